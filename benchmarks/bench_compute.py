"""Speed of the compute engine: samples simulated per second against raw SimPy.

For each concurrency (64, 1,024 and 8,192 sequences in flight) it measures, in one process so the
ratios share the machine's load:

* ``raw``: timeouts per second of a bare SimPy loop with that many processes, each sleeping an
  exponential time again and again (the floor of any SimPy model: one event per sample);
* ``engine``: samples per second of one :class:`~pipesim.compute.engine.ComputeReplica` per 1,024
  sequences under a closed loop (every finished sequence replaced at once), no kernel around it;
* ``multi-turn``: turns per second of the same full run with 4-turn agent episodes (2 s tool
  calls, unlimited environment workers, 64 observation tokens);
* ``pipeline``: samples per second of a full run (:func:`~pipesim.compute.cluster.run_compute`:
  controller, trainer, weight syncs, asynchronous eta 1 with partial rollouts, one batch =
  the concurrency), samples = episodes launched.

Model: Qwen3-0.6B on H100-SXM replicas (TP 1, up to 1,024 sequences each), 128-token prompts,
log-normal responses (median 256, sigma 0.6) capped at 1,024 tokens: short sequences, so the KV
cache holds the whole concurrency and the table measures the simulator, not preemptions.

Then a verl-scale run: Qwen3-8B, 64 H100 (32 train, 32 replicas of 256 sequences), 512 prompts x
16 samples per step (8,192 samples), eta 1 with partial rollouts, ``--steps`` steps (default 10;
the full-size run is 100 steps, 819,200 samples), with its wall time, summary and ledger.
The first line says whether the compute engine runs compiled (``make fast``: ``setup.py`` turns
its hot modules into C with mypyc; ``make bench-compute`` runs this script on that build) or as
pure Python (about half the speed). Wall time is ``time.perf_counter``; the machine may be
shared, so treat the rates as lower bounds.
``--clock cpu`` times with ``time.process_time`` instead (this process's CPU seconds), which other
jobs on a shared machine disturb less; the ratios to the raw SimPy rate are what to compare.
``--rounds N`` (default 3) measures each row N times, the four measurements in turn, and prints
the median of each rate and of each round's ratios: one disturbed measurement moves no ratio.
Ctrl-C (or SIGTERM) stops it with one line on stderr and exit status 130; the rows printed by then
are complete.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

import numpy as np
import simpy

import pipesim
from pipesim.compute import GPUS, MODELS, batch, is_compiled
from pipesim.compute.closedloop import ClosedLoop
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.workload import AgentTurns, LogNormalLengths, TokenWorkload

clock = time.perf_counter
"""The clock every measurement reads (``--clock``)."""


def clock_name() -> str:
    """What :data:`clock` measures, as the output says it: ``wall`` or ``CPU``."""
    return "CPU" if clock is time.process_time else "wall"


def start_clock() -> float:
    """Collect the garbage the previous measurement left, then read the clock: each measurement
    pays for its own objects only (a full collection after one run would land in the next)."""
    gc.collect()
    return clock()


SMALL = TokenWorkload(
    response=LogNormalLengths(256.0, 0.6), prompt=128, max_response_tokens=1024, max_prompt_tokens=128
)
AGENT = TokenWorkload(
    response=LogNormalLengths(64.0, 0.6),
    prompt=128,
    max_response_tokens=256,
    agent=AgentTurns(turns=4, tool_latency_s=2.0, tool_latency_sigma=1.0, observation_tokens=64),
)


def raw_simpy_rate(concurrency: int, events: int) -> float:
    """Timeouts per second of ``concurrency`` SimPy processes sleeping exponential times."""
    env = simpy.Environment()
    rng = np.random.default_rng(0)
    waits = rng.exponential(1.0, events + concurrency).tolist()
    left = [events]

    def proc(i: int):  # type: ignore[no-untyped-def]
        k = i
        while left[0] > 0:
            left[0] -= 1
            yield env.timeout(waits[k % len(waits)])
            k += concurrency

    for i in range(concurrency):
        env.process(proc(i))
    t = start_clock()
    env.run()
    return events / (clock() - t)


def engine(per_replica: int) -> EngineConfig:
    return EngineConfig(
        model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=2048, max_num_seqs=per_replica
    )


def engine_rate(concurrency: int, samples: int) -> float:
    per = min(concurrency, 1024)
    loops = [ClosedLoop(engine(per), SMALL, per, seed=i) for i in range(concurrency // per)]
    t = start_clock()
    done = sum(loop.run(samples // len(loops))["samples"] for loop in loops)
    return done / (clock() - t)


def pipeline_rate(concurrency: int, samples: int, workload: TokenWorkload = SMALL) -> tuple[float, float]:
    """Samples per wall second of a full run, and turns per wall second (the same single-turn)."""
    per = min(concurrency, 1024)
    n_rep = concurrency // per
    cluster = Cluster(engine=engine(per), n_gpus=2 * n_rep, trainer_gpus=n_rep)
    steps = max(samples // concurrency, 2)
    cfg = pipesim.PipelineConfig(batch_size=concurrency, steps=steps, max_staleness=1)
    sc = pipesim.Scenario(pipeline=cfg, weight_update=pipesim.PartialRollout())
    t = start_clock()
    run = run_compute(sc, cluster, workload, slots_per_replica=per)
    wall = clock() - t
    assert run.ledger.closes()
    turns = sum(e["completions"] + e["tool_calls"] for e in run.engines)
    return len(run.result.episodes) / wall, turns / wall


def verl_scale(steps: int, multi_turn: bool = False) -> None:
    eng = EngineConfig(model=MODELS["qwen3-8b"], gpu=GPUS["h100-sxm"], max_model_len=16384)
    cluster = Cluster(engine=eng, n_gpus=64, trainer_gpus=32, env_workers=2048 if multi_turn else None)
    agent = AgentTurns(turns=4, tool_latency_s=5.0, observation_tokens=256) if multi_turn else None
    wl = TokenWorkload(
        response=LogNormalLengths(400.0 if multi_turn else 1500.0, 0.8),
        prompt=512,
        samples_per_prompt=16,
        max_response_tokens=2048 if multi_turn else 8192,
        agent=agent,
    )
    cfg = pipesim.PipelineConfig(batch_size=512 * 16, steps=steps, max_staleness=1)
    sc = pipesim.Scenario(pipeline=cfg, weight_update=pipesim.PartialRollout())
    t = start_clock()
    run = run_compute(sc, cluster, wl)
    s = run.summary()
    wall = clock() - t
    n = len(run.result.episodes)
    print(
        f"\nverl-scale{' multi-turn (4 turns, 5 s tools, 2,048 workers)' if multi_turn else ''}: "
        "Qwen3-8B, 64 x H100 (32 train / 32 replicas), 512 x 16 samples per step, "
        f"{steps} steps, eta 1 partial\n  {n:,} samples launched ({s['episodes_trained']:,.0f} trained) "
        f"in {wall:.1f} s {clock_name()} ({n / wall:,.0f} samples per {clock_name()} second), "
        "summary included"
    )
    print(
        f"  simulated {s['sim_time_s'] / 3600:.2f} h, step {s['step_time_s_mean']:.1f} s, "
        f"staleness {s['staleness_mean']:.2f}, concurrency {s['concurrency_mean']:.0f}, "
        f"decode {s['decode_tokens_per_s']:,.0f} tok/s"
    )
    print(
        f"  ledger (M tokens): generated {s['tokens_generated'] / 1e6:.2f}"
        f" = trained {s['tokens_trained'] / 1e6:.2f}"
        f" + discarded {s['tokens_discarded'] / 1e6:.2f} + buffered {s['tokens_buffered'] / 1e6:.2f}"
        f" + in flight {s['tokens_in_flight'] / 1e6:.2f} (closes: {bool(s['ledger_closes'])})"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from pipesim.io.argtypes import int_in  # bounded flags (imports pipesim here, not at the top)

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--samples",
        type=int_in(1, 1_000_000),
        default=40_000,
        help="samples per measurement, 1 to 1,000,000 (default 40,000; at least 4 x the concurrency is run)",
    )
    ap.add_argument(
        "--steps",
        type=int_in(1, 200),
        default=10,
        help="steps of the verl-scale run, 1 to 200 (default 10; 100 is the full-size run)",
    )
    ap.add_argument("--no-verl", action="store_true", help="skip the verl-scale runs")
    ap.add_argument(
        "--rounds",
        type=int_in(1, 100),
        default=3,
        help="rounds per row, 1 to 100; medians are printed (default 3)",
    )
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="time with the wall clock (default) or this process's CPU time (less disturbed by other jobs)",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, 2 for a usage error, 130 when Ctrl-C or SIGTERM stopped it (one line on
    stderr saying what it was measuring; the rows printed by then are complete)."""
    args = parse_args(argv)
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    from pipesim.io.interrupts import interrupt_once

    doing = ["the table"]
    with interrupt_once():  # SIGTERM as Ctrl-C
        try:
            _measure(args, doing)
        except KeyboardInterrupt:
            print(
                f"bench_compute: interrupted during {doing[0]}; the rows printed above are complete",
                file=sys.stderr,
            )
            return 130
    return 0


