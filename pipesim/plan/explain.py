"""What a plan says when it cannot answer, and how its answer moves: the cause of an empty
space, the tightest of the constraints no design meets, and the sensitivity of the best designs
to the engine model (moved from :mod:`pipesim.plan.search`, which re-exports them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any

from pipesim.plan.build import check_fits, trainer_config
from pipesim.plan.cache import DiskCache
from pipesim.plan.drops import placement_reasons
from pipesim.plan.evaluate import Evaluated, Evaluator
from pipesim.plan.space import CONSTRAINT_METRICS, PlanSpec

if TYPE_CHECKING:
    from pipesim.plan.search import PlanResult

__all__ = ["infeasible_message", "no_candidates", "sensitivity"]


def no_candidates(spec: PlanSpec) -> str:
    """Why the space has no valid design. With ``space.placement`` listed, per value and cause
    (:func:`~pipesim.plan.drops.placement_reasons`: below ``min_trainer_gpus``, a trainer whose
    memory cannot hold the model, rollout GPUs a TP degree does not tile; before, every cause read
    "no split in space.placement [16, 24] leaves a multiple of 1"); otherwise per TP degree: a
    replica wider than the GPUs the trainer leaves, colocated replicas that do not tile the
    cluster, or no trainer of at least the minimum that holds the model."""
    n, lo = spec.n_gpus, spec.constraints.min_trainer_gpus
    if spec.space.placement is not None:  # the listed values, each with its real cause
        said = placement_reasons(spec, check_fits(spec), every=True)
        return f"no candidate design of {n} GPUs: " + "; ".join(said)
    rollout = n - max(lo, 1)
    why = []
    for tp in sorted(set(spec.space.tp)):
        parts = []
        if tp > rollout:
            parts.append(
                f"a replica of tp={tp} needs {tp} GPUs, but min_trainer_gpus={lo} leaves at most "
                f"{max(rollout, 0)} of the {n} GPUs for rollout"
            )
        else:
            sp = spec.sequence_parallel
            dividing = f" on a multiple of model.sequence_parallel={sp} GPUs" if sp > 1 else ""
            parts.append(f"no trainer of at least {lo} GPUs{dividing} holds {spec.model.name}")
        if n < lo:
            parts.append(f"colocated trains on all {n} GPUs, fewer than min_trainer_gpus={lo}")
        elif n % tp:
            parts.append(f"colocated replicas of tp={tp} do not tile {n} GPUs")
        why.append(f"tp={tp}: " + "; ".join(parts))
    return f"no candidate design of {n} GPUs: " + "; ".join(why)


_WORDS = {
    "mean_staleness": ("mean staleness", "{:.3g}"),
    "max_staleness": ("max staleness", "{:.3g}"),
    "discarded_share": ("discarded-token share", "{:.2%}"),
    "offpolicy_token_share": ("off-policy token share", "{:.2%}"),
    "cost_per_mtok": ("cost per million trained tokens", "{:.4g}"),
}
"""How each constraint of :data:`~pipesim.plan.space.CONSTRAINT_METRICS` reads (its metric is there)."""


def infeasible_message(spec: PlanSpec, evals: Sequence[Evaluated]) -> str:
    """Which constraint is tightest and the best value reached for it, by which design.

    The designs are judged on their longest runs: the full runs when there are any (a 3-step
    screen's whole-run mean and its maximum are censored low, so they would name a value no run
    of the spec's length reaches), the screens otherwise. The value of a constraint is the one
    the judge read (:func:`pipesim.plan.judge.judge`: the settled mean, not the whole run's), and
    a design breaks it when the judge marks it ``violated`` (or, without a judgement, when the
    metric is past the limit). The tightest is broken by the most designs (ties: the larger gap of
    the best value reached); the other constraints every design breaks are named too, since
    relaxing the tightest alone leaves them."""
    c = spec.constraints
    ok = [e for e in evals if not e.metrics.get("failed")]
    if not ok:
        errors = {str(e.metrics.get("error", "")) for e in evals}
        return "no design could be run: " + "; ".join(sorted(errors))[:500]
    full = [e for e in ok if e.steps >= spec.steps]
    judged = full or ok
    where = f"the {len(full)} run in full" if full else f"their {max(e.steps for e in ok)}-step screens"
    rows = []
    for name, key in CONSTRAINT_METRICS.items():
        words, fmt = _WORDS[name]
        limit = getattr(c, name)
        if limit is None or any(key not in e.metrics and name not in e.status for e in judged):
            continue

        def value(e: Evaluated, name: str = name, key: str = key) -> float:
            return float(e.status[name][1]) if name in e.status else float(e.metrics[key])

        def bad(e: Evaluated, name: str = name, limit: float = limit) -> bool:
            if name in e.status:
                return e.status[name][0] == "violated"
            return value(e) > limit + 1e-12

        n_bad = sum(1 for e in judged if bad(e))
        best = min(judged, key=lambda e: (value(e), -e.throughput, e.design))
        gap = (value(best) - limit) / max(abs(limit), 0.05)
        rows.append((n_bad, gap, name, words, fmt, limit, best, value(best)))
    if not rows:  # a limit whose metric the runs do not report
        return f"no design meets the constraints ({len(ok)} evaluated); relax them or widen the space."
    rows.sort(key=lambda r: (-r[0], -r[1], r[2]))
    n_bad, gap, name, words, fmt, limit, best, v = rows[0]
    alone = (
        "no design meets it even alone" if gap > 0 else "each limit is met by some design, not all together"
    )
    label = best.design.label(spec.n_gpus)
    also = [r for r in rows[1:] if r[0] == len(judged) and r[1] > 0]
    extra = "".join(
        f" {r[2]} is violated by every one of them too (best {r[4].format(r[7])}, "
        f"{r[6].design.label(spec.n_gpus)}; limit {r[4].format(r[5])})."
        for r in also
    )
    names = " and ".join([name, *(r[2] for r in also)])
    return (
        f"no design meets the constraints ({len(ok)} evaluated, judged on {where}). The tightest is "
        f"{name} ({words} <= {fmt.format(limit)}): {n_bad} of {len(judged)} designs violate it and "
        f"{alone}; the best value reached is {fmt.format(v)} ({label}).{extra} "
        f"Relax {names} or widen the space."
    )


def sensitivity(
    result: PlanResult,
    *,
    seed: int = 0,
    executor: Executor | None = None,
    top: int = 3,
    progress: bool = False,
    cache: DiskCache | None = None,
) -> list[dict[str, Any]]:
    """The best few feasible designs re-run in full under three perturbations of the engine model,
    and a fourth for a trainer that deals samples as verl did before its PR #3605 (``"step"``):
    the same designs with today's verl dealing (``"sorted"``)."""
    spec = result.spec
    base = result.feasible[:top]
    if not base:
        return []
    drift = 1.3 ** (1 / spec.steps) - 1
    variants = {
        "sync cost x2": spec.with_(sync_scale=spec.sync_scale * 2),
        "responses 30% longer by the last step": spec.with_(
            workload=_replace(spec.workload, drift_per_version=drift)
        ),
        "trainer MFU -20%": _slower_trainer(spec, 0.8),
    }
    # what verl's newer dealing (its PR #3605, pipesim.compute.balance) would give, for a trainer
    # that deals as verl did before it (the profile resolved as the runs resolve it)
    if trainer_config(spec, base[0].design).framework.balance == "step":
        variants["ranks dealt as verl does since PR #3605"] = spec.with_(balance="sorted")
    from pipesim.plan.verify import mean_open, tail_open

    out = []
    rec = base[0]
    for name, sp in variants.items():
        ev = Evaluator(sp, executor, progress, seed, cache)
        evals = ev.evaluate([e.design for e in base], spec.steps, spec.seeds, desc=name)
        result.runs += ev.runs
        result.reused += ev.reused
        # met by its runs, doubted by the tail or a settled mean within its error of the limit alone:
        # as the recommendation itself was before its verification (a variant is not verified), so
        # it is not called infeasible on that
        fits = {e.design: e.feasible or tail_open(sp, e) or mean_open(sp, e) for e in evals}
        ok = sorted((e for e in evals if fits[e.design]), key=lambda e: (-e.throughput, e.design))
        now = evals[0]
        out.append(
            {
                "variant": name,
                "recommended": rec.design.label(spec.n_gpus),
                "throughput_before": rec.throughput,
                "throughput_after": now.throughput,
                "change": now.throughput / rec.throughput - 1 if rec.throughput else math.nan,
                "still_feasible": fits[now.design],
                "best_after": ok[0].design.label(spec.n_gpus) if ok else None,
                "best_after_throughput": ok[0].throughput if ok else None,
            }
        )
    return out


def _slower_trainer(spec: PlanSpec, factor: float) -> PlanSpec:
    """``spec`` with the trainer's efficiency scaled: ``mfu``, or a framework profile's two."""
    if spec.framework is None:
        return spec.with_(mfu=spec.mfu * factor)
    f = spec.framework
    return spec.with_(
        framework=_replace(
            f, fwd_bwd_efficiency=f.fwd_bwd_efficiency * factor, fwd_efficiency=f.fwd_efficiency * factor
        )
    )


def _replace(obj: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(obj, **changes)
