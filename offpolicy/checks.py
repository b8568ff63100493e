"""How offpolicy's configs say a field is wrong: a :class:`FieldError` (a ``ValueError``) whose
``field`` names the field; and how its scripts say an output flag cannot be written
(:func:`check_output`), a usage error naming the flag.

``offpolicy`` does not import ``pipesim`` (whose package imports SimPy), so it keeps these
checks of its own, a small twin of :mod:`pipesim.core.validate`: :class:`FieldError` carries
``field`` (and ``file``) as pipesim's does, :func:`refuse` builds the message from the field, and
:func:`check_int` / :func:`check_real` mirror ``check_int`` / ``check_number``: a bool is
not a number, a float field takes an int or a float and must be finite, and a numpy scalar is
named with the conversion to use. Every learning rate is checked by :func:`check_lr` (the
scripts' ``--lr`` / ``--lrs`` too, through :func:`lr_problem`). Nor does it import
``scenarios`` (which imports offpolicy), so :func:`check_output` is its own copy of
``scenarios.outputs.check_output``.
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
import reprlib
import stat
import tempfile
from pathlib import Path
from typing import Any


def _numpy_hint(value: object) -> str:
    """The conversion to name for a numpy scalar (or another real that is not a Python number)."""
    if isinstance(value, bool | int | float):
        return ""
    if isinstance(value, numbers.Integral):
        return f" (int(x) converts a {type(value).__name__})"
    if isinstance(value, numbers.Real):
        return f" (float(x) converts a {type(value).__name__})"
    return ""


class FieldError(ValueError):
    """A value a field cannot take: ``field`` its (dotted) name, ``file`` the file or None."""

    def __init__(self, message: str, field: str = "", file: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.file = file

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.field, self.file), self.__dict__)


def refuse(field: str, problem: str) -> FieldError:
    """The error saying ``field`` ``problem`` (``"must be a bool, got 3"``)."""
    return FieldError(f"{field} {problem}", field)


_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxtuple, _SHOWN.maxdict = 2, 4, 4, 4
_SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 60, 60, 40


def shown(value: object, limit: int = 80) -> str:
    """A user's value as a message shows it: a repr bounded in depth and count (pipesim's
    ``shown``), cut at ``limit`` characters."""
    try:
        text = _SHOWN.repr(value).replace("\n", " ")
    except Exception:  # a repr that fails: the type is still worth naming
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: The largest seed ``torch.Generator.manual_seed`` takes (it refuses 2**64 with an unnamed
#: ``RuntimeError``); every seed field is checked against it.
SEED_MAX = 2**64 - 1


#: The largest learning rate a config takes (every ``lr`` field, and so every ``--lr`` / ``--lrs``).
#: Adam's first step moves a weight by up to ``lr / (1 - beta1) = 10 * lr``, computed in float32,
#: which overflows near 3.4e38: ``lr=1e38`` failed inside torch's Adam. Far below that, 1e6 still
#: reaches every learning rate at which TinyAgent's training breaks (its reward falls to 0 within 20
#: steps from lr 0.1, and from about 1e5 its logits overflow: a run recorded as diverged), so an lr
#: sweep can find them; an lr above it is no step size anyone means (Adam moves each weight by about
#: ``lr`` per step; TinyAgent's weights are about 0.1).
LR_MAX = 1e6


def check_lr(name: str, value: object) -> None:
    """FieldError for ``name`` unless ``value`` is a finite learning rate in ``(0, LR_MAX]``."""
    check_real(name, value, 0, LR_MAX, open_low=True)


def lr_problem(flag: str, lr: float) -> str | None:
    """A script's usage error for learning rate ``lr`` given as ``flag`` (None: none), by the rule
    of every config's ``lr`` (:func:`check_lr`), said with the flag."""
    try:
        check_lr(flag, lr)
    except FieldError:
        return f"{flag}: a learning rate must be a finite number > 0 and at most {LR_MAX:g}, got {shown(lr)}"
    return None


