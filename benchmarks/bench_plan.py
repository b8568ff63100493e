"""How long a plan takes, and whether its pick holds (the goals below). A script, not CI.

``python benchmarks/bench_plan.py [SPEC] [--workers N] [--check-longer] [--rerun] [--reference]``

* Without ``SPEC``: a verl-scale plan, 128 H100s, Qwen3-8B, 512 prompts x 16 samples per step
  (560 designs: colocated and 13 splits of 8 GPUs, TP 1/2, eta 0-3, five weight-update policies),
  NSGA-II screening ``--trials`` (128) designs with 2-step runs, full runs of 5 steps.
* ``SPEC`` (e.g. ``examples/agent_plan.toml``, the agent spec of ``docs/plan.md``): that spec as
  written, but for ``--screen-steps``, ``--steps`` and ``--trials`` where they are given
  (``--trials 0``: the grid). Flags the spec cannot take together (``--screen-steps`` above
  ``--steps``), or a spec that cannot be read, are a usage error naming them, before any run.

It prints the wall time, the rungs, the runs, the first cut and the recommendation, then the
goal checks asked for:

* ``--check-longer [--longer-seeds N]``: the recommendation re-run ``HORIZON`` (4) x as long on
  the plan's seeds (or N seeds), with ``run_design`` (not the plan's cache);
  its measured staleness and discard must meet the limits (goal: feasible in a run 4x longer);
* ``--rerun``: the plan again with ``constraints.mean_staleness`` 10% looser, on the run cache the
  first plan filled; goal: at most half the first plan's wall time;
* ``--reference --sample TOP DRAW [--sample-fluid N]``: a reduced check, reported as one: the
  plan's TOP full-run designs (the pick first), DRAW drawn from the space (seed 43) and the N best
  by the fluid ceiling, at full length with 5 seeds (with ``--cache-dir``, the plan's runs are
  reused: a run is a pure function of design, length and seed);
* ``--reference``: the exhaustive grid over the same space, every design at full length with 5
  seeds (``--reference-seeds``), judged as the plan judges; goal: the pick is within 5% of the
  grid's best feasible design or tied with it by a paired test on the shared seeds. On the agent
  spec this is 1,548 designs x 5 seeds of 12 steps, hours on a 2-core machine;
  ``benchmarks/plan_reference.py`` answers the same question in stages that skip only runs
  which cannot change it.

The goals: the agent spec plans in at most 4 minutes with ``--workers 2`` on 2 cores, and a
re-run with one constraint changed takes at most half that.

Ctrl-C (or SIGTERM) stops it with one line on stderr and exit status 130: what it had done (the
plan's runs and designs, with the best design so far; or which check it was in, the plan above
being complete) and where the finished runs are. Without ``--cache-dir`` the run cache is a
temporary folder, removed on the way out, so the line says the runs are lost and suggests
``--cache-dir DIR``, from which a re-run resumes.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import sys
import tempfile
import time
from typing import Any

import pipesim.plan as plan
from pipesim.compute import GPUS, MODELS, LogNormalLengths, TokenWorkload
from pipesim.io.interrupts import ignore_sigint
from pipesim.plan.cache import DiskCache
from pipesim.plan.evaluate import Evaluator, run_design
from pipesim.plan.fluid import ceiling
from pipesim.plan.judge import HORIZON
from pipesim.plan.report import cut_line, designs_said, runs_said
from pipesim.plan.stats import paired
from pipesim.plan.verify import verify_lines

WORKLOAD = TokenWorkload(
    response=LogNormalLengths(1500.0, 0.9),
    prompt=512,
    samples_per_prompt=16,
    max_response_tokens=12288,
    difficulty_sigma=0.5,
)


def verl_scale(screen_steps: int, steps: int, trials: int | None) -> plan.PlanSpec:
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


BUILT_IN = {"screen_steps": 2, "steps": 5, "trials": 128}
"""The built-in spec's ``--screen-steps``, ``--steps`` and ``--trials`` where none is given."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped the plan after ``wall`` seconds; ``result``: what it had finished."""

    def __init__(self, result: plan.PlanResult, wall: float) -> None:
        super().__init__(f"interrupted after {wall:.1f} s")
        self.result, self.wall = result, wall


