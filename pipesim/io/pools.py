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
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from typing import Any, TypeVar

from pipesim.io.interrupts import ignore_sigint
from pipesim.io.interrupts import polled_interrupts as polled_interrupts  # re-exported: sweeps, table

__all__ = ["POLL_S", "as_finished", "kill_workers", "polled_interrupts", "stop_pool", "worker_pool"]

T = TypeVar("T")

POLL_S = 0.05
"""The longest wait of :func:`as_finished` (seconds): a Ctrl-C held meanwhile is taken at most this late."""

STOP_WAIT_S = 10.0
"""How long :func:`stop_pool` waits for the pool's manager thread (seconds): its workers are dead
by then, and it only fails their futures and closes its queues (milliseconds)."""


def as_finished(futures: Iterable[Future[T]], check: Callable[[], None]) -> Iterator[Future[T]]:
    """``futures`` as they finish (:func:`~concurrent.futures.as_completed`), waiting at most
    :data:`POLL_S` at a time and calling ``check`` (:func:`polled_interrupts`'s) before each wait,
    so that an interrupt is raised there and never inside the wait."""
    pending = set(futures)
    while pending:
        check()
        done, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
        yield from done


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
