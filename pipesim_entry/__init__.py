"""The ``pipesim`` console script: a Ctrl-C is one line from the first instant to the last.

Design: the command line (:func:`pipesim.io.cli.main`) lies under ``import pipesim``, which takes
about a second (pandas, torch), and a Ctrl-C in that second came as a 30-56 line KeyboardInterrupt
traceback from inside an import (no handler of pipesim's was in place yet). This package imports
the standard library only, so it is in place at once: :func:`main` imports the command line under
``try``, and an interrupt there is one line, ``pipesim: interrupted before COMMAND started``, and
exit status 130 (SIGTERM likewise). It lives outside ``pipesim`` because importing any module of
``pipesim`` runs ``pipesim/__init__.py``, the slow part.

The other end: once the command has returned, :func:`pipesim.io.interrupts.command_finished` records
a Ctrl-C rather than raising it, so multiprocessing's and torch's exit functions are not cut by a
KeyboardInterrupt ("Exception ignored in atexit callback", a traceback after a finished sweep).
The interpreter's last steps restore the default action of every signal with a Python handler,
and a Ctrl-C there killed a finished command (status -2): the exit function registered here, first
of all so that it runs last, ignores Ctrl-C and SIGTERM from then on.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import sys
from collections.abc import Sequence
from types import FrameType

__all__ = ["main"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def ignore_interrupts() -> None:
    """Ctrl-C and SIGTERM ignored from now on: the process only exits (the main thread only)."""
    for sig in _SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            signal.signal(sig, signal.SIG_IGN)


atexit.register(ignore_interrupts)  # registered before any other, so it runs after them all


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def main(argv: Sequence[str] | None = None) -> int:
    """``pipesim``'s console script: :func:`pipesim.io.cli.main`'s exit status, or 130 where an
    interrupt came while it was being imported."""
    try:
        with contextlib.suppress(ValueError, OSError):  # SIGTERM as Ctrl-C, as the commands take it
            before = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            from pipesim.io.cli import main as cli_main
        finally:
            with contextlib.suppress(ValueError, OSError, NameError):
                signal.signal(signal.SIGTERM, before)
    except KeyboardInterrupt:
        ignore_interrupts()  # the process only exits: a second Ctrl-C must not cut the line below
        words = list(sys.argv[1:] if argv is None else argv)
        command = words[0] if words and not words[0].startswith("-") else "pipesim"
        print(f"pipesim: interrupted before {command} started; nothing was written", file=sys.stderr)
        return 130
    return cli_main(argv)