def timed_plan(sp: plan.PlanSpec, workers: int, cache: DiskCache) -> tuple[plan.PlanResult, float]:
    t0 = time.perf_counter()
    try:
        result = plan.plan(sp, workers=workers, progress=True, with_sensitivity=False, cache=cache)
    except plan.PlanInfeasible as e:
        result = e.result
        print(f"infeasible: {e}")
    except plan.PlanInterrupted as e:
        raise Interrupted(e.result, time.perf_counter() - t0) from None
    return result, time.perf_counter() - t0


def interrupted_line(sp: plan.PlanSpec, doing: str, e: KeyboardInterrupt, cache_dir: str | None) -> str:
    """The one line an interrupt ends with: what was interrupted, what it had done, and where the
    finished runs are (a temporary cache is removed on the way out)."""
    said = f"bench_plan: interrupted during {doing}"
    if isinstance(e, Interrupted):
        r = e.result
        said += f" after {e.wall:.1f} s: {runs_said(r)} done, {designs_said(r)}"
        if r.best is not None:
            said += f"; best so far (not a recommendation): {r.best.design.label(sp.n_gpus)}"
    else:
        said += " (the plan above is complete)"
    if doing == "--check-longer":  # run_design: no run cache
        return said + "; the longer runs printed above are complete"
    if cache_dir:
        return (
            said
            + f"; the finished runs are kept in {cache_dir}: run again with --cache-dir {cache_dir} to resume"
        )
    return (
        said + "; the finished runs were in a temporary cache and are lost: pass --cache-dir DIR to keep them"
    )


def interval(m: dict[str, float]) -> str:
    """``± 1,234`` (the 95% interval over seeds), or ``(1 seed)`` where one seed gives none
    (``throughput_ci`` NaN, as the plan's table prints it; ``± nan`` before)."""
    ci = float(m.get("throughput_ci", 0.0))
    return f"± {ci:,.0f}" if math.isfinite(ci) else "(1 seed)"


def describe(sp: plan.PlanSpec, result: plan.PlanResult, wall: float, workers: int) -> None:
    print(f"candidates {result.n_candidates}; method {result.method}; workers {workers}")
    print("rungs: " + ", ".join(f"{k} designs x {s} steps" for s, k in result.rungs))
    print(f"screened {result.n_screened}, run in full {result.n_full}, runs {result.runs}")
    print(cut_line(result))
    print(f"wall {wall:.1f} s ({wall / 60:.1f} min)")
    for line in verify_lines(result):
        print(line)
    if result.best is not None:
        m = result.best.metrics
        print(
            f"recommended: {result.best.design.label(sp.n_gpus)}: {m['throughput_per_hour']:,.0f} "
            f"{interval(m)} samples/h, mean staleness {m['staleness_mean']:.2f}, "
            f"max {m['staleness_max']:.0f}, {m['gpu_hours_per_mtok']:.2f} GPU-h per M trained tokens"
        )


def check_longer(sp: plan.PlanSpec, result: plan.PlanResult, n_seeds: int | None = None) -> bool:
    """The pick re-run HORIZON x as long on every seed of the plan (or the first ``n_seeds``
    simulation seeds, independently of the plan's runs and cache): do the limits hold?"""
    if result.best is None:
        print("longer run: no recommendation")
        return False
    ok = True
    seeds = result.sim_seeds() if n_seeds is None else [sp.sim_seed + i for i in range(n_seeds)]
    for seed in seeds:
        m = run_design(sp, result.best.design, sp.steps * HORIZON, seed)
        good = sp.constraints.feasible(m)
        ok &= good
        print(
            f"  {sp.steps * HORIZON} steps, seed {seed}: mean staleness {m['staleness_mean']:.2f}, max "
            f"{m['staleness_max']:.0f}, discarded {m['discarded_share']:.1%}: "
            + ("meets the limits" if good else "BREAKS the limits")
        )
    print(f"feasible in a run {HORIZON}x longer: {ok}")
    return ok


