"""The simulated side of a calibration: the spec run at fitted values, and the decode overhead.

A log gives means per step; what the spec predicts for them comes from running it
(:func:`simulate`: the per-step means of a run in the log's column names). The one constant fitted
*through* the simulation is the engine's decode overhead (``iteration_overhead_s``, seconds per
decode iteration), by :func:`fit_overhead`: the design is run at the two overheads of
:data:`OVERHEAD_PROBE_S` and the logged mean is interpolated between the two simulated means. Every
decode iteration pays the overhead once, so generation is close to affine in it.

Its 95% interval maps an interval of the logged mean through the slope, and that interval holds
two noises: the logged mean's (a bootstrap over the steps, widened for a short log:
:func:`pipesim.calibrate.fit.small_sample`) and the simulation's, whose mean is one draw of as
many steps at the calibration's seed. The two add in variance: each end's distance from the logged
mean ``d`` becomes ``hypot(d, t95(N - 1) se)``, ``se`` the simulated mean's standard error over its
``N`` steps (:attr:`Sim.se`), taken linearly between the two probes to the fitted overhead, so no
run is added. Before, the simulation's noise was left out: at calibration seeds other than the
sample log's own run seed the true overhead fell outside, and a log whose ``gen`` barely varies got
an interval of about zero width (``tests/test_calnoise_overhead_interval.py``). The fitted
lengths' error, which moves the simulated mean too, is still not in it.

Which column it is fitted to:

* ``timing_s/gen`` where the log has it: the generation the overhead belongs to.
* else ``timing_s/step``, the whole step, which moves with the overhead by the same seconds
  where the step waits for its generation (a colocated or synchronous design); the simulated step
  is taken in the log's meaning, with or without the weight sync as the logged trainer times it
  (:mod:`pipesim.calibrate.steptime`). The overhead then
  holds every second of the step the model misses, training's and the remainder's included, and
  the note says so. Before, a log of step times alone calibrated nothing the step depends on:
  a run spec predicting 41 s for a logged 120 s was written back unchanged, with the held-out
  step off by 66%.

Neither is identified where the simulated column barely moves with the overhead: a trainer-bound
asynchronous design, whose ``gen`` is the trainer's wait and whose step is the trainer's.

The simulations are a calibration's time (a 2,000-step log: about 40 s on one core). Each says
what it runs through :func:`report`, to the callback :func:`reporting` installed (``pipesim
calibrate`` prints them on stderr; :func:`pipesim.calibrate.calibrate` takes ``progress=``); a
context variable, so the fitting functions keep their signatures and concurrent calibrations in
threads or tasks do not mix their lines.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipesim.calibrate.fit import Fitted, small_sample, t95
from pipesim.calibrate.log import TrainingLog
from pipesim.calibrate.steptime import includes_sync, simulated_step_s
from pipesim.compute.series import step_breakdown
from pipesim.plan.runspec import RunSpec, from_dict, run

__all__ = [
    "OVERHEAD_PROBE_S",
    "Sim",
    "fit_overhead",
    "report",
    "reporting",
    "reusing",
    "simulate",
    "with_values",
]

OVERHEAD_PROBE_S = (0.0, 0.01)
"""The two decode overheads (seconds per iteration) the simulation is run at to interpolate ``gen``."""
MIN_MOVE = 0.02
"""The least relative change of the simulated column between the two probes for the overhead to
count as identified."""
BOOTSTRAP = 200
"""Resamples of the logged steps behind the overhead's interval."""
REFINE_RUNS = 10
"""The most simulations spent refining the interpolated overhead where the column is not affine in it."""
REFINE_TOL = 0.005
"""The relative miss of the logged mean at which the refinement stops."""


_PROGRESS: ContextVar[Callable[[str], None] | None] = ContextVar("calibrate_progress", default=None)
_LAST: ContextVar[list[tuple[RunSpec, Any]] | None] = ContextVar("calibrate_last_run", default=None)


@contextlib.contextmanager
def reporting(progress: Callable[[str], None] | None) -> Iterator[None]:
    """Within the block, :func:`report` passes its lines to ``progress`` (None: nowhere)."""
    token = _PROGRESS.set(progress)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


