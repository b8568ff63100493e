"""Throughput of the SimPy engine against a straightforward loop and against raw SimPy.

For each size (n_slots = B in 64, 1,024, 4,096, 16,384) and each design (eta = 0, and eta = 2 with
partial rollouts) it measures, in one process and one run so the ratios share the machine's load:

* ``engine``: episodes simulated per second by ``pipesim.run`` (results are built lazily, so this
  is the simulation itself);
* ``loop``: the same workload through the plain-Python oracle of ``tests/oracle.py``, which scans
  the slots and the running episodes at every event, as the chapter's loop does (run for fewer
  steps at large sizes, since its cost per event grows with n_slots);
* ``raw``: events per second of a bare SimPy loop at the same concurrency (n_slots processes,
  each ``yield env.timeout(d)``) -- the ceiling for any SimPy design.

Goals: engine >= 2x loop at 64 slots and >= 50x at 4,096; engine >= 20% of raw at every size.
Usage: ``python benchmarks/bench_pipeline.py [--quick] [--sizes 64,1024]``.

Timing is CPU time of this process (``time.process_time``), best of several repeats, with the
three measurements interleaved: the machines this runs on are shared, and wall time there
mostly measures the neighbours. Small sizes run 100 steps so a run lasts long enough to time.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Generator
from functools import partial
from pathlib import Path

import simpy
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipesim import Drain, PartialRollout, PipelineConfig, Scenario, run  # noqa: E402
from pipesim.durations import agent_episode_durations  # noqa: E402
from tests.oracle import oracle_pipeline  # noqa: E402


def rate(fn: Callable[[], int]) -> float:
    """Units per CPU second of one call; ``fn`` returns the units it did."""
    t0 = time.process_time()
    units = fn()
    return units / max(time.process_time() - t0, 1e-9)


def best_rates(fns: list[Callable[[], int]], repeats: int) -> list[float]:
    """The best rate of each function over ``repeats`` rounds, the functions interleaved per round."""
    best = [0.0] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            best[i] = max(best[i], rate(fn))
    return best


def raw_simpy_rate(n: int, pool: list[float], n_events: int) -> int:
    """Run a bare SimPy loop (n processes, each ``yield env.timeout(d)``); return the events done."""
    env = simpy.Environment()
    per = max(1, n_events // n)

    def proc(i: int) -> Generator[simpy.Event, None, None]:
        k = i
        for _ in range(per):
            yield env.timeout(pool[k % len(pool)])
            k += n

    for i in range(n):
        env.process(proc(i))
    env.run()
    return per * n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller workloads (for a smoke run)")
    ap.add_argument("--sizes", default="64,1024,4096,16384", help="slot counts, comma-separated")
    args = ap.parse_args()
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    if any(n < 1 for n in sizes):
        ap.error(f"--sizes must be positive, got {args.sizes!r}")
    if args.quick:
        sizes = [n for n in sizes if n <= 1024] or [64]
    print(
        f"{'slots':>6} {'design':<12} | {'engine ep/s':>11} | {'loop ep/s':>9} | {'raw ev/s':>9} |"
        f" {'engine/loop':>11} | {'engine/raw':>10}"
    )
    for n in sizes:
        steps = max(4, 100 * 64 // n) if not args.quick else 4
        pool_t = agent_episode_durations((steps + 4) * n + n, torch.Generator().manual_seed(0))
        pool = pool_t.tolist()
        reps = {64: 30, 1024: 5, 4096: 3}.get(n, 2)  # small sizes: more rounds, since each is short
        raw_fn = partial(raw_simpy_rate, n, pool, max(200_000, 4 * n))
        for eta, label in [(0, "sync eta=0"), (2, "eta=2 part")]:
            cfg = PipelineConfig(
                n_slots=n, batch_size=n, train_time_s=60, sync_time_s=10, max_staleness=eta, steps=steps
            )
            sc = Scenario(
                pipeline=cfg, pool_size=len(pool), weight_update=PartialRollout() if eta else Drain()
            )
            loop_steps = steps if n <= 1024 else 1  # the loop's cost per event grows with n_slots
            engine, loop, raw = best_rates(
                [
                    partial(engine_episodes, sc, pool_t),
                    partial(loop_episodes, pool, n, eta, loop_steps),
                    raw_fn,
                ],
                reps,
            )
            ratio = engine / loop
            shown = f"{ratio:.2f}" if ratio < 10 else f"{ratio:.1f}"  # near a goal, two decimals
            print(
                f"{n:>6} {label:<12} | {engine:>11,.0f} | {loop:>9,.0f} | {raw:>9,.0f} |"
                f" {shown:>10}x | {engine / raw:>9.0%}"
            )


def engine_episodes(sc: Scenario, pool: torch.Tensor) -> int:
    return len(run(sc, pool).episodes)


def loop_episodes(pool: list[float], n: int, eta: int, steps: int) -> int:
    return oracle_pipeline(pool, n, n, 60.0, 10.0, eta, bool(eta), steps).started


if __name__ == "__main__":
    main()
