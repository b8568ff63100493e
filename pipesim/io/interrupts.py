"""Interrupts that leave nothing half-written: SIGTERM as Ctrl-C, and files written whole or not at all.

Design: a command stopped by Ctrl-C or SIGTERM should keep what it finished and leave no output
that half loads. Python turns Ctrl-C into :class:`KeyboardInterrupt`, which unwinds the stack and
runs every ``finally``; SIGTERM's default action kills the process where it stands, so
:func:`sigterm_as_interrupt` makes it raise the same exception for the length of a command (the
commands then need one path, not two). An output file is written beside its target under a
temporary name and moved over it with :func:`os.replace`, which is atomic on one file system: a
reader sees the old file or the whole new one, and an interrupt mid-write removes the temporary
file (:func:`write_atomic`). A target that is not a regular file (``/dev/stdout``, a pipe) is
written in place, since renaming over it would replace the device rather than write to it.
A command that saves what it finished when it is stopped (``pipesim sweep``, ``pipesim plan``)
runs under :func:`interrupt_once`: the first signal stops it, and later ones are dropped until it
has written its outputs (a second Ctrl-C 30 ms after the first used to cut that writing).
Both blocks whose handlers raise (:func:`sigterm_as_interrupt`, :func:`interrupt_once`) run under
:func:`~pipesim.compute.finalizer_stop.stops_from_finalizers`: a stop raised inside a ``__del__`` was
printed as "Exception ignored" and lost, and the command ran on to its end.

Once a command has returned, its outputs are complete: :func:`command_finished` records a Ctrl-C or
SIGTERM from then on and says so in one line, keeping the exit status (one just after ``pipesim run
--save`` said "saved the run" gave 130 and "stopped before it finished"; one in a pool's exit-time
clean-up, "Exception ignored in atexit callback" and a traceback). :func:`command_signals` keeps
that handler to the end of a process whose program is the command line, and gives a caller in the
same process its handlers back; :mod:`pipesim_entry` ignores both signals in the interpreter's
last steps (which restore their default action, and a Ctrl-C there killed the process).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from pipesim.compute.finalizer_stop import stops_from_finalizers
from pipesim.core.atomic import write_atomic, write_text_atomic, writes_in_place

__all__ = [
    "Finished",
    "Once",
    "command_finished",
    "command_signals",
    "deferred_interrupts",
    "held_interrupts",
    "ignore_interrupts_at_exit",
    "ignore_sigint",
    "interrupt_once",
    "polled_interrupts",
    "reader_may_leave",
    "signals_to",
    "sigterm_as_interrupt",
    "stdout_may_close",
    "stopping",
    "write_atomic",
    "write_text_atomic",
    "writes_in_place",
]


def ignore_sigint() -> None:
    """A pool worker's initializer: leave Ctrl-C to the parent (a terminal sends it to the whole
    process group), which keeps what finished and stops the pool; no worker answers a task with
    KeyboardInterrupt or prints a traceback. SIGTERM gets its default action back: a worker
    started by ``fork`` inherits :func:`sigterm_as_interrupt`, and a SIGTERM then only
    interrupted its task (:mod:`pipesim.io.pools`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def reader_may_leave(main: Callable[[], int | None]) -> int:
    """``main()``'s exit status, where a reader that leaves early (``python -m ... | head``)
    does not stop the command: what it prints after that is dropped (:func:`stdout_may_close`),
    and every file it was asked for is still written. Before, the first print to the closed pipe
    raised BrokenPipeError, and a command that prints before it writes (``pipesim run --trace``)
    exited 0 without its files."""
    with stdout_may_close():
        return main() or 0


class _MayClose(io.TextIOBase):
    """A text stream over ``inner`` that drops what it is given once its reader has gone: the
    first BrokenPipeError points the file descriptor at the null device (so the interpreter's
    last flush cannot fail) and every later write is dropped."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.gone = inner, False

    def _closed(self) -> None:
        self.gone = True
        with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.inner.fileno())
            os.close(devnull)

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.inner.write(text)
            except BrokenPipeError:
                self._closed()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.inner.flush()
            except BrokenPipeError:
                self._closed()

    def isatty(self) -> bool:
        return not self.gone and bool(self.inner.isatty())

    def fileno(self) -> int:
        return int(self.inner.fileno())

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.inner, "encoding", "utf-8"))


@contextlib.contextmanager
def stdout_may_close() -> Iterator[None]:
    """Standard output as a stream a reader may close early (``pipesim ... | head``): the command
    goes on, writes every file, and ends with its own status; output to the closed pipe is
    dropped. ``sys.stdout`` is restored when the block ends."""
    before = sys.stdout
    sys.stdout = _MayClose(before)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout.flush()
        sys.stdout = before


@contextlib.contextmanager
def signals_to(
    handler: Any, signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
) -> Iterator[None]:
    """Within the block each of ``signals`` goes to ``handler`` (a function, or ``SIG_IGN``); the
    handlers before are restored when it ends. Only the main thread can set a handler, and one not
    set from Python (``getsignal`` is None) cannot be restored, so there this changes nothing. The
    one mechanism under :func:`deferred_interrupts`, :func:`held_interrupts`,
    :func:`sigterm_as_interrupt` and the sweep pool's forkserver start."""
    if threading.current_thread() is not threading.main_thread() or any(
        signal.getsignal(sig) is None for sig in signals
    ):
        yield
        return
    before = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, previous in before.items():  # a stopped command's process only exits now
            signal.signal(sig, _FINISHED or (signal.SIG_IGN if _EXITING else previous))


def deferred_interrupts() -> contextlib.AbstractContextManager[None]:
    """Ctrl-C and SIGTERM ignored while a command that is already stopping saves what the first
    interrupt left it (the designs finished, the outputs asked for). A second signal there (Ctrl-C
    pressed twice; ``timeout`` signals the process and then its group) would otherwise unwind the
    saving itself and lose the work: ``pipesim plan`` said "nothing written" after hundreds of
    runs. The command is stopping anyway, so the second signal changes nothing; the handlers are
    restored when the block ends. Outside the main thread this does nothing."""
    return signals_to(signal.SIG_IGN)


@contextlib.contextmanager
def held_interrupts() -> Iterator[None]:
    """Ctrl-C and SIGTERM held while the block runs, then delivered again under the handlers it
    restores: for a step that must not be cut half-way. A process pool starting a worker forks it
    from the forkserver and then hands it its arguments; cut between the two, the worker died with a
    20-line traceback of its own under the sweep's clean "interrupted" line. Outside the main
    thread this does nothing. (:func:`polled_interrupts` without taking them early.)"""
    with polled_interrupts():
        yield


@contextlib.contextmanager
def polled_interrupts() -> Iterator[Callable[[], None]]:
    """Ctrl-C and SIGTERM held within the block, and taken only where it calls the function it
    yields (a "check") or where it ends: each signal held is then raised again under the handler
    the block replaced (a KeyboardInterrupt, usually), which it restores. For a loop that waits in
    :mod:`concurrent.futures`, whose locks a KeyboardInterrupt must never cut
    (:mod:`pipesim.io.pools`); the loop calls the check between its waits, which must be short
    (:func:`pipesim.io.pools.as_finished`). Outside
    the main thread this changes nothing and the check does nothing."""
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    before: dict[int, Any] = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def check() -> None:
        while held:  # (a signal held only where the block set ``hold``: the main thread)
            signum = held.pop(0)
            while signum in held:
                held.remove(signum)
            signal.signal(signum, before[signum])
            try:
                signal.raise_signal(signum)  # its handler runs now, here: outside any lock
            finally:
                signal.signal(signum, hold)

    try:
        with signals_to(hold):
            yield check
    finally:
        for signum in dict.fromkeys(held):  # each once, under the handler the caller had
            signal.raise_signal(signum)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


class Once:
    """The handler of :func:`interrupt_once`: the first Ctrl-C or SIGTERM raises KeyboardInterrupt,
    every later one is counted in ``later`` and dropped. ``stopping`` says whether the command is
    stopping (an interrupt came, by a signal or as :func:`stopping` says)."""

    def __init__(self) -> None:
        self.stopping = False
        self.later: list[int] = []

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.stopping:
            self.later.append(signum)
            return
        self.stopping = True
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


_ONCE: list[Once] = []
"""The :func:`interrupt_once` blocks open, innermost last."""


@contextlib.contextmanager
def interrupt_once() -> Iterator[Once]:
    """Within the block the first Ctrl-C or SIGTERM raises KeyboardInterrupt (SIGTERM as Ctrl-C
    does), and every later one is dropped until the block ends: for a command that keeps what it
    finished when it is stopped. Stopping takes time (a pool's workers are ended, the finished
    work is gathered and written), and a second Ctrl-C pressed soon after the first, or
    ``timeout`` signalling the process and then its group, used to land there and unwind the
    saving itself: ``pipesim sweep`` stopped with no ``--csv`` after its cells had finished, or
    died of the signal (status -2, not 130). :func:`deferred_interrupts` covers one step; this
    covers the whole way out. An interrupt that comes as no signal (a worker's KeyboardInterrupt,
    raised again in the parent) marks the command stopping through :func:`stopping`. The handlers
    are restored when the block ends (a caller in the same process gets Ctrl-C back); outside the
    main thread this does nothing. A stop that lands in a finalizer still stops the block
    (:func:`~pipesim.compute.finalizer_stop.stops_from_finalizers`)."""
    global _EXITING
    once = Once()
    _ONCE.append(once)
    try:
        with stops_from_finalizers(), signals_to(once):
            try:
                yield once
            finally:
                _EXITING = _EXITING or (once.stopping and _command_is_the_program())
    finally:
        _ONCE.remove(once)


_EXITING = False
"""Whether pipesim's command line, run as this process's program, was stopped: the process only
exits from then on, and every handler :func:`signals_to` would restore is SIG_IGN instead. The
interpreter's exit (a pool's, a cluster's cleanup) takes tens of milliseconds, and a second Ctrl-C
there killed a sweep that had said "interrupted" (status -2, not 130)."""


def _command_is_the_program() -> bool:
    """Whether this process runs pipesim's command line as its program (``pipesim``, ``python -m
    pipesim``: their ``__main__`` calls a ``main`` of pipesim's, or of the console script's
    :mod:`pipesim_entry`), rather than a caller that goes on after the command returns (a test, a
    notebook), whose Ctrl-C must work again."""
    main = getattr(sys.modules.get("__main__"), "main", None)
    return str(getattr(main, "__module__", "")).split(".")[0] in ("pipesim", "pipesim_entry")


class Finished:
    """Ctrl-C and SIGTERM once a command has returned (:func:`command_finished`): recorded in
    ``signals``, never raised; the first writes ``said`` (if any) with one ``os.write`` (a handler
    may run in the middle of another write to ``sys.stderr``)."""

    def __init__(self, said: str | None) -> None:
        self.said = said
        self.signals: list[int] = []

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)
        if self.said and len(self.signals) == 1:
            with contextlib.suppress(OSError):
                os.write(2, f"{self.said}\n".encode())


