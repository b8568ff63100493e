"""The command's plumbing: a stdout that survives its reader leaving, atomic writes, and stop
signals that interrupt once.

``mismatch`` does not import pipesim (it runs where pipesim's dependencies are absent), so these
twin :mod:`pipesim.io.interrupts`' helpers in a few lines each; the finalizer-stop block they use
is :mod:`mismatch.finalizer_stop`, pipesim's line for line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mismatch.finalizer_stop import stops_from_finalizers


class DropOnClosedPipe:
    """A stdout that, once its reader has left (``| head``), drops what is written instead of
    raising BrokenPipeError: the run goes on and writes its files. The first broken write points
    the stream's file descriptor at os.devnull, so the interpreter's final flush of what is still
    buffered cannot fail either (that made the exit status 120). Anything else is the stream's."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.dropping = False

    def write(self, text: str) -> int:
        if not self.dropping:
            try:
                return int(self.stream.write(text))
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.dropping:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        self.dropping = True
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):  # not a file (a test's capture): nothing to flush
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def closed_pipe_dropped() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` are :class:`DropOnClosedPipe` within the block (``|&
    head`` closes both), flushed at its end and then restored."""
    guards = {name: DropOnClosedPipe(getattr(sys, name)) for name in ("stdout", "stderr")}
    for name, guard in guards.items():
        setattr(sys, name, guard)
    try:
        yield
    finally:
        for name, guard in guards.items():
            guard.flush()
            if getattr(sys, name) is guard:
                setattr(sys, name, guard.stream)


def write_atomic(path: str, write: Any) -> None:
    """``write(tmp)`` to a temporary file beside ``path``, then rename it over ``path``: an
    interrupt leaves the old file or none, never half of one. A pipe or a terminal (``/dev/stdout``)
    is written in place. (``mismatch`` does not import pipesim, whose ``write_atomic`` this twins.)"""
    if special_path(path):
        write(Path(path))
        return
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.resolve().parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; results are meant to be shared
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interrupts_stop_once() -> Iterator[None]:
    """Within the block the first SIGINT or SIGTERM raises KeyboardInterrupt (SIGTERM as Ctrl-C
    does), and every later one is ignored until the block ends, so that saving what the first left
    cannot be cut short: ``timeout`` signals the process and then its whole process group, so the
    probe gets each of its signals twice (``timeout`` gives its command the default SIGINT handler,
    so ``timeout -s INT`` stops a probe even from a background job). A stop raised inside a
    finalizer (a ``__del__`` the garbage collector ran when the signal came) is raised again in the
    main code (:func:`mismatch.finalizer_stop.stops_from_finalizers`): CI saw one printed as
    "Exception ignored" and lost, and the probe ran to its end and exited 0. Main thread only; the
    handlers before are restored at the end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _stop(signum: int, frame: Any) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    with stops_from_finalizers():
        # a signal ignored from the start (a script's background job) stays ignored, as Python leaves it
        previous = {
            sig: signal.signal(sig, _stop)
            for sig in STOP_SIGNALS
            if signal.getsignal(sig) is not signal.SIG_IGN
        }
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def special_path(path: str) -> bool:
    """Whether ``path`` is an existing pipe, character device or socket (``/dev/stdout``, a FIFO,
    ``>(cat)``), which a script writes as a stream: nothing to test by opening it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)
