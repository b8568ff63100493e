"""A calibrated spec's prediction with intervals: the design run with the calibrated values drawn
from their intervals (``pipesim run CALIBRATED.toml --intervals N``).

Each of ``n`` draws takes every value of ``[calibration.values]`` so that 2.5% of the draws fall
below its interval and 2.5% above it (:func:`draw_value`): a two-piece normal centred on the value,
each side's standard deviation its end's distance over 1.96 (an interval symmetric about the value:
one normal, ``sd = (hi - lo) / 3.92``). An efficiency (``fwd_bwd_efficiency``, ``fwd_efficiency``,
``mfu``) is drawn on its reciprocal, the seconds per FLOP the trainer's fit is linear in and its
interval symmetric about (:func:`pipesim.calibrate.fitbounds.widen` widens ``1 / v``), and mapped
back. Before, every value was one normal with ``sd = (below + above) / 3.92``: an efficiency of
0.2586, 95% [0.1537, 0.8153] (symmetric about its reciprocal, not about itself), drew 26.8% of its
draws below 0.1537 and 6% at the 0.001 floor (a trainer 250 times slower), and a 4:4 prediction
read 620 to 32,037 samples/h. An end that is open (``inf``: an efficiency whose reciprocal's
interval reaches 0) counts as the other end's distance. A value with no interval, or outside its
interval (a what-if, ``--set calibration.values.KEY``), is held at itself, not drawn
(:func:`held_values`; the ranges' head counts what was drawn and :func:`conditional_on` names the
rest): the interval measured the fitted value, and nothing measured says how far another one may
move. Before, a value above its interval drew every draw below it (``step_s`` 30 with [2.944,
3.044]: a throughput of 5,203 printed with the range [5,277, 7,876]). Each draw is cut to the
value's valid range (:func:`pipesim.plan.runspec_calibration.value_range`, inside an open bound: a
drift above -1, a median above 0), and each run has its own seed (``run.seed + 1 + i``), so the
spread holds both the calibration's uncertainty and the run's own randomness. The interval of a
metric is the 2.5th and 97.5th percentiles of the draws. Values are drawn independently: the fit's
correlations (the efficiency's with the fixed costs, for one) are not kept, which widens the
trainer's interval somewhat. Except where they are one value: the constants of a profile scaled as
a whole (:mod:`pipesim.calibrate.scale`, their ``method`` says so) share one normal draw, so a draw
makes the whole trainer slower or faster, as the one fitted scale does (a fixed cost and an
efficiency's reciprocal both grow with it); drawn apart, five constants of one scale would average
out and narrow the interval.

The ranges hold what the calibration measured, given the rest: a value the log did not identify
is the spec's (its profile's constants for phases the log has no column for, the spec's sigma
without a clip ratio) and is not drawn; :func:`conditional_on` names them, and the command prints
it under the ranges. So is a multi-turn spec's tool latency, which no log column fits: the decode
overhead took up its error (:mod:`pipesim.calibrate.agent`), and another design pays that error
per decode iteration, not per tool call (a 4 s latency for a logged 8 s: 7,223 samples/h, 95%
[5,751, 8,020], for a true 12,249); :func:`conditional_on` says so for an agent spec.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pipesim.calibrate.scale import SCALE_METHOD
from pipesim.core.errors import check_int, shown
from pipesim.plan.runspec import RunSpec, from_dict, run
from pipesim.plan.runspec_calibration import value_range

__all__ = [
    "MAX_DRAWS",
    "METRICS",
    "RECIPROCAL",
    "PredictInterrupted",
    "conditional_on",
    "draw_value",
    "held_values",
    "outside",
    "predict",
    "ranges_head",
]

MAX_DRAWS = 1000
"""The most runs ``--intervals`` takes: each is a whole run (a second or more), and percentiles of
1,000 draws are already steady to a fraction of their width."""

METRICS = (
    "throughput_per_hour",
    "timing_s/step",
    "timing_s/gen",
    "timing_s/update_actor",
    "staleness_mean",
    "fully_async/trainer/idle_ratio",
)
_BOUNDS = {
    "mfu": (1e-3, 1.0),
    "fwd_bwd_efficiency": (1e-3, 1.0),
    "fwd_efficiency": (1e-3, 1.0),
    "response_sigma": (0.0, 4.0),
}


RECIPROCAL = ("mfu", "fwd_bwd_efficiency", "fwd_efficiency")
"""The values drawn on their reciprocal (seconds per FLOP), where the trainer's fit is linear and
its interval symmetric (the module docstring)."""
_Z95 = 1.959963984540054
"""The standard normal's 97.5th percentile: an end's distance over it is that side's sd."""


def outside(value: float, interval: Any) -> bool:
    """Whether ``value`` lies outside ``interval`` (``[lo, hi]``; None holds nothing: False), a
    what-if ``--set calibration.values.KEY`` put there: :func:`draw_value` holds it."""
    if not interval:
        return False
    lo, hi = (float(x) for x in interval[:2])
    return not lo <= float(value) <= hi