def check_int(name: str, value: object, minimum: int, maximum: int | None = None) -> None:
    """FieldError for ``name`` unless ``value`` is an int (not a bool) ``>= minimum`` (and
    ``<= maximum`` where given)."""
    bad = isinstance(value, bool) or not isinstance(value, int) or value < minimum
    if bad or (maximum is not None and value > maximum):  # type: ignore[operator]
        where = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise refuse(name, f"must be an integer {where}{_numpy_hint(value)}, got {shown(value)}")


def check_seed(name: str, value: object) -> None:
    """FieldError for ``name`` unless ``value`` is an int in ``[0, SEED_MAX]``."""
    check_int(name, value, 0, SEED_MAX)


def check_real(name: str, value: object, low: float, high: float = math.inf, open_low: bool = False) -> None:
    """FieldError for ``name`` unless ``value`` is a finite int or float (not a bool) in
    ``[low, high]`` (``(low, high]`` with ``open_low``)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not (low < value if open_low else low <= value) or value > high:  # type: ignore[operator]
        if high < math.inf:
            where = f" in {'(' if open_low else '['}{low:g}, {high:g}]"
        elif low > -math.inf:
            where = f" {'>' if open_low else '>='} {low:g}"
        else:
            where = ""
        raise refuse(name, f"must be a finite number{where}{_numpy_hint(value)}, got {shown(value)}")


def check_output(parser: argparse.ArgumentParser, flag: str, path: str | None, replace: bool = False) -> None:
    """``parser.error`` (usage, exit 2) naming ``flag`` unless ``path`` (None: not given) can be
    written: a script writes it after minutes of training, so a missing directory, a path that is a
    directory or one this user cannot write must fail before. ``os.access`` is not enough (root
    passes it on ``/proc``), so the check writes as the script will: it opens the file for
    appending (and removes it if it was not there), or, where ``replace`` (the results JSON, which
    ``write_json`` replaces through a temporary file and a rename), makes a temporary file in its
    directory, removed again. A missing directory is refused for every flag, as
    ``scenarios.outputs.check_output`` refuses it: the results JSON's was made silently (a typo in
    the directory wrote the study somewhere unexpected) while ``--html`` and ``--out`` refused
    theirs. An empty path (``--json ''``, an unset shell variable) is refused by name
    (:func:`refuse_empty_path`), never taken as "not given" nor as the current directory."""
    if path is None:
        return
    refuse_empty_path(parser, flag, path)
    if _special(path):  # a pipe, a terminal, /dev/null: opening it to test would block or drain it
        if replace:
            parser.error(f"{flag} {path}: not a regular file (a pipe or a device); it is written by a rename")
        return
    target = Path(path).resolve()
    folder = target.parent
    if not folder.is_dir():
        parser.error(f"{flag} {path}: no directory {folder}")
    if target.is_dir():
        parser.error(f"{flag} {path}: is a directory; give a file name")
    existed = target.exists()
    try:
        if replace:
            with tempfile.NamedTemporaryFile(dir=folder, suffix=".tmp"):
                pass
        else:
            with open(target, "a"):
                pass
    except OSError as exc:
        parser.error(f"{flag} {path}: cannot write it ({exc.strerror})")
    if not replace and not existed:
        target.unlink()


def refuse_empty_path(parser: argparse.ArgumentParser, flag: str, path: str | None) -> None:
    """``parser.error`` naming ``flag`` when ``path`` is given but empty or blank (``--json ''``):
    taken as "not given" it silently wrote nothing, and as a path it is the current directory
    (``Path('')`` is ``.``), which ``--resume`` then tried to read as a file. None: not given."""
    if path is not None and not path.strip():
        parser.error(f"{flag} {path!r}: an empty path; give a file")


def _special(path: str) -> bool:
    """Whether ``path`` is an existing pipe, character device or socket (``/dev/stdout``, a FIFO,
    ``>(cat)``), which a script writes as a stream: nothing to test by opening it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)
