"""Ctrl-C in the training scripts: keep the finished runs, say so in one line, exit 130.

The scripts (``offpolicy.staleness``, ``lr_sweep``, ``fp8``, ``estimator``) run for minutes to
hours and write their results file after every run (:func:`offpolicy.runfile.write_json`: a
temporary file and a rename, so an interrupt never leaves it half-written). Stopped by Ctrl-C or
SIGTERM they print one line saying what the file holds and exit 130, as ``pipesim`` and
``python -m scenarios.published`` do, never a traceback. ``offpolicy`` does not import pipesim,
so :func:`sigterm_as_interrupt` is a twin of ``pipesim.io.interrupts.sigterm_as_interrupt``, and
:func:`stops_from_finalizers` of ``pipesim.compute.finalizer_stop``'s (its docstring has the design): a
Ctrl-C or SIGTERM whose KeyboardInterrupt was raised inside a finalizer (a ``__del__`` the garbage
collector ran) was printed as "Exception ignored" and lost, and the script trained on; it is now
raised again in the main code, about 0.05 s later, and the script stops as for any other.
:func:`reader_may_leave` is not a twin: pipesim's goes on writing after its reader leaves, and
this one stops the script there (its JSON already holds every finished run, written after each).
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

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


class _Redelivery:
    """A stop a finalizer swallowed, on its way back to the main code: a one-shot SIGINT handler
    raises it again, sent from a thread once the finalizer has returned (twin of
    ``pipesim.compute.finalizer_stop.Redelivery``)."""

    def __init__(self, stop: KeyboardInterrupt) -> None:
        self.args = stop.args
        self.sent = self.over = False  # the thread has sent it; it was raised, or is not wanted
        self.handler = self._raise  # one bound method, to know it again in getsignal
        self.before: Any = signal.signal(signal.SIGINT, self.handler)
        threading.Thread(target=self._send, name="offpolicy-stop", daemon=True).start()

    def _raise(self, signum: int, frame: FrameType | None) -> None:
        if self.over:  # a copy a block put back after the stop: the handler before takes the signal
            if callable(self.before):
                self.before(signum, frame)
            return
        self.cancel()
        raise KeyboardInterrupt(*self.args)

    def _send(self) -> None:
        time.sleep(0.05)  # the finalizer and the hook have returned: raised in the main code
        if not self.over:
            self.sent = True
            _thread.interrupt_main(signal.SIGINT)  # whatever handles SIGINT now takes it

    @property
    def armed(self) -> bool:
        """The one-shot handler is in place and will raise the stop."""
        return not self.over and signal.getsignal(signal.SIGINT) == self.handler

    def cancel(self) -> None:
        """Nothing more is sent; the SIGINT handler before is back where the one-shot still is."""
        self.over = True
        if signal.getsignal(signal.SIGINT) == self.handler:
            signal.signal(signal.SIGINT, self.before)


@contextlib.contextmanager
def stops_from_finalizers() -> Iterator[None]:
    """Within the block a KeyboardInterrupt raised inside a finalizer is raised again in the main
    code, printing nothing (one the block outlives is raised as it ends); any other exception a
    finalizer raises goes to the unraisable hook before, restored at the end. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = sys.unraisablehook
    pending: list[_Redelivery] = []

    def hook(unraisable: Any) -> None:
        stop = unraisable.exc_value
        if (
            not isinstance(stop, KeyboardInterrupt)
            or threading.current_thread() is not threading.main_thread()
        ):
            before(unraisable)
        elif pending and pending[-1].armed:
            return  # one stop on its way already
        elif signal.getsignal(signal.SIGINT) is None:  # a handler not set from Python: no way back
            before(unraisable)
        else:
            pending.append(_Redelivery(stop))

    sys.unraisablehook = hook
    try:
        yield
    except BaseException:
        for back in pending:
            back.cancel()
        raise
    else:
        late = [back for back in pending if not (back.sent or back.over)]
        for back in pending:
            back.cancel()
        if late:
            raise KeyboardInterrupt(*late[0].args)
    finally:
        if sys.unraisablehook is hook:
            sys.unraisablehook = before


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises KeyboardInterrupt, as Ctrl-C does; the previous handler is
    restored after. Either one raised inside a finalizer still stops the block
    (:func:`stops_from_finalizers`). Only the main thread can set a handler, so elsewhere this does
    nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with stops_from_finalizers():
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
