"""Every value a log identifies for a spec, in the order each needs the last
(:func:`fit_spec`), and the held-out residuals of the values fitted (:func:`validate`):
:func:`pipesim.calibrate.calibrate` runs them, once on the first three quarters of the log
(predicting the rest) and once on all of it. The order, and why each part is fitted where it is,
is :mod:`pipesim.calibrate`'s docstring: the lengths first (a multi-turn spec's as a turn's, from
the episode verl logs: :mod:`pipesim.calibrate.agent`), then the trainer (dealt at those lengths),
the weight sync, the asynchronous design's length bias (and the trainer again, at the corrected
lengths), the decode overhead last (by simulation, with everything else in place).

The decode overhead takes up every second of the fitted column the rest of the model misses (an
agent spec's tool latency, which no column fits: :func:`pipesim.calibrate.agent.tool_note`). Where
even its interval's low end is more than :data:`OVERHEAD_FAR_ABOVE` times the engine's own
(:data:`ENGINE_OVERHEAD_S`), a note says the value is not a decode iteration's cost
(:func:`overhead_warning`), and ``pipesim calibrate`` warns on stderr.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pipesim.calibrate.agent import length_notes, tool_note, turn_means
from pipesim.calibrate.checks import outlier_notes, remainder_note
from pipesim.calibrate.fit import MIN_DRIFT_STEPS, Fitted, fit_drift, fit_lengths, t95
from pipesim.calibrate.frame import check_fitted
from pipesim.calibrate.log import TrainingLog
from pipesim.calibrate.residuals import trainer_residuals
from pipesim.calibrate.rows import centres, max_draws, row_note, trainer_steps
from pipesim.calibrate.simulated import OVERHEAD_PROBE_S, Sim, fit_overhead, simulate, with_values
from pipesim.calibrate.steptime import includes_sync, step_note, sync_note
from pipesim.calibrate.trainer import fit_trainer_profile, tokens
from pipesim.calibrate.trajfit import cap_seen, capped_drift_note, fit_trajectory
from pipesim.compute.engine_config import DEFAULT_ITERATION_OVERHEAD_S
from pipesim.plan.runspec import RunSpec

__all__ = [
    "ENGINE_OVERHEAD_S",
    "OVERHEAD_FAR_ABOVE",
    "fit_spec",
    "overhead_warning",
    "validate",
    "with_lengths",
]

ENGINE_OVERHEAD_S: float = DEFAULT_ITERATION_OVERHEAD_S
"""The engine's own decode overhead (``EngineConfig.iteration_overhead_s``, 1 ms): what an
uncalibrated run spec runs at (a spec has no key for it)."""
OVERHEAD_FAR_ABOVE = 10.0
"""How many times the engine's own decode overhead the fitted one's 95% interval must clear, at its
low end, to be said to hold more than a decode iteration's fixed cost (scheduler, sampling,
launches): an order of magnitude, which noise in the fit does not reach (the low end is above it)
and a different engine or version alone hardly explains (the shipped sample fits 4.0 ms,
[3.5, 4.5])."""


def overhead_warning(values: dict[str, Fitted]) -> str | None:
    """Why the fitted ``iteration_overhead_s`` in ``values`` is not a decode iteration's cost,
    where its interval's low end is above :data:`OVERHEAD_FAR_ABOVE` x :data:`ENGINE_OVERHEAD_S`
    (module docstring); None otherwise (or where it was not fitted)."""
    check_fitted(values)
    o = values.get("iteration_overhead_s")
    bound = OVERHEAD_FAR_ABOVE * ENGINE_OVERHEAD_S
    if o is None or not o.lo > bound:
        return None
    return (
        f"iteration_overhead_s: {o.value * 1e3:.3g} ms, 95% [{o.lo * 1e3:.3g}, {o.hi * 1e3:.3g}] ms, is more "
        f"than {OVERHEAD_FAR_ABOVE:g}x the engine's own {ENGINE_OVERHEAD_S * 1e3:g} ms even at its low end: "
        "no decode iteration's fixed cost is that; it holds time the rest of the spec misses (a tool "
        "latency, the trainer, a slower engine), paid per decode iteration, so a prediction for another "
        "design can be far off though the logged one is reproduced: check the spec against the run"
    )


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


def _drift(
    log: TrainingLog,
    values: dict[str, Fitted],
    mean: np.ndarray,
    clip: np.ndarray | None,
    maxes: np.ndarray | None,
    rs: RunSpec,
    rng: np.random.Generator,
) -> tuple[list[str], bool]:
    """Fit the length trajectory to the steps' mean response (a turn's, for an agent spec:
    ``mean``); where its interval excludes 0, keep it with the median at the first step's version
    (the run starts there, at step 0: a log cut at the front is compared with the run's own steps,
    :func:`fit_spec`); else say none was seen. Returns the notes and whether the lengths in
    ``values`` were replaced by the joint fit's.

    Where a step is clipped, the drift, median and sigma are fitted together with the cap
    (:func:`~pipesim.calibrate.trajfit.fit_trajectory`), and replace the pooled ones when its drift
    is seen: its median is at step 0 already (not scaled back again). Otherwise the least-squares
    slope of ``ln`` mean (:func:`~pipesim.calibrate.fit.fit_drift`), the pooled median scaled back
    by ``(1 + d) ** mean step``, and a note where the responses reach the cap (it is then biased,
    :func:`~pipesim.calibrate.trajfit.capped_drift_note`). The asynchronous design's corrections
    (the median's ratio, :func:`_sigma_bias`) never meet these: they run at ``eta > 0``, this at 0."""
    at = centres(log)  # the trainer step each row's mean sits at (a row per step: its step)
    d = fit_drift(at, mean)
    if d is None:
        return [f"drift_per_version: fewer than {MIN_DRIFT_STEPS} steps for a length trajectory"], False
    wl = rs.plan.workload
    cap = float(wl.max_response_tokens)
    joint = None
    if clip is not None and (clip > 0).any():  # a child stream: the later fits draw what they drew
        joint = fit_trajectory(at, mean, clip, cap, wl.difficulty_sigma, rng.spawn(1)[0])
        d = joint["drift_per_version"] if joint is not None else d
    if d.lo <= 0.0 <= d.hi:
        return [
            f"drift_per_version: none seen (95% interval [{d.lo:.3g}, {d.hi:.3g}] holds 0); the spec's kept"
        ], False
    values["drift_per_version"] = d
    if joint is not None:
        values.update(joint)
        return [], True
    notes = []
    m = values.get("response_median_tokens")
    if m is not None:
        back = (1.0 + d.value) ** float(np.mean(at))
        values["response_median_tokens"] = m = Fitted(
            m.value / back, m.lo / back, m.hi / back, m.how + ", at the first step"
        )
        sg = values.get("response_sigma")
        sigma = sg.value if sg is not None else float(getattr(wl.response, "sigma", 0.0))
        seen = cap_seen(at, clip, maxes, cap, (m.value, math.hypot(sigma, wl.difficulty_sigma), d.value))
        if seen is not None:
            why = (
                "the fit with the cap found no solution"
                if clip is not None
                else "the log has no clip ratio to fit it with the cap"
            )
            pooled = sg is not None and sg.how.startswith("clip ratio")
            notes.append(capped_drift_note(d, seen, cap, why, pooled))
    return notes, False


def fit_spec(
    log: TrainingLog, rs: RunSpec, seed: int, predict: np.ndarray | None = None, means: bool = True
) -> tuple[dict[str, Fitted], list[str], Sim]:
    """Every value the log identifies, the notes on what it does not, and the simulated means of
    the fitted spec (the predictions): over the simulated steps ``predict`` (the held-out rows'
    trainer steps, :func:`~pipesim.calibrate.rows.trainer_steps`), else over the log's.

    The log's step ``s`` is the simulated run's step ``s`` (as the trainer's dealing reads it): the
    simulations run through the log's last step and each mean is taken over the log's own steps.
    A log cut at the front (``--steps 6:``, a warm-up dropped) is thus compared with the run's
    steps 6 on, not with its first steps, an asynchronous design's pipeline fill among them (which
    moved the decode overhead fitted on a noiseless log from 4.11 to 3.39 ms, true 4).
    With ``means=False`` and no ``predict`` the last simulation is skipped (a whole run of
    the log's steps, a seventh of a calibration's time): the means returned are then those before
    the overhead was fitted."""
    rng = np.random.default_rng(seed)
    values: dict[str, Fitted] = {}
    notes: list[str] = list(log.notes)
    holds = includes_sync(log, rs)  # does the log's step hold the weight sync (steptime)
    if log.has("timing_s/step"):
        notes.append(step_note(log, rs))
    if (sync := sync_note(log, rs)) is not None:
        notes.append(sync)
    notes += outlier_notes(log)
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
        # an agent spec's: a turn's mean from verl's episode, no clip ratio or max (calibrate.agent)
        turn = turn_means(log.col("response_length/mean"), wl)
        one = wl.agent is None
        clip = (
            log.col("response_length/clip_ratio") if one and log.has("response_length/clip_ratio") else None
        )
        mx = log.col("response_length/max") if one and log.has("response_length/max") else None
        sigma = float(getattr(wl.response, "sigma", 0.0))
        notes += length_notes(log, rs)
        got, why = fit_lengths(
            turn,
            clip,
            mx,
            wl.max_response_tokens,
            max_draws(log, batch) if mx is not None else batch,  # a row's max: of K steps' responses
            wl.difficulty_sigma,
            sigma,
            rng,
        )
        values.update(got)
        if rs.design.eta == 0:
            drift_notes, joint = _drift(log, values, turn, clip, mx, rs, rng)
            # the joint fit read sigma from every step: the pooled fit's "sigma kept" is not so
            notes += [n for n in why if not (joint and n.startswith("response_sigma:"))] + drift_notes
        else:
            notes += why
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
                "trainer: a step's tokens hold the tool observations, as verl's response length and "
                "the simulated trainer count them"
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
    over = trainer_steps(log).ravel()  # the simulated steps the log's rows cover
    n_sim = max(int(over.max()) + 1, 4)  # run through the log's last step
    o0 = OVERHEAD_PROBE_S[0]
    sim0 = simulate(fitted, o0, n_sim, seed, over, holds_sync=holds)
    # an asynchronous design trains short samples first: the trained batch's mean is biased low
    if "response_median_tokens" in values and rs.design.eta > 0 and sim0["response_length/mean"] > 0:
        logged, simulated = turn_means(
            np.array([log.col("response_length/mean").mean(), sim0["response_length/mean"]]), wl
        )
        ratio = float(logged / simulated)  # a turn's, for an agent spec (calibrate.agent)
        v = values["response_median_tokens"]
        values["response_median_tokens"] = Fitted(
            v.value * ratio, v.lo * ratio, v.hi * ratio, v.how + ", bias-corrected"
        )
        current["response_median_tokens"] = values["response_median_tokens"].value
        fitted = with_values(rs, current)
        sim0 = simulate(fitted, o0, n_sim, seed, over, holds_sync=holds)
        if "response_sigma" in values:
            why_not = _sigma_bias(fitted, sim0, values, log, seed)
            if why_not is not None:
                notes.append(why_not)
            current["response_sigma"] = values["response_sigma"].value
            fitted = with_values(rs, current)
            sim0 = simulate(fitted, o0, n_sim, seed, over, holds_sync=holds)
        if t is not None:  # deal at the corrected lengths, those the calibrated spec runs at
            got, trainer_notes = fit_trainer_profile(log, with_lengths(rs, values), t)
            values.update(got)
            current.update({k: v.value for k, v in got.items()})
            fitted = with_values(rs, current)
            sim0 = simulate(fitted, o0, n_sim, seed, over, holds_sync=holds)
    notes += trainer_notes + (remainder_note(log, rs) if t is not None else [])
    # the held-out prediction runs the whole log at the fitted overhead: the solver's runs go that
    # far, so that the last of them (at that overhead) is the prediction (simulated.reusing)
    horizon = int(np.max(predict)) + 1 if predict is not None else None
    overhead, why = fit_overhead(log, fitted, sim0, n_sim, seed, rng, horizon, over)
    notes += why
    if (tool := tool_note(rs, overhead is not None)) is not None:
        notes.append(tool)
    if overhead is not None:
        values["iteration_overhead_s"] = overhead
        current["iteration_overhead_s"] = overhead.value
        fitted = with_values(rs, current)
        if (far := overhead_warning(values)) is not None:
            notes.append(far)
    if predict is not None:  # the held-out steps' own versions (lengths may drift)
        sim0 = simulate(fitted, None, int(np.max(predict)) + 1, seed, predict, holds_sync=holds)
    elif overhead is not None and means:
        sim0 = simulate(fitted, None, n_sim, seed, over, holds_sync=holds)
    return values, notes, sim0


def validate(rest: TrainingLog, rs: RunSpec, vals: dict[str, Fitted], pred: Sim) -> dict[str, Any]:
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
