"""The search: screen candidates with short runs, promote the promising ones by successive halving,
and run the survivors in full over several seeds.

* ``slices`` (chosen by name; ``auto`` takes Optuna above ``grid_limit``) screens each slice's
  fluid balance split, probes slices at full length along the split axis and takes the full rung
  from the probes (:mod:`pipesim.plan.slices`); no successive halving.
* ``grid`` screens every candidate; ``optuna`` screens ``trials`` designs chosen by Optuna's
  NSGA-II (:func:`~pipesim.plan.rungs.optuna_screen`).
* A rung keeps ``max(ceil(n / reduction), min_full)`` designs, chosen by
  :func:`~pipesim.plan.rungs.promote` (the fastest proved, then throughput x the chance the
  constraints hold, then the rung's Pareto layers, then the least infeasible). The rungs' lengths,
  quotas, promotion and the NSGA-II screen live in :mod:`pipesim.plan.rungs` (``rung_steps`` and
  ``promote`` are re-exported here); :func:`search` strings them together.
* Verification (:mod:`pipesim.plan.verify`): before the fastest feasible full-run design is
  recommended, it is run ``HORIZON`` times as long on the same seeds unless a declared bound
  proves its staleness; a design that breaks a limit there is infeasible, and the next is tried.
* The front is the feasible full-run designs no other feasible full-run design dominates
  (throughput up, mean staleness and discarded share down).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipesim.core.errors import shown
from pipesim.io.cli_options import max_workers
from pipesim.io.interrupts import deferred_interrupts, ignore_sigint
from pipesim.io.pools import stop_pool
from pipesim.plan.build import candidates, check_plan_pool, space_size
from pipesim.plan.cache import DiskCache
from pipesim.plan.checks import check_seed, integer
from pipesim.plan.evaluate import Evaluated, Evaluator, nondominated
from pipesim.plan.explain import infeasible_message, no_candidates, sensitivity
from pipesim.plan.fluid import FLOOR_SHARE, Cut, audit_sample, ceiling, proved
from pipesim.plan.judge import HORIZON
from pipesim.plan.rungs import optuna_screen, rung_quota
from pipesim.plan.rungs import promote as promote  # re-exported: callers found them here
from pipesim.plan.rungs import rung_steps as rung_steps
from pipesim.plan.slices import pick_full, slice_search
from pipesim.plan.space import Design, PlanError, PlanSpec
from pipesim.plan.verify import along_slices, needs_verification, verify


class PlanInfeasible(PlanError):
    """No evaluated design meets the constraints; ``result`` holds what was evaluated."""

    def __init__(self, message: str, result: PlanResult) -> None:
        super().__init__(message)
        self.result = result


class PlanInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, as the command maps it) stopped the plan; ``result`` holds the designs
    whose runs had finished (``result.partial`` is True). A KeyboardInterrupt, so a caller that
    does not know it still stops."""

    def __init__(self, result: PlanResult) -> None:
        super().__init__(f"interrupted after {result.runs} runs")
        self.result = result
        self.outputs_asked = True
        """Whether the command was asked to write any output (``pipesim plan`` sets it): what its
        last line says was written."""


