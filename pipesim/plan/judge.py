"""Constraints judged without censoring: what a run of s steps says about a run of any length.

A short run censors staleness twice. Its maximum cannot exceed ``s - 1`` (a sample trained at
step k is at most k versions old), and its *mean* is low too: the first steps train samples that
could not be stale yet, so a design with eta = 2 averages 0.97 over 3 steps and 1.81 over 12 (the
agent spec of ``docs/plan.md``). Judging either from a short screen calls designs feasible that are
not.
So each constraint of a design is one of

* ``met`` -- proved at any length, by the bound the design's own policies declare
  (``staleness_bound``: the count throttle with ``drain`` bounds staleness by eta; :func:`bound`),
  or, at the full rung, estimated within the limit from the run's settled part (below);
* ``violated`` -- the run already shows it broken: a maximum above the limit (the maximum of a
  longer run can only be larger), a whole-run mean above it, or a settled mean above it by more
  than its error;
* ``open`` -- the run cannot tell yet. At the full rung a settled mean above the limit by no more
  than its error is ``open``, and verification decides it (:func:`pipesim.plan.verify.mean_open`:
  the longer run's estimate is final, ``violated`` above the limit by any margin). It was
  ``violated``: on a walkthrough spec (Qwen3-8B on 32 H100s as an 8-turn agent, 12 steps,
  limits 2 and 4) split 16:16 TP 1 eta 2 partial settled at 2.007 with an error of 0.033, its
  48-step runs settle at 1.998 (later halves 1.996-2.000), and the plan picked eta 1 at 63% of
  its 6,361 samples/h; it now holds at 48 steps and is picked.

**The mean.** The estimate is the mean staleness of the samples trained in the later half of
the run (``staleness_late_mean``), raised by the rise still under way
(``staleness_slope`` x a quarter of the run, when the per-step means still climb), and capped by
the declared bound. Its error is the spread of the per-step means in that half
(``staleness_late_se``) plus the rise. A run shorter than the design's warm-up --
``(eta + 1) x sync_every + 2`` steps, the admission window in which staleness builds up -- is
never ``met`` by the estimate, only by a bound. A longer run's whole-run mean includes its own
warm-up, so it is at most the settled estimate when staleness rises to a plateau (the case here).

**The maximum.** Without a bound, a maximum at the ceiling of the full run (``steps - 1``) may
grow with the run (stragglers that keep ageing): when ``HORIZON`` times it passes the limit it is
``open``, never ``violated`` -- the run shows no sample past the limit, and verification
(``HORIZON`` x as long) decides. It was ``violated``: on a walkthrough spec (``qwen3-0.6b`` on 8
H100s, 8 steps, limits 1.5 and 20) colocated TP 1 eta 1 partial over-sampled showed 7 (the
ceiling) and reaches 12-13 at 32-128 steps, and the plan picked a design at half its 215,696
samples/h. Otherwise the tail of the per-sample staleness is taken as geometric, with the
ratio of the counts at the run's maximum m and at m - 1; the chance of a sample at m + 1 is that
tail continued, but at most half a sample in all the samples the runs trained (they saw none
there); the expected number of samples beyond the limit in a run :data:`HORIZON` times longer
must stay below one half to be ``met``. Above that (a maximum at or near the limit with many
samples there) it is ``open``, not ``violated``: the full rung's runs meet the limit and only the
tail doubts it, so verification decides (:func:`pipesim.plan.verify.tail_open`: run
``HORIZON`` x as long on twice the seeds). Refused on the tail alone, designs holding a maximum
of exactly 3 for 384 steps were passed over under a limit of 3 (the README's plan spec: 50,243
or 23,852 samples/h recommended for 64,645; the response cap bounds the syncs a sample outlives,
which a geometric tail does not know).

**Promotion.** :func:`p_met` turns an open constraint into a probability (a normal tail of the
margin over the error), and the search promotes by throughput x that probability, so the budget
goes where the answer can still change. A short run's maximum at its ceiling is *censored*: every
sample staler than ``steps - 1`` reads as ``steps - 1``. Its estimate for the full run is the
growing straggler's (``(full - 1) x top / (steps - 1)``), but a normal tail around that would give
every censored design a chance near 0 -- every stale design on a 3-step screen -- and promotion
could not tell a thin tail from a thick one. So its chance is the Poisson chance of no sample
beyond the limit under the geometric tail above (:func:`exceed_expected` over ``HORIZON`` full
runs): on the README's plan spec an eta-0 over-sampled partial design (17 samples at the ceiling,
191 one below) reads 0.94, an eta-1 partial one (117 and 432) 0.55 and an eta-3 one (487 and 512)
about 0.001. Before this, search seeds 1-4 of that plan never ran the first kind in full and
recommended a design at 37% of the throughput seed 0 found. A tail needs two stale levels: a
maximum of 1 (a 2-step screen) compares the stale samples with the fresh ones, which says nothing
of stragglers, so it keeps the normal tail (on ``tests/test_plan.py``'s spec, whose eta-1 partial
designs reach the ceiling of every run, the 2-step counts would read 0.94).
"""

