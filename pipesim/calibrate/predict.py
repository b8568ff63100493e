"""A calibrated spec's prediction with intervals: the design run with the calibrated values drawn
from their intervals (``pipesim run CALIBRATED.toml --intervals N``).

Each of ``n`` draws takes every value of ``[calibration.values]`` from a normal distribution whose
95% interval is the value's (``sd = (hi - lo) / 3.92``; an interval open above, the MFU's when the
slope's interval reaches zero, counts as the distance below on both sides), cut to the value's valid
range (:func:`pipesim.plan.runspec_calibration.value_range`, inside an open bound: a drift above
-1, a median above 0), and runs the design with its own seed (``run.seed + 1 + i``), so the spread
holds both the calibration's uncertainty and the run's own randomness. The interval of a metric is
the 2.5th and 97.5th percentiles of the draws. Values are drawn independently: the fit's
correlations (the MFU's with the step overhead, for one) are not kept, which widens the trainer's
interval somewhat. Except where they are one value: the constants of a profile scaled as a whole
(:mod:`pipesim.calibrate.scale`, their ``method`` says so) share one normal draw, its sign turned
for the efficiencies, so a draw makes the whole trainer slower or faster, as the one fitted scale
does; drawn apart, five constants of one scale would average out and narrow the interval.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np

from pipesim.calibrate.scale import EFFICIENCIES, SCALE_METHOD
from pipesim.core.errors import check_int, shown
from pipesim.plan.runspec import RunSpec, from_dict, run
from pipesim.plan.runspec_calibration import value_range

__all__ = ["MAX_DRAWS", "METRICS", "predict"]

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
        lo, hi = (intervals.get(k) or [v, v])[:2]
        below, above = v - float(lo), float(hi) - v
        sd = (below + (above if math.isfinite(above) else below)) / 3.92
        if k in scaled:
            z = -shared if k in EFFICIENCIES else shared
        else:
            z = float(rng.standard_normal())
        x = v + sd * z
        lo_k, hi_k, open_below = value_range(k)  # the value's own range (a drift's goes below 0)
        a, b = _BOUNDS.get(k, (lo_k, hi_k))
        a, b = max(a, math.nextafter(lo_k, math.inf) if open_below else lo_k), min(b, hi_k)
        out[k] = min(max(x, a), b)
    return out


def predict(rs: RunSpec, n: int, rng: np.random.Generator) -> dict[str, dict[str, float]]:
    """Metric -> ``{"value", "lo", "hi"}``: the spec's own run and the 95% range of ``n`` runs with
    the calibrated values drawn from their intervals (module docstring)."""
    check_int("n", n, 2, MAX_DRAWS)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy Generator, got {shown(rng)}")
    cal = rs.data.get("calibration")
    if not isinstance(cal, dict) or not cal.get("values"):
        raise ValueError(
            "--intervals needs a calibrated spec: a [calibration] table with values (pipesim calibrate)"
        )
    point = run(rs).summary()
    draws = []
    for i in range(n):
        data = copy.deepcopy(rs.data)
        data["calibration"]["values"] = _draw(
            cal["values"], cal.get("intervals", {}), rng, cal.get("method", {})
        )
        data.setdefault("run", {})["seed"] = rs.seed + 1 + i
        s = run(from_dict(data)).summary()
        draws.append([float(s[m]) for m in METRICS])
    arr = np.array(draws)
    lo, hi = np.percentile(arr, [2.5, 97.5], axis=0)
    return {
        m: {"value": float(point[m]), "lo": float(lo[j]), "hi": float(hi[j])} for j, m in enumerate(METRICS)
    }
