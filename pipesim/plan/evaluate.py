"""One design run on the compute engine, its metrics, and a cached, ordered, parallel evaluator.

:func:`run_design` is a pure function of (spec, design, steps, seed): a worker process gives the
same numbers as the parent, so a pool's completion order never changes a result.
:class:`Evaluator` keeps every result by that key and maps the missing ones over an executor
(``Executor.map`` returns them in submission order), with a tqdm bar.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import pipesim
import pipesim.compute as _compute
from pipesim.compute.tool_slots import ToolSlotWarning
from pipesim.plan.build import design_cluster, routing, scenario, sync_seconds, trainer_config
from pipesim.plan.cache import DiskCache, run_key
from pipesim.plan.slots import slot_limited
from pipesim.plan.space import Constraints, Design, PlanSpec
from pipesim.plan.stats import t95


def run_design(spec: PlanSpec, d: Design, steps: int, seed: int) -> dict[str, float]:
    """The metrics of one run of ``d`` for ``steps`` steps (``failed`` = 1 when the run fails).

    ``tool_slot_limited`` is 1 where the run's slots, not its engines, looked like its limit
    (:func:`pipesim.plan.slots.slot_limited`); the run's own
    :class:`~pipesim.compute.tool_slots.ToolSlotWarning` is not raised (a worker process printed it
    once, in any order, and a cached run never): the report says it once, per design."""
    run_compute: Any = _compute.run_compute  # a lazy attribute of pipesim.compute
    _, cluster = design_cluster(spec, d)
    sync = sync_seconds(spec, d, cluster)
    sc = scenario(spec, d, steps, seed, n_slots=cluster.n_slots)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ToolSlotWarning)
            run = run_compute(
                sc,
                cluster,
                spec.workload,
                seed=seed,
                trainer=trainer_config(spec, d),
                sync_time_s=sync,
                routing=routing(spec),
            )
    except (pipesim.PipelineError, ValueError) as e:
        return {"failed": 1.0, "error": str(e)}  # type: ignore[dict-item]
    s = run.summary()
    T = s["sim_time_s"]
    n_steps = max(len(run.result.train_log), 1)
    gen, trained = s["tokens_generated"], s["tokens_trained"]
    sync_busy = sum(b - a for a, b, _ in run.result.sync_log)
    m = {
        "failed": 0.0,
        "throughput_per_hour": s["throughput_per_hour"],
        "tokens_per_hour": trained / T * 3600 if T > 0 else 0.0,
        "staleness_mean": s["staleness_mean"],
        "staleness_max": s["staleness_max"],
        "discarded_share": s["tokens_discarded"] / gen if gen > 0 else 0.0,
        "offpolicy_token_share": s["offpolicy_token_share"],
        "gpu_hours_per_mtok": spec.n_gpus * T / 3600 / (trained / 1e6) if trained > 0 else math.inf,
        "step_time_s": s["step_time_s_mean"],
        "train_time_s": s["train_time_s_mean"],
        "sync_time_s": sync_busy / n_steps,
        "wait_time_s": max(s["step_time_s_mean"] - s["train_time_s_mean"] - sync_busy / n_steps, 0.0),
        "trainer/idle_ratio": s["trainer/idle_ratio"],
        "rollouter/idle_ratio": s["rollouter/idle_ratio"],
        "gpu_busy_share": s["gpu_busy_share"],
        "engine_busy_share": s["engine_busy_share"],
        "concurrency_mean": s["concurrency_mean"],
        "recompute_tokens": s["recompute_tokens"],
        "preemptions": s["preemptions"],
        "sim_time_s": T,
        "ledger_closes": s["ledger_closes"],
        "tool_slot_limited": float(slot_limited(spec, run)),
    }
    for k in ("generated", "trained", "discarded", "buffered", "in_flight"):
        m[f"tokens_{k}"] = s[f"tokens_{k}"]
    m.update(staleness_profile(run.result.trained))
    m["tokens_per_s_per_gpu"] = trained / T / spec.n_gpus if T > 0 else 0.0
    return m


def staleness_profile(trained: Any) -> dict[str, float]:
    """What :mod:`pipesim.plan.judge` reads of a run's trained samples (``step``, ``staleness``):
    the mean staleness of the later half of the steps, the spread of its per-step means, their
    rise per step (least squares), and the counts at the maximum staleness and one below."""
    if len(trained) == 0:
        return {"staleness_late_mean": 0.0, "staleness_late_se": 0.0, "staleness_slope": 0.0}
    steps = trained["step"].to_numpy()
    stale = trained["staleness"].to_numpy()
    first, last = int(steps.min()), int(steps.max())
    late = steps >= first + (last - first + 1) // 2
    per = trained[late].groupby("step")["staleness"].mean()
    x, y = per.index.to_numpy(dtype=float), per.to_numpy(dtype=float)
    slope = float(np.polyfit(x, y, 1)[0]) if len(per) >= 2 else 0.0
    se = float(np.std(y, ddof=1) / math.sqrt(len(y))) if len(y) >= 2 else 0.0
    top = int(stale.max())
    return {
        "staleness_late_mean": float(stale[late].mean()),
        "staleness_late_se": se,
        "staleness_slope": slope,
        "episodes_trained_run": int(len(stale)),
        "at_max": int((stale == top).sum()),
        "below_max": int((stale == top - 1).sum()),
    }


def _task(args: tuple[PlanSpec, Design, int, int]) -> dict[str, float]:
    return run_design(*args)


@dataclass
class Evaluated:
    """A design at one rung: its runs (one per seed) and their aggregate."""

    design: Design
    steps: int
    runs: list[dict[str, float]]
    metrics: dict[str, float] = field(default_factory=dict)
    feasible: bool = False
    """Every constraint ``met`` (:func:`pipesim.plan.judge.judge`): proved at any length, or at the
    full rung estimated within its limit; a short screen is never judged feasible on its numbers."""
    status: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Constraint -> (``met``/``violated``/``open``, the estimate judged)."""
    p_feasible: float = 0.0
    """The chance every constraint holds at full length (:func:`pipesim.plan.judge.p_met`)."""
    verified: str = ""
    """What verification found (:mod:`pipesim.plan.verify`): held or broke ``HORIZON`` times as
    long, proved by a bound, or not verified; empty when it was not reached."""

    @property
    def censored(self) -> bool:
        """Some constraint is still open: this run cannot tell."""
        return any(state == "open" for state, _ in self.status.values())

    @property
    def throughput(self) -> float:
        return self.metrics.get("throughput_per_hour", 0.0)


