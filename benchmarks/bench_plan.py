"""How long a verl-scale plan takes: 128 H100s, Qwen3-8B, 512 prompts x 16 samples per step.

``python benchmarks/bench_plan.py [--workers N] [--screen-steps S] [--steps F] [--trials N]``

The space has 560 designs (colocated and 13 splits of 8 GPUs from 16 to 112 trainer GPUs, TP 1/2,
eta 0-3, five weight-update policies). By default Optuna's NSGA-II screens ``--trials`` (128) of
them with 2-step runs, successive halving keeps a sixth, and the survivors run in full (5 steps);
``--trials 0`` screens every design (the grid). It prints the wall time, the designs screened and
run in full, the runs and the recommendation. The issue's target: under 15 minutes on the 2-core
machine. One verl-scale run takes 1-11 s there (8,192 samples per step on 64-128 replicas).
"""

from __future__ import annotations

import argparse
import sys
import time

import pipesim.plan as plan
from pipesim.compute import GPUS, MODELS, LogNormalLengths, TokenWorkload

WORKLOAD = TokenWorkload(
    response=LogNormalLengths(1500.0, 0.9),
    prompt=512,
    samples_per_prompt=16,
    max_response_tokens=12288,
    difficulty_sigma=0.5,
)


def spec(screen_steps: int, steps: int, trials: int | None) -> plan.PlanSpec:
    return plan.PlanSpec(
        gpu=GPUS["h100-sxm"],
        n_gpus=128,
        model=MODELS["qwen3-8b"],
        workload=WORKLOAD,
        batch_size=512 * 16,
        constraints=plan.Constraints(mean_staleness=1.0, max_staleness=4, discarded_share=0.05),
        space=plan.Space(
            placement=(0, *range(16, 113, 8)),
            tp=(1, 2),
            eta=(0, 1, 2, 3),
            update=("drain", "partial", "abort_reprefill", "inflight", "abort"),
            oversample=(1.0,),
        ),
        steps=steps,
        screen_steps=screen_steps,
        seeds=1,
        max_model_len=16384,
        method="optuna" if trials else "grid",
        trials=trials or 1,
        grid_limit=10_000,
        reduction=6,
        min_full=8,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--screen-steps", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--trials", type=int, default=128, help="Optuna: designs to screen (0: the grid)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    sp = spec(args.screen_steps, args.steps, args.trials)
    n = len(plan.candidates(sp))
    t0 = time.perf_counter()
    try:
        result = plan.plan(sp, workers=args.workers, progress=True, with_sensitivity=False)
    except plan.PlanInfeasible as e:
        result = e.result
        print(f"infeasible: {e}")
    wall = time.perf_counter() - t0
    print(f"candidates {n}; method {result.method}; workers {args.workers}")
    print("rungs: " + ", ".join(f"{k} designs x {s} steps" for s, k in result.rungs))
    print(f"screened {result.n_screened}, run in full {result.n_full}, runs {result.runs}")
    print(f"wall {wall:.1f} s ({wall / 60:.1f} min)")
    if result.best is not None:
        m = result.best.metrics
        print(
            f"recommended: {result.best.design.label(sp.n_gpus)}: {m['throughput_per_hour']:,.0f} samples/h, "
            f"mean staleness {m['staleness_mean']:.2f}, max {m['staleness_max']:.0f}, "
            f"{m['gpu_hours_per_mtok']:.2f} GPU-h per M trained tokens"
        )
    return 0


if __name__ == "__main__":
    from pipesim.core.collector import pause_collector_during_runs

    with pause_collector_during_runs():  # as the pipesim command runs them
        raise SystemExit(main())