@contextlib.contextmanager
def reusing() -> Iterator[None]:
    """Within the block, :func:`simulate` keeps its last run and runs it again only for another
    spec, overhead, length or seed (a calibration's held-out prediction is the overhead solver's
    last run: :func:`fit_overhead`'s ``horizon``). One run is kept, and dropped at the end."""
    token = _LAST.set([])
    try:
        yield
    finally:
        _LAST.reset(token)


def _run(rs: RunSpec, at: str) -> Any:
    """``run(rs)``, said as run ``at`` an overhead, or the last run of an equal spec (its plan,
    design, steps and seed) inside :func:`reusing` (nothing starts, so nothing is said)."""
    last = _LAST.get()
    if last and last[0][0] == rs:
        return last[0][1]
    report(f"simulating {rs.steps:,} steps at {at}")
    r = run(rs)
    if last is not None:
        last[:] = [(rs, r)]
    return r


def report(text: str) -> None:
    """Tell the installed progress callback (:func:`reporting`) what starts now."""
    progress = _PROGRESS.get()
    if progress is not None:
        progress(text)


def with_values(rs: RunSpec, values: dict[str, float]) -> RunSpec:
    """``rs`` with ``values`` as its ``[calibration]`` values (what a calibrated spec applies)."""
    data = copy.deepcopy(rs.data)
    data["calibration"] = {"values": dict(values)}
    return from_dict(data, rs.base)


@dataclass(frozen=True)
class Sim:
    """A simulated run's per-step means in the log's names (``sim["timing_s/gen"]``), and its
    per-step trained response mean and clip share (what the sigma's bias correction fits again);
    ``se``: the standard error of the ``gen`` and ``step`` means (the steps' sd over the root of
    their count, 0 for one step), the seed-to-seed noise of the simulation the decode overhead is
    read against (:func:`fit_overhead`)."""

    means: dict[str, float]
    length_mean: np.ndarray
    clip: np.ndarray
    se: dict[str, float] = dataclasses.field(default_factory=dict)

    def __getitem__(self, column: str) -> float:
        return self.means[column]


def simulate(
    rs: RunSpec,
    overhead: float | None,
    steps: int,
    seed: int,
    window: np.ndarray | None = None,
    holds_sync: bool = True,
    horizon: int | None = None,
) -> Sim:
    """Per-step means of a simulated run of ``rs`` (at ``overhead`` seconds per decode iteration;
    None: the spec's) in the log's names, over the simulated steps ``window`` (the trainer steps a
    log's rows cover, :func:`pipesim.calibrate.rows.trainer_steps`: a log's step ``s`` is the
    run's step ``s``; None: all ``steps``). Before, a log cut at the front (``--steps 6:``) was
    compared with the run's steps from 0, its asynchronous pipeline fill included: on a noiseless
    log of a 4 ms overhead the fit read 3.39 ms (4.11 uncut).
    ``timing_s/step`` in the log's meaning: with the step's weight sync where the log's step holds
    it (``holds_sync``), else without (:func:`pipesim.calibrate.steptime.simulated_step_s`).
    ``horizon``: run that many steps when more than ``steps`` (the means still over ``window``): a
    run's first steps do not depend on how many follow, so a later call for the longer run (the
    held-out steps') reuses it inside :func:`reusing`."""
    o = rs.iteration_overhead_s if overhead is None else overhead  # None: the spec's own
    at = "the engine's default decode overhead" if o is None else f"{o * 1e3:.3g} ms per decode iteration"
    total = max(steps, horizon or 0)
    r = _run(dataclasses.replace(rs, plan=rs.plan.with_(iteration_overhead_s=o), steps=total, seed=seed), at)
    keep = set(range(steps) if window is None else (int(x) for x in np.asarray(window).ravel()))
    br = step_breakdown(r.result)
    br = br[br["step"].isin(keep)]
    wl = rs.plan.workload
    prompt = float(wl.prompt) if isinstance(wl.prompt, int) else math.nan
    gen, whole = br["timing_s/gen"].to_numpy(float), np.asarray(simulated_step_s(br, holds_sync), float)
    out = {"timing_s/gen": float(gen.mean()), "timing_s/step": float(whole.mean())}
    se = {"timing_s/gen": _se(gen), "timing_s/step": _se(whole)}
    sync = br["timing_s/param_sync"].to_numpy()
    out["timing_s/param_sync"] = float(sync[sync > 0].mean()) if (sync > 0).any() else 0.0
    logged = [step for step, _, _ in r.trainer_log if step in keep]
    tokens = np.array([t for step, t, _ in r.trainer_log if step in keep], float)
    per_step = tokens / rs.plan.batch_size - prompt
    out["response_length/mean"] = float(per_step.mean())
    clip = r.result.trained.groupby("step")["truncated"].mean()
    return Sim(out, per_step, np.array([float(clip.get(s, 0.0)) for s in logged]), se)


