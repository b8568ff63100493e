"""What a calibration refuses of a log given the spec, and the ranges it writes intervals in.

:func:`check_log`: a log that no run of the spec can have written (a length above what the spec
allows) is refused before anything is fitted, a :class:`~pipesim.calibrate.log.LogError` naming the
column, the step and the spec's key. What needs no spec (a cell that is not a number, a negative
time, a step that is no step number) :func:`pipesim.calibrate.log.read_log` refuses.

:func:`in_range`: a fitted interval cut to the value's range, as a run spec's
``[calibration.intervals]`` must hold it (:mod:`pipesim.plan.runspec_calibration`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pipesim.calibrate.agent import check_episodes
from pipesim.calibrate.fit import Fitted
from pipesim.calibrate.frame import check_calibrate_args, check_kind
from pipesim.calibrate.log import LogError, TrainingLog
from pipesim.core.validate import shown
from pipesim.plan.build import engine_config
from pipesim.plan.runspec import RunSpec
from pipesim.plan.runspec_calibration import value_range

__all__ = [
    "PLAUSIBLE",
    "check_log",
    "implausible",
    "in_range",
    "outlier_notes",
    "outlier_steps",
    "remainder_note",
]

_SLACK = 1 + 1e-9
"""A logged mean may exceed a cap by rounding (a CSV's six decimals), not more."""


def _first_over(log: TrainingLog, column: str, values: np.ndarray, cap: float, what: str, key: str) -> None:
    """LogError at the first step where ``values`` (of ``column``) exceed ``cap`` (``what``, ``key``)."""
    over = np.flatnonzero(values > cap * _SLACK)
    if len(over):
        i = int(over[0])
        raise LogError(
            f"{log.path}: column {column!r}, step {log.steps[i]:g}: {values[i]:g} tokens is above {what} "
            f"({key} = {cap:,}): is the log from a run of this spec?",
            column.split(" + ")[0],
        )


def _clipped_floor(log: TrainingLog, cap: int) -> None:
    """LogError at the first step whose response mean is below what its clip ratio gives: the
    clipped share ``c`` holds ``cap`` tokens each, the rest at least one, so the mean is at least
    ``c cap + (1 - c)`` (a log of a run with a shorter cap)."""
    clip, mean = log.col("response_length/clip_ratio"), log.col("response_length/mean")
    floor = clip * cap + (1.0 - clip)
    under = np.flatnonzero(mean * (1 + 1e-6) < floor)  # a CSV's rounding of either, not more
    if len(under):
        i = int(under[0])
        raise LogError(
            f"{log.path}: column 'response_length/clip_ratio', step {log.steps[i]:g}: {clip[i]:g} of the "
            f"samples at the cap (workload.max_response_tokens = {cap:,}) is a mean of at least "
            f"{floor[i]:g} tokens, but response_length/mean is {mean[i]:g}: is the log from a run of "
            "this spec?",
            "response_length/clip_ratio",
        )


def check_log(log: TrainingLog, rs: RunSpec) -> None:
    """Refuse a log that cannot come from a run of ``rs``, a LogError naming the column, its step
    and the cap:

    * a response length (mean or max) above the longest response the spec allows,
      ``workload.max_response_tokens`` (for an agent workload, its turns' responses and
      observations: what verl counts as one response);
    * a response mean below what the clip ratio gives (its share of the samples hold
      ``workload.max_response_tokens`` each; a single-turn workload);
    * for an agent workload, a response mean below its shortest episode (a token a turn and the
      observations: :func:`pipesim.calibrate.agent.check_episodes`; a log of the turns alone);
    * a mean prompt length above the longest prompt the spec allows: the model context
      (``model.max_model_len``; a drawn prompt: ``workload.max_prompt_tokens`` if smaller), or a
      mean prompt and response together above the context (every sample's sequence fits it, so
      their means do too)."""
    check_calibrate_args(log, rs, min_steps=1)
    wl = rs.plan.workload
    cap = wl.longest_response_tokens
    key = "workload.max_response_tokens" + (" x agent.turns + observations" if wl.agent is not None else "")
    for c in ("response_length/mean", "response_length/max"):
        if log.has(c):
            _first_over(log, c, log.col(c), cap, "the longest response the spec allows", key)
    if wl.agent is None and log.has("response_length/mean") and log.has("response_length/clip_ratio"):
        _clipped_floor(log, wl.max_response_tokens)
    check_episodes(log, rs)
    if not log.has("prompt_length/mean"):
        return
    context = engine_config(rs.plan, rs.design.tp).context_len
    spec = rs.plan
    ctx = (
        "the model context",
        "model.max_model_len" if spec.max_model_len else f"{spec.model.name}'s context",
    )
    prompt = log.col("prompt_length/mean")
    if not isinstance(wl.prompt, int) and wl.max_prompt_tokens < context:
        longest = ("the longest prompt the spec allows", "workload.max_prompt_tokens")
        _first_over(log, "prompt_length/mean", prompt, wl.max_prompt_tokens, *longest)
    _first_over(log, "prompt_length/mean", prompt, context, *ctx)
    if log.has("response_length/mean"):
        both = prompt + log.col("response_length/mean")
        _first_over(log, "prompt_length/mean + response_length/mean", both, context, *ctx)


def in_range(key: str, v: Fitted) -> Fitted:
    """``v`` with its interval cut to the value's range (bounds included,
    :func:`~pipesim.plan.runspec_calibration.value_range`), what a run spec's
    ``[calibration.intervals]`` must hold: a fixed cost's lower end below 0 at 0, an efficiency's
    upper end above 1 at 1 (an open one, ``inf``, stays open), an end the fit left undetermined
    (NaN: no residual degrees of freedom) at the range's bound. The true value lies in the range,
    so the cut interval holds it as often as the uncut one."""
    from pipesim.plan.runspec_calibration import CALIBRATED

    if key not in CALIBRATED:
        raise LogError(f"key {shown(key)} is not a calibrated value ({', '.join(CALIBRATED)})", "key")
    check_kind("v", v, Fitted, "a Fitted value")
    lo_b, hi_b, _ = value_range(key)
    lo = lo_b if math.isnan(v.lo) else min(max(v.lo, lo_b), hi_b)
    hi = hi_b if math.isnan(v.hi) else v.hi if v.hi == math.inf else min(max(v.hi, lo), hi_b)
    return Fitted(v.value, lo, hi, v.how)


def remainder_note(log: TrainingLog, rs: RunSpec) -> list[str]:
    """A note when ``timing_s/step`` is shorter than its logged parts (gen, the trainer phases,
    param_sync where the step holds the sync: :mod:`pipesim.calibrate.steptime`) and the spec's
    offload/reload at some steps: the trainer's fit takes such a step's remainder as 0 s
    (:func:`pipesim.calibrate.trainer.remainder`), which is no measurement."""
    from pipesim.calibrate.steptime import includes_sync
    from pipesim.calibrate.trainer import remainder

    rest = remainder(log, rs)
    if rest is None or not (rest < 0).any():
        return []
    i = int(np.argmin(rest))
    parts = (
        "gen, param_sync and the trainer's phases"
        if includes_sync(log, rs)
        else "gen and the trainer's phases"
    )
    return [
        f"timing_s/step: shorter than {parts} (and the spec's "
        f"offload/reload) at {int((rest < 0).sum())} of {len(rest)} steps (step {log.steps[i]:g} by "
        f"{-rest[i]:.3g} s): their remainder is taken as 0 s (do the timers overlap?)"
    ]


PLAUSIBLE: dict[str, tuple[float, float]] = {
    "mfu": (0.005, 1.0),
    "fwd_bwd_efficiency": (0.005, 1.0),
    "fwd_efficiency": (0.005, 1.0),
    "iteration_overhead_s": (0.0, 0.5),
    "sync_time_s": (0.0, 3600.0),
}
"""Ranges no real run's fitted constant leaves: a trainer below half a percent of its GPUs' peak, a
decode iteration with half a second of fixed cost, an hour-long weight sync. A log in milliseconds
fits inside the range a cell may hold (a week) and its held-out residuals stay small, since the
spec is fitted to it: fitted, it read an efficiency of 0.00046, 13 s an iteration and a 1,490 s
sync, and the calibrated spec ran 7 samples an hour (a user's walkthrough)."""


_RATES = ("mfu", "fwd_bwd_efficiency", "fwd_efficiency")
"""The :data:`PLAUSIBLE` values that are rates (a share of peak: higher is faster); the rest are
seconds (higher is slower)."""


def implausible(values: dict[str, Fitted]) -> list[str]:
    """A note for each fitted constant outside :data:`PLAUSIBLE`, saying what would explain it."""
    notes = []
    for name, (lo, hi) in PLAUSIBLE.items():
        f = values.get(name)
        if f is None or lo <= f.value <= hi:
            continue
        # an efficiency is slow below its range, a time (an overhead, a sync) above it; before, the
        # direction was read from the range's top (at most 1: an efficiency), and an 11 s decode
        # overhead (range 0 to 0.5 s) was "faster than the GPUs can run"
        slow = f.value < lo if name in _RATES else f.value > hi
        why = (
            "is the log in seconds? (verl's timing_s/* are; a log in milliseconds reads 1,000x slow)"
            if slow
            else "faster than the GPUs can run: does the spec's model, GPU or GPU count match the log's run?"
        )
        notes.append(f"{name}: {f.value:.3g} is outside what real runs fit ({lo:g} to {hi:g}); {why}")
    return notes


def outlier_notes(log: TrainingLog) -> list[str]:
    """A note for each timing column and the response mean with outlying steps
    (:func:`pipesim.calibrate.result.outlying`: more than ``OUTLIER_MADS`` robust sds and
    ``OUTLIER_RATIO`` times above the median),
    naming the steps: the fit and the validation take them as they are (a checkpoint save, a
    retry, a stalled node?), and one such step moves a constant far (a step ten times as long at
    step 17 of the sample fitted step_s 25.8 s for 2.0). Before, nothing said so."""
    from pipesim.calibrate.cells import COLUMNS
    from pipesim.calibrate.log import listed_steps
    from pipesim.calibrate.result import OUTLIER_MADS, OUTLIER_RATIO, outlying

    notes = []
    for c in COLUMNS:
        if not (c.startswith("timing_s/") or c == "response_length/mean") or not log.has(c):
            continue
        x, steps = log.col(c), log.steps
        if c == "timing_s/param_sync":  # the steps that synced (others log 0)
            x, steps = x[x > 0], steps[x > 0]
        out = outlying(x)
        if not out.any():
            continue
        med = float(np.median(x))
        worst = int(np.argmax(np.where(out, x, -np.inf)))
        notes.append(
            f"{c}: step {listed_steps(pd.Series(steps[out]))} an outlier (more than {OUTLIER_MADS:g} "
            f"robust sds and {OUTLIER_RATIO:g}x above the steps' median {med:.4g}; step "
            f"{steps[worst]:g}: {x[worst]:.4g}, "
            f"{x[worst] / med:.3g}x): the fit and the held-out validation take it as it is (a warm-up, a "
            "checkpoint save, a retry, a stall?); to leave a step out, empty its cell or cut it with --steps"
        )
    return notes


def outlier_steps(log: TrainingLog) -> list[int]:
    """The steps :func:`outlier_notes` flags in any column, in order (the held-out guard's warning
    names them as the likely cause of a miss)."""
    from pipesim.calibrate.cells import COLUMNS
    from pipesim.calibrate.result import outlying

    out: set[int] = set()
    for c in COLUMNS:
        if not (c.startswith("timing_s/") or c == "response_length/mean") or not log.has(c):
            continue
        x, steps = log.col(c), log.steps
        if c == "timing_s/param_sync":
            x, steps = x[x > 0], steps[x > 0]
        out.update(int(s) for s in steps[outlying(x)])
    return sorted(out)
