"""Ctrl-C in the training scripts: keep the finished runs, say so in one line, exit 130.

The scripts (``offpolicy.staleness``, ``lr_sweep``, ``fp8``, ``estimator``) run for minutes to
hours and write their results file after every run (:func:`offpolicy.runfile.write_json`: a
temporary file and a rename, so an interrupt never leaves it half-written). Stopped by Ctrl-C or
SIGTERM they print one line saying what the file holds and exit 130, as ``pipesim`` and
``python -m scenarios.published`` do, never a traceback. ``offpolicy`` does not import pipesim,
so :func:`sigterm_as_interrupt` is a twin of ``pipesim.io.interrupts.sigterm_as_interrupt``.
:func:`reader_may_leave` is not a twin: pipesim's goes on writing after its reader leaves, and
this one stops the script there (its JSON already holds every finished run, written after each).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType

INTERRUPTED = 130
"""The exit status of a script stopped by Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports it)."""


def reader_may_leave(main: Callable[[], int | None]) -> int:
    """``main()``'s exit status; a reader that leaves early (``... | head``) ends the script there,
    quietly, with 0: the runs finished so far are in its JSON (see the module docstring)."""
    try:
        return main() or 0
    except BrokenPipeError:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - held until the interpreter exits
        return 0


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises KeyboardInterrupt, as Ctrl-C does; the previous handler is
    restored after. Only the main thread can set a handler, so elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class Kept:
    """What a script's results file holds, for the line an interrupt prints.

    Attributes:
        path: the results file (``--json``).
        before: runs it held when the script started (``--resume`` keeps them).
        written: runs it holds after this invocation's last write (0: not written yet).
    """

    path: str
    before: int = 0
    written: int = 0

    def interrupted(self, prog: str, resumable: bool) -> int:
        """Print the one line (stderr) and return :data:`INTERRUPTED`."""
        if self.written == 0:
            said = f"no run had finished; {self.path} was not changed"
        else:
            new = self.written - self.before
            said = f"{self.path} keeps the {self.written} finished run(s)"
            said += f" ({new} from this invocation)" if self.before else ""
            said += "; --resume continues" if resumable else ""
        print(f"{prog}: interrupted: {said}", file=sys.stderr, flush=True)
        return INTERRUPTED


def run_keeping(prog: str, path: str, body: Callable[[Kept], None], resumable: bool) -> int:
    """Run a script's ``body`` (it writes its results file ``path`` after every run and updates
    the :class:`Kept` it is given) with SIGTERM as Ctrl-C -> 0, or :data:`INTERRUPTED` after the
    one line saying what ``path`` keeps (``resumable``: the script takes ``--resume``)."""
    kept = Kept(path)
    try:
        with sigterm_as_interrupt():
            body(kept)
    except KeyboardInterrupt:  # the file already holds every finished run
        return kept.interrupted(prog, resumable)
    return 0
