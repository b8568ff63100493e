"""The trainer's fit: the framework profile's constants from a log's phase seconds.

The spec's trainer is phased (:mod:`pipesim.compute.phases`): ``model.framework`` names the
profile (:mod:`pipesim.compute.profiles`; none named: the one-MFU ``ideal`` profile at
``model.mfu``). Each step of the log gives one observation per phase it has, at the step's tokens
``T = batch * (prompt_length/mean + response_length/mean)`` and ``batch`` samples:

* ``timing_s/update_actor``: ``6 N T / (G F fwd_bwd_efficiency) + n_micro micro_batch_s +
  n_opt optimizer_step_s + comm``;
* ``timing_s/old_log_prob`` and ``timing_s/ref``: ``2 N T / (G F fwd_efficiency) + n_micro
  micro_batch_s + comm``;
* the remainder, ``timing_s/step`` less ``gen``, the phases above, a colocated engine's offload
  and reload (which the model puts in the training span) and ``param_sync`` where the log's step
  holds the sync (verl's colocated trainer times it inside its step, its fully-async trainer
  apart: :mod:`pipesim.calibrate.steptime`): ``step_s + batch sample_s`` (only when the log has
  ``step``, ``gen``, ``update_actor`` and, if the trainer recomputes them, ``old_log_prob``: else
  the remainder would absorb a missing phase).

Each step's tokens, the remainder and the samples dealt to the ranks are read in
:mod:`pipesim.calibrate.trainer_inputs` (the dealing drawn without the engines where the draws
alone decide it, a synchronous colocated design's: :mod:`pipesim.calibrate.dealing`; else the spec's
run); this module fits them.

:func:`pipesim.compute.phasefit.fit_profile` solves them together by least squares, with normal
intervals (95%, widened to Student's t at the residual degrees of freedom of the phases that hold
each constant: :mod:`pipesim.calibrate.fitbounds`), weighted: a
first fit gives each phase's residual variance, a second weighs each observation by its inverse
(the phases' noise differs: pooled, the long ``update_actor``'s intervals came out too narrow to
hold the constants a noisy sample log was made with). What a log cannot identify stays at the
profile's value, with a note:

* ``sample_s`` always: every step of a log trains the same number of samples, so the per-sample
  remainder is not told from the per-step one (``step_s`` takes it all; but when the remainder is
  shorter than the profile's per-sample part, ``step_s`` would fall below 0: then ``step_s`` is 0
  and ``sample_s`` takes it all, as the profile's own calibration puts a remainder per sample);
* ``fwd_efficiency`` without an ``old_log_prob`` or ``ref`` column (``fwd_bwd_efficiency``
  without ``update_actor``; ``step_s`` without the remainder);
* the fixed costs ``micro_batch_s`` and ``optimizer_step_s`` when the steps' tokens vary by less
  than :data:`~pipesim.calibrate.fit.MIN_TOKEN_SPREAD` (intercept not told from slope), and
  ``micro_batch_s`` when the micro-batch count cannot be told from the optimizer steps (no
  forward-only phase: both are constant per step); a fixed cost the fit puts below 0 (none seen,
  or noise) is set to 0 and the rest refitted; should a fit still fail (an efficiency above 1: the
  log's trainer is faster than peak), the fixed costs are kept one by one until it does not; and
  should it fail even so, the phase that holds that efficiency (``update_actor``; ``old_log_prob``
  and ``ref``) is left out, the constants only it holds keep the profile's values, and the rest
  are fitted without it (:func:`pipesim.calibrate.trainer_notes.left_out`). An efficiency at or
  below 0 is a phase shorter than the model's fixed terms alone: faster than peak too.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from pipesim.calibrate.fit import MIN_TOKEN_SPREAD, Fitted
from pipesim.calibrate.fitbounds import hull, phase_weights, unbounded_note, unfloored, widen
from pipesim.calibrate.frame import check_calibrate_args, check_fitted, check_series
from pipesim.calibrate.log import TrainingLog
from pipesim.calibrate.scale import fit_trainer_scale
from pipesim.calibrate.steptime import includes_sync, spec_sync_s
from pipesim.calibrate.trainer_inputs import MAX_DEALT_STEPS as MAX_DEALT_STEPS  # re-exported
from pipesim.calibrate.trainer_inputs import (
    TRAINER_PHASES,
    config,
    dealt,
    remainder,
    row_members,
    spread,
    switch_s,
    tokens,
)
from pipesim.calibrate.trainer_inputs import Member as Member  # re-exported
from pipesim.calibrate.trainer_notes import HOLDS, left_out, too_fast
from pipesim.calibrate.trainer_notes import absent as _absent
from pipesim.calibrate.trainer_notes import fails as _fails  # re-exported, as it was named
from pipesim.calibrate.trainer_notes import faster_than_peak as _faster_than_peak
from pipesim.calibrate.trainer_notes import recompute_note as _recompute_note
from pipesim.compute.phasefit import (
    FITTED,
    PhaseObservation,
    ProfileFit,
    fit_profile,
)
from pipesim.compute.phases import FrameworkProfile
from pipesim.plan.runspec import RunSpec

__all__ = [
    "TRAINER_PHASES",
    "fit_trainer_profile",
    "remainder",
    "dealing_spread",
    "dealt",
    "row_members",
    "spread",
    "switch_s",
    "tokens",
]

_HOW = {
    "fwd_bwd_efficiency": "update_actor on its FLOPs",
    "fwd_efficiency": "old_log_prob/ref on their FLOPs",
    "micro_batch_s": "the forward phases' intercept",
    "optimizer_step_s": "update_actor's intercept",
    "step_s": "the remainder (step less the phases)",
    "sample_s": "the remainder per sample",
}


def _observations(
    log: TrainingLog, rs: RunSpec, t: np.ndarray, batches: list[tuple[int, ...]] | None = None
) -> list[tuple[PhaseObservation, ...]]:
    """Each row's observation of each phase it logs: one per trainer step the row covers (a row
    per step: one), each with the row's seconds (:func:`pipesim.compute.phasefit.fit_profile` fits
    a group's mean)."""
    tcfg, batch = config(rs), rs.plan.batch_size
    rows = row_members(rs, t, batches, log.steps, log.per_row)
    obs: list[tuple[PhaseObservation, ...]] = []
    for c in TRAINER_PHASES:
        if not log.has(c):
            continue
        phase = c.removeprefix("timing_s/")
        cfg = dataclasses.replace(tcfg, reference_model=True) if phase == "ref" else tcfg
        if phase == "old_log_prob" and not cfg.recompute_old_logp:
            continue
        obs += [
            tuple(PhaseObservation(cfg, phase, x, batch, float(y), s) for x, s in row)
            for y, row in zip(log.col(c), rows, strict=True)
        ]
    rest = remainder(log, rs)
    if rest is not None:
        obs += [
            (PhaseObservation(tcfg, "remainder", float(x), batch, max(float(y), 0.0)),)
            for x, y in zip(t, rest, strict=True)
        ]
    return obs


