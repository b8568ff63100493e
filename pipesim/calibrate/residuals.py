"""The trainer's phases on held-out steps: what a calibration's validation reports for them.

:func:`pipesim.calibrate.calibrate` holds out the last quarter of a log, fits the rest, and
predicts the held-out steps. The simulated means (``gen``, ``step``, ``param_sync``, the response
mean) come from a run of the fitted spec; the trainer's phases need no simulation: each held-out
step's seconds follow from its own tokens through the fitted profile
(:func:`~pipesim.compute.phases.phase_times_s`), so they are compared step by step. Apart from
:mod:`pipesim.calibrate.trainer` because it judges a fit rather than making one.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pipesim.calibrate.fit import Fitted
from pipesim.calibrate.frame import check_fitted
from pipesim.calibrate.log import TrainingLog
from pipesim.calibrate.trainer import TRAINER_PHASES, config, fitted_profile, remainder, row_members, tokens
from pipesim.compute.phases import PHASES, phase_times_s
from pipesim.plan.runspec import RunSpec

__all__ = ["trainer_residuals"]


def trainer_residuals(
    rest: TrainingLog, rs: RunSpec, values: dict[str, Fitted]
) -> dict[str, dict[str, float]]:
    """``(logged - predicted) / logged`` of each trainer phase on the held-out steps ``rest``, step
    by step from its tokens, and of their sum (a phase logged as 0 s at some step has none:
    :func:`~pipesim.calibrate.log.read_log` leaves no such column)."""
    check_fitted(values)
    t = tokens(rest, rs)
    phases = [c for c in TRAINER_PHASES if rest.has(c) and bool((rest.col(c) > 0).all())]
    if t is None or not phases:
        return {}
    prof = fitted_profile(rs, values)
    cfg = config(rs, prof)
    ref_cfg = dataclasses.replace(cfg, reference_model=True)
    batch = rs.plan.batch_size
    pred = [  # each row's mean over its trainer steps (a row per step: the step)
        {p: float(np.mean([phase_times_s(ref_cfg, x, batch, s)[p] for x, s in row])) for p in PHASES}
        for row in row_members(rs, t, steps=rest.steps, per_row=rest.per_row)
    ]
    out: dict[str, dict[str, float]] = {}
    total_seen, total_pred = np.zeros(len(rest)), np.zeros(len(rest))
    for c in phases:
        seen = rest.col(c)
        p = np.array([d[c.removeprefix("timing_s/")] for d in pred])
        total_seen, total_pred = total_seen + seen, total_pred + p
        r = (seen - p) / seen
        out[c] = {"mean": float(r.mean()), "abs_mean": float(np.abs(r).mean())}
    name = "trainer (" + " + ".join(p.removeprefix("timing_s/") for p in phases) + ")"
    r = (total_seen - total_pred) / total_seen
    out[name] = {"mean": float(r.mean()), "abs_mean": float(np.abs(r).mean())}
    rem = remainder(rest, rs)
    if rem is not None and rem.mean() > 0:
        p = np.array([d["remainder"] for d in pred])
        out["remainder"] = {"mean": float((rem.mean() - p.mean()) / rem.mean())}
    return out
