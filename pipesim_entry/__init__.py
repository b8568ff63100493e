"""The ``pipesim`` console script: a Ctrl-C is one line from the first instant to the last.

Design: the command line (:func:`pipesim.io.cli.main`) lies under ``import pipesim``, which takes
about a second (pandas, torch), and a Ctrl-C in that second came as a 30-56 line KeyboardInterrupt
traceback from inside an import (no handler of pipesim's was in place yet). This package imports
the standard library only, so it is in place at once: :func:`main` imports the command line under
``try``, and an interrupt there is one line, ``pipesim: interrupted before COMMAND started``, and
exit status 130 (SIGTERM likewise). It lives outside ``pipesim`` because importing any module of
``pipesim`` runs ``pipesim/__init__.py``, the slow part.

A stop that lands inside a finalizer during that import (a ``__del__`` the garbage collector ran, a
weakref callback) was printed as "Exception ignored in: ... __del__" and lost: the import went on
and the command ran to its end. The import runs under
:func:`pipesim.compute.finalizer_stop.stops_from_finalizers`, which raises such a stop again in the
main code, so it is the same one line and 130. That module is standard library only, but importing
it as ``pipesim``'s would run ``pipesim/__init__.py``: :func:`_stops_from_finalizers` loads the
same file under a private name (as ``python pipesim/compute/profile.py`` loads it as the top-level
``finalizer_stop``), one copy of the mechanism and no twin.

A stop can also land while an extension module imports another module from C, and the C code may
turn the KeyboardInterrupt into its own error: numpy, when one came as it imported ``datetime``,
raised a 40-line ImportError ("Importing the numpy C-extensions failed ... PLEASE READ THIS"). So
:func:`main` notes each SIGINT or SIGTERM that comes while it imports, and an error out of an import
that a stop signal came into is that stop: the same one line and 130. (An import that fails on its
own, no signal having come, raises as before.)

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
import importlib.util
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["main"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def ignore_interrupts() -> None:
    """Ctrl-C and SIGTERM ignored from now on: the process only exits (the main thread only)."""
    for sig in _SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            signal.signal(sig, signal.SIG_IGN)


atexit.register(ignore_interrupts)  # registered before any other, so it runs after them all


def _stops_from_finalizers() -> contextlib.AbstractContextManager[Any]:
    """:func:`pipesim.compute.finalizer_stop.stops_from_finalizers`' block, without running
    ``pipesim/__init__.py``: the module already imported, or else its file, found where the import
    will find ``pipesim`` and loaded under a private name (a few milliseconds). No file there (no
    ``pipesim`` to import either): no block."""
    loaded = sys.modules.get("pipesim.compute.finalizer_stop")
    if loaded is None:
        found = importlib.util.find_spec("pipesim")  # the package's spec: imports nothing
        places = (found.submodule_search_locations or []) if found else []
        files = [Path(place, "compute", "finalizer_stop.py") for place in places]
        file = next((file for file in files if file.is_file()), None)
        spec = importlib.util.spec_from_file_location("_pipesim_entry_finalizer_stop", file) if file else None
        if spec is None or spec.loader is None:
            return contextlib.nullcontext()
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
    block: contextlib.AbstractContextManager[Any] = loaded.stops_from_finalizers()
    return block


def main(argv: Sequence[str] | None = None) -> int:
    """``pipesim``'s console script: :func:`pipesim.io.cli.main`'s exit status, or 130 where an
    interrupt came while it was being imported (one that landed in a finalizer, or was turned into
    another error by an extension module, too)."""
    came: list[int] = []  # the stop signals that came while the command line was imported

    def stop(signum: int, frame: FrameType | None) -> None:
        came.append(signum)
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    try:
        before = _handled_by(stop)  # SIGTERM as Ctrl-C, as the commands take it
        try:
            with _stops_from_finalizers():  # a stop raised in a __del__ is raised again here
                from pipesim.io.cli import main as cli_main
        finally:
            for sig, handler in before.items():
                with contextlib.suppress(ValueError, OSError):
                    signal.signal(sig, handler)
    except Exception:
        if not came:  # an import that failed on its own
            raise
        return _interrupted(argv)  # a stop that C code turned into its own error
    except KeyboardInterrupt:
        return _interrupted(argv)
    return cli_main(argv)


def _handled_by(stop: Any) -> dict[int, Any]:
    """SIGTERM, and SIGINT where Python's own handler has it (one ignored from the start, a
    script's background job, stays ignored), handled by ``stop`` -> the handlers before (none
    outside the main thread)."""
    before: dict[int, Any] = {}
    for sig in _SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            if sig == signal.SIGTERM or signal.getsignal(sig) is signal.default_int_handler:
                before[sig] = signal.signal(sig, stop)
    return before


def _interrupted(argv: Sequence[str] | None) -> int:
    """The one line an interrupt before the command started prints -> its exit status, 130."""
    ignore_interrupts()  # the process only exits: a second Ctrl-C must not cut the line below
    words = list(sys.argv[1:] if argv is None else argv)
    command = words[0] if words and not words[0].startswith("-") else "pipesim"
    print(f"pipesim: interrupted before {command} started; nothing was written", file=sys.stderr)
    return 130