_FIXED_COSTS = ("micro_batch_s", "optimizer_step_s", "step_s", "sample_s")


def fit_trainer_profile(log: TrainingLog, rs: RunSpec, t: np.ndarray) -> tuple[dict[str, Fitted], list[str]]:
    """The profile's constants the log identifies, with 95% intervals, and notes on the rest
    (module docstring). ``t``: each step's tokens (:func:`tokens`; LogError naming ``t`` unless
    one number above 0 per step of ``log``)."""
    check_calibrate_args(log, rs, min_steps=1)
    t = check_series("t", t, len(log), positive=True)
    base = config(rs).framework
    last = (int(log.steps.max()) + 1) * log.per_row if len(log) else 1
    batches = dealt(rs, last, log.per_row)
    obs = _observations(log, rs, t, batches)
    notes = []
    if not any(g[0].phase != "remainder" for g in obs):  # one scale from step less gen, where it can
        rows = row_members(rs, t, batches, log.steps, log.per_row)
        cfg, holds = config(rs), includes_sync(log, rs)
        sync = spec_sync_s(log, rs)
        return fit_trainer_scale(
            log, cfg, t, rs.plan.batch_size, [None] * len(t), switch_s(rs), holds, rows, sync
        )
    fix = ["sample_s"]
    if t.std() / t.mean() < MIN_TOKEN_SPREAD:
        fix += ["micro_batch_s", "optimizer_step_s"]
        notes.append(
            "micro_batch_s, optimizer_step_s: the steps' tokens barely vary, so a fixed cost cannot be "
            "told from the efficiency; the profile's kept"
        )
    solved = first = _solve(base, obs, fix)
    gone: list[str] = []  # constants only a phase left out held (faster than peak): noted with it
    left: list[str] = []  # the notes on the phases left out
    while solved.fit is None and (fast := too_fast(solved.why)) is not None:
        rest = [g for g in obs if g[0].phase not in HOLDS[fast[0]]]
        if not rest or len(rest) == len(obs):  # no phase left to fit: the profile kept (below)
            break
        dropped = [p for p in HOLDS[fast[0]] if any(g[0].phase == p for g in obs)]
        note, held = left_out(solved.why, dropped, {g[0].phase for g in rest}, fix, base)
        left.append(note)
        gone += held
        obs, solved = rest, _solve(base, rest, fix)
    fit, prof, fixed, fix = solved.fit, solved.prof, solved.fixed, solved.fix
    zeroed, moved, reasons = solved.zeroed, solved.moved, solved.reasons
    notes += _recompute_note(log, rs)
    if fit is None:  # told by the first failure: with every phase in it (faster than peak, above all)
        said = _faster_than_peak(first.why) or f"({first.why})"
        return {}, [*notes, f"trainer: the profile's constants could not be fitted {said}; the profile kept"]
    notes += left
    for k in FITTED:
        if k in fit.fitted or k in fix or k in gone:
            continue
        if k in zeroed:
            notes.append(f"{k}: fitted below 0 (no such fixed cost seen); set to 0")
        else:
            reason = reasons.get(k) or _absent(k, log, rs)
            notes.append(f"{k}: not identified ({reason}); the profile's {getattr(base, k):.4g} kept")
    if moved:
        notes.append(
            "step_s: the remainder is shorter than the profile's per-sample part; fitted per sample "
            "(sample_s), step_s set to 0"
        )
    else:
        notes.append(
            "sample_s: every step trains the same number of samples, so step_s holds the whole remainder"
        )
    values = {}
    intervals = widen(fit, obs)
    if (short := unbounded_note(fit.fitted, obs)) is not None:
        notes.append(short)
    if batches is not None:  # the log has each step's mean, not its samples
        notes.append(
            f"trainer: each step's samples are dealt to the ranks as the spec's run deals them at seed "
            f"{rs.seed} (a log holds means only; another dealing moves the constants, docs/calibrate.md)"
        )
    if log.per_row > 1:  # a row's phases: the mean of its steps, whose own tokens the log does not keep
        notes.append(
            f"trainer: each row's phases fitted as the mean of its {log.per_row} trainer steps, dealt as "
            "the spec's run dealt them and sharing the row's tokens as that run's did; a mean of whole "
            "micro-batch counts follows the tokens nearly in proportion, and the log keeps no step's own "
            "tokens, so micro_batch_s and the efficiencies are told apart less well than from a row per "
            "step and can sit outside their intervals (on a sample log of 2 steps a row, fwd_bwd_efficiency "
            "0.27 [0.22, 0.32] for a true 0.35); the trainer's seconds on the logged design are not, "
            "on another split they can be off by about 10% (docs/calibrate.md)"
        )
    floored = [k for k in zeroed if not (moved and k == "step_s")]
    loose = unfloored(prof, obs, fixed - set(floored), fit) if floored else {}
    if loose:
        notes.append(
            f"{', '.join(floored)}: fitted below 0 and set to 0; the intervals of the constants fitted "
            "beside it cover the fit without that floor too (given the floor alone they came out "
            "narrower than the data allow)"
        )
    for k in fit.fitted:
        lo, hi = hull(k, intervals[k], loose.get(k))
        values[k] = Fitted(getattr(fit.profile, k), lo, hi, f"least squares, {_HOW[k]} (fit_profile)")
    for k in zeroed:
        hi = max(loose[k][1], 0.0) if k in loose else 0.0
        values[k] = Fitted(0.0, 0.0, hi, f"least squares, {_HOW[k]}, floored at 0")
    return values, notes


