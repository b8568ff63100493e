"""How ``pipesim profile`` stops early, keeping what it measured: a signal or a shape too large.

A profile spends minutes of a GPU's time, so stopping it early never throws the rows away: the
command (:func:`pipesim.compute.profile.run`) writes the rows measured so far, marked incomplete,
and lets the exception go on. Two things stop it:

* **a signal**: :func:`stop_once` turns the first SIGINT or SIGTERM (``timeout``'s default, a
  scheduler's, Ctrl-C) into ``KeyboardInterrupt`` and ignores the rest until the rows are
  written; one raised inside a finalizer (a ``__del__`` the garbage collector ran when the
  signal came) was printed as "Exception ignored" and lost, and the profile measured on to its end:
  :func:`stops_from_finalizers` raises it again in the main code, about 0.05 s later (a twin of
  ``pipesim.io.finalizer_stop``, whose docstring has the design);
* **a shape too large for the device's memory**: inside :func:`shape_guard`, torch's allocator
  failing (a ``RuntimeError`` that says so) becomes :class:`TooLarge`, a ``ValueError`` naming
  the option and the shape that asked for it; any other ``RuntimeError`` goes on as it was.

Standard library only, and never ``torch`` (it only recognises torch's error by its text): like
:mod:`pipesim.compute.profile_shapes`, this file is imported through the package, or, where
``python pipesim/compute/profile.py`` runs on torch alone, as the top-level module
``profile_stop`` (see :mod:`pipesim.compute.profile`). Split from that module, which re-exports
every name here.
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

__all__ = ["STOP_SIGNALS", "TooLarge", "shape_guard", "stop_once", "stops_from_finalizers"]


class TooLarge(ValueError):
    """A shape needs more memory than the device has: the option and the shape that asked for it
    (the command writes the rows measured before it, as an interrupt does)."""


@contextlib.contextmanager
def shape_guard(option: str, shape: str, tp: int) -> Iterator[None]:
    """Within the block, torch's allocator failing (a CUDA or CPU out-of-memory error) raises
    :class:`TooLarge` naming ``option`` and ``shape``."""
    try:
        yield
    except RuntimeError as e:  # torch.OutOfMemoryError is one
        text = str(e).strip()
        if "out of memory" not in text.lower() and "allocate" not in text.lower():
            raise
        first = text.splitlines()[0][:200] if text else type(e).__name__
        raise TooLarge(
            f"{option} {shape} (tp {tp}): needs more memory than the device has ({first}); give a smaller one"
        ) from None


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Redelivery:
    """A stop a finalizer swallowed, on its way back to the main code: a one-shot SIGINT handler
    raises it again, sent from a thread once the finalizer has returned (twin of
    ``pipesim.io.finalizer_stop.Redelivery``)."""

    def __init__(self, stop: KeyboardInterrupt) -> None:
        self.args = stop.args
        self.sent = self.over = False  # the thread has sent it; it was raised, or is not wanted
        self.handler = self._raise  # one bound method, to know it again in getsignal
        self.before: Any = signal.signal(signal.SIGINT, self.handler)
        threading.Thread(target=self._send, name="profile-stop", daemon=True).start()

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
            return  # one stop on its way already (timeout signals the process, then its group)
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
def stop_once() -> Iterator[None]:
    """Within the block the first SIGINT or SIGTERM raises KeyboardInterrupt, so a profile stopped
    by ``timeout`` (SIGTERM by default), a scheduler or Ctrl-C writes the rows it measured; every
    later one is ignored until the block ends, so that the writing cannot be cut short (``timeout``
    signals the process and then its whole process group: each signal comes twice). The handlers
    before are restored after; outside the main thread this does nothing. A twin of
    ``pipesim.io.interrupts.sigterm_as_interrupt`` and ``deferred_interrupts`` together: run as a
    file this script imports nothing of pipesim (see the module docstring). A stop raised inside
    a finalizer still stops the block (:func:`stops_from_finalizers`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _stop(signum: int, frame: object) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    # a signal ignored from the start (a script's background job) stays ignored, as Python leaves it
    before = {
        sig: signal.signal(sig, _stop) for sig in STOP_SIGNALS if signal.getsignal(sig) is not signal.SIG_IGN
    }
    try:
        with stops_from_finalizers():  # one raised inside a __del__ still stops the profile
            yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