@dataclass
class PlanResult:
    spec: PlanSpec
    method: str
    n_candidates: int
    rungs: list[tuple[int, int]]
    """(steps, designs run) per rung; the first is the screening, the last the full runs."""
    full: list[Evaluated]
    screened: list[Evaluated]
    feasible: list[Evaluated]
    front: list[Evaluated]
    best: Evaluated | None
    elapsed_s: float = 0.0
    runs: int = 0
    """Runs simulated by this plan (a resumed plan's new ones)."""
    reused: int = 0
    """Runs the run cache gave back (:class:`~pipesim.plan.cache.DiskCache`): with :attr:`runs`,
    every run the plan's answer rests on (``--resume`` after an interrupt: the runs before it)."""
    sensitivity: list[dict[str, Any]] = field(default_factory=list)
    cut: Cut = field(default_factory=Cut)
    """The fluid first cut (:mod:`pipesim.plan.fluid`): designs ruled out, the audit."""
    baseline: Evaluated | None = None
    """The spec's ``[baseline]`` design in full (None: none given)."""
    partial: bool = False
    """Interrupted: the lists hold the designs whose runs had finished."""
    seed: int = 0
    """The search's seed (Optuna's); the simulations use :meth:`sim_seeds`."""

    def sim_seeds(self) -> list[int]:
        return [self.spec.sim_seed + i for i in range(self.spec.seeds)]

    def frame(self) -> Any:
        """The designs as a pandas DataFrame: design keys, metrics, intervals, marks
        (:func:`pipesim.plan.frame.frame`)."""
        from pipesim.plan.frame import frame

        return frame(self)

    @property
    def n_screened(self) -> int:
        return self.rungs[0][1]

    @property
    def n_full(self) -> int:
        return self.rungs[-1][1]


def check_spec(spec: object) -> None:
    """PlanError naming ``spec`` unless it is a :class:`PlanSpec`: a path handed to :func:`plan`
    failed inside the search (``'str' object has no attribute 'baseline'``)."""
    if not isinstance(spec, PlanSpec):
        raise PlanError(
            f"spec must be a PlanSpec, got {shown(spec)}: read a spec file with pipesim.plan.load(path)",
            "spec",
        )


