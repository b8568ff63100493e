"""Who a run's failure is about: the policy that raised, called or answered wrongly.

* :func:`from_user_code` -- the exception a policy raised inside the run, as its author should see
  it (SimPy's copy dropped; a note naming the policy, "raised by the admission policy X").
* :func:`calling_policy` -- the policy that called a port action that refuses (the stack is walked
  only then, never on the hot path).
* :func:`bool_answer`, :func:`int_answer`, :func:`count_answer` -- a policy's answer of the wrong
  type or range, refused naming ``Class.method``.

Split out of :mod:`pipesim.core.errors` (past 450 lines) along this seam: errors says what state a
run cannot finish from; this module says whose code put it there.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from pipesim.core.errors import PipelineError, shown

if TYPE_CHECKING:
    from types import FrameType

    from pipesim.core.engine import Pipeline

__all__ = [
    "NOTE_END",
    "bool_answer",
    "calling_policy",
    "count_answer",
    "detached",
    "from_user_code",
    "int_answer",
    "note_culprit",
]


def from_user_code(exc: Exception, roles: list[tuple[str, object]]) -> Exception:
    """The exception a policy or seam raised inside the run, as the user should see it.

    SimPy re-raises a process's failure as a fresh copy of the same type whose ``__cause__`` is
    the original; the original (its own type, message, cause and traceback into the user's code)
    is returned instead, and the copy is dropped from its display. The innermost frame of the
    traceback that belongs to one of ``roles``' objects names the culprit in a note ("raised by
    the admission policy X"), where Python has notes (3.11+)."""
    cause = exc.__cause__
    original: Exception = exc
    if isinstance(cause, Exception) and type(cause) is type(exc) and cause.args == exc.args:
        exc.__cause__ = None
        original = cause
        original.__suppress_context__ = True
    frames = []
    tb = original.__traceback__
    while tb is not None:  # outermost first: the last match is the innermost
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    if (culprit := _policy_of(reversed(frames), roles)) is not None:
        note_culprit(original, culprit)
    return original


def calling_policy(p: Pipeline) -> str:
    """Who called the port action that is refusing ("the batch policy X"): the innermost frame on
    the stack that runs a method of one of the run's policies or seams, found as
    :func:`from_user_code` finds the culprit of an exception; "a policy" where none does (a call
    from outside the run). Walks the stack, so only an error pays for it."""
    return _policy_of(_stack(), p._roles()) or "a policy"


def called_by(obj: object) -> bool:
    """Whether a frame on the stack runs code of ``obj`` (a method of its class, or a function
    whose ``self`` it is): the port asks it before refusing an action a promise rules out for that
    policy alone. Walks the stack, so ask only where the answer may refuse."""
    return _policy_of(_stack(), [("", obj)]) is not None


def _stack() -> list[FrameType]:
    """The frames of the caller's caller and outward, innermost first."""
    frames = []
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def _policy_of(frames: Iterable[FrameType], roles: list[tuple[str, object]]) -> str | None:
    """The first of ``frames`` (innermost first) that runs code of one of ``roles``' objects
    (a method of its class, or any function whose ``self`` is the object), named by role (the
    last role that matches, where one object plays several)."""
    codes = [(role, obj, _codes(obj)) for role, obj in reversed(roles) if obj is not None]
    for frame in frames:
        me = frame.f_locals.get("self")
        for role, obj, code in codes:
            if me is obj or frame.f_code in code:
                return f"the {role} policy {type(obj).__name__}"
    return None


NOTE_END = "during the pipesim run"
"""How every note naming a culprit ends (one note per exception: the innermost names it)."""


def note_culprit(exc: BaseException, who: str) -> None:
    """Add the note "raised by ``who`` during the pipesim run" to ``exc``, unless a note naming a
    culprit is there already (the innermost policy generator that saw it added it)."""
    add_note = getattr(exc, "add_note", None)
    if add_note is None or any(str(n).endswith(NOTE_END) for n in getattr(exc, "__notes__", ())):
        return
    add_note(f"raised by {who} {NOTE_END}")


def _codes(obj: object) -> set[object]:
    """The code objects of the methods ``obj``'s class and its bases define (plain, static, class
    methods and properties): a frame running one is the policy's, even where it has no ``self``
    (a static method, a helper the method returned)."""
    out: set[object] = set()
    for klass in type(obj).__mro__[:-1]:  # not object's
        for v in vars(klass).values():
            f = v.__func__ if isinstance(v, (staticmethod, classmethod)) else getattr(v, "fget", v)
            code = getattr(f, "__code__", None)
            if code is not None:
                out.add(code)
    return out


def detached(err: PipelineError) -> PipelineError:
    """``err`` with no chained context (``raise err from None``): an error raised inside a SimPy
    process, re-raised without SimPy's frames. Set here, in Python, because the compiled kernel's
    ``raise ... from None`` leaves ``__suppress_context__`` unset."""
    err.__cause__ = None
    err.__suppress_context__ = True
    return err


def bool_answer(policy: object, method: str, yes: object) -> bool:
    """A policy's answer to ``method`` when it is not a bool: a numpy bool counts as one, and
    anything else (``"no"``, ``1``, ``None``) is a :class:`PipelineError` rather than a truth value."""
    if isinstance(yes, np.bool_):
        return bool(yes)
    raise PipelineError(
        f"{type(policy).__name__}.{method} must return a bool, got {shown(yes)} ({type(yes).__name__})"
    )


def int_answer(policy: object, method: str, got: object) -> int:
    """A policy's answer to ``method`` as an int (a numpy integer converted), else a
    :class:`PipelineError` naming it (a bool or a float is no count)."""
    if type(got) is int:
        return got
    if isinstance(got, bool) or not isinstance(got, numbers.Integral):
        raise PipelineError(
            f"{type(policy).__name__}.{method} must return an int, got {shown(got)} ({type(got).__name__})"
        )
    return int(got)


def count_answer(policy: object, method: str, got: object) -> int:
    """A policy's answer to ``method`` as a count: an int >= 0 (a numpy integer converted), else a
    :class:`PipelineError` naming it (``min_items`` of -1, a float, None)."""
    n = int_answer(policy, method, got)
    if n < 0:
        raise PipelineError(f"{type(policy).__name__}.{method} must return a count >= 0, got {shown(got)}")
    return n