def draw_value(key: str, value: float, interval: Any, z: float) -> float:
    """``key``'s draw at the standard normal ``z``: the two-piece normal whose 2.5th and 97.5th
    percentiles are ``interval``'s ends (on the reciprocal for :data:`RECIPROCAL`), cut to the
    value's range (the module docstring). ``interval`` None, or a value outside it (a what-if,
    :func:`outside`): the value itself, held. Before, a value above its interval's upper end had a
    negative upper side, so every draw fell below it (``step_s`` 30 with [2.944, 3.044] put none of
    its draws above 30, and the range of a what-if's throughput left out its own value)."""
    if outside(value, interval):
        interval = None  # the fit measured another value: nothing says how far this one may move
    lo, hi = (float(x) for x in (interval or [value, value])[:2])
    if not interval:
        x = below = above = value  # held: the value itself (not 1 / (1 / value), a bit off it)
    elif key in RECIPROCAL and value > 0:
        r = 1.0 / value
        r_lo = 0.0 if math.isinf(hi) else 1.0 / hi if hi > 0 else math.inf  # the ends swap
        r_hi = 1.0 / lo if lo > 0 else math.inf
        below, above = r - r_lo, r_hi - r
        below, above = (below if math.isfinite(below) else above), (above if math.isfinite(above) else below)
        x_r = r + (below if z < 0 else above) / _Z95 * z
        x = 1.0 / x_r if x_r > 0 else math.inf  # at or past 0 s per FLOP: the range's top
    else:
        below, above = value - lo, hi - value
        below, above = (below if math.isfinite(below) else above), (above if math.isfinite(above) else below)
        x = value + (below if z < 0 else above) / _Z95 * z
    if not math.isfinite(below) or not math.isfinite(above):
        x = value  # neither end known: the value
    lo_k, hi_k, open_below = value_range(key)  # the value's own range (a drift's goes below 0)
    a, b = _BOUNDS.get(key, (lo_k, hi_k))
    a, b = max(a, math.nextafter(lo_k, math.inf) if open_below else lo_k), min(b, hi_k)
    return min(max(x, a), b)


def _draw(
    values: dict[str, float],
    intervals: dict[str, Any],
    rng: np.random.Generator,
    methods: dict[str, Any] | None = None,
) -> dict[str, float]:
    out = {}
    methods = methods or {}
    scaled = [k for k in values if methods.get(k) == SCALE_METHOD]
    shared = float(rng.standard_normal()) if scaled else 0.0  # the one draw of a profile's scale
    for k, v in values.items():
        # a scaled profile's one draw: slower is a longer fixed cost and a longer 1 / efficiency
        z = shared if k in scaled else float(rng.standard_normal())
        out[k] = draw_value(k, float(v), intervals.get(k), z)
    return out


_TRAINER = ("fwd_bwd_efficiency", "fwd_efficiency", "micro_batch_s", "optimizer_step_s", "step_s")
_SHOWN = ("response_median_tokens", "response_sigma", *_TRAINER, "sync_time_s", "iteration_overhead_s")


def conditional_on(rs: RunSpec) -> list[str]:
    """What a calibrated spec's ranges hold fixed (module docstring): for a multi-turn spec, a line
    on its tool latency; one line naming the values the log did not identify (the spec's, not
    drawn), and one where the trainer's split between its phases is the profile's (a log without
    phase columns); empty when every value was fitted and the spec is single-turn.
    On logs of step and gen alone (the profile scaled) or of the step alone, the 4:4 split's 95%
    ranges of throughput, step and update_actor were about +-5% wide and held the true run in 0 or
    1 of 6 logs each (a user's walkthrough): the miss is the profile's split, not noise."""
    cal = rs.data.get("calibration") if isinstance(rs, RunSpec) else None
    if not isinstance(cal, dict) or not isinstance(cal.get("values"), dict) or not cal["values"]:
        return []
    values, methods = cal["values"], cal.get("method") or {}
    lines = []
    agent = rs.plan.workload.agent
    if agent is not None:
        lines.append(
            "these ranges hold given the spec's tool latency (agent.tool_latency_s = "
            f"{agent.tool_latency_s:g} s, tool_latency_sigma = {agent.tool_latency_sigma:g}; not "
            "fitted, not drawn): an error in it "
            "was fitted into iteration_overhead_s, which another design pays per decode iteration, "
            "so the ranges can miss by more than their width (docs/calibrate.md)"
        )
    kept = [k for k in _SHOWN if k not in values]
    if kept:
        lines.append(
            "these ranges hold given the spec's own values for what the log did not identify (not "
            f"drawn): {', '.join(kept)}"
        )
    if held := held_values(rs):
        lines.append(
            "these calibrated values are held, not drawn: "
            + "; ".join(f"{k} = {values[k]:g} ({why})" for k, why in held.items())
        )
    if not any(k in values and methods.get(k) != SCALE_METHOD for k in _TRAINER[:2]):
        what = (
            "scaled as a whole to the logged step less gen"
            if any(methods.get(k) == SCALE_METHOD for k in _TRAINER)
            else "as the spec has it"
        )
        lines.append(
            f"the log has no trainer-phase column: the trainer's profile is {what}, its split between "
            "update_actor, old_log_prob and the rest the profile's, not measured; on another split "
            "these ranges can miss by more than their width (docs/calibrate.md)"
        )
    return lines


