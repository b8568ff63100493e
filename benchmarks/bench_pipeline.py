"""Throughput of pipesim against the chapter's own loop (and, ``--suite all``, the oracle loop and raw SimPy).

``--suite chapter`` (the default) is the comparison with the chapter's own loop: the chapter's
``simulate_pipeline``, imported at run time from ``../shared/reference/chapter_loop.py`` (relative
to the repository root) when that file is there -- nothing in the project copies it -- against

* ``pipesim.simulate_pipeline``: the same signature and the same dict, end to end;
* ``pipesim.run``: the engine alone, on the equivalent Scenario, without building the dict;

called as the chapter calls it: one pool of 400,000 ``pipesim.agent_episode_durations`` (generator
seed 7: the chapter's ``torch.Generator().manual_seed(7)`` where the function accepts one, else
``numpy.random.default_rng(7)``), batch = slots, 60 s train, 10 s sync, 200 steps at 64 slots and 4
at 4,096, for eta=0 and eta=2, both with ``interrupt=True``. Timing is CPU time
(``time.process_time``), best of 5 rounds (2 with ``--quick``), the three sides interleaved in every
round. Rates are episodes generated (the ``gen`` events of the output, the same on every side when
they agree) per CPU second. The outputs are checked to agree (time, throughput, staleness_mean,
staleness_max, trained_duration: equal or within 1e-9 relative; and the sorted events). Each
row's verdict is AGREE, DISAGREE, or ``AGREE (float32 mean)`` where the only difference is the
staleness mean and the two are equal once rounded to float32 (the chapter averages staleness in
float32, pipesim in float64; ``docs/performance.md`` counts that as agreement).
Goals: simulate_pipeline >= 2x the loop at 64 slots, >= 50x at 4,096; ``run`` alone keeps
its ratio (about 2.2-2.6x at 64 slots, about 110x at 4,096: ``docs/performance.md``) within 10%.

``--suite all`` adds the older table. For each size (n_slots = B in 64, 1,024, 4,096, 16,384) and
each design (eta = 0, and eta = 2 with partial rollouts) it measures, in one process and one run so
the ratios share the machine's load:

* ``engine``: episodes simulated per second by ``pipesim.run`` (results are built lazily, so this
  is the simulation itself);
* ``loop``: the same workload through the plain-Python oracle of ``tests/oracle.py``, which scans
  the slots and the running episodes at every event, as the chapter's loop does (run for fewer
  steps at large sizes, since its cost per event grows with n_slots);
* ``raw``: events per second of a bare SimPy loop at the same concurrency (n_slots processes,
  each ``yield env.timeout(d)``) -- the ceiling for any SimPy design.

Goals: engine >= 2x loop at 64 slots and >= 50x at 4,096; engine >= 20% of raw at every size.

Usage: ``python benchmarks/bench_pipeline.py [--suite chapter|all] [--quick] [--rounds N]
[--sizes 64,1024]`` (``--sizes`` is for the older table, so it needs ``--suite all``; the
chapter's sizes are fixed). ``--quick`` changes the rounds (2) and, in the older table, runs 4
steps at the sizes up to 1,024 of the default ones (the sizes ``--sizes`` names are all run);
the chapter's workloads stay as they are. Ctrl-C (or SIGTERM) stops it with one line on stderr
and exit status 130; the rows printed by then are complete, and the chapter rows' verdicts are
printed with them.

Timing is CPU time of this process, best of several repeats, interleaved: the machines this runs
on are shared, and wall time there mostly measures the neighbours. A full chapter suite takes a
few minutes, almost all of it the chapter's loop at 4,096 slots (its cost per event grows with
n_slots).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import math
import sys
import time
from collections.abc import Callable, Generator
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import simpy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pipesim  # noqa: E402
from pipesim import CountThrottle, Drain, PartialRollout, PipelineConfig, Scenario, run  # noqa: E402
from pipesim.io.argtypes import int_in, int_list  # noqa: E402

CHAPTER_LOOP = ROOT.parent / "shared" / "reference" / "chapter_loop.py"
# (slots, steps) of the comparison's goals; batch = slots, 60 s train, 10 s sync, interrupt=True.
CHAPTER_SIZES = [(64, 200), (4096, 4)]
CHAPTER_POOL, CHAPTER_SEED = 400_000, 7
CHECKED = ("time", "throughput", "staleness_mean", "staleness_max", "trained_duration")
REL_TOL = 1e-9


def durations_pool(n: int, seed: int) -> tuple[Any, str]:
    """``pipesim.agent_episode_durations(n, generator)`` with whichever generator it accepts.

    The chapter's call first (``torch.Generator().manual_seed(seed)``, the chapter's numbers), else
    ``numpy.random.default_rng(seed)``; returns the pool and a description of the generator used.
    """
    try:
        import torch

        return pipesim.agent_episode_durations(n, torch.Generator().manual_seed(seed)), (
            f"torch.Generator().manual_seed({seed})"
        )
    except (ImportError, TypeError, ValueError):
        import numpy as np

        pool = pipesim.agent_episode_durations(n, np.random.default_rng(seed))
        return pool, f"numpy.random.default_rng({seed})"


def load_chapter_loop() -> ModuleType | None:
    """The chapter's module from ../shared/reference/chapter_loop.py, imported at run time, or None."""
    if not CHAPTER_LOOP.is_file():
        return None
    spec = importlib.util.spec_from_file_location("chapter_loop", CHAPTER_LOOP)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_time(fn: Callable[[], Any]) -> tuple[float, Any]:
    """CPU seconds of one call of ``fn`` (collected garbage first, untimed) and its result."""
    gc.collect()
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def rel_diff(a: float, b: float) -> float:
    if a == b:
        return 0.0
    if math.isnan(a) and math.isnan(b):
        return 0.0
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def dict_fields(out: dict[str, Any]) -> dict[str, Any]:
    """What the agreement check needs of a simulate_pipeline dict (so the dict itself can go)."""
    fields: dict[str, Any] = {k: float(out[k]) for k in CHECKED}
    fields["events"] = sorted(out["events"])
    fields["n_gen"] = sum(1 for e in out["events"] if e[0] == "gen")
    return fields


