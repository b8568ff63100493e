"""``pipesim calibrate``: a run spec fitted to a training log, values with intervals, checked on
held-out steps (``docs/calibrate.md``).

``pipesim calibrate LOG --spec RUN.toml --out CALIBRATED.toml [--columns MAP.toml] [--steps A:B]``
reads a verl-style log (:mod:`pipesim.calibrate.log`: one row per step, verl's metric names) of a
run made with the design of ``RUN.toml`` (:mod:`pipesim.plan.runspec`) and fits what the log's
columns identify:

* the response lengths (``response_length/*``): median and log-space sigma, closed-form
  (:func:`~pipesim.calibrate.fit.fit_lengths`), and, for a synchronous design (``eta = 0``), their
  trajectory (``drift_per_version``, :func:`~pipesim.calibrate.fit.fit_drift`, kept where its
  interval excludes 0, the median then taken back to the first logged step); then corrected once
  by simulation for the length bias of the trained batch when the design is asynchronous
  (``eta > 0``: short samples are trained first): the median is scaled by the logged mean over the
  simulated trained mean, and the sigma by itself over the sigma the same fit finds on the
  simulated run's per-step trained mean and clip share (:func:`_sigma_bias`);
* the trainer: the constants of the spec's framework profile (``model.framework``; none named: the
  one-MFU ``ideal`` profile at ``model.mfu``) that ``timing_s/update_actor``, ``old_log_prob``,
  ``ref`` and the step's remainder identify, by weighted least squares through
  :func:`pipesim.compute.phasefit.fit_profile` (:mod:`pipesim.calibrate.trainer`), which deals each
  step's samples to the ranks as the spec's run at the fitted lengths deals them (refitted once the
  lengths are bias-corrected, so the calibrated spec deals what its trainer was fitted on);
* the weight sync (``timing_s/param_sync``): its mean, with a t interval; whether the logged
  ``timing_s/step`` holds it follows verl's trainers (colocated: yes; split, fully async: no) or
  ``step_includes_sync`` (:mod:`pipesim.calibrate.steptime`, which converts between the log's
  meaning and the simulated step's; a note says which was used);
* the decode overhead (``timing_s/gen``, else ``timing_s/step``): the engine's
  ``iteration_overhead_s``, by simulation (:mod:`pipesim.calibrate.simulated`) -- the design run
  for the log's number of steps at :data:`OVERHEAD_PROBE_S` = (0, 10 ms) per iteration, the logged
  mean interpolated between the two simulated means (``gen`` is affine in the overhead: every
  iteration pays it once). Its interval maps the bootstrap interval of the logged mean, widened
  for a short log (:func:`~pipesim.calibrate.fit.small_sample`; the simulation's own noise is not
  in it). Fitted to the step, it holds every second the model
  misses (said in a note). Not identified when the column barely moves with it (a trainer-bound
  asynchronous design, whose ``gen`` is the trainer's wait).

**Validation**: with at least :data:`MIN_HOLDOUT_STEPS` steps, the last quarter (at least two) is
held out, everything is fitted on the rest, and the held-out steps are predicted: the trainer per
step (from its tokens), ``gen``, ``step``, ``param_sync`` and the response mean as means over the
same steps of a simulated run (a simulation draws its own lengths, so single steps do not pair
up; the trainer's phases are predicted step by step from the step's tokens). The residuals are
relative: ``(logged - predicted) / logged``. The values written are then
fitted on every step.

**Rows of several trainer steps**: verl's fully-async trainer logs one row per parameter version,
its ``timing_s/*`` summed over ``trigger_parameter_sync_step`` trainer steps and one
``param_sync``; ``trainer_steps_per_row=K`` (``--trainer-steps-per-row K``) reads each row as its
``K`` steps (:mod:`pipesim.calibrate.rows`): the sums per step, the sync once a row, the
simulations ``K`` steps a row, and a note says so.

The calibrated spec is ``RUN.toml`` with a ``[calibration]`` table: ``values`` (what a run applies,
:data:`pipesim.plan.runspec.CALIBRATED`), ``intervals``, ``method``, ``residuals``, the log's path
and ``log_sha256``, the steps used, ``not_identified`` and the simulation ``seed``. ``pipesim run``
and ``pipesim plan`` read it. Simulations use their own ``seed`` (not the spec's), so a log pipesim
wrote from the same spec is not replayed draw for draw.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipesim.calibrate.checks import check_log, implausible, in_range, remainder_note
from pipesim.calibrate.fit import MIN_DRIFT_STEPS, Fitted, fit_drift, fit_lengths, t95
from pipesim.calibrate.frame import check_calibrate_args, check_calibration, check_fitted, check_kind
from pipesim.calibrate.log import COLUMNS, LogError, TrainingLog, parse_steps, read_columns_map, read_log
from pipesim.calibrate.residuals import trainer_residuals
from pipesim.calibrate.rows import centres, max_draws, row_note
from pipesim.calibrate.simulated import (
    OVERHEAD_PROBE_S,
    Sim,
    fit_overhead,
    report,
    reporting,
    reusing,
    simulate,
    with_values,
)
from pipesim.calibrate.steptime import includes_sync, step_note
from pipesim.calibrate.trainer import dealing_spread, fit_trainer_profile, tokens
from pipesim.core.errors import shown
from pipesim.plan.runspec import RunSpec

__all__ = [
    "COLUMNS",
    "Calibration",
    "Fitted",
    "LogError",
    "TrainingLog",
    "calibrate",
    "calibrated_spec",
    "check_log",
    "parse_steps",
    "read_columns_map",
    "read_log",
    "with_lengths",
]

MIN_HOLDOUT_STEPS = 6
"""The fewest steps of which some are held out for validation."""


@dataclass
class Calibration:
    """What a calibration fitted, how well it predicts held-out steps, and from which log."""

    values: dict[str, Fitted]
    not_identified: list[str]
    residuals: dict[str, dict[str, float]]
    log: TrainingLog
    held_out: list[int] = field(default_factory=list)
    seed: int = 0

    def __post_init__(self) -> None:  # each field checked (frame.check_calibration), a LogError
        check_calibration(self)

    def table(self) -> dict[str, Any]:
        """The ``[calibration]`` table of the calibrated spec."""
        steps = self.log.steps
        return {
            "values": {k: _sig(v.value) for k, v in self.values.items()},
            "intervals": {k: [_sig(v.lo), _sig(v.hi)] for k, v in self.values.items()},
            "method": {k: v.how for k, v in self.values.items()},
            "residuals": self.residuals,
            "log": self.log.path,
            "log_sha256": self.log.sha256,
            "steps": f"{int(steps.min())}:{int(steps.max()) + 1}",
            "not_identified": list(self.not_identified),
            "seed": self.seed,
        }

    def text(self) -> str:
        per = self.log.per_row
        what = f"{len(self.log)} steps" if per == 1 else f"{len(self.log)} rows of {per} trainer steps"
        lines = [f"calibrated from {self.log.path} ({what}, sha256 {self.log.sha256[:12]}...)"]
        for k, v in self.values.items():
            lines.append(f"  {k:<24} {v.value:>12.5g}   95% [{v.lo:.5g}, {v.hi:.5g}]   ({v.how})")
        for note in self.not_identified:  # what the log leaves unidentified, and how the fit read it
            lines.append(f"  note: {note}")
        if self.residuals:
            rows = "steps" if self.log.per_row == 1 else "rows"
            lines.append(f"held-out {rows} {_listed(self.held_out)}: (logged - predicted) / logged")
            for k, r in self.residuals.items():
                lines.append(f"  {k:<28} " + ", ".join(f"{m} {x:+.3f}" for m, x in r.items()))
        elif len(self.log) < MIN_HOLDOUT_STEPS:
            lines.append(f"no held-out validation: fewer than {MIN_HOLDOUT_STEPS} steps")
        else:
            lines.append("no held-out validation: the log has no timing column to predict")
        return "\n".join(lines)


def _listed(steps: list[int]) -> str:
    """The held-out steps as a list, its middle elided past 10 (a 2,000-step log holds out 500)."""
    if len(steps) <= 10:
        return str(steps)
    return f"[{steps[0]}, {steps[1]}, ..., {steps[-1]}] ({len(steps):,})"


def _sig(x: float) -> float:
    """``x`` to six significant digits (what a calibrated spec shows)."""
    return float(f"{x:.6g}")


def with_lengths(rs: RunSpec, values: dict[str, Fitted]) -> RunSpec:
    """``rs`` at the response lengths fitted in ``values`` (its other calibration kept): the
    trainer's fit deals the spec's run's samples to the ranks (:func:`pipesim.calibrate.trainer.dealt`),
    whose spread should be the log's, not the spec's guess."""
    check_fitted(values)
    lengths = {k: v.value for k, v in values.items() if k in ("response_median_tokens", "response_sigma")}
    if not lengths:
        return rs
    return with_values(rs, {**rs.data.get("calibration", {}).get("values", {}), **lengths})


def _sigma_bias(rs: RunSpec, sim: Sim, values: dict[str, Fitted], log: TrainingLog, seed: int) -> str | None:
    """Correct ``response_sigma`` for the trained batch's bias, as the median is corrected: the
    length fit is applied to the simulated run of the fitted spec (its per-step trained mean and
    clip share) and the fitted sigma is scaled by (fitted / refitted). None when it applied, else
    why not."""
    if not log.has("response_length/clip_ratio"):
        return "response_sigma: not bias-corrected (it needs the clip ratio, which the simulation logs)"
    wl = rs.plan.workload
    sigma = float(getattr(wl.response, "sigma", 0.0))
    refit, _ = fit_lengths(
        sim.length_mean,
        sim.clip,
        None,
        wl.max_response_tokens,
        rs.plan.batch_size,
        wl.difficulty_sigma,
        sigma,
        np.random.default_rng(seed),
    )
    s = refit.get("response_sigma")
    v = values["response_sigma"]
    if s is None or s.value <= 0:
        return "response_sigma: not bias-corrected (the simulated run clips no sample)"
    ratio = v.value / s.value
    values["response_sigma"] = Fitted(v.value * ratio, v.lo * ratio, v.hi * ratio, v.how + ", bias-corrected")
    return None


def _drift(log: TrainingLog, values: dict[str, Fitted]) -> list[str]:
    """Fit the length trajectory; where its interval excludes 0, keep it and move the median back
    to the first step's version (the run starts there); else say none was seen."""
    at = centres(log)  # the trainer step each row's mean sits at (a row per step: its step)
    d = fit_drift(at, log.col("response_length/mean"))
    if d is None:
        return [f"drift_per_version: fewer than {MIN_DRIFT_STEPS} steps for a length trajectory"]
    if d.lo <= 0.0 <= d.hi:
        return [
            f"drift_per_version: none seen (95% interval [{d.lo:.3g}, {d.hi:.3g}] holds 0); the spec's kept"
        ]
    values["drift_per_version"] = d
    back = (1.0 + d.value) ** float(np.mean(at - log.steps.min() * log.per_row))
    m = values.get("response_median_tokens")
    if m is not None:
        values["response_median_tokens"] = Fitted(
            m.value / back, m.lo / back, m.hi / back, m.how + ", at the first step"
        )
    return []