_FINISHED: Finished | None = None
"""The handler of the command that has returned (:func:`command_finished`), until
:func:`command_signals` ends (in a process that runs the command line as its program, until it
exits); :func:`signals_to` restores it rather than the handler it replaced."""


def command_finished(command: str, status: int, interrupted: bool = False) -> None:
    """``pipesim COMMAND`` has returned ``status`` (0: its outputs are complete): from now on a
    Ctrl-C or SIGTERM is recorded rather than raised (:class:`Finished`), and the first one says
    ``pipesim: interrupted after COMMAND had finished; the outputs are complete`` where the status
    is 0 (another status was said by the command already, so nothing more is said). The exit
    status stays the command's; ``interrupted``: one such signal came already (as an exception).
    Outside the main thread the handler is not set."""
    global _FINISHED
    if _FINISHED is None:
        said = f"pipesim: interrupted after {command} had finished; the outputs are complete"
        _FINISHED = Finished(said if status == 0 else None)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(sig) is not None:  # one not set from Python stays as it is
                signal.signal(sig, _FINISHED)
    if interrupted:
        _FINISHED(signal.SIGINT, None)


@contextlib.contextmanager
def command_signals(command: str) -> Iterator[None]:
    """The block of the command line's ``main``: when it ends, the command has returned. In a
    process that runs the command line as its program, Ctrl-C and SIGTERM are recorded from then
    on (:func:`command_finished`; silently, where the command did not say it had finished) and
    ignored in the interpreter's last steps; a caller in the same process (a test) gets the
    handlers it had back."""
    global _FINISHED
    main_thread = threading.current_thread() is threading.main_thread()
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)} if main_thread else {}
    try:
        yield
    finally:
        if _command_is_the_program():
            command_finished(command, 1)  # a no-op where the command said it had finished
            if "pipesim_entry" not in sys.modules:  # the console script registered this first
                atexit.register(_ignore_interrupts)
        else:
            _FINISHED = None
            for sig, previous in before.items():
                if previous is not None:
                    signal.signal(sig, previous)


