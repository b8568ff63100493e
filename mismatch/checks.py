"""How mismatch refuses bad input: :class:`FieldError`, a ``ValueError`` whose ``field`` names the
argument or flag (and ``file`` the file, where one was read).

A twin of :class:`pipesim.core.validate.FieldError` (and of ``offpolicy.checks.FieldError``):
``mismatch`` runs on the GPU machine with torch and transformers only, so it imports neither
pipesim nor offpolicy. Tests assert the type and ``field``, never the sentence.
"""

from __future__ import annotations

import reprlib
from typing import Any

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxtuple, _SHOWN.maxdict = 2, 4, 4, 4
_SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 60, 60, 40


class FieldError(ValueError):
    """A value a field cannot take: ``field`` its name, ``file`` the file it came from or None."""

    def __init__(self, message: str, field: str = "", file: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.file = file

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.field, self.file), self.__dict__)


def refuse(field: str, problem: str) -> FieldError:
    """The error saying ``field`` ``problem`` (``"must be >= 1, got 0"``)."""
    return FieldError(f"{field} {problem}", field)


def shown(value: object, limit: int = 80) -> str:
    """A user's value as a message shows it: a repr bounded in depth and count, cut at ``limit``."""
    try:
        text = _SHOWN.repr(value).replace("\n", " ")
    except Exception:  # a repr that fails: the type is still worth naming
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
