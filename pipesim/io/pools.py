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
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor

from pipesim.io.interrupts import ignore_sigint

__all__ = ["kill_workers", "stop_pool", "worker_pool"]


def kill_workers(ex: Executor) -> None:
    """Kill a process pool's workers (Python 3.11 has no public call; 3.14 adds kill_workers):
    the manager thread then finds the pool broken and fails its unfinished futures."""
    for proc in list((getattr(ex, "_processes", None) or {}).values()):
        proc.kill()


def stop_pool(ex: ProcessPoolExecutor) -> None:
    """Drop ``ex``'s queued tasks and end its running ones, so that an interrupt does not wait for
    them (what finished has already been handed back). The workers are killed before ``shutdown``,
    which forgets them: the plan's stop read them after it, and so ended none."""
    kill_workers(ex)
    ex.shutdown(wait=False, cancel_futures=True)


@contextlib.contextmanager
def worker_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A pool of ``workers`` processes that ignore Ctrl-C; leaving the block normally waits for
    its tasks, leaving it by an exception (Ctrl-C, SIGTERM, a task's error) stops them."""
    ex = ProcessPoolExecutor(max_workers=workers, initializer=ignore_sigint)
    try:
        yield ex
    except BaseException:
        stop_pool(ex)
        raise
    finally:
        ex.shutdown(wait=True)