def _fit(
    log: TrainingLog, rs: RunSpec, seed: int, predict: tuple[int, int] | None = None, means: bool = True
) -> tuple[dict[str, Fitted], list[str], Sim]:
    """Every value the log identifies, the notes on what it does not, and the simulated means of
    the fitted spec (the predictions): over the rows ``predict`` (``[a, b)`` counted from the
    first logged row: the held-out ones; ``K`` simulated steps a row of ``K``), else over the
    log's. With ``means=False`` and no ``predict`` the last simulation is skipped (a whole run of
    the log's steps, a seventh of a calibration's time): the means returned are then those before
    the overhead was fitted."""
    rng = np.random.default_rng(seed)
    values: dict[str, Fitted] = {}
    notes: list[str] = list(log.notes)
    holds = includes_sync(log, rs)  # does the log's step hold the weight sync (steptime)
    if log.has("timing_s/step"):
        notes.append(step_note(log, rs))
    if (rows := row_note(log, rs)) is not None:
        notes.append(rows)
    if log.has("timing_s/ref") and not rs.plan.reference_model:
        # fitted (the forward efficiency reads it), but a run of the spec has no ref phase: its
        # step would be short by the logged ref time (7% on a walkthrough's GRPO log)
        notes.append(
            f"timing_s/ref: the log times a reference model ({float(log.col('timing_s/ref').mean()):.3g} s "
            "a step) and the spec runs none; set model.reference_model = true in the spec (and "
            "calibrate again) so that its runs time the ref phase"
        )
    wl, spec = rs.plan.workload, rs.plan
    batch = spec.batch_size
    if log.has("response_length/mean"):
        clip = log.col("response_length/clip_ratio") if log.has("response_length/clip_ratio") else None
        mx = log.col("response_length/max") if log.has("response_length/max") else None
        sigma = float(getattr(wl.response, "sigma", 0.0))
        got, why = fit_lengths(
            log.col("response_length/mean"),
            clip,
            mx,
            wl.max_response_tokens,
            max_draws(log, batch) if mx is not None else batch,  # a row's max: of K steps' responses
            wl.difficulty_sigma,
            sigma,
            rng,
        )
        values.update(got)
        notes += why
        if rs.design.eta == 0:
            notes += _drift(log, values)
        else:
            notes.append(
                "drift_per_version: not fitted for an asynchronous design (its first steps train the "
                "short samples first, a trend of their own)"
            )
    else:
        notes.append("response lengths: no response_length/mean column")
    # the trainer: the framework profile's constants from the phases it has (calibrate.trainer)
    t = tokens(log, rs)
    trainer_notes: list[str] = []
    if not log.has("prompt_length/mean") and isinstance(wl.prompt, int):
        notes.append(f"prompt_length/mean: not in the log; the spec's {wl.prompt} tokens assumed")
    if t is not None:
        if wl.agent is not None:
            notes.append(
                "trainer: a step's tool-observation tokens are not in verl's columns and are not counted"
            )
        # the ranks' dealing comes from the spec's run at the lengths fitted so far
        got, trainer_notes = fit_trainer_profile(log, with_lengths(rs, values), t)
        values.update(got)
    else:
        notes.append("trainer: the profile's constants need response_length/mean and the prompt length")
    ps = log.col("timing_s/param_sync") if log.has("timing_s/param_sync") else np.zeros(0)
    ps = ps[ps > 0]  # the first step has no sync before it
    if len(ps) >= 2:
        half = t95(len(ps) - 1) * float(ps.std(ddof=1)) / math.sqrt(len(ps))
        values["sync_time_s"] = Fitted(float(ps.mean()), max(ps.mean() - half, 0.0), ps.mean() + half, "mean")
    else:
        notes.append("sync_time_s: no timing_s/param_sync (or all zero); the cluster's weight sync kept")
    current = {k: v.value for k, v in values.items()}
    fitted = with_values(rs, current)
    per_row = log.per_row
    n_sim = max(len(log) * per_row, 4)  # the trainer steps the log's rows cover
    o0 = OVERHEAD_PROBE_S[0]
    sim0 = simulate(fitted, o0, n_sim, seed, holds_sync=holds)
    # an asynchronous design trains short samples first: the trained batch's mean is biased low
    if "response_median_tokens" in values and rs.design.eta > 0 and sim0["response_length/mean"] > 0:
        ratio = float(log.col("response_length/mean").mean()) / sim0["response_length/mean"]
        v = values["response_median_tokens"]
        values["response_median_tokens"] = Fitted(
            v.value * ratio, v.lo * ratio, v.hi * ratio, v.how + ", bias-corrected"
        )
        current["response_median_tokens"] = values["response_median_tokens"].value
        fitted = with_values(rs, current)
        sim0 = simulate(fitted, o0, n_sim, seed, holds_sync=holds)
        if "response_sigma" in values:
            why_not = _sigma_bias(fitted, sim0, values, log, seed)
            if why_not is not None:
                notes.append(why_not)
            current["response_sigma"] = values["response_sigma"].value
            fitted = with_values(rs, current)
            sim0 = simulate(fitted, o0, n_sim, seed, holds_sync=holds)
        if t is not None:  # deal at the corrected lengths, those the calibrated spec runs at
            got, trainer_notes = fit_trainer_profile(log, with_lengths(rs, values), t)
            values.update(got)
            current.update({k: v.value for k, v in got.items()})
            fitted = with_values(rs, current)
            sim0 = simulate(fitted, o0, n_sim, seed, holds_sync=holds)
    notes += trainer_notes + (remainder_note(log, rs) if t is not None else [])
    # the held-out prediction runs the whole log at the fitted overhead: the solver's runs go that
    # far, so that the last of them (at that overhead) is the prediction (simulated.reusing)
    horizon = predict[1] * per_row if predict is not None else None
    overhead, why = fit_overhead(log, fitted, sim0, n_sim, seed, rng, horizon)
    notes += why
    if overhead is not None:
        values["iteration_overhead_s"] = overhead
        current["iteration_overhead_s"] = overhead.value
        fitted = with_values(rs, current)
    if predict is not None:  # the held-out steps' own versions (lengths may drift)
        window = (predict[0] * per_row, predict[1] * per_row)
        sim0 = simulate(fitted, None, window[1], seed, window=window, holds_sync=holds)
    elif overhead is not None and means:
        sim0 = simulate(fitted, None, n_sim, seed, holds_sync=holds)
    return values, notes, sim0