def held_values(rs: RunSpec) -> dict[str, str]:
    """The ``[calibration.values]`` that ``--intervals`` holds at their value, each with why: no
    interval in ``[calibration.intervals]``, or a value outside its interval (a what-if,
    :func:`draw_value`). Every other value is drawn."""
    cal = rs.data.get("calibration") if isinstance(rs, RunSpec) else None
    values = cal.get("values") if isinstance(cal, dict) else None
    if not isinstance(cal, dict) or not isinstance(values, dict):
        return {}
    got = cal.get("intervals")
    intervals: dict[str, Any] = got if isinstance(got, dict) else {}
    out = {}
    for k, v in values.items():
        iv = intervals.get(k)
        if not iv:
            out[k] = "no interval"
        elif outside(v, iv):
            out[k] = f"outside its interval [{float(iv[0]):g}, {float(iv[1]):g}]: a what-if"
    return out


def ranges_head(rs: RunSpec, n: int) -> str:
    """The line above ``--intervals``' ranges: what the ``n`` runs drew (:func:`held_values`).
    Before, a spec whose values had no interval was said to draw them, and its range was the
    runs' seed-to-seed spread alone."""
    cal = rs.data.get("calibration") if isinstance(rs, RunSpec) else None
    got = cal.get("values") if isinstance(cal, dict) else None
    values: dict[str, Any] = got if isinstance(got, dict) else {}
    held = held_values(rs)
    drawn = [k for k in values if k not in held]
    if not drawn:
        return (
            f"95% range over {n} runs at other seeds, no calibrated value drawn (none has an interval "
            "it lies in: notes below): the runs' own seed-to-seed spread"
        )
    if not held:
        return f"95% range over {n} runs with the calibrated values drawn from their intervals"
    return (
        f"95% range over {n} runs with {len(drawn)} of the {len(values)} calibrated values drawn from "
        f"their intervals ({', '.join(drawn)}; the rest held: notes below)"
    )


class PredictInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, where the command maps it) during :func:`predict`: ``done`` of ``n`` draws
    had finished, and ``ranges`` holds what predict returns computed over those ``done`` (None
    when fewer than 2 had, or the spec's own run had not). A KeyboardInterrupt, so a caller that
    does not know it still stops; before, an interrupt after 900 of 1,000 draws lost them all."""

    def __init__(self, done: int, n: int, ranges: dict[str, dict[str, float]] | None) -> None:
        super().__init__(f"interrupted after {done} of {n} draws")
        self.done, self.n, self.ranges = done, n, ranges


def predict(
    rs: RunSpec,
    n: int,
    rng: np.random.Generator,
    *,
    on_draw: Callable[[int], None] | None = None,
) -> dict[str, dict[str, float]]:
    """Metric -> ``{"value", "lo", "hi"}``: the spec's own run and the 95% range of ``n`` runs with
    the calibrated values drawn from their intervals (module docstring). ``on_draw`` is called
    with the number of draws finished after each (a progress bar); an interrupt raises
    :class:`PredictInterrupted` with the ranges of the draws finished by then."""
    check_int("n", n, 2, MAX_DRAWS)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy Generator, got {shown(rng)}")
    cal = rs.data.get("calibration")
    if not isinstance(cal, dict) or not cal.get("values"):
        raise ValueError(
            "--intervals needs a calibrated spec: a [calibration] table with values (pipesim calibrate)"
        )
    point: dict[str, float] | None = None
    draws: list[list[float]] = []
    try:
        point = run(rs).summary()
        for i in range(n):
            data = copy.deepcopy(rs.data)
            data["calibration"]["values"] = _draw(
                cal["values"], cal.get("intervals", {}), rng, cal.get("method", {})
            )
            data.setdefault("run", {})["seed"] = rs.seed + 1 + i
            s = run(from_dict(data)).summary()
            draws.append([float(s[m]) for m in METRICS])
            if on_draw is not None:
                on_draw(len(draws))
    except KeyboardInterrupt:
        ranges = _ranges(point, draws) if point is not None and len(draws) >= 2 else None
        raise PredictInterrupted(len(draws), n, ranges) from None
    assert point is not None
    return _ranges(point, draws)


def _ranges(point: dict[str, float], draws: list[list[float]]) -> dict[str, dict[str, float]]:
    """Each metric's value in ``point`` and the 2.5th and 97.5th percentiles of ``draws``."""
    arr = np.array(draws)
    lo, hi = np.percentile(arr, [2.5, 97.5], axis=0)
    return {
        m: {"value": float(point[m]), "lo": float(lo[j]), "hi": float(hi[j])} for j, m in enumerate(METRICS)
    }