AGREE, AGREE_F32, DISAGREE = "AGREE", "AGREE (float32 mean)", "DISAGREE"
"""The verdicts of :func:`agreement`."""


def agreement(ours: dict[str, Any], theirs: dict[str, Any]) -> tuple[str, str]:
    """The verdict on two outputs, and how: AGREE where each checked field is equal or within
    REL_TOL relative and the events are identical; AGREE_F32 where the one difference is the
    staleness mean and the two are equal once rounded to float32 (the chapter averages in float32);
    DISAGREE otherwise."""
    notes = []
    f32_only = True  # every difference so far is the staleness mean's float32 rounding
    for k in CHECKED:
        d = rel_diff(ours[k], theirs[k])
        if d > REL_TOL:
            note = f"{k} differs by {d:.1e} rel ({ours[k]!r} vs chapter {theirs[k]!r})"
            import numpy as np

            if k == "staleness_mean" and np.float32(ours[k]) == np.float32(theirs[k]):
                note += ": the chapter averages staleness in float32, equal once rounded to float32"
            else:
                f32_only = False
            notes.append(note)
    if ours["events"] != theirs["events"]:
        f32_only = False
        notes.append(f"events differ ({len(ours['events'])} vs chapter {len(theirs['events'])})")
    if not notes:
        return AGREE, "all checked fields equal within 1e-9, events identical"
    return (AGREE_F32 if f32_only else DISAGREE), "; ".join(notes)


def chapter_suite(rounds: int) -> None:
    print(f"== pipesim against the chapter's loop ({CHAPTER_LOOP}) ==")
    loop = load_chapter_loop()
    pool, how = durations_pool(CHAPTER_POOL, CHAPTER_SEED)
    print(
        f"pool: {CHAPTER_POOL:,} pipesim.agent_episode_durations from {how}; CPU time, best of {rounds}"
        " rounds, sides interleaved; ep/s = episodes generated per CPU second"
    )
    if loop is None:
        print(f"chapter loop not found at {CHAPTER_LOOP}: the comparison is skipped (pipesim alone below)")
    hdr = (
        f"{'slots':>6} {'steps':>5} {'design':<16} | {'simulate_pipeline ep/s':>22} | {'run ep/s':>9} |"
        f" {'chapter loop ep/s':>17} | {'sim/loop':>8} | {'run/loop':>8}"
    )
    print(hdr)
    print("-" * len(hdr))
    verdicts: list[str] = []
    try:
        _chapter_rows(loop, pool, rounds, verdicts)
    finally:  # an interrupt too: the rows printed keep their verdicts
        if verdicts:
            print("outputs, pipesim.simulate_pipeline vs the chapter's simulate_pipeline:")
            print("\n".join(verdicts), flush=True)