from __future__ import annotations

import functools
import math
from typing import Any

from pipesim.plan.build import scenario
from pipesim.plan.checks import HORIZON
from pipesim.plan.space import Constraints, Design, PlanSpec

__all__ = ["HORIZON", "bound", "judge", "mean_estimate", "p_met", "warmup_steps"]


MET, VIOLATED, OPEN = "met", "violated", "open"


def bound(spec: PlanSpec, d: Design) -> int | None:
    """The staleness bound ``d``'s own policies declare at any run length (None: none): the
    smallest of the weight update's and the batching's ``staleness_bound``. Its policies do not
    depend on the split or TP (:func:`~pipesim.plan.build.scenario`), so it is computed once per
    eta, update, sync interval and over-sampling: a plan on 8,192 GPUs asks it for 982,240
    designs before its first run, 37 s built one scenario each."""
    return _policy_bound(spec, d.eta, d.update, d.sync_every, d.oversample)


@functools.lru_cache(maxsize=4096)
def _policy_bound(spec: PlanSpec, eta: int, update: str, sync_every: int, oversample: float) -> int | None:
    d = Design(trainer_gpus=0, tp=1, eta=eta, update=update, sync_every=sync_every, oversample=oversample)
    sc = scenario(spec, d, spec.steps)
    found = []
    for pol in (sc.weight_update, sc.batching):
        declared: Any = getattr(pol, "staleness_bound", None)
        if callable(declared):
            b = declared(sc)
            if b is not None:
                found.append(int(b))
    return min(found) if found else None


def warmup_steps(d: Design) -> int:
    """Steps before a design's staleness can have built up: its admission window, ``(eta + 1)``
    syncs of ``sync_every`` steps, plus two."""
    return (d.eta + 1) * d.sync_every + 2


def mean_estimate(m: dict[str, float], cap: int | None, steps: int) -> tuple[float, float]:
    """(estimate, error) of the long-run mean staleness from the metrics of runs of ``steps``
    steps (module docstring)."""
    late = float(m.get("staleness_late_mean", m["staleness_mean"]))
    slope = max(float(m.get("staleness_slope", 0.0)), 0.0)
    rise = slope * steps / 4
    est = late + rise
    if cap is not None:
        est = min(est, float(cap))
    return est, float(m.get("staleness_late_se", 0.0)) + rise


def exceed_expected(m: dict[str, float], limit: float, horizon: float) -> float:
    """Expected count of samples staler than ``limit`` in a run ``horizon`` times as long, from
    a geometric tail fitted to the counts at the run's maximum and one below."""
    top = float(m["staleness_max"])
    if top > limit:
        return math.inf
    n = max(float(m.get("episodes_trained_run", 0.0)), 1.0)
    at, below = float(m.get("at_max", 0.0)), float(m.get("below_max", 0.0))
    if top == 0 and at >= n:
        return 0.0  # every sample fresh
    ratio = min((at + 0.5) / (below + 1.0), 0.95)
    # the chance of one level above the max: the tail continued, but no more than the runs
    # themselves allow (they saw none there among their n x seeds samples: about half a sample)
    seen = n * max(float(m.get("seeds", 1.0)), 1.0)
    p_next = min(at / n * ratio, 0.5 / seen)
    k = math.floor(limit) - top  # levels from the one above the max to the first beyond the limit
    return n * horizon * p_next * ratio**k


