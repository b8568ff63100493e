"""Whether a process pool would re-run the sweep that starts it: the main-module guard.

A process pool whose workers start by ``spawn`` or ``forkserver`` re-imports the main script in
each worker (:func:`reimports_main`), so a script that starts a sweep at its top level would start
a sweep in every worker, each with a pool of its own. :func:`main_guard_problem` finds that case
before a pool starts and says what to do instead: it finds the main script's frame on the stack
and reads the script with :mod:`ast` to see whether the calling line lies under a
``__name__ == "__main__"`` test. A worker that is itself re-importing the script, and a script
read from stdin (which no worker can re-import), are refused as well.

It reads the caller's stack and source and never runs a cell, so it lives apart from the
executors it guards (:mod:`pipesim.io.sweep_exec`); :func:`pipesim.io.sweeps.sweep` asks it
before it starts a pool.
"""

from __future__ import annotations

import ast
import multiprocessing
import sys
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from types import FrameType

__all__ = ["main_guard_problem", "reimports_main"]


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either side of the ``==``)."""
    if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)):
        return False
    t = node.test
    if len(t.ops) != 1 or not isinstance(t.ops[0], ast.Eq):
        return False
    sides = [t.left, t.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(consts) == 1


def _guarded(body: Sequence[ast.stmt], line: int) -> bool | None:
    """Whether ``line`` of a module lies inside an ``if __name__ == "__main__":`` block (None: not found)."""
    for node in body:
        if not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        if _is_main_guard(node):
            assert isinstance(node, ast.If)
            inside = any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in node.body)
            return True if inside else _guarded(node.orelse, line)
        for attr in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, attr, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt | ast.excepthandler):
                found = _guarded([s for s in inner if isinstance(s, ast.stmt)], line)
                if found:
                    return True
        return False
    return None


_GUARD_ADVICE = (
    'put the code that runs the sweep under `if __name__ == "__main__":` (a process pool re-imports '
    "the main script in every worker), or pass executor=ThreadPoolExecutor(...) with timeout_s=None"
)


def main_guard_problem() -> str | None:
    """Why a process pool's workers would re-run this very sweep, or None when they would not.

    That is the case when the sweep is started from a main script's top level outside
    ``if __name__ == "__main__":``, or from inside a worker that is re-importing the main script.
    The caller raises the message (:class:`~pipesim.io.sweeps.SweepError`).
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        return f"pipesim.sweep was called while a worker process imported the main script: {_GUARD_ADVICE}"
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path:
        return None  # interactive or -c: nothing is re-imported
    if not Path(path).is_file():  # ``python - < script.py``: __file__ is "<stdin>"
        return (
            f"pipesim.sweep was started from a main script read from {path}, which a process pool's "
            "workers cannot re-import (each would fail to start): save the script as a file and run "
            "that, or pass executor=ThreadPoolExecutor(...) with timeout_s=None"
        )
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "<module>" and frame.f_globals is vars(main)):
        frame = frame.f_back
    if frame is None:
        return None
    try:
        tree = ast.parse(Path(path).read_text(), str(path))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    if _guarded(tree.body, frame.f_lineno) is False:
        return (
            f"pipesim.sweep was started at {path}:{frame.f_lineno} outside "
            f'`if __name__ == "__main__":`: {_GUARD_ADVICE}'
        )
    return None


def reimports_main(ex: Executor) -> bool:
    if not isinstance(ex, ProcessPoolExecutor):
        return False
    ctx = getattr(ex, "_mp_context", None)
    method = ctx.get_start_method() if ctx is not None else multiprocessing.get_start_method()
    return method != "fork"