def ignore_interrupts_at_exit() -> None:
    """For a program's ``__main__`` once its work is done (``python -m pipesim.io.demo``): Ctrl-C
    and SIGTERM are ignored from the first exit function on (registered last, so run first). The
    interpreter gives every signal with a Python handler its default action back as it finalizes,
    and a SIGINT there killed ``make demo`` after it had said "interrupted" (status -2, not 130:
    2 of 115 stops beside three CPU hogs). :func:`command_signals` does this for pipesim's commands."""
    atexit.register(_ignore_interrupts)


def _ignore_interrupts() -> None:
    """Ctrl-C and SIGTERM ignored: the interpreter's last steps restore a Python handler's default."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)


def stopping() -> None:
    """Mark every open :func:`interrupt_once` block as stopping: from now on a Ctrl-C or SIGTERM is
    dropped there. For an interrupt that came as no signal to this process (a worker's)."""
    for once in _ONCE:
        once.stopping = True


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises KeyboardInterrupt, as Ctrl-C does; the previous handler is
    restored after. Either one raised inside a finalizer still stops the block
    (:func:`~pipesim.compute.finalizer_stop.stops_from_finalizers`). Only the main thread can set a
    handler, so elsewhere this does nothing."""
    with stops_from_finalizers(), signals_to(_raise_interrupt, (signal.SIGTERM,)):
        yield