def judge(spec: PlanSpec, d: Design, steps: int, m: dict[str, float]) -> dict[str, tuple[str, float]]:
    """Each staleness or discard constraint of ``spec`` -> (state, estimate) for design ``d``'s
    runs of ``steps`` steps with aggregated metrics ``m`` (``met``, ``violated`` or ``open``)."""
    c: Constraints = spec.constraints
    out: dict[str, tuple[str, float]] = {}
    if m.get("failed"):
        names = (
            "mean_staleness",
            "max_staleness",
            "discarded_share",
            "offpolicy_token_share",
            "cost_per_mtok",
        )
        return {n: (VIOLATED, math.inf) for n in names if getattr(c, n) is not None}
    b = bound(spec, d)
    full = steps >= spec.steps
    settled = steps >= warmup_steps(d)
    if c.mean_staleness is not None:
        lim = float(c.mean_staleness)
        est, err = mean_estimate(m, b, steps)
        if b is not None and b <= lim:
            out["mean_staleness"] = (MET, est)
        elif float(m["staleness_mean"]) > lim + 1e-12 and (full or est - err > lim):
            out["mean_staleness"] = (VIOLATED, est)
        elif full and settled and est <= lim + 1e-12:
            out["mean_staleness"] = (MET, est)
        elif full and settled and est - err <= lim:  # above by no more than its error
            out["mean_staleness"] = (OPEN, est)  # verification decides (module docstring)
        elif full or (settled and est - err > lim):
            out["mean_staleness"] = (VIOLATED if est > lim else OPEN, est)
        else:
            out["mean_staleness"] = (OPEN, est)
    if c.max_staleness is not None:
        lim = float(c.max_staleness)
        top = float(m["staleness_max"])
        if b is not None and b <= lim:
            out["max_staleness"] = (MET, float(b))
        elif top > lim + 1e-12:
            out["max_staleness"] = (VIOLATED, top)
        elif full:
            # at the ceiling a run can show (steps - 1), an unbounded max may grow with the run:
            # not shown broken (it is within the limit), so open, and verification decides
            growing = _censored(m, steps) and top * HORIZON > lim
            beyond = exceed_expected(m, lim, HORIZON)
            out["max_staleness"] = (OPEN if growing or beyond >= 0.5 else MET, top)
        else:  # at the ceiling a short run can show, an unbounded max may grow one a step
            ceiling = _censored(m, steps)
            out["max_staleness"] = (OPEN, (spec.steps - 1) * top / max(steps - 1, 1) if ceiling else top)
    for share in ("discarded_share", "offpolicy_token_share"):
        limit = getattr(c, share)
        if limit is not None:
            out[share] = _share_state(float(m[share]), float(limit), full)
    if c.cost_per_mtok is not None and "cost_per_mtok" in m:
        lim, v = float(c.cost_per_mtok), float(m["cost_per_mtok"])
        out["cost_per_mtok"] = (MET if v <= lim else VIOLATED if full or v > 1.5 * lim else OPEN, v)
    return out


def _share_state(v: float, lim: float, full: bool) -> tuple[str, float]:
    """A share's state: met or violated on a full run; on a screen, violated past 1.5 x the limit,
    open past the limit, met below it."""
    if full:
        return (MET if v <= lim + 1e-12 else VIOLATED, v)
    return (VIOLATED, v) if v > 1.5 * lim + 1e-9 else (OPEN if v > lim else MET, v)


def _censored(m: dict[str, float], steps: int) -> bool:
    """Whether the run's maximum staleness sits at the ceiling its length allows (``steps - 1``)."""
    top = float(m["staleness_max"])
    return top >= steps - 1 and top > 0


def p_met(spec: PlanSpec, d: Design, steps: int, m: dict[str, float]) -> float:
    """The chance that every constraint holds at full length, from this rung's judgement: 1 for
    ``met``, 0 for ``violated``, a normal tail of the margin over the error for ``open``."""
    c = spec.constraints
    p = 1.0
    for name, (state, est) in judge(spec, d, steps, m).items():
        if state == MET:
            continue
        if state == VIOLATED:
            return 0.0
        lim = float(getattr(c, name))
        if name == "mean_staleness":
            _, err = mean_estimate(m, bound(spec, d), steps)
            scale = max(err, 0.1 * max(lim, 0.5))
        elif name == "max_staleness":
            if _censored(m, steps) and float(m["staleness_max"]) >= 2:  # the tail decides (module docstring)
                p *= math.exp(-exceed_expected(m, lim, HORIZON * spec.steps / steps))
                continue
            scale = 1.0  # one version: the next level of the tail
        else:  # a share or a price: a quarter of the limit
            scale = max(0.25 * lim, 0.01)
        p *= 0.5 * math.erfc(-(lim - est) / (scale * math.sqrt(2)))
    return p