def _se(x: np.ndarray) -> float:
    """The standard error of the mean of the steps ``x`` (0 for fewer than two)."""
    return float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else 0.0


def fit_overhead(
    log: TrainingLog,
    rs: RunSpec,
    sim0: Sim,
    steps: int,
    seed: int,
    rng: np.random.Generator,
    horizon: int | None = None,
    window: np.ndarray | None = None,
) -> tuple[Fitted | None, list[str]]:
    """The decode overhead ``log`` identifies for ``rs`` (its other values fitted already;
    ``sim0``: its simulation at the first probe, ``steps`` long, with the log's step meaning:
    :func:`pipesim.calibrate.steptime.includes_sync`), with the notes on how it was read; None,
    with why, where it is not identified (see the module). ``horizon``: the solver's runs, each of
    which may be the last, run that many steps (:func:`simulate`): the validation's held-out
    prediction at the fitted overhead is then the last of them, not one more run. ``window``: the
    simulated steps the log's rows cover (:func:`simulate`; None: all ``steps``)."""
    column = next((c for c in ("timing_s/gen", "timing_s/step") if log.has(c)), None)
    if column is None:
        return None, ["iteration_overhead_s: no timing_s/gen or timing_s/step column"]
    name = column.removeprefix("timing_s/")
    o0, o1 = OVERHEAD_PROBE_S
    holds = includes_sync(log, rs)
    sim1 = simulate(rs, o1, steps, seed, window=window, holds_sync=holds)
    g0, g1 = sim0[column], sim1[column]
    if g1 - g0 <= MIN_MOVE * max(g0, 1e-9):
        why = "the trainer's wait, not the engines' decode" if name == "gen" else "the trainer's"
        return None, [
            f"iteration_overhead_s: the simulated {name} barely moves with it in this design "
            f"({name} is {why})"
        ]
    notes = []
    if name == "step":
        notes.append(
            "iteration_overhead_s: fitted to timing_s/step (the log has no timing_s/gen): it holds "
            "every second of the step the model misses, training's and the remainder's included; a "
            "gen column would separate them"
        )
    seen = log.col(column)
    target = float(seen.mean())
    o, slope = _solve(rs, column, target, ((o0, g0), (o1, g1)), steps, seed, holds, horizon, window)
    boots = [seen[rng.integers(0, len(seen), len(seen))].mean() for _ in range(BOOTSTRAP)]
    lo_b, hi_b = np.percentile(boots, [2.5, 97.5])
    lo_g, hi_g = small_sample(target, float(lo_b), float(hi_b), len(seen))  # widened for a short log
    # the simulation's own noise: its mean is one draw at this seed (module docstring)
    n = steps if window is None else len(np.asarray(window).ravel())  # the simulated steps averaged
    sim_half = t95(max(n - 1, 1)) * _se_at(o, (o0, sim0.se.get(column, 0.0)), (o1, sim1.se.get(column, 0.0)))
    lo_g, hi_g = target - math.hypot(target - lo_g, sim_half), target + math.hypot(hi_g - target, sim_half)
    if o < 0:
        slow = "the roofline's decode is too slow here" if name == "gen" else "the model's step is too slow"
        notes.append(
            f"iteration_overhead_s: the logged {name} is {1 - target / g0:.0%} faster than the "
            f"model with no overhead at all ({slow}); set to 0"
        )
    fitted = Fitted(
        max(o, 0.0),
        max(o + (lo_g - target) * slope, 0.0),
        max(o + (hi_g - target) * slope, 0.0),
        f"simulated {name} at 0 and 10 ms per iteration, interpolated",
    )
    return fitted, notes