def aggregate(runs: Sequence[dict[str, float]], n_gpus: int | None = None) -> dict[str, float]:
    """Means over seeds; the maximum staleness is the maximum; the throughput gets the half-width
    of its 95% Student t interval, ``throughput_ci = t95(n - 1) sd / sqrt(n)`` (the same quantile
    table as the paired test, :func:`pipesim.plan.stats.t95`; the normal 1.96 is 12% too narrow
    at 11 seeds, t95(10) = 2.228). One seed has no interval: ``throughput_ci`` is NaN, never 0, and the
    report prints ``(1 seed)`` (:mod:`pipesim.plan.report`).

    ``gpu_hours_per_mtok`` is a ratio, so it is not averaged: it is the cluster's ``n_gpus`` over
    the mean trained Mtok/h (:func:`cost_ratio`), the number the table's ``Mtok/h`` column gives, so
    ``GPU-h/Mtok x Mtok/h = n_gpus`` on every row and the ``cost_per_mtok`` limit judges it. The mean
    of the per-seed ratios is larger (Jensen: 1/x is convex): 4.61 GPU-h/Mtok beside 14.1 Mtok/h on
    64 GPUs, where 64 / 14.1 = 4.54. ``n_gpus`` None: read from the runs (each run's ratio times its
    Mtok/h)."""
    if any(r.get("failed") for r in runs):
        bad = next(r for r in runs if r.get("failed"))
        return {
            "failed": 1.0,
            "error": bad.get("error", ""),  # type: ignore[dict-item,arg-type]
            "throughput_per_hour": 0.0,
            "tokens_per_hour": 0.0,
            "staleness_mean": math.inf,
            "staleness_max": math.inf,
            "discarded_share": 1.0,
            "offpolicy_token_share": 1.0,
            "gpu_hours_per_mtok": math.inf,
        }
    keys = [k for k, v in runs[0].items() if isinstance(v, int | float)]
    out = {k: statistics.fmean(r[k] for r in runs) for k in keys}
    out["staleness_max"] = top = max(r["staleness_max"] for r in runs)
    if "gpu_hours_per_mtok" in out and "tokens_per_hour" in out:
        out["gpu_hours_per_mtok"] = cost_ratio(runs, out["tokens_per_hour"], n_gpus)
    if "at_max" in runs[0]:  # the tail at the overall maximum: runs below it have none there
        at_top = [r for r in runs if r["staleness_max"] == top]
        out["at_max"] = sum(r["at_max"] for r in at_top) / len(runs)
        out["below_max"] = sum(r["below_max"] for r in at_top) / len(runs)
    thr = [r["throughput_per_hour"] for r in runs]
    n = len(thr)
    out["throughput_ci"] = t95(n - 1) * statistics.stdev(thr) / math.sqrt(n) if n > 1 else math.nan
    out["seeds"] = float(n)
    return out