@dataclasses.dataclass
class _Solved:
    """What :func:`_solve` ends with: the fit (None: every try failed, ``why`` says how), the
    profile and the constants fixed it ended at, the constants floored at 0, whether the remainder
    moved to ``sample_s``, and why the fallback fixed each constant it fixed."""

    fit: ProfileFit | None
    why: str
    prof: FrameworkProfile
    fixed: set[str]
    fix: list[str]
    zeroed: list[str]
    moved: bool
    reasons: dict[str, str]


def _solve(base: FrameworkProfile, obs: list[tuple[PhaseObservation, ...]], fix: list[str]) -> _Solved:
    """The weighted fit of ``obs`` with ``fix`` kept at ``base``'s values, tried again with a fixed
    cost below 0 set to 0 and, while it still fails, with the fixed costs kept one by one (the
    module docstring)."""
    fix = list(fix)
    prof, fixed, zeroed, moved = base, set(fix), [], False
    fallback = iter(("micro_batch_s", "optimizer_step_s", "step_s"))
    fit: ProfileFit | None = None
    why = ""
    reasons: dict[str, str] = {}  # a constant the fallback fixed: the failure that fixed it
    for _ in range(2 * len(FITTED)):
        try:
            fit = fit_profile(prof, obs, fix=sorted(fixed))
            fit = fit_profile(prof, obs, fix=sorted(fixed), weights=phase_weights(fit, obs))
            break
        except ValueError as e:
            fit, why = None, str(e).removeprefix("observations: ")
        bad = next((k for k in FITTED if k in why), None)
        if bad == "step_s" and "out of range" in why and "sample_s" in fix and "step_s" not in fixed:
            # the remainder is shorter than the profile's per-sample part: it is per sample (step_s 0)
            prof = dataclasses.replace(prof, step_s=0.0)
            fixed, fix = (fixed - {"sample_s"}) | {"step_s"}, [k for k in fix if k != "sample_s"]
            moved, why = True, ""
            zeroed.append("step_s")
            continue
        bad = next((k for k in FITTED if k in why), None)
        if bad in _FIXED_COSTS and "out of range" in why and bad not in fixed:
            zero: dict[str, Any] = {bad: 0.0}  # a fixed cost below 0: none seen
            prof = dataclasses.replace(prof, **zero)
            fixed.add(bad)
            zeroed.append(bad)
            continue
        nxt = next((k for k in fallback if k not in fixed), None)
        if nxt is None:
            break
        fixed.add(nxt)
        reasons[nxt] = _fails(why)
    return _Solved(fit, why, prof, fixed, fix, zeroed, moved, reasons)


