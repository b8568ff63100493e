"""A stop that lands inside a finalizer still stops the probe: a twin of
``pipesim.compute.finalizer_stop``, whose docstring has the design (``mismatch`` imports nothing of
pipesim: it runs where pipesim's dependencies are absent).

A signal's Python handler runs at the next bytecode boundary, and that can be inside a finalizer (a
``__del__`` the garbage collector ran, a weakref callback); the KeyboardInterrupt it raises there
is printed as "Exception ignored in: ... __del__" and dropped. CI saw ``python -m mismatch`` run to
its end and exit 0 after a SIGTERM that landed in ``regex``'s ``Group.__del__``.
:func:`stops_from_finalizers` raises such a stop again in the main code, about :data:`DELAY_S`
later, from a one-shot SIGINT handler a short-lived thread triggers once the finalizer has
returned; a stop the block outlives is raised as it ends. Any KeyboardInterrupt counts, whichever
handler raised it: :func:`mismatch.cliio.interrupts_stop_once`'s, ``python -m mismatch``'s while
torch imports, Python's own SIGINT handler's.

The code is pipesim's line for line (only the thread's name differs), and
tests/test_mismatch_stop_finalizer.py checks that it stays so: change both, or neither.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

__all__ = ["DELAY_S", "Redelivery", "stops_from_finalizers"]

DELAY_S = 0.05
"""How long the stop waits before it is raised again: the finalizer and the hook have returned."""


class Redelivery:
    """A stop a finalizer swallowed, on its way back to the main code (created in the main thread:
    ``signal.signal`` raises ValueError elsewhere): a one-shot SIGINT handler that raises it, and a
    thread that sends the SIGINT. Once it has raised, or been cancelled, the one-shot passes a
    SIGINT to the handler before it (a block that saved it as "its" handler may put it back)."""

    def __init__(self, stop: KeyboardInterrupt) -> None:
        self.args = stop.args
        self.sent = self.over = False  # the thread has sent it; it was raised, or is not wanted
        self.handler = self._raise  # one bound method, to know it again in getsignal
        self.before: Any = signal.signal(signal.SIGINT, self.handler)
        threading.Thread(target=self._send, name="mismatch-stop", daemon=True).start()

    def _raise(self, signum: int, frame: FrameType | None) -> None:
        if self.over:  # a copy a block put back after the stop: the handler before takes the signal
            if callable(self.before):
                self.before(signum, frame)
            return
        self.cancel()
        raise KeyboardInterrupt(*self.args)

    def _send(self) -> None:
        time.sleep(DELAY_S)  # the finalizer and the hook have returned: raised in the main code
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
    """Within the block a KeyboardInterrupt raised inside a finalizer (a stop handler's, landed in
    a ``__del__``) is raised again in the main code, printing nothing, and any other exception a
    finalizer raises goes to the unraisable hook before; that hook is restored when the block ends
    (see the module docstring). Main thread only; elsewhere this changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = sys.unraisablehook
    pending: list[Redelivery] = []

    def hook(unraisable: Any) -> None:
        stop = unraisable.exc_value
        if (
            not isinstance(stop, KeyboardInterrupt)
            or threading.current_thread() is not threading.main_thread()
        ):
            before(unraisable)
        elif pending and pending[-1].armed:
            return  # one stop on its way already (timeout signals the process, then its group)
        elif signal.getsignal(signal.SIGINT) is None:  # a handler not set from Python: no way back
            before(unraisable)
        else:
            pending.append(Redelivery(stop))

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
        if late:  # the block ended before the stop came back: it stops here
            raise KeyboardInterrupt(*late[0].args)
    finally:
        if sys.unraisablehook is hook:
            sys.unraisablehook = before
