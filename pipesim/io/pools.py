"""Process pools that stop with the command: a Ctrl-C leaves no worker computing behind it.

Design: a terminal sends Ctrl-C to the whole process group, so a pool's workers get it too. A
worker that takes it raises :class:`KeyboardInterrupt` inside its task, which
:class:`~concurrent.futures.ProcessPoolExecutor` hands back as the task's result before it takes
the next one from the queue; and the ``with`` block's exit then waits for every queued task.
``python -m scenarios.published --workers 2`` stopped 20 s in said "interrupted" and ran on
for the rest of its 69 runs. So the workers here leave Ctrl-C to the parent
(:func:`~pipesim.io.interrupts.ignore_sigint`, which also gives SIGTERM its default action back:
under ``fork`` a worker inherits the command's SIGTERM-as-Ctrl-C handler, and a SIGTERM to the
group then only interrupted its task), and a block left by an exception drops the
queued tasks and kills the running ones (:func:`stop_pool`) instead of waiting for them.

The parent's wait must not be cut either. :func:`concurrent.futures.wait` (and
:func:`~concurrent.futures.as_completed`) takes the lock of every future it waits on, one by one in
Python code, and a KeyboardInterrupt raised there by the signal handler left the ones taken held for
good: the pool's manager thread then blocked on one, and so did the shutdown that joined it. A
``pipesim sweep`` of 10,000 cells stopped by Ctrl-C hung in 3 of 12 tries, with its finished cells
unwritten and every later signal dropped, until SIGKILL. So a loop that waits holds Ctrl-C and
SIGTERM (:func:`polled_interrupts`) and takes them where it chooses, between short waits
(:func:`as_finished`, :data:`POLL_S`); and :func:`stop_pool` waits for the manager thread a bounded
time only (:data:`STOP_WAIT_S`), since the workers it killed can hold nothing up.

Those waits learn of finished futures from done-callbacks (:class:`Finished`), not by handing every
pending future to :func:`~concurrent.futures.wait` again: that call takes each future's lock and
hangs a waiter on it, so a 10,000-cell sweep spent O(cells) of the parent's time per finished cell,
on the two cores its workers needed (10,000 cells of 2 ms took 36 s where ``as_completed`` took
22 s; ``benchmarks/bench_pools.py``). A callback costs one queue put per future, whatever is pending.
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from typing import Any, Generic, TypeVar

from pipesim.io.interrupts import ignore_sigint
from pipesim.io.interrupts import polled_interrupts as polled_interrupts  # re-exported: sweeps, table

__all__ = [
    "POLL_S",
    "Finished",
    "as_finished",
    "kill_workers",
    "polled_interrupts",
    "stop_pool",
    "worker_pool",
]

T = TypeVar("T")

POLL_S = 0.05
"""The longest wait of :func:`as_finished` (seconds): a Ctrl-C held meanwhile is taken at most this late."""

STOP_WAIT_S = 10.0
"""How long :func:`stop_pool` waits for the pool's manager thread (seconds): its workers are dead
by then, and it only fails their futures and closes its queues (milliseconds)."""


class Finished(Generic[T]):
    """The futures of one wait loop, told as they finish by their done-callbacks.

    Each future's callback puts it on a queue (in the thread that finished it; at once for one done
    already), so :meth:`take` costs the futures finished, not those pending. A future given twice
    is counted once. What the loop does with a future is its own: one it stopped waiting for (a
    cell it timed out) still comes back here when it ends, for the loop to skip.
    """

    def __init__(self, futures: Iterable[Future[T]]) -> None:
        self._done: queue.SimpleQueue[Future[T]] = queue.SimpleQueue()
        unique = list(dict.fromkeys(futures))
        self.left = len(unique)
        """How many futures have not come back from :meth:`take` yet."""
        for fut in unique:
            fut.add_done_callback(self._done.put)

    def take(self, timeout_s: float) -> list[Future[T]]:
        """The futures finished since the last call, in the order they finished; waits at most
        ``timeout_s`` for the first (an empty list when none finished meanwhile)."""
        if self.left == 0:
            return []
        try:
            done = [self._done.get(timeout=timeout_s)]
        except queue.Empty:
            return []
        while True:
            try:
                done.append(self._done.get_nowait())
            except queue.Empty:
                break
        self.left -= len(done)
        return done


def as_finished(futures: Iterable[Future[T]], check: Callable[[], None]) -> Iterator[Future[T]]:
    """``futures`` as they finish (:func:`~concurrent.futures.as_completed`), waiting at most
    :data:`POLL_S` at a time and calling ``check`` (:func:`polled_interrupts`'s) before each wait,
    so that an interrupt is raised there and never inside the wait."""
    finished = Finished(futures)
    while finished.left:
        check()
        yield from finished.take(POLL_S)


def kill_workers(ex: Executor) -> None:
    """Kill a process pool's workers (Python 3.11 has no public call; 3.14 adds kill_workers):
    the manager thread then finds the pool broken and fails its unfinished futures."""
    for proc in list((getattr(ex, "_processes", None) or {}).values()):
        proc.kill()


def stop_pool(ex: Executor) -> None:
    """Drop ``ex``'s queued tasks and end its running ones, so that an interrupt does not wait for
    them (what finished has already been handed back). The workers are killed before ``shutdown``,
    which forgets them: the plan's stop read them after it, and so ended none. The pool's manager
    thread is then given :data:`STOP_WAIT_S` to end, never more: the shutdown that waited for it
    without a limit hung a stopped sweep for good when it could not."""
    manager: Any = getattr(ex, "_executor_manager_thread", None)  # shutdown forgets it
    kill_workers(ex)
    ex.shutdown(wait=False, cancel_futures=True)
    if manager is not None:
        manager.join(STOP_WAIT_S)


@contextlib.contextmanager
def worker_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of ``workers`` processes that ignore Ctrl-C; leaving the block normally waits for
    its tasks, leaving it by an exception (Ctrl-C, SIGTERM, a task's error) stops them
    (:func:`stop_pool`, which does not wait on a stuck pool). A loop in the block that waits on
    its futures should take interrupts between its waits (:func:`polled_interrupts`,
    :func:`as_finished`)."""
    ex = ProcessPoolExecutor(max_workers=workers, initializer=ignore_sigint)
    try:
        yield ex
    except BaseException:
        stop_pool(ex)
        raise
    ex.shutdown(wait=True)