def _measure(args: argparse.Namespace, doing: list[str]) -> None:
    """The table, then the verl-scale runs; ``doing[0]`` says which row or run is under way."""
    kind = "compiled (mypyc, make fast)" if is_compiled() else "pure Python"
    print(f"compute engine: {kind} ({batch.__file__})")
    head = "concurrency   raw SimPy ev/s   engine samples/s   pipeline samples/s   multi-turn turns/s"
    print(head + "   engine/raw   pipeline/raw   turns/raw")
    med = statistics.median
    for c in (64, 1024, 8192):
        doing[0] = f"the {c:,}-sequence row"
        n = max(args.samples, 4 * c)
        rounds = []
        for _ in range(args.rounds):  # the four in turn, so a disturbance hits one round's ratios
            raw = raw_simpy_rate(c, n)
            eng = engine_rate(c, n)
            pipe, _ = pipeline_rate(c, n)
            _, turns = pipeline_rate(c, n // 4, AGENT)
            rounds.append((raw, eng, pipe, turns))
        raw, eng, pipe, turns = (med(r[k] for r in rounds) for k in range(4))
        ratios = [med(r[k] / r[0] for r in rounds) for k in (1, 2, 3)]
        rates = f"{raw:>14,.0f}   {eng:>16,.0f}   {pipe:>18,.0f}   {turns:>18,.0f}"
        print(f"{c:>11,}   {rates}   {ratios[0]:>10.2f}   {ratios[1]:>12.2f}   {ratios[2]:>9.2f}", flush=True)
    if not args.no_verl:
        doing[0] = "the verl-scale run"
        verl_scale(args.steps)
        doing[0] = "the multi-turn verl-scale run"
        verl_scale(args.steps, multi_turn=True)


if __name__ == "__main__":
    from pipesim.core.collector import pause_collector_during_runs

    with pause_collector_during_runs():  # as the pipesim command runs them
        raise SystemExit(main())
