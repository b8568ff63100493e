"""A stop that lands inside a finalizer still stops the work.

Design. A signal's Python handler runs in the main thread at the next bytecode boundary, wherever
that is, and that can be inside a finalizer: a ``__del__`` run when a reference is dropped or by the
garbage collector, or a weakref callback. An exception raised there cannot reach the code that was
running (the interpreter has nowhere to raise it), so the KeyboardInterrupt a stop handler raises
is handed to :data:`sys.unraisablehook`, printed as "Exception ignored in: ... __del__" and dropped:
the command runs on to its end, the Ctrl-C or ``timeout``'s SIGTERM lost. A handler that stops
once (:func:`pipesim.io.interrupts.interrupt_once`) has by then marked the command stopping, so it
drops every later signal too. CI saw this once, in ``mismatch`` (SIGTERM inside ``regex``'s
``Group.__del__``: the probe ran to its end and exited 0); pipesim's handlers had the same
exposure.

:func:`stops_from_finalizers` installs an unraisable hook for its block. A KeyboardInterrupt that
reaches it is a stop (one of pipesim's handlers', or Python's default SIGINT handler's), and it is
raised again in the main code (:class:`Redelivery`): the hook sets a one-shot SIGINT handler that
puts the handler before back and raises a KeyboardInterrupt with the same message, and a
short-lived thread triggers it with :func:`_thread.interrupt_main` :data:`DELAY_S` later, once the
finalizer and the hook have returned (a handler run at once would run inside the hook, and an
exception from there is printed as "Exception ignored in sys.unraisablehook"). The command then
stops as it does for a signal anywhere else, and saves what it finished.

The cases around it:

* the redelivered stop lands in a finalizer again (the collector is still running them): it comes
  back to the hook and is sent again;
* a second stop while the one-shot is in place (``timeout`` signals the process, then its group)
  is the same stop: dropped;
* another block has replaced the one-shot by then (``polled_interrupts``' hold, a nested
  ``interrupt_once``): that handler takes the SIGINT as it takes a Ctrl-C (held to the next check,
  or raised). A block that saved the one-shot as "its" handler puts it back when it ends; once
  spent, the one-shot passes a signal to the handler before it, so ``interrupt_once`` still drops
  a second signal while the command saves;
* the block ends before the thread sends the stop: the stop is raised as the block ends, unless an
  exception is already unwinding it (that one is the stop);
* any other unraisable exception, and a KeyboardInterrupt off the main thread (no handler can be
  set there), goes to the hook before, which is restored when the block ends. Outside the main
  thread the block changes nothing.

One limit: :func:`_thread.interrupt_main` wakes no blocking system call, so a main thread asleep
in one (``time.sleep``) takes the stop when the call returns; pipesim's waits are short polls.

Standard library only, and the one copy pipesim has: :mod:`pipesim.io.interrupts` imports it
through the package, and :mod:`pipesim.compute.profile_stop` too, or, where ``python
pipesim/compute/profile.py`` runs on torch alone, as the top-level module ``finalizer_stop`` from
this folder (see :mod:`pipesim.compute.profile`): that is why it lives beside the profile, not in
``pipesim.io`` (``compute`` may not import ``io``). ``pipesim_entry`` loads this file under a
private name during the console script's import window (importing it through the package would run
``pipesim/__init__.py``). ``offpolicy`` and ``mismatch`` import nothing of pipesim, so
:mod:`offpolicy.interrupts` twins it, and so does :mod:`mismatch.finalizer_stop`, line for line
(``tests/test_mismatch_stop_finalizer.py`` checks the twin equal).
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
        threading.Thread(target=self._send, name="pipesim-stop", daemon=True).start()

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