def _se_at(o: float, p0: tuple[float, float], p1: tuple[float, float]) -> float:
    """The simulated mean's standard error at overhead ``o``, linear between the probes'
    ``(overhead, se)`` (the steps' spread grows with the overhead, which every decode iteration
    pays), not extrapolated below the first probe nor below the smaller of the two."""
    (a, sa), (b, sb) = p0, p1
    w = max(o - a, 0.0) / (b - a)
    return max(sa + w * (sb - sa), min(sa, sb))


def _solve(
    rs: RunSpec,
    column: str,
    target: float,
    probes: tuple[tuple[float, float], ...],
    steps: int,
    seed: int,
    holds_sync: bool = True,
    horizon: int | None = None,
    window: np.ndarray | None = None,
) -> tuple[float, float]:
    """The overhead at which the simulated mean of ``column`` is ``target``, and the slope
    (seconds of overhead per second of the column) of the last bracket, which maps its interval.

    First the interpolation between the two ``probes`` (overhead, simulated mean): exact where the
    column is affine in the overhead (a synchronous step, a colocated ``gen``: the same decode
    iterations at every overhead). Where it is not (a design that moves from waiting for the
    trainer to waiting for generation as the overhead grows, so the step is a max of the two), the
    estimate is simulated and refined, the column being nondecreasing in the overhead, inside the
    bracket of the nearest simulated means on either side of ``target`` (:func:`_estimate`), until
    the simulated mean is within :data:`REFINE_TOL` of the logged one or :data:`REFINE_RUNS` runs
    are spent. On 20,000 drawn columns (a kink, a smoothed kink, a convex and a saturating curve)
    it met the tolerance every time, in 2 to 4 runs on average and 10 at most
    (``tests/test_calibrate_overhead.py`` draws the kink).
    A negative estimate (the logged mean below the model's with no overhead) is returned as it is,
    not refined."""
    points = list(probes)
    o, slope = _estimate(points, target, bisect=False)
    last_side = 0
    for _ in range(REFINE_RUNS):
        if o < 0 or slope <= 0 or any(p[0] == o for p in points):
            break
        got = simulate(rs, o, steps, seed, window=window, holds_sync=holds_sync, horizon=horizon)[column]
        if abs(got - target) <= REFINE_TOL * target:
            break
        points.append((o, got))
        side = 1 if got > target else -1
        o, slope = _estimate(points, target, bisect=side == last_side)
        last_side = side
    return o, slope


def _estimate(points: list[tuple[float, float]], target: float, bisect: bool) -> tuple[float, float]:
    """The next overhead from the simulated ``points`` (see :func:`_solve`), and the slope of the
    pair it came from (0 where their means are equal).

    Inside a bracket, a secant through the two nearest points above the target, where it falls
    inside the bracket: exact on a straight rising piece, which false position from a flat end
    never is (it creeps along the flat part; a secant through two points of the flat part points
    anywhere). Else bisection (``bisect``: the last two runs fell on the same side) or false
    position between the bracket's ends. Outside every simulated mean, a secant through the
    nearest two."""
    below = sorted((p for p in points if p[1] < target), key=lambda p: (p[1], p[0]))  # nearest last
    above = sorted((p for p in points if p[1] >= target), key=lambda p: (p[1], p[0]))  # nearest first
    if not below or not above:  # outside every simulated mean: a secant through the two nearest
        (a, fa), (b, fb) = sorted(sorted(points, key=lambda p: abs(p[1] - target))[:2])
        return (a, 0.0) if fb == fa else (a + (target - fa) * (b - a) / (fb - fa), (b - a) / (fb - fa))
    (a, fa), (b, fb) = below[-1], above[0]
    if len(above) > 1 and above[1][1] > above[0][1]:
        (c, fc), (d, fd) = above[:2]
        x = c + (target - fc) * (d - c) / (fd - fc)
        if a < x < b:
            return x, (d - c) / (fd - fc)
    slope = (b - a) / (fb - fa)
    return (0.5 * (a + b) if bisect else a + (target - fa) * slope), slope