def search(
    spec: PlanSpec,
    *,
    seed: int = 0,
    executor: Executor | None = None,
    progress: bool = False,
    cache: DiskCache | None = None,
    announce: Callable[[int], None] | None = None,
) -> PlanResult:
    """Screen, halve, run in full; see the module docstring. Raises PlanInfeasible when no design
    meets the constraints, PlanError when the model does not fit or the space is empty (or the
    seed is not in [0, 2**32), the range of Optuna's sampler, or ``spec`` is no PlanSpec).
    ``announce`` is called once with the number of designs in the space
    (:func:`~pipesim.plan.build.space_size`), before they are enumerated."""
    check_spec(spec)
    check_seed(seed)
    t0 = time.perf_counter()
    if spec.baseline is not None:  # run last: a baseline that does not fit is refused before the search
        from pipesim.plan.runspec_checks import check_design

        check_design(spec, spec.baseline, "baseline")
    if announce is not None:
        announce(space_size(spec))
    pool = candidates(spec)
    if not pool:
        raise PlanError(f"space: {no_candidates(spec)}", "space")  # the space the constraints leave is empty
    check_plan_pool(spec, [*pool, *([spec.baseline] if spec.baseline is not None else [])], HORIZON)
    method = spec.method
    if method == "auto":
        method = "grid" if len(pool) <= spec.grid_limit else "optuna"
    n_all = len(pool)
    ev = Evaluator(spec, executor, progress, seed, cache)
    steps = rung_steps(spec)
    rungs: list[tuple[int, int]] = []
    cut = Cut()
    n_screen = 1 if len(steps) > 1 else spec.seeds
    try:
        if spec.first_cut:
            pool, cut = first_cut(spec, ev, pool, steps[0], n_screen, seed)
        later = steps[1:]  # the successive-halving rungs after the screen
        pre = [] if method == "grid" else ev.evaluate(cut.anchors, steps[0], 1)  # the first cut ran them
        if method == "slices":
            ceilings = cut.ceilings or {d: ceiling(spec, d, {}) for d in pool}
            screens, probes = slice_search(spec, ev, pool, ceilings, pre[: spec.trials])
            keep = pick_full(spec, probes, rung_quota(spec, len(probes)))
            current = ev.evaluate(keep, spec.steps, spec.seeds, desc="full")
            screened, later = screens, []  # the rungs: the screen, the probes, the full runs
            rungs += [
                (spec.screen_steps, len(screens)),
                (spec.steps, len(probes)),
                (spec.steps, len(current)),
            ]
        else:
            if method == "grid":
                current = ev.evaluate(pool, steps[0], n_screen, desc=f"screen ({steps[0]} steps)")
            else:
                current = optuna_screen(spec, ev, pool, seed, steps[0], pre[: spec.trials])
                if len(steps) == 1:
                    current = ev.evaluate([e.design for e in current], steps[0], spec.seeds, desc="full")
            screened = current
            rungs.append((steps[0], len(current)))
        for i, st in enumerate(later, start=1):
            keep = promote(spec, current, rung_quota(spec, len(current)))
            last = i == len(steps) - 1
            desc = "full" if last else f"rung {i} ({st} steps)"
            current = ev.evaluate(keep, st, spec.seeds if last else 1, desc=desc)
            rungs.append((st, len(current)))
        if spec.baseline is not None and spec.baseline not in {e.design for e in current}:
            # the user's design, run in full beside the plan's (not counted in the rungs)
            current = [*current, *ev.evaluate([spec.baseline], spec.steps, spec.seeds, desc="baseline")]
        proved = sorted((e for e in screened if e.p_feasible >= 1), key=lambda e: (-e.throughput, e.design))
        fallback = [e.design for e in proved if not needs_verification(spec, e.design)][: spec.min_full]
        current = verify(spec, ev, current, fallback=fallback)  # the pick holds HORIZON x as long
        if method == "slices":  # a slice whose fastest broke: its slower splits, bisected
            current = along_slices(spec, ev, current, pool)
    except KeyboardInterrupt:
        with deferred_interrupts():  # a second Ctrl-C must not lose what finished
            done = finished(ev, steps[0], 1 if len(steps) > 1 else spec.seeds)
            full_done = finished(ev, spec.steps, spec.seeds)
            result = _result(spec, method, n_all, rungs or [(steps[0], len(done))], full_done, done)
            result.partial, result.seed, result.cut = True, seed, cut
            result.runs, result.reused, result.elapsed_s = ev.runs, ev.reused, time.perf_counter() - t0
        raise PlanInterrupted(result) from None
    result = _result(spec, method, n_all, rungs, current, screened)
    result.runs, result.reused, result.seed, result.cut = ev.runs, ev.reused, seed, cut
    result.elapsed_s = time.perf_counter() - t0
    if result.best is None:
        latest = {e.design: e for e in screened} | {e.design: e for e in result.full}  # the longest run
        message = infeasible_message(spec, list(latest.values()))
        notes = [f"{e.design.label(spec.n_gpus)}: {e.verified}" for e in result.full if e.verified]
        if notes:  # judged feasible at full length, refused by verification
            message += f" Verified {HORIZON}x as long: " + "; ".join(notes) + "."
        raise PlanInfeasible(message, result)
    return result


def first_cut(
    spec: PlanSpec, ev: Evaluator, pool: list[Design], steps: int, n_seeds: int, seed: int
) -> tuple[list[Design], Cut]:
    """The pool left by the fluid first cut, and what it did (:mod:`pipesim.plan.fluid`): the
    fastest proved designs are screened, and designs whose ceiling is below the floor they set are
    dropped, a seeded sample of those screened anyway to measure the cut's error. The ceilings
    have a bar of their own: 767,200 designs took a minute before the first run's bar."""
    memo: dict[Any, float] = {}
    shown = bool(getattr(ev, "progress", False))  # a stand-in evaluator may have no bar of its own
    with _bar(pool, "fluid cut", "design", shown) as each:
        cut = Cut({d: ceiling(spec, d, memo) for d in each})
    sure = sorted((d for d in pool if proved(spec, d)), key=lambda d: (-cut.ceilings[d], d))
    cut.anchors = sure[: max(spec.batch, 4)]
    if not cut.anchors:
        return pool, cut
    got = [e for e in ev.evaluate(cut.anchors, steps, n_seeds, desc="first cut") if e.feasible]
    if not got:
        return pool, cut
    cut.floor = FLOOR_SHARE * max(e.throughput for e in got)
    anchors = set(cut.anchors)
    cut.ruled_out = [d for d in pool if cut.ceilings[d] < cut.floor and d not in anchors]
    cut.audited = audit_sample(cut.ruled_out, np.random.default_rng(seed))
    for e in ev.evaluate(cut.audited, steps, n_seeds, desc="audit"):
        if e.throughput >= cut.floor or e.throughput > cut.ceilings[e.design] * (1 + 1e-9):
            cut.disagreed.append(e.design)
    dropped = set(cut.ruled_out) - set(cut.disagreed)
    return [d for d in pool if d not in dropped], cut