def _validate(rest: TrainingLog, rs: RunSpec, vals: dict[str, Fitted], pred: Sim) -> dict[str, Any]:
    """Relative residuals ``(logged - predicted) / logged`` on the held-out steps ``rest``: the
    simulated means, and the trainer per step from its tokens (the phases' sum, and
    ``update_actor`` and ``old_log_prob`` each by the model's split of the FLOPs). ``step`` in the
    log's meaning (with or without the sync: ``pred`` was simulated so); ``param_sync`` over the
    steps that synced, as the simulated mean and ``sync_time_s`` take it (a design that syncs
    every ``k`` steps logs 0 at the others)."""
    out: dict[str, dict[str, float]] = {}
    for c in ("timing_s/gen", "timing_s/step", "timing_s/param_sync", "response_length/mean"):
        x = rest.col(c) if rest.has(c) else np.zeros(0)
        x = x[x > 0] if c == "timing_s/param_sync" else x
        if len(x) and x.mean() > 0:
            seen = float(x.mean())
            out[c] = {"mean": (seen - pred[c]) / seen}
    out.update(trainer_residuals(rest, with_lengths(rs, vals), vals))
    return out


def calibrate(
    log: TrainingLog,
    rs: RunSpec,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    step_includes_sync: bool | None = None,
    trainer_steps_per_row: int | None = None,
) -> Calibration:
    """Fit ``rs`` to ``log`` and validate on held-out steps (see the module docstring); a log that
    cannot come from a run of ``rs`` is refused first (:func:`check_log`), as are arguments of the
    wrong kind and a log of fewer than 3 steps (:func:`~pipesim.calibrate.frame.check_calibrate_args`),
    each a :class:`LogError` naming the argument.
    ``progress`` is called with one line as each part and each simulation starts (the CLI prints
    them on stderr). ``step_includes_sync``: whether the log's ``timing_s/step`` holds the weight
    sync; None (the default): the log's own ``step_includes_sync``, else as verl times the spec's
    design, colocated yes, split (fully async) no (:mod:`pipesim.calibrate.steptime`; a note says
    which was used). ``trainer_steps_per_row``: how many trainer steps each row covers, ``K`` for
    verl's fully-async trainer (one row per parameter version, its ``timing_s/*`` summed over
    ``trigger_parameter_sync_step = K`` steps, one ``param_sync``); None (the default): the log's
    own, else one (:mod:`pipesim.calibrate.rows`; a note says how the rows were read)."""
    check_calibrate_args(log, rs, seed)
    if progress is not None and not callable(progress):
        raise LogError(
            f"progress must be a callable taking one str (print, list.append), or None; "
            f"got {shown(progress)}",
            "progress",
        )
    if step_includes_sync is not None:
        log = dataclasses.replace(log, step_includes_sync=step_includes_sync)  # checked: a LogError
    if trainer_steps_per_row is not None:
        log = dataclasses.replace(log, trainer_steps_per_row=trainer_steps_per_row)  # checked likewise
    check_log(log, rs)
    with reporting(progress), reusing():
        return _calibrate(log, rs, seed)


