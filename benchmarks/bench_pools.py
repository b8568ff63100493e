"""What waiting on a process pool costs the parent: the sweep's and the published table's loop.

A sweep of many cells waits for them in a loop that must take Ctrl-C between short waits
(``pipesim.io.pools``). That loop runs in the parent, on the cores the workers need, so its cost
per finished cell is what it takes from the sweep. Three loops wait on the same tasks:

* ``as_finished``: ``pipesim.io.pools.as_finished`` of this checkout (done-callbacks and a queue);
* ``wait-poll``: the loop it replaced (stop 65), ``concurrent.futures.wait(pending,
  timeout=POLL_S, return_when=FIRST_COMPLETED)`` on every pending future at each poll;
* ``as_completed``: ``concurrent.futures.as_completed``, which cannot take Ctrl-C safely (a
  KeyboardInterrupt inside it left futures' locks held) but is the floor to compare with.

Workload: ``--tasks`` tasks (default 10,000) on a pool of ``--workers`` processes (default 2), each
task spinning ``--task-ms`` of CPU (default 2). Printed per loop: wall seconds, the parent's CPU
seconds (``time.process_time``: its threads too, the pool's manager among them) and the parent's
CPU per task in microseconds; the median of ``--rounds`` rounds (default 3), the loops in turn
within a round, since the machine may be shared. Goal: ``as_finished``'s parent CPU per task within
1.5x of ``as_completed``'s, whatever the number of tasks.

Usage: ``python benchmarks/bench_pools.py [--tasks 10000] [--workers 2] [--task-ms 2] [--rounds 3]``.
Ctrl-C (or SIGTERM) stops it with one line on stderr saying what it was measuring, and exit status
130 (the table is printed at the end, from the medians).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, as_completed, wait

from pipesim.io.pools import POLL_S, as_finished


def spin(ms: float) -> float:
    """A task: ``ms`` milliseconds of CPU."""
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass
    return ms


def wait_poll(futures: Iterable[Future[float]]) -> Iterator[Future[float]]:
    """The loop ``as_finished`` replaced: every pending future handed to ``wait`` at each poll."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
        yield from done


LOOPS: dict[str, Callable[[list[Future[float]]], Iterable[Future[float]]]] = {
    "as_finished": lambda fs: as_finished(fs, lambda: None),
    "wait-poll": wait_poll,
    "as_completed": as_completed,
}


def measure(loop: str, tasks: int, workers: int, task_ms: float) -> tuple[float, float]:
    """(wall s, parent CPU s) of submitting ``tasks`` and taking them back through ``loop``."""
    with ProcessPoolExecutor(max_workers=workers) as ex:
        list(ex.map(spin, [0.0] * workers))  # the workers started before the clocks
        wall0, cpu0 = time.perf_counter(), time.process_time()
        futures = [ex.submit(spin, task_ms) for _ in range(tasks)]
        n = sum(1 for _ in LOOPS[loop](futures))
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    if n != tasks:
        raise AssertionError(f"{loop} gave back {n} of {tasks} futures")
    return wall, cpu


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=10_000, help="tasks per loop (default 10,000)")
    p.add_argument("--workers", type=int, default=2, help="pool processes (default 2)")
    p.add_argument("--task-ms", type=float, default=2.0, help="CPU milliseconds per task (default 2)")
    p.add_argument("--rounds", type=int, default=3, help="rounds, the loops in turn (default 3)")
    args = p.parse_args(argv)
    for name in ("tasks", "workers", "rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1, not {getattr(args, name)}")
    if not 0 <= args.task_ms <= 60_000:
        p.error(f"--task-ms must be within [0, 60000], not {args.task_ms}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, 2 for a usage error, 130 when Ctrl-C or SIGTERM stopped it."""
    args = parse_args(argv)
    from pipesim.io.interrupts import interrupt_once

    print(f"{args.tasks:,} tasks of {args.task_ms:g} ms CPU, {args.workers} workers, median of {args.rounds}")
    print(f"{'loop':<14}{'wall s':>9}{'parent CPU s':>14}{'CPU us/task':>13}")
    doing = "the first round"
    with interrupt_once():  # SIGTERM as Ctrl-C
        try:
            got: dict[str, list[tuple[float, float]]] = {loop: [] for loop in LOOPS}
            for r in range(args.rounds):
                for loop in LOOPS:
                    doing = f"round {r + 1}, {loop}"
                    got[loop].append(measure(loop, args.tasks, args.workers, args.task_ms))
            for loop, rows in got.items():
                wall = statistics.median(w for w, _ in rows)
                cpu = statistics.median(c for _, c in rows)
                print(f"{loop:<14}{wall:>9.2f}{cpu:>14.2f}{1e6 * cpu / args.tasks:>13.0f}")
        except KeyboardInterrupt:
            print(f"bench_pools: interrupted during {doing}; no row printed", file=sys.stderr)
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
