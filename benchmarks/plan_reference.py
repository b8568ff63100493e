"""The exhaustive reference for a plan spec, run in stages that skip only what cannot matter.

``python benchmarks/plan_reference.py SPEC --cache-dir DIR [--workers N] [--seeds 5] [--margin 0.25]``

The goal: the plan's pick is feasible in a run ``HORIZON`` (4) x longer, and its throughput is
within 5% of the best feasible design of the exhaustive grid (every design at full length with 5
seeds, judged as the plan judges) or tied with it by a paired test on the shared seeds. Run
naively that is every design x 5 seeds (on the agent spec 7,740 runs of 12 steps, about 8 h of one
core). The stages answer the same question with fewer runs:

A. every design of the space on the first seed, at full length;
B. the rest of the seeds, one seed a round, for the designs still in, where a design leaves

   * **exactly**, when a run fails or shows a maximum staleness above the limit (the judgement
     takes the maximum over seeds, so no further seed can bring it back), and
   * **by a stated margin**, when its first-seed throughput is below ``1.05 x pick / (1 +
     margin)``: it could matter only if its mean over the seeds were ``margin`` above its first
     seed. The report prints the largest such gap measured on the designs that ran every seed, so
     a reader sees how much room the margin left;

   then every remaining design is judged on all its seeds (:meth:`Evaluator.result`, the plan's
   judgement);
C. each design judged feasible whose throughput beats the pick by more than 5% and is not tied
   with it is run ``HORIZON`` x as long, one seed a round, and leaves at its first run that breaks
   a limit (:func:`pipesim.plan.verify.broken`, as the plan's verification judges).

It prints both readings of the goal (docs/plan.md, "The reading of the goal"): the grid's best
design judged at full length, and the best that also holds ``HORIZON`` x as long. Every run goes
through the plan's disk cache, so an interrupted reference resumes where it stopped, and the
plan's own runs are reused. The pick is the plan's (run first on the same cache) unless
``--pick`` names a design as ``trainer_gpus,tp,eta,update[,oversample]`` (0 trainer GPUs:
colocated). A spec that cannot be read is a usage error naming it (exit 2); Ctrl-C (or SIGTERM)
stops it with one line and exit status 130, the finished runs kept in ``--cache-dir``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import pipesim.plan as plan
from pipesim.io.interrupts import ignore_sigint
from pipesim.plan.cache import DiskCache
from pipesim.plan.evaluate import Evaluated, Evaluator
from pipesim.plan.judge import HORIZON
from pipesim.plan.space import Design
from pipesim.plan.stats import paired
from pipesim.plan.verify import broken

GOAL_SHARE = 0.05
"""The goal's tolerance: the pick within 5% of the reference's best."""


@dataclass
class Reference:
    """What the staged reference found."""

    pick: Evaluated
    feasible: list[Evaluated]
    """Designs judged feasible at full length on every seed, fastest first (those the margin left
    out are not here)."""
    ahead: list[Evaluated]
    """Of those, the ones beating the pick by more than 5% and not tied with it."""
    holding: list[Evaluated]
    """Of those, the ones that hold ``HORIZON`` x as long on every seed."""
    broke: dict[Design, str]
    """Why each design of ``ahead`` not in ``holding`` broke."""
    reading1: bool
    reading2: bool


def _over_max(spec: plan.PlanSpec, r: dict[str, float]) -> bool:
    lim = spec.constraints.max_staleness
    return bool(r.get("failed")) or (lim is not None and float(r["staleness_max"]) > lim)


def interval(m: dict[str, float]) -> str:
    """``± 1,234`` (the 95% interval over seeds), or ``(1 seed)`` where one seed gives none
    (``throughput_ci`` NaN, as the plan's table prints it)."""
    ci = float(m.get("throughput_ci", 0.0))
    return f"± {ci:,.0f}" if math.isfinite(ci) else "(1 seed)"


def _label(spec: plan.PlanSpec, e: Evaluated) -> str:
    m = e.metrics
    return (
        f"{e.design.label(spec.n_gpus)}: {e.throughput:,.0f} {interval(m)} "
        f"samples/h, staleness mean {m['staleness_mean']:.2f} max {m['staleness_max']:.0f}, "
        f"discarded {m['discarded_share']:.1%}"
    )


def parse_pick(text: str) -> Design:
    """``trainer_gpus,tp,eta,update[,oversample]`` -> a Design (argparse's type for ``--pick``)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        if len(parts) not in (4, 5):
            raise ValueError
        over = float(parts[4]) if len(parts) == 5 else 1.0
        return Design(int(parts[0]), int(parts[1]), int(parts[2]), parts[3], oversample=over)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--pick {text[:80]!r}: expected trainer_gpus,tp,eta,update[,oversample], e.g. 30,2,0,drain,1.25"
        ) from None


def staged_reference(
    spec: plan.PlanSpec, ev: Evaluator, pick_design: Design, seeds: int, margin: float
) -> Reference:
    """Stages A-C (module docstring) on ``ev``; prints as it goes."""
    steps, ids = spec.steps, ev.seeds(seeds)
    pool = plan.candidates(spec)
    t0 = time.perf_counter()
    pick = ev.evaluate([pick_design], steps, seeds, desc="the pick")[0]
    target = pick.throughput * (1 + GOAL_SHARE)
    floor = target / (1 + margin)
    print(f"pick: {_label(spec, pick)}; feasible at {steps} steps: {pick.feasible}")
    first = ev.evaluate(pool, steps, 1, desc="A: every design, first seed")
    over = [e.design for e in first if _over_max(spec, e.runs[0])]
    slow = [e.design for e in first if not _over_max(spec, e.runs[0]) and e.throughput < floor]
    alive = [e.design for e in first if not _over_max(spec, e.runs[0]) and e.throughput >= floor]
    print(
        f"A: {len(pool)} designs; {len(over)} break the maximum or fail (out, exactly); "
        f"{len(slow)} below {floor:,.0f} samples/h on the first seed (out by the margin "
        f"{margin:.0%}); {len(alive)} go on"
    )
    for k in range(1, seeds):
        got = ev.evaluate(alive, steps, k + 1, desc=f"B: seed {k + 1} of {seeds}")
        out = [e.design for e in got if _over_max(spec, e.runs[k])]
        alive = [d for d in alive if d not in set(out)]
        print(f"B: seed {k + 1}: {len(out)} break the maximum or fail; {len(alive)} go on")
    judged = [ev.result(d, steps, ids) for d in alive]
    gaps = [abs(e.runs[0]["throughput_per_hour"] / e.throughput - 1) for e in judged if e.throughput]
    feasible = sorted((e for e in judged if e.feasible), key=lambda e: -e.throughput)
    print(
        f"B: {len(feasible)} of {len(judged)} judged feasible on {seeds} seeds; the largest gap "
        f"between a first seed and its mean: {max(gaps, default=0.0):.1%} (the margin: {margin:.0%})"
    )
    for e in feasible[:10]:
        print(f"   {_label(spec, e)}")

    def tied(e: Evaluated) -> bool:
        a = [r["throughput_per_hour"] for r in e.runs]
        return paired(a, [r["throughput_per_hour"] for r in pick.runs]).tied

    ahead = [e for e in feasible if e.throughput > target and e.design != pick_design and not tied(e)]
    print(f"C: {len(ahead)} feasible designs beat the pick by more than 5% and are not tied with it")
    longer, holding = steps * HORIZON, list(ahead)
    reasons: dict[Design, str] = {}
    for k in range(seeds):
        got = ev.evaluate([e.design for e in holding], longer, k + 1, desc=f"C: {longer} steps, seed {k + 1}")
        for e in got:
            why = broken(spec, e.runs[k : k + 1], longer, ids[k : k + 1])
            if why:
                reasons[e.design] = why
        holding = [e for e in holding if e.design not in reasons]
    for e in ahead:
        print(f"   {e.design.label(spec.n_gpus)}: {reasons.get(e.design, 'HOLDS')}")
    best12 = feasible[0] if feasible else None
    r1 = best12 is None or pick.throughput >= best12.throughput * (1 - GOAL_SHARE) or tied(best12)
    r2 = not holding
    print(f"reference wall {time.perf_counter() - t0:.0f} s; runs simulated {ev.runs}, reused {ev.reused}")
    if best12 is not None:
        gap = pick.throughput / best12.throughput - 1
        print(f"reading 1 (judged at {steps} steps): best {_label(spec, best12)}; pick {gap:+.1%}: goal {r1}")
    best2 = holding[0] if holding else None
    print(
        f"reading 2 (judged at {steps} steps and holding {HORIZON}x as long): "
        + (f"best {_label(spec, best2)}: goal False" if best2 else "none beats the pick by 5%: goal True")
    )
    return Reference(pick, feasible, ahead, holding, reasons, r1, r2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec")
    ap.add_argument("--cache-dir", required=True, help="the plan's run cache (resumable)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--margin", type=float, default=0.25)
    ap.add_argument(
        "--pick", type=parse_pick, help="trainer_gpus,tp,eta,update[,oversample] (default: the plan's pick)"
    )
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.seeds < 1 or args.workers < 1 or not args.margin >= 0:
        ap.error("--seeds and --workers must be at least 1 and --margin at least 0")
    try:
        sp = plan.load(args.spec)
    except plan.PlanError as e:  # its message names the file (and the key)
        ap.error(str(e))
    from pipesim.io.interrupts import interrupt_once

    cache = DiskCache(args.cache_dir)
    with interrupt_once():  # SIGTERM as Ctrl-C; a second signal cannot cut the way out
        try:
            return _run(sp, cache, args)
        except KeyboardInterrupt:  # every finished run is in the cache: a re-run resumes from there
            sys.stdout.flush()
            print(
                f"plan_reference: interrupted; the finished runs are kept in {args.cache_dir}: run again"
                f" with --cache-dir {args.cache_dir} to resume",
                file=sys.stderr,
            )
            return 130


def _run(sp: plan.PlanSpec, cache: DiskCache, args: argparse.Namespace) -> int:
    with ProcessPoolExecutor(args.workers, initializer=ignore_sigint) as ex:  # Ctrl-C is the parent's
        if args.pick:
            pick = args.pick
            if pick not in plan.candidates(sp):
                print(f"--pick {pick.label(sp.n_gpus)} is not a design of the spec's space")
                return 2
        else:
            try:
                result = plan.plan(
                    sp, workers=args.workers, progress=True, with_sensitivity=False, cache=cache
                )
            except plan.PlanInfeasible as e:
                result = e.result
            if result.best is None:
                print("the plan recommends nothing")
                return 1
            pick = result.best.design
        ev = Evaluator(sp.with_(seeds=args.seeds), ex, progress=True, disk=cache)
        staged_reference(sp.with_(seeds=args.seeds), ev, pick, args.seeds, args.margin)
    return 0


if __name__ == "__main__":
    from pipesim.core.collector import pause_collector_during_runs

    with pause_collector_during_runs():
        raise SystemExit(main())