def _calibrate(log: TrainingLog, rs: RunSpec, seed: int) -> Calibration:
    residuals: dict[str, dict[str, float]] = {}
    held: list[int] = []
    n = len(log)
    if n >= MIN_HOLDOUT_STEPS:
        k = max(2, round(0.25 * n))
        part, rest = log.select(np.arange(n) < n - k), log.select(np.arange(n) >= n - k)
        held = [int(s) for s in rest.steps]
        report(f"validation: fitting the first {n - k:,} steps, predicting the last {k:,} (held out)")
        vals, _, pred = _fit(part, rs, seed, predict=(n - k, n))
        residuals = _validate(rest, rs, vals, pred)
    report(f"fitting all {n:,} steps")
    values, notes, _ = _fit(log, rs, seed, means=False)  # its means are not used
    t = tokens(log, rs)
    if t is not None and (spread := dealing_spread(log, with_lengths(rs, values), t, values)) is not None:
        notes.append(spread)
    values = {k: in_range(k, v) for k, v in values.items()}
    notes += implausible(values)
    return Calibration(values, notes, residuals, log, held, seed)


def calibrated_spec(rs: RunSpec, cal: Calibration) -> dict[str, Any]:
    """The run spec's data with the ``[calibration]`` table (what ``--out`` writes)."""
    check_kind("rs", rs, RunSpec, "a RunSpec (pipesim.plan.runspec.load reads one)")
    check_kind("cal", cal, Calibration, "a Calibration (calibrate returns one)")
    data = copy.deepcopy(rs.data)
    data["calibration"] = cal.table()
    return data