def _bar(items: Sequence[Design], desc: str, unit: str, enabled: bool) -> Any:
    """``items`` under a tqdm bar (the evaluator's, :mod:`pipesim.plan.evaluate`), where
    ``enabled`` (a terminal, not ``--quiet``): shown once a stage has taken half a second, so a
    small space's instant stage leaves no line. A context manager: it closes on the way out."""
    from tqdm import tqdm

    return tqdm(items, total=len(items), desc=desc, unit=unit, disable=not enabled, delay=0.5)


def _result(
    spec: PlanSpec,
    method: str,
    n_candidates: int,
    rungs: list[tuple[int, int]],
    full: Sequence[Evaluated],
    screened: Sequence[Evaluated],
) -> PlanResult:
    full = sorted(full, key=lambda e: (-e.throughput, e.design))
    feasible = [e for e in full if e.feasible]
    front = nondominated(feasible)
    best = feasible[0] if feasible else None
    result = PlanResult(spec, method, n_candidates, rungs, full, list(screened), feasible, front, best)
    result.baseline = next((e for e in full if e.design == spec.baseline), None)
    return result


def finished(ev: Evaluator, steps: int, n_seeds: int) -> list[Evaluated]:
    """The designs whose ``n_seeds`` runs of ``steps`` steps are all in ``ev``'s cache."""
    seeds = ev.seeds(n_seeds)
    designs = sorted({d for d, st, _ in ev.cache if st == steps})
    return [ev.result(d, steps, seeds) for d in designs if all((d, steps, s) in ev.cache for s in seeds)]


def plan(
    spec: PlanSpec,
    *,
    seed: int = 0,
    workers: int = 1,
    progress: bool = False,
    with_sensitivity: bool = True,
    executor: Executor | None = None,
    cache: DiskCache | None = None,
    announce: Callable[[int], None] | None = None,
) -> PlanResult:
    """Search ``spec``'s space (``workers`` processes; 1: in this process) and, optionally, the
    sensitivity of the recommendation. ``cache``: reuse and keep runs on disk
    (:class:`~pipesim.plan.cache.DiskCache`); ``announce``: told the space's size first
    (:func:`search`). Ctrl-C raises :class:`PlanInterrupted` with what finished."""
    check_spec(spec)
    check_seed(seed)
    integer("workers", workers, 1, max_workers())  # CPU-bound runs: 4 processes per CPU at most
    own = executor is None and workers > 1
    ex = ProcessPoolExecutor(max_workers=workers, initializer=ignore_sigint) if own else executor
    try:
        result = search(spec, seed=seed, executor=ex, progress=progress, cache=cache, announce=announce)
        if with_sensitivity:
            t0 = time.perf_counter()
            try:
                result.sensitivity = sensitivity(
                    result, seed=seed, executor=ex, progress=progress, cache=cache
                )
            except KeyboardInterrupt:
                result.partial = True  # the search is whole; the sensitivity is left out
                raise PlanInterrupted(result) from None
            finally:
                result.elapsed_s += time.perf_counter() - t0
        return result
    except KeyboardInterrupt:
        if own and isinstance(ex, ProcessPoolExecutor):
            stop_pool(ex)
        raise
    finally:
        if own and ex is not None:
            ex.shutdown()