def cost_ratio(runs: Sequence[dict[str, float]], tokens_per_hour: float, n_gpus: int | None) -> float:
    """GPU-hours per million trained tokens at the seeds' mean ``tokens_per_hour``: ``n_gpus`` GPUs
    for an hour over the Mtok they train in it (inf when nothing is trained). Without ``n_gpus``,
    the GPUs are each run's own ratio times its Mtok/h (the runs' definition, :func:`run_design`)."""
    if n_gpus is None:
        each = [
            r["gpu_hours_per_mtok"] * r["tokens_per_hour"] / 1e6
            for r in runs
            if math.isfinite(r["gpu_hours_per_mtok"]) and r["tokens_per_hour"] > 0
        ]
        gpus = statistics.fmean(each) if each else math.nan
    else:
        gpus = float(n_gpus)
    if not math.isfinite(gpus) or tokens_per_hour <= 0:
        return math.inf
    return gpus * 1e6 / tokens_per_hour


def priced(m: dict[str, float], cost_per_gpu_hour: float | None) -> dict[str, float]:
    """``m`` with ``cost_per_mtok`` (the price of a million trained tokens) where a GPU-hour has a
    price (computed here, not in the run: the run cache does not depend on prices)."""
    if cost_per_gpu_hour is None or m.get("failed"):
        return m
    return {**m, "cost_per_mtok": m["gpu_hours_per_mtok"] * cost_per_gpu_hour}


