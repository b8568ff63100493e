"""The rungs of the search (:mod:`pipesim.plan.search`): how long each is, who goes on, and the
NSGA-II screen that fills the first one for ``method = "optuna"``.

* :func:`rung_steps` -- the rungs' lengths: ``screen_steps``, multiplied by ``reduction`` while a
  rung is at most half of ``steps``, then the full ``steps``.
* :func:`rung_quota` -- how many of a rung's ``n`` designs go on: ``ceil(n / reduction)``, at least
  ``min_full`` (all of them where fewer are left).
* :func:`promote` -- which designs those are: a third of the quota to the fastest designs whose
  constraints are proved (a floor the recommendation can fall back on), up to two thirds by
  throughput x the chance the constraints hold at full length (:func:`pipesim.plan.judge.p_met`),
  then layers of non-dominated sorting of the designs not shown broken (so the low-staleness end
  of the trade-off survives), then the least infeasible.
* :func:`optuna_screen` -- ``trials`` designs chosen by Optuna's NSGA-II (three objectives:
  throughput up, mean staleness and discarded share down; the constraints' violation as Optuna's
  constraint), asked and told in batches of ``spec.batch`` in ask order, so neither the worker
  count nor the order in which runs finish changes what is asked next. Designs the first cut
  screened already count toward ``trials``; a design outside the pool (invalid, or ruled out by
  the first cut) or a failed run is told as the worst point.

:func:`pipesim.plan.search.search` strings these together; the grid and slice searches, the
first cut, verification and the result stay there.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

from pipesim.plan.build import TrainerMemoryWarning, check_fits, placements
from pipesim.plan.evaluate import Evaluated, Evaluator, nondominated, violation
from pipesim.plan.space import Design, PlanSpec


def rung_steps(spec: PlanSpec) -> list[int]:
    """The rungs' lengths in steps: ``screen_steps``, times ``reduction`` while a rung stays at most
    half of ``steps``, then ``steps`` (the full runs)."""
    steps = [spec.screen_steps]
    while steps[-1] * spec.reduction * 2 <= spec.steps:
        steps.append(steps[-1] * spec.reduction)
    if steps[-1] != spec.steps:
        steps.append(spec.steps)
    return steps


def promote(spec: PlanSpec, evals: Sequence[Evaluated], quota: int) -> list[Design]:
    """A third of the quota to the fastest designs whose constraints are proved (a floor the
    recommendation can fall back on), up to two thirds by throughput x the chance the design's
    constraints hold at full length (:func:`pipesim.plan.judge.p_met`: 1 proved, 0 shown broken,
    between for what a short run cannot tell), the rest by layers of non-dominated sorting of the
    designs not shown broken (the low-staleness end of the trade-off survives too), then the least
    infeasible."""
    c = spec.constraints
    alive = [e for e in evals if e.p_feasible > 0]
    sure = sorted((e for e in alive if e.p_feasible >= 1), key=lambda e: (-e.throughput, e.design))
    chosen = [e.design for e in sure[: math.ceil(quota / 3)]]  # the fastest proved ones: a floor
    ranked = sorted(
        (e for e in alive if e.design not in chosen), key=lambda e: (-e.throughput * e.p_feasible, e.design)
    )
    chosen += [e.design for e in ranked[: max(math.ceil(2 * quota / 3) - len(chosen), 0)]]
    rest = [e for e in alive if e.design not in chosen]
    while rest and len(chosen) < quota:
        layer = nondominated(rest, tol=(0.0, 0.0, 0.0))  # raw layers: the report's tolerance is for the front
        chosen += [e.design for e in layer[: quota - len(chosen)]]
        taken = {e.design for e in layer}
        rest = [e for e in rest if e.design not in taken]
    others = sorted(
        (e for e in evals if e.design not in chosen),
        key=lambda e: (violation(c, e.metrics), -e.throughput, e.design),
    )
    chosen += [e.design for e in others[: max(quota - len(chosen), 0)]]
    return sorted(chosen)


def optuna_screen(
    spec: PlanSpec, ev: Evaluator, pool: list[Design], seed: int, steps: int, pre: Sequence[Evaluated] = ()
) -> list[Evaluated]:
    """``pre``: designs screened already (the first cut's), counted in ``trials``."""
    import optuna
    from optuna.distributions import BaseDistribution, CategoricalDistribution

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sp = spec.space
    engines = check_fits(spec)
    with warnings.catch_warnings():  # candidates() warned of a tight trainer: once, not again here
        warnings.simplefilter("ignore", TrainerMemoryWarning)
        trainers = sorted({t for tp in engines for t in placements(spec, tp)})
    choices: dict[str, list[Any]] = {
        "trainer_gpus": trainers,
        "tp": sorted(engines),
        "eta": sorted(set(sp.eta)),
        "update": list(dict.fromkeys(sp.update)),
        "sync_every": sorted(set(sp.sync_every)),
        "oversample": sorted({float(f) for f in sp.oversample}) if spec.has_groups else [1.0],
    }
    dists: dict[str, BaseDistribution] = {k: CategoricalDistribution(v) for k, v in choices.items()}
    modern = hasattr(optuna.trial.Trial, "set_constraint")  # Optuna >= 5

    def constrain(t: Any, v: float) -> None:
        if modern:
            t.set_constraint("violation", v)
        else:
            t.set_user_attr("c", [v])

    sampler = optuna.samplers.NSGAIISampler(
        population_size=max(spec.batch, 2),
        seed=seed,
        constraints_func=None if modern else (lambda t: t.user_attrs["c"]),
    )
    study = optuna.create_study(directions=["maximize", "minimize", "minimize"], sampler=sampler)
    target = min(spec.trials, len(pool))
    allowed = set(pool)  # valid and not ruled out by the first cut
    seen: dict[Design, Evaluated] = {e.design: e for e in pre}
    asks = 0
    bar: Any = None
    if ev.progress:
        from tqdm import tqdm

        bar = tqdm(total=target, desc=f"screen ({steps} steps, NSGA-II)", unit="design")
    try:
        while len(seen) < target and asks < 20 * spec.trials:
            trials = [study.ask(dists) for _ in range(spec.batch)]
            asks += len(trials)
            designs = [Design(**t.params) for t in trials]
            new = [d for d in dict.fromkeys(designs) if d not in seen and d in allowed]
            new = new[: target - len(seen)]
            for e in ev.evaluate(new, steps, 1, bar=bar):
                seen[e.design] = e
            for t, d in zip(trials, designs, strict=True):
                got = seen.get(d)
                if got is None or got.metrics.get("failed"):
                    constrain(t, 1e9)
                    study.tell(t, [0.0, 1e9, 1.0])
                    continue
                m = got.metrics
                constrain(t, min(violation(spec.constraints, m), 1e9))
                study.tell(t, [m["throughput_per_hour"], m["staleness_mean"], m["discarded_share"]])
    finally:  # an interrupt's too: its last line before the line that says so
        if bar is not None:
            bar.close()
    return [seen[d] for d in sorted(seen)]


def rung_quota(spec: PlanSpec, n: int) -> int:
    """How many of a rung's ``n`` designs go on: ``n / reduction``, at least ``min_full``."""
    return max(math.ceil(n / spec.reduction), min(spec.min_full, n))
