"""The trainer from a log without its phases: one scale on the profile, from the step less ``gen``.

Many logs, and most published tables, give a step's seconds and its generation (``timing_s/step``,
``timing_s/gen``) but not the trainer's phases. What the trainer took is then the difference:
``step - gen - offload/reload``, less ``param_sync`` where the log's step holds the sync (the
remainder's definition, :mod:`~pipesim.calibrate.trainer`; verl's colocated trainer times the sync
inside its step, its fully-async trainer apart: :func:`pipesim.calibrate.steptime.trainer_span_s`),
which is every phase of the spec's trainer plus its remainder. One number per step
identifies one constant, so the profile is scaled as a whole, its split between phases kept: at
scale ``k`` every efficiency is divided by ``k`` and every fixed cost multiplied by it (a trainer
``k`` times slower at everything it computes), while the trainer's own communication, which the
links time, stays. Each step's trainer seconds are then affine in ``k``, ``a k + c`` (``c`` the
communication), evaluated in closed form (:func:`~pipesim.compute.phases.phase_times_s` at ``k`` =
1 and 2), and ``k`` is their least squares, with a Student's t interval from the residuals.

It is not identified, and the profile is kept, where the log has fewer than two such steps, where
the differences are not above the communication (``k <= 0``), or where ``k`` would put an
efficiency above 1 (the logged trainer faster than the GPUs' peak). A log that has a phase column
fits the profile's constants one by one instead (:func:`~pipesim.calibrate.trainer.fit_trainer_profile`).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from pipesim.calibrate.fit import Fitted, t95
from pipesim.calibrate.log import TrainingLog
from pipesim.calibrate.steptime import timed_sync, trainer_span_s
from pipesim.compute.phases import FrameworkProfile, phase_times_s
from pipesim.compute.trainer import TrainerConfig

__all__ = ["EFFICIENCIES", "FIXED_COSTS", "SCALE_METHOD", "fit_trainer_scale", "scaled"]

EFFICIENCIES = ("fwd_bwd_efficiency", "fwd_efficiency")
"""The profile's efficiencies, divided by the scale."""
FIXED_COSTS = ("micro_batch_s", "optimizer_step_s", "step_s", "sample_s")
"""The profile's fixed costs, multiplied by the scale."""
SCALE_METHOD = "one scale on the profile, from step less gen (fit_trainer_scale)"
"""The ``method`` of every constant this fit writes: :mod:`pipesim.calibrate.predict` draws them together."""
_PHASES = ("old_log_prob", "ref", "update_actor", "remainder")


GIVEN = (
    "a prediction's intervals (--intervals) hold given the profile's constants for the phases the "
    "log does not have, which nothing here measures: on another split they can miss by more than "
    "their width (on such logs the 4:4 split's 95% ranges held the true run in 0-1 of 6; docs/calibrate.md)"
)
"""What a trainer calibrated without phase columns says about its intervals (:mod:`pipesim.calibrate.predict`
prints the same under the ranges)."""


def scaled(profile: FrameworkProfile, k: float) -> FrameworkProfile:
    """``profile`` ``k`` times slower at everything it computes (see the module)."""
    eff = {e: getattr(profile, e) / k for e in EFFICIENCIES}
    fixed = {f: getattr(profile, f) * k for f in FIXED_COSTS}
    return dataclasses.replace(profile, **eff, **fixed)


def _trainer_s(
    cfg: TrainerConfig, t: np.ndarray, batch: int, spreads: list, members: list | None = None
) -> np.ndarray:
    """Each step's trainer seconds under ``cfg`` (its phases the spec runs, and the remainder); with
    ``members`` (each row's trainer steps, :func:`pipesim.calibrate.trainer.row_members`), each row's
    mean over its steps."""
    keep = [p for p in _PHASES if p != "ref" or cfg.reference_model]
    keep = [p for p in keep if p != "old_log_prob" or cfg.recompute_old_logp]
    rows = members if members is not None else [[(float(x), s)] for x, s in zip(t, spreads, strict=True)]
    return np.array(
        [np.mean([sum(phase_times_s(cfg, x, batch, s)[p] for p in keep) for x, s in row]) for row in rows],
        dtype=float,
    )


def fit_trainer_scale(
    log: TrainingLog,
    cfg: TrainerConfig,
    t: np.ndarray,
    batch: int,
    spreads: list,
    switch_s: float,
    holds_sync: bool = True,
    members: list | None = None,
    spec_sync: np.ndarray | None = None,
) -> tuple[dict[str, Fitted], list[str]]:
    """The profile's constants scaled to the log's ``step - gen`` (see the module), with 95%
    intervals, and the note that says how; or nothing and why. ``cfg``: the spec's trainer;
    ``t``: each step's tokens; ``spreads``: each step's tokens per sample as the ranks hold them
    (:func:`~pipesim.calibrate.trainer.spread`); ``switch_s``: a colocated engine's offload and
    reload per step; ``holds_sync``: whether the log's step holds the weight sync
    (:func:`pipesim.calibrate.steptime.includes_sync`: verl's colocated trainer's does, its
    fully-async trainer's does not), so that ``param_sync`` is subtracted only then; ``members``:
    each row's trainer steps where a row covers several (:func:`~pipesim.calibrate.trainer.row_members`:
    the row's seconds are their mean; ``spreads`` is then not read)."""
    seen = trainer_span_s(log, holds_sync, switch_s, spec_sync)
    if seen is None:
        return {}, [
            f"trainer: no timing_s/update_actor, old_log_prob or ref column; the profile kept; {GIVEN}"
        ]
    prof = cfg.framework
    one = _trainer_s(cfg, t, batch, spreads, members)
    a = _trainer_s(dataclasses.replace(cfg, profile=scaled(prof, 2.0)), t, batch, spreads, members) - one
    c = one - a
    why = ""
    if len(seen) < 2 or float(a @ a) <= 0:
        why = "fewer than two steps"
    else:
        k = float(a @ (seen - c)) / float(a @ a)
        peak = max(getattr(prof, e) for e in EFFICIENCIES)
        if k <= 0:
            why = "the logged step less gen is not above the trainer's communication"
        elif k < peak:
            why = (
                f"it would put an efficiency above 1 (scale {k:.3g}: the logged trainer is faster than peak)"
            )
    if why:
        return {}, [
            f"trainer: no phase column, and step less gen cannot scale the profile ({why}); kept; {GIVEN}"
        ]
    resid = seen - (a * k + c)
    half = t95(len(seen) - 1) * math.sqrt(float(resid @ resid) / (len(seen) - 1) / float(a @ a))
    lo, hi = max(k - half, peak), k + half
    how = SCALE_METHOD
    values = {
        e: Fitted(getattr(prof, e) / k, getattr(prof, e) / hi, getattr(prof, e) / lo, how)
        for e in EFFICIENCIES
    }
    # a fixed cost the profile has at 0 stays at 0: not a fitted value
    values.update({f: Fitted(v * k, v * lo, v * hi, how) for f in FIXED_COSTS if (v := getattr(prof, f)) > 0})
    less = (
        (
            " and param_sync"
            if timed_sync(log)
            else " and the spec's simulated sync"
            if spec_sync is not None
            else ""
        )
        if holds_sync
        else ""
    )
    note = (
        f"trainer: no phase column; the profile scaled as a whole to the logged step less gen"
        f"{less} (x{k:.3g}: every efficiency / "
        f"{k:.3g}, every fixed cost x {k:.3g}); the split between phases is the profile's, not the log's; "
        f"{GIVEN}"
    )
    return values, [note]
