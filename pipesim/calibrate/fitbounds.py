"""The intervals of the trainer's fit (:func:`pipesim.calibrate.trainer.fit_trainer_profile`).

* :func:`phase_weights`: the second pass of a feasible weighted least squares, ``1 / variance``
  of each phase's residuals under a first fit;
* :func:`widen`: the fit's normal intervals widened to Student's t, each constant at the fewest
  residual degrees of freedom of the phases that hold it (:func:`phase_dof`): a phase's noise is
  estimated from its own residuals only (the phases' noise differs, which is why they are
  weighted), so ``update_actor``'s constants are no surer than its own steps allow. Before, every
  constant took the pooled count (all observations less all constants): on 3- to 5-step sample
  logs the efficiencies' intervals held the true constant in 60-75% of 40 seeds for a stated 95%.
  A phase with no degrees of freedom left (as many steps as constants it holds) leaves its
  constants unbounded (``-inf, inf``, cut to their range by the caller), with a note naming the
  steps needed (:func:`unbounded_note`);
* :func:`unfloored` and :func:`hull`: where a fixed cost was fitted below 0 and floored at 0, the
  refit's intervals hold only given the floor; the fit without it
  (:func:`pipesim.compute.phasefit.solve_unbounded`) says how far the data leave the others, and
  each interval is widened to cover it too, within the constant's range.
"""

from __future__ import annotations

import math

import numpy as np

from pipesim.calibrate.fit import t95
from pipesim.compute.phasefit import PhaseObservation, ProfileFit, predictions_s, solve_unbounded
from pipesim.compute.phases import FrameworkProfile

__all__ = ["hull", "phase_dof", "phase_weights", "unbounded_note", "unfloored", "widen"]

_TOUCHES = {
    "update_actor": ("fwd_bwd_efficiency", "micro_batch_s", "optimizer_step_s"),
    "old_log_prob": ("fwd_efficiency", "micro_batch_s"),
    "ref": ("fwd_efficiency", "micro_batch_s"),
    "remainder": ("step_s", "sample_s"),
}


def phase_dof(fitted: tuple[str, ...], obs: list[tuple[PhaseObservation, ...]]) -> dict[str, int]:
    """Each phase's residual degrees of freedom: its observations less the ``fitted`` constants
    its rows hold (:data:`_TOUCHES`)."""
    count: dict[str, int] = {}
    for g in obs:  # a row: the mean of its trainer steps (one, for a row per step)
        count[g[0].phase] = count.get(g[0].phase, 0) + 1
    return {p: n - sum(k in fitted for k in _TOUCHES[p]) for p, n in count.items()}


def constant_dof(k: str, dof: dict[str, int]) -> int:
    """The degrees of freedom of constant ``k``'s interval: the fewest of the phases that hold it
    (Satterthwaite's count for a mix of the phases' variances is never below that)."""
    return min((d for p, d in dof.items() if k in _TOUCHES[p]), default=0)


def phase_weights(fit: ProfileFit, obs: list[tuple[PhaseObservation, ...]]) -> list[float] | None:
    """``1 / variance`` of each phase's residuals under a first fit (the second pass of a feasible
    weighted least squares: the phases' noise differs, ``update_actor``'s seconds being the
    longest), each phase's variance over its own degrees of freedom (:func:`phase_dof`); None when
    a phase has none left or every residual is 0."""
    resid: dict[str, list[float]] = {}
    for g, predicted in zip(obs, predictions_s(obs, fit.profile), strict=True):
        resid.setdefault(g[0].phase, []).append(g[0].seconds - predicted)
    dof = phase_dof(fit.fitted, obs)
    if min(dof.values()) < 1:
        return None
    var = {phase: float(np.sum(np.square(r))) / dof[phase] for phase, r in resid.items()}
    if min(var.values()) <= 0.0:
        return None
    return [1.0 / var[g[0].phase] for g in obs]


def _t_scale(k: str, dof: dict[str, int]) -> float:
    """How far Student's t at ``k``'s degrees of freedom widens a normal 95% interval (inf: none left)."""
    return t95(constant_dof(k, dof)) / t95(10**6)


def unbounded_note(fitted: tuple[str, ...], obs: list[tuple[PhaseObservation, ...]]) -> str | None:
    """A note naming the phases whose noise the log's steps cannot estimate (no degrees of freedom
    left: :func:`widen` leaves their constants unbounded) and the steps that would; None if none."""
    dof = phase_dof(fitted, obs)
    short = {p: d for p, d in dof.items() if d < 1}
    if not short:
        return None
    rows = sum(1 for g in obs if g[0].phase in short) // len(short)
    need = rows + 1 - min(short.values())  # one degree of freedom at least
    names = ", ".join(sorted(k for k in fitted if constant_dof(k, dof) < 1))
    return (
        f"trainer: {' and '.join(sorted(short))}: as many fitted constants as the log has steps "
        f"({rows}), so the noise cannot be estimated: {names} unbounded (95% [0, inf]); at least "
        f"{need} steps bound them"
    )


def widen(fit: ProfileFit, obs: list[tuple[PhaseObservation, ...]]) -> dict[str, tuple[float, float]]:
    """``fit``'s normal intervals widened to Student's t, each constant at the fewest degrees of
    freedom of the phases that hold it (module docstring; ``(-inf, inf)`` where a phase has none);
    an efficiency's on its reciprocal, as ``fit_profile`` gives it."""
    dof = phase_dof(fit.fitted, obs)
    out = {}
    for k in fit.fitted:
        scale = _t_scale(k, dof)
        lo, hi = fit.intervals[k]
        v = getattr(fit.profile, k)
        if not math.isfinite(scale):
            out[k] = (0.0, math.inf) if k.endswith("efficiency") else (-math.inf, math.inf)
        elif k.endswith("efficiency"):  # the interval of 1 / v, mapped back
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
        vals, ivs, _ = solve_unbounded(prof, obs, sorted(fixed), weights=phase_weights(fit, obs))
    except ValueError:
        return {}
    dof = phase_dof(tuple(ivs), obs)
    out = {}
    for k, (lo, hi) in ivs.items():
        v, scale = vals[k], _t_scale(k, dof)
        if not math.isfinite(scale):
            out[k] = (-math.inf, math.inf)
        else:
            out[k] = (v - (v - lo) * scale, v + (hi - v) * scale) if math.isfinite(lo + hi) else (lo, hi)
    return out


def hull(k: str, fitted: tuple[float, float], loose: tuple[float, float] | None) -> tuple[float, float]:
    """``fitted`` widened to hold ``loose`` too, within the constant's range (an efficiency in
    [0, 1], a fixed cost at least 0). An open end of ``loose`` (an efficiency's ``inf``: its
    reciprocal's interval reaches 0) widens to the range's bound; only a NaN end (no estimate) is
    skipped. Before, a ``loose`` with any end not finite was dropped whole: on 5-step sample logs
    whose fixed costs were floored, ``fwd_efficiency`` kept the floor's narrow interval
    ([0.177, 0.186] for a true 0.25)."""
    lo, hi = fitted
    if loose is None:
        return lo, hi
    lo = lo if math.isnan(loose[0]) else min(lo, loose[0])
    hi = hi if math.isnan(loose[1]) else max(hi, loose[1])
    if k.endswith("efficiency"):
        return max(lo, 0.0), min(hi, 1.0)
    return max(lo, 0.0), hi