class Evaluator:
    """Runs designs for a spec on an executor (None: in this process), caching every run."""

    def __init__(
        self,
        spec: PlanSpec,
        executor: Executor | None = None,
        progress: bool = False,
        seed: int = 0,
        disk: DiskCache | None = None,
    ) -> None:
        self.spec, self.executor, self.progress, self.seed = spec, executor, progress, seed
        self.cache: dict[tuple[Design, int, int], dict[str, float]] = {}
        self.disk = disk
        self.runs = 0
        """Runs simulated here (not those the disk cache held)."""
        self.reused = 0
        """Runs the disk cache held."""

    def seeds(self, n: int) -> list[int]:
        return [self.spec.sim_seed + i for i in range(n)]

    def evaluate(
        self, designs: Iterable[Design], steps: int, n_seeds: int, desc: str = "runs", bar: Any = None
    ) -> list[Evaluated]:
        """Run what is not cached (in submission order), with a tqdm bar of its own or ``bar``."""
        designs = list(designs)
        seeds = self.seeds(n_seeds)
        todo = [(d, steps, s) for d in designs for s in seeds if (d, steps, s) not in self.cache]
        todo = list(dict.fromkeys(todo))
        keys: dict[tuple[Design, int, int], str] = {}
        if self.disk is not None:
            keys = {t: run_key(self.spec, *t) for t in todo}
            for t in todo:
                got = self.disk.get(keys[t])
                if got is not None:
                    self.cache[t] = got
                    self.reused += 1
            todo = [t for t in todo if t not in self.cache]
        args = [(self.spec, d, st, s) for d, st, s in todo]
        results: Iterable[dict[str, float]]
        if self.executor is None:
            results = map(_task, args)
        else:
            results = self.executor.map(_task, args, chunksize=max(1, len(args) // 64))
        if self.progress and todo and bar is None:
            from tqdm import tqdm

            results = tqdm(results, total=len(todo), desc=desc, unit="run", leave=True)
        for key, r in zip(todo, results, strict=True):  # an interrupt keeps what came back
            self.cache[key] = r
            self.runs += 1
            if self.disk is not None and not r.get("failed"):
                self.disk.put(keys[key], r)
            if bar is not None:
                bar.update(1)
        return [self.result(d, steps, seeds) for d in designs]

    def result(self, d: Design, steps: int, seeds: Sequence[int]) -> Evaluated:
        from pipesim.plan.judge import judge, p_met

        runs = [self.cache[(d, steps, s)] for s in seeds]
        m = priced(aggregate(runs, self.spec.n_gpus), self.spec.cost_per_gpu_hour)
        status = judge(self.spec, d, steps, m)
        ok = self.spec.constraints.feasible(m) and all(st == "met" for st, _ in status.values())
        return Evaluated(d, steps, runs, m, ok, status, p_met(self.spec, d, steps, m))


def violation(c: Constraints, m: dict[str, float]) -> float:
    """The sum of relative excesses over the limits (0: feasible)."""
    if m.get("failed"):
        return math.inf
    total = 0.0
    for name, v in c.violations(m).items():
        limit = float(getattr(c, name))
        total += max(v, 0.0) / max(abs(limit), 0.05)
    return total


def objectives(m: dict[str, float]) -> tuple[float, float, float]:
    """(throughput, mean staleness, discarded share), all to be minimised (throughput negated)."""
    return (-m["throughput_per_hour"], m["staleness_mean"], m["discarded_share"])


FRONT_TOLERANCE = (0.0, 0.01, 0.001)
"""Differences of :func:`objectives` the front does not count: none in throughput (the front
trades throughput for freshness, so the faster of two equally fresh designs wins), 0.01 of a
version in mean staleness and 0.001 in discarded share -- one unit of the last digit the report
prints (``0.23``, ``0.0 %``). A design 0.0002 fresher than a faster one is printed as fresh as
it, so it is no trade-off a reader can see; before this tolerance an A100 plan put colocated TP 1 partial
(4,517 samples/h) and TP 2 abort-reprefill (5,154) on the front beside its pick (5,242), all three
printed at mean staleness 0.23, maximum 2 and 0.0 % discarded."""


def dominates(a: tuple[float, ...], b: tuple[float, ...], tol: tuple[float, ...] | None = None) -> bool:
    """``a`` no worse than ``b`` on every objective (minimised) up to ``tol``, and better on one by
    more than ``tol`` (None: no tolerance, the strict partial order of Pareto dominance)."""
    t = tol if tol is not None else (0.0,) * len(a)
    return all(x <= y + d for x, y, d in zip(a, b, t, strict=True)) and any(
        x < y - d for x, y, d in zip(a, b, t, strict=True)
    )


def nondominated(evals: Sequence[Evaluated], tol: tuple[float, ...] = FRONT_TOLERANCE) -> list[Evaluated]:
    """The front of ``evals``, by throughput descending: each design in that order is kept unless a
    design kept before it dominates it within ``tol`` (:data:`FRONT_TOLERANCE`), so a design is on
    the front when it is fresher, by more than the tolerance, than every faster design on it.
    Within a tolerance dominance is not transitive, so "no design dominates it" would let a chain
    of small steps push a much fresher design off the front; against the kept designs it cannot.
    With no tolerance this is exactly the designs no other one dominates. Designs of equal
    throughput are kept only if no other kept one dominates them."""
    if not evals:
        return []
    order = sorted(evals, key=lambda e: (-e.throughput, *objectives(e.metrics)[1:], e.design))
    o = np.array([objectives(e.metrics) for e in order], dtype=float)
    t = np.asarray(tol, dtype=float)
    kept: list[int] = []
    for i in range(len(order)):
        if kept:
            k = o[kept]
            if ((k <= o[i] + t).all(axis=1) & (k < o[i] - t).any(axis=1)).any():
                continue
        kept.append(i)
    keep = [
        order[i]
        for i in kept
        if not any(j != i and o[j, 0] == o[i, 0] and dominates(tuple(o[j]), tuple(o[i]), tol) for j in kept)
    ]
    return sorted(keep, key=lambda e: (-e.throughput, e.design))