def sampled(
    sp: plan.PlanSpec, result: plan.PlanResult, top: int, draw: int, seed: int, fluid: int = 0
) -> list[Any]:
    """The plan's ``top`` full-run designs by throughput, the pick first, plus ``draw`` others drawn
    from the whole space by a generator seeded with ``seed`` (the same draw whatever ``fluid``
    is), plus the ``fluid`` best designs by the fluid ceiling not already in: a reduced check,
    not the reference."""
    full = sorted(result.full, key=lambda e: -e.throughput)
    chosen = [result.best.design] if result.best is not None else []
    chosen += [e.design for e in full if e.design not in chosen][: max(0, top - len(chosen))]
    pool = plan.candidates(sp)
    rest = [d for d in pool if d not in chosen]
    chosen += random.Random(seed).sample(rest, min(draw, len(rest)))
    if fluid:
        memo: dict[Any, float] = {}
        ceilings = {d: ceiling(sp, d, memo) for d in pool}
        by_ceiling = sorted((d for d in pool if d not in chosen), key=lambda d: (-ceilings[d], d))
        chosen += by_ceiling[:fluid]
    return chosen


def reference(
    sp: plan.PlanSpec,
    result: plan.PlanResult,
    seeds: int,
    workers: int,
    sample: tuple[int, int] | None = None,
    fluid: int = 0,
    cache: DiskCache | None = None,
) -> None:
    """The exhaustive grid at full length with ``seeds`` seeds, and the pick against its best; with
    ``sample`` = (top, draw), only :func:`sampled`'s designs, reported as a sample."""
    from concurrent.futures import ProcessPoolExecutor

    ref = sp.with_(seeds=seeds)
    pool = plan.candidates(ref) if sample is None else sampled(ref, result, *sample, seed=43, fluid=fluid)
    what = "reference" if sample is None else f"SAMPLED check, not the reference ({len(pool)} designs)"
    print(f"{what}: {len(pool)} designs x {seeds} seeds x {ref.steps} steps")
    t0 = time.perf_counter()
    with ProcessPoolExecutor(workers, initializer=ignore_sigint) as ex:  # Ctrl-C is the parent's
        try:
            evals = Evaluator(ref, ex, progress=True, disk=cache).evaluate(
                pool, ref.steps, seeds, desc="reference"
            )
        except KeyboardInterrupt:
            ex.shutdown(wait=False, cancel_futures=True)
            raise
    feasible = sorted((e for e in evals if e.feasible), key=lambda e: -e.throughput)
    print(f"reference wall {time.perf_counter() - t0:.0f} s; {len(feasible)} feasible")
    if not feasible or result.best is None:
        print("reference: nothing to compare")
        return
    top = feasible[0]
    pick = next((e for e in evals if e.design == result.best.design), None)
    if pick is None:
        print("reference: the pick is outside the grid")
        return
    gap = pick.throughput / top.throughput - 1
    p = paired([r["throughput_per_hour"] for r in top.runs], [r["throughput_per_hour"] for r in pick.runs])
    print(
        f"{'sample' if sample else 'reference'} best: {top.design.label(sp.n_gpus)} "
        f"{top.throughput:,.0f}; pick {pick.throughput:,.0f} "
        f"({gap:+.1%}); within 5%: {gap >= -0.05}; tied by the paired test: {p.tied}; "
        f"pick feasible: {pick.feasible}"
    )