def _chapter_rows(loop: ModuleType | None, pool: Any, rounds: int, verdicts: list[str]) -> None:
    """The chapter table's rows, printed as each is measured; each row's verdict goes to
    ``verdicts`` (printed after the table)."""
    for n, steps in CHAPTER_SIZES:
        for eta in (0, 2):
            label = f"eta={eta} interrupt"
            kw: dict[str, Any] = dict(max_staleness=eta, interrupt=True, steps=steps)
            sim_fn = partial(pipesim.simulate_pipeline, pool, n, n, 60.0, 10.0, **kw)
            sc = Scenario(
                pipeline=PipelineConfig(n, n, 60.0, 10.0, eta, steps),
                admission=CountThrottle(),
                weight_update=PartialRollout(),
                name="simulate_pipeline",
            )
            run_fn = partial(run, sc, pool)
            sides: dict[str, Callable[[], Any]] = {"sim": sim_fn, "run": run_fn}
            if loop is not None:
                sides["loop"] = partial(loop.simulate_pipeline, pool, n, n, 60.0, 10.0, **kw)
            best = dict.fromkeys(sides, math.inf)
            fields: dict[str, dict[str, Any]] = {}
            for _ in range(rounds):
                for side, fn in sides.items():
                    dt, out = cpu_time(fn)
                    best[side] = min(best[side], dt)
                    if side != "run" and side not in fields:
                        fields[side] = dict_fields(out)
                    del out
            units = fields["loop" if loop is not None else "sim"]["n_gen"]
            sim_r, run_r = units / best["sim"], units / best["run"]
            if loop is not None:
                loop_r = units / best["loop"]
                loop_s = f"{loop_r:>17,.0f}"
                ratios = f" {sim_r / loop_r:>7.2f}x | {run_r / loop_r:>7.2f}x"
                verdict, how_ = agreement(fields["sim"], fields["loop"])
                verdicts.append(f"  {n:>5} slots {label}: {verdict} -- {how_}")
            else:
                loop_s, ratios = f"{'n/a':>17}", f" {'n/a':>8} | {'n/a':>8}"
            print(
                f"{n:>6} {steps:>5} {label:<16} | {sim_r:>22,.0f} | {run_r:>9,.0f} | {loop_s} |{ratios}",
                flush=True,
            )


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


DEFAULT_SIZES = [64, 1024, 4096, 16384]
"""The older table's slot counts where ``--sizes`` names none."""


def oracle_suite(sizes: list[int] | None, quick: bool) -> None:
    """The older table at ``sizes`` (None: DEFAULT_SIZES, only those up to 1,024 with ``quick``)."""
    print("== pipesim.run against the oracle loop (tests/oracle.py) and raw SimPy ==")
    if sizes is None:
        sizes = [n for n in DEFAULT_SIZES if n <= 1024] if quick else DEFAULT_SIZES
    print(
        f"{'slots':>6} {'design':<12} | {'engine ep/s':>11} | {'loop ep/s':>9} | {'raw ev/s':>9} |"
        f" {'engine/loop':>11} | {'engine/raw':>10}"
    )
    for n in sizes:
        steps = max(4, 100 * 64 // n) if not quick else 4
        pool_t, _ = durations_pool((steps + 4) * n + n, 0)
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
                f" {shown:>10}x | {engine / raw:>9.0%}",
                flush=True,
            )


def engine_episodes(sc: Scenario, pool: Any) -> int:
    return len(run(sc, pool).episodes)


def loop_episodes(pool: list[float], n: int, eta: int, steps: int) -> int:
    from tests.oracle import oracle_pipeline

    return oracle_pipeline(pool, n, n, 60.0, 10.0, eta, bool(eta), steps).started


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--suite",
        choices=["chapter", "all"],
        default="chapter",
        help="chapter: pipesim vs the chapter's loop (default); all: also the oracle-loop/raw-SimPy table",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 2 rounds; in the oracle table (--suite all) 4 steps, and of the default sizes"
        " only those up to 1,024 (the chapter's workloads are unchanged)",
    )
    ap.add_argument(
        "--rounds",
        type=int_in(1, 100),
        help="rounds of the chapter suite, 1 to 100 (default 5, 2 with --quick)",
    )
    ap.add_argument(
        "--sizes",
        type=int_list(1, 65_536),
        help="slot counts of the oracle table (--suite all), comma-separated, each 1 to 65,536"
        " (default 64,1024,4096,16384; 64,1024 with --quick); all of them are run",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, 2 for a usage error, 130 when Ctrl-C or SIGTERM stopped it (one line on
    stderr; the rows printed by then are complete)."""
    args = parse_args(argv)
    if args.sizes is not None and args.suite != "all":  # as argparse says a usage error
        print(
            "bench_pipeline.py: error: --sizes is for the oracle table: it needs --suite all"
            " (the chapter's sizes are fixed)",
            file=sys.stderr,
        )
        return 2
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else 5)
    from pipesim.io.interrupts import interrupt_once

    with interrupt_once():  # SIGTERM as Ctrl-C; a second signal cannot cut the verdicts' printing
        try:
            chapter_suite(rounds)
            if args.suite == "all":
                print()
                oracle_suite(args.sizes, args.quick)
        except KeyboardInterrupt:
            sys.stdout.flush()
            print("bench_pipeline: interrupted; the rows printed above are complete", file=sys.stderr)
            return 130
    return 0


if __name__ == "__main__":
    from pipesim.core.collector import pause_collector_during_runs

    with pause_collector_during_runs():  # as the pipesim command runs them
        raise SystemExit(main())
