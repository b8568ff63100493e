"""How ``pipesim profile`` stops early, keeping what it measured: a signal or a shape too large.

A profile spends minutes of a GPU's time, so stopping it early never throws the rows away: the
command (:func:`pipesim.compute.profile.run`) writes the rows measured so far, marked incomplete,
and lets the exception go on. Two things stop it:

* **a signal**: :func:`stop_once` turns the first SIGINT or SIGTERM (``timeout``'s default, a
  scheduler's, Ctrl-C) into ``KeyboardInterrupt`` and ignores the rest until the rows are
  written; one raised inside a finalizer (a ``__del__`` the garbage collector ran when the
  signal came) was printed as "Exception ignored" and lost, and the profile measured on to its end:
  :func:`stops_from_finalizers` (:mod:`pipesim.compute.finalizer_stop`, imported beside this
  file as this file is, re-exported here) raises it again in the main code, about 0.05 s later;
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

import contextlib
import signal
import threading
from collections.abc import Iterator

if __package__:  # imported as pipesim.compute.profile_stop: its sibling through the package
    from pipesim.compute.finalizer_stop import stops_from_finalizers as stops_from_finalizers
else:  # the top-level module profile_stop (pipesim.compute.profile run as a file): from this folder
    from finalizer_stop import stops_from_finalizers as stops_from_finalizers  # type: ignore[no-redef]

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