DEALING_SEEDS = 4
"""Other dealings :func:`dealing_spread` refits the trainer on (the spec's run at seeds
``seed + 1 .. seed + DEALING_SEEDS``). Each was a run of the spec through the log's last step,
which made a 1,000-step calibration of the sample spec 1.4-1.7x slower; a synchronous colocated
design's are drawn without the engines (:mod:`pipesim.calibrate.dealing`, the same samples), so
there the note costs the four fits."""


def dealing_spread(log: TrainingLog, rs: RunSpec, t: np.ndarray, values: dict[str, Fitted]) -> str | None:
    """How far the efficiencies move when the log's steps are dealt to the ranks as the spec's run
    at :data:`DEALING_SEEDS` other seeds deals them (``rs`` at the fitted lengths): a note giving
    each fitted efficiency's range, which the intervals do not hold (a log has means, not which
    samples each rank held). None for an exactly balanced profile or when nothing was fitted."""
    check_fitted(values)
    keys = [k for k in ("fwd_bwd_efficiency", "fwd_efficiency") if k in values]
    if config(rs).framework.balance == "exact" or not keys:
        return None
    seen: dict[str, list[float]] = {k: [values[k].value] for k in keys}
    seeds = [(rs.seed + i) % 2**32 for i in range(1, DEALING_SEEDS + 1)]
    for s in seeds:
        got, _ = fit_trainer_profile(log, dataclasses.replace(rs, seed=s), t)
        for k in keys:
            if k in got:
                seen[k].append(got[k].value)
    parts = [f"{k} {min(v):.4g}-{max(v):.4g}" for k, v in seen.items() if len(v) > 1]
    if not parts:
        return None
    return (
        f"trainer: over the dealings of the spec's run at seed {rs.seed} (used) and seeds "
        f"{seeds[0]}-{seeds[-1]}: {', '.join(parts)} (a spread the intervals do not hold; docs/calibrate.md)"
    )


def fitted_profile(rs: RunSpec, values: dict[str, Any]) -> FrameworkProfile:
    """The spec's profile with the fitted constants in place."""
    fitted: dict[str, Any] = {k: float(getattr(v, "value", v)) for k, v in values.items() if k in FITTED}
    return dataclasses.replace(config(rs).framework, **fitted)
