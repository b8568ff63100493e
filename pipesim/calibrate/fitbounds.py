"""The intervals of the trainer's fit (:func:`pipesim.calibrate.trainer.fit_trainer_profile`).

* :func:`phase_weights`: the second pass of a feasible weighted least squares, ``1 / variance``
  of each phase's residuals under a first fit;
* :func:`widen`: the fit's normal intervals widened to Student's t for the log's few steps;
* :func:`unfloored` and :func:`hull`: where a fixed cost was fitted below 0 and floored at 0, the
  refit's intervals hold only given the floor; the fit without it
  (:func:`pipesim.compute.phasefit.solve_unbounded`) says how far the data leave the others, and
  each interval is widened to cover it too, within the constant's range.
"""

from __future__ import annotations

import math

import numpy as np

from pipesim.calibrate.fit import t95
from pipesim.compute.phasefit import PhaseObservation, ProfileFit, predicted_s, solve_unbounded
from pipesim.compute.phases import FrameworkProfile

__all__ = ["hull", "phase_weights", "unfloored", "widen"]

_TOUCHES = {
    "update_actor": ("fwd_bwd_efficiency", "micro_batch_s", "optimizer_step_s"),
    "old_log_prob": ("fwd_efficiency", "micro_batch_s"),
    "ref": ("fwd_efficiency", "micro_batch_s"),
    "remainder": ("step_s", "sample_s"),
}


def phase_weights(fit: ProfileFit, obs: list[tuple[PhaseObservation, ...]]) -> list[float] | None:
    """``1 / variance`` of each phase's residuals under a first fit (the second pass of a feasible
    weighted least squares: the phases' noise differs, ``update_actor``'s seconds being the
    longest), each phase's variance over its own degrees of freedom (its observations less the
    fitted constants its rows hold); None when a phase has none left or every residual is 0."""
    resid: dict[str, list[float]] = {}
    for g in obs:  # a row: the mean of its trainer steps (one, for a row per step)
        o = g[0]
        resid.setdefault(o.phase, []).append(o.seconds - predicted_s(g, fit.profile))
    var = {}
    for phase, r in resid.items():
        dof = len(r) - sum(k in fit.fitted for k in _TOUCHES[phase])
        if dof < 1:
            return None
        var[phase] = float(np.sum(np.square(r))) / dof
    if min(var.values()) <= 0.0:
        return None
    return [1.0 / var[g[0].phase] for g in obs]


def widen(fit: ProfileFit, n: int) -> dict[str, tuple[float, float]]:
    """``fit``'s normal intervals widened to Student's t with ``n - fitted`` degrees of freedom
    (a short log's few steps); an efficiency's on its reciprocal, as ``fit_profile`` gives it."""
    scale = t95(n - len(fit.fitted)) / t95(10**6)
    out = {}
    for k in fit.fitted:
        lo, hi = fit.intervals[k]
        v = getattr(fit.profile, k)
        if k.endswith("efficiency"):  # the interval of 1 / v, mapped back
            r_lo = 1.0 / hi if hi > 0 and math.isfinite(hi) else 0.0
            r_hi = 1.0 / lo if lo > 0 else math.inf
            half = scale * max(1.0 / v - r_lo, r_hi - 1.0 / v)
            a, b = 1.0 / v - half, 1.0 / v + half
            out[k] = (1.0 / b, 1.0 / a if a > 0 else math.inf)
        else:
            half = scale * (hi - lo) / 2.0
            out[k] = (v - half, v + half)
    return out


def unfloored(
    prof: FrameworkProfile, obs: list[tuple[PhaseObservation, ...]], fixed: set[str], fit: ProfileFit
) -> dict[str, tuple[float, float]]:
    """The 95% intervals of the fit without the floors at 0 (:func:`pipesim.compute.phasefit.
    solve_unbounded`, weighted as the fit was), widened to Student's t as :func:`widen` widens
    the fit's: each end moved away from the value by the same factor. Empty where it cannot be
    solved."""
    try:
        vals, ivs, n_free = solve_unbounded(prof, obs, sorted(fixed), weights=phase_weights(fit, obs))
    except ValueError:
        return {}
    scale = t95(len(obs) - n_free) / t95(10**6)
    out = {}
    for k, (lo, hi) in ivs.items():
        v = vals[k]
        out[k] = (v - (v - lo) * scale, v + (hi - v) * scale) if math.isfinite(lo + hi) else (lo, hi)
    return out


def hull(k: str, fitted: tuple[float, float], loose: tuple[float, float] | None) -> tuple[float, float]:
    """``fitted`` widened to hold ``loose`` too, within the constant's range (an efficiency in
    (0, 1], a fixed cost at least 0)."""
    lo, hi = fitted
    if loose is None or not all(math.isfinite(x) for x in loose):
        return lo, hi
    lo, hi = min(lo, loose[0]), max(hi, loose[1])
    if k.endswith("efficiency"):
        return (max(lo, 0.0) if lo > 0 else fitted[0]), min(hi, 1.0)
    return max(lo, 0.0), hi