def _check_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse what would only fail (or pass vacuously) after the plan has run, naming the flag:
    ``--longer-seeds 0`` once printed "feasible in a run 4x longer: True" after no run at all."""
    at_least_one = ("workers", "screen_steps", "steps", "reference_seeds")
    for name in at_least_one:
        if getattr(args, name) is not None and getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.trials is not None and args.trials < 0:
        ap.error(f"--trials must be at least 0 (0: the grid), got {args.trials}")
    if args.longer_seeds is not None and args.longer_seeds < 1:
        ap.error(f"--longer-seeds must be at least 1, got {args.longer_seeds}")
    if args.longer_seeds is not None and not args.check_longer:
        ap.error("--longer-seeds needs --check-longer")
    if args.sample is not None and (not args.reference or min(args.sample) < 0):
        ap.error("--sample TOP DRAW needs --reference and two counts >= 0")
    if args.sample_fluid and (args.sample is None or args.sample_fluid < 0):
        ap.error("--sample-fluid N needs --sample and N >= 0")


def _spec(ap: argparse.ArgumentParser, args: argparse.Namespace) -> plan.PlanSpec:
    """The spec to plan: the built-in one or ``SPEC``'s, with the step and trial flags given applied;
    a spec that cannot be read or flags it cannot take are a usage error naming them."""
    given = {k: getattr(args, k) for k in BUILT_IN if getattr(args, k) is not None}
    if not args.spec:
        values = {**BUILT_IN, **given}
        try:
            return verl_scale(values["screen_steps"], values["steps"], values["trials"])
        except plan.PlanError as e:
            flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in values.items())
            ap.error(f"{flags} (the built-in spec): {e}")
    try:
        sp = plan.load(args.spec)
    except plan.PlanError as e:
        ap.error(str(e))
    changes: dict[str, Any] = {k: v for k, v in given.items() if k != "trials"}
    if "trials" in given:  # 0: the grid, as for the built-in spec
        if given["trials"] == 0:
            changes["method"] = "grid"
        else:
            changes["trials"] = given["trials"]
    try:
        return sp.with_(**changes)
    except plan.PlanError as e:
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in given.items())
        ap.error(f"{flags} on {args.spec} (steps {sp.steps}, screen_steps {sp.screen_steps}): {e}")


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, 2 for a usage error, 130 when Ctrl-C or SIGTERM stopped it (one line on
    stderr: :func:`interrupted_line`)."""
    from pipesim.io.interrupts import interrupt_once

    with interrupt_once():  # SIGTERM as Ctrl-C; a second signal cannot cut the way out
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", nargs="?", help="a plan spec (default: the built-in verl-scale one)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--screen-steps", type=int, help="steps of a screening run (default: the spec's; built-in: 2)"
    )
    ap.add_argument("--steps", type=int, help="steps of a full run (default: the spec's; built-in: 5)")
    ap.add_argument(
        "--trials",
        type=int,
        help="designs to screen (0: the grid; default: the spec's; built-in: 128, with Optuna)",
    )
    ap.add_argument("--check-longer", action="store_true")
    ap.add_argument(
        "--longer-seeds", type=int, metavar="N", help="--check-longer on N seeds (default: the plan's)"
    )
    ap.add_argument("--rerun", action="store_true")
    ap.add_argument("--reference", action="store_true")
    ap.add_argument("--reference-seeds", type=int, default=5)
    ap.add_argument("--cache-dir", help="the plan's run cache (default: a fresh temporary one)")
    ap.add_argument(
        "--sample",
        nargs=2,
        type=int,
        metavar=("TOP", "DRAW"),
        help="with --reference: only the plan's TOP full-run designs and DRAW drawn at random (seed 43)",
    )
    ap.add_argument(
        "--sample-fluid",
        type=int,
        default=0,
        metavar="N",
        help="with --sample: add the N best designs by the fluid ceiling (pipesim.plan.fluid)",
    )
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    _check_args(ap, args)
    sp = _spec(ap, args)
    doing = "the plan"
    try:
        with tempfile.TemporaryDirectory(prefix="bench_plan_") as scratch:  # removed on any way out
            tmp = args.cache_dir or scratch
            cache = DiskCache(tmp)
            result, wall = timed_plan(sp, args.workers, cache)
            describe(sp, result, wall, args.workers)
            if args.rerun:
                doing = "the re-run"
                c = sp.constraints
                looser = dataclasses.replace(
                    c, mean_staleness=None if c.mean_staleness is None else c.mean_staleness * 1.1
                )
                again, wall2 = timed_plan(sp.with_(constraints=looser), args.workers, DiskCache(tmp))
                print(
                    f"re-run with mean_staleness x1.1: {wall2:.1f} s ({wall2 / wall:.0%} of the first), "
                    f"{again.runs} new runs; at most half: {wall2 <= wall / 2}"
                )
        if args.check_longer:
            doing = "--check-longer"
            check_longer(sp, result, args.longer_seeds)
        if args.reference:
            doing = "--reference"
            sample = None if args.sample is None else (args.sample[0], args.sample[1])
            ref_cache = DiskCache(args.cache_dir) if args.cache_dir else None  # the plan's runs, reused
            reference(sp, result, args.reference_seeds, args.workers, sample, args.sample_fluid, ref_cache)
    except KeyboardInterrupt as e:
        sys.stdout.flush()
        print(interrupted_line(sp, doing, e, args.cache_dir), file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    from pipesim.core.collector import pause_collector_during_runs

    with pause_collector_during_runs():  # as the pipesim command runs them
        raise SystemExit(main())
