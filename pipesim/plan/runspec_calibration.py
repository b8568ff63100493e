"""A run spec's ``[calibration]`` table, checked (``docs/runspec.md``): the ``values`` a run applies
and their ``intervals``, each under one rule per key (:func:`check_value`), so that a value, an end
of its interval and a draw of ``pipesim run --intervals`` (:mod:`pipesim.calibrate.predict`) obey
the same one.

* ``values``: the keys of :data:`CALIBRATED`, each a finite number in its range
  (:data:`RANGES`: an efficiency or the MFU in (0, 1], ``iteration_overhead_s`` at most
  :data:`~pipesim.compute.roofline.MAX_FIXED_COST_S`, ``drift_per_version`` above -1,
  ``response_median_tokens`` above 0, ``response_sigma`` >= 0, a time per step in [0, a week]).
* ``intervals``: the same keys, each ``[lo, hi]``: two numbers, ``lo <= hi``, ``lo`` finite and
  ``hi`` finite or ``inf`` (open above: ``pipesim calibrate`` writes that for an efficiency whose
  reciprocal's interval reaches 0); each end in the value's range, its bounds included (an
  efficiency's interval may reach 0: a fit with no residual degrees of freedom bounds it no better),
  except that ``lo`` may lie below it (``pipesim calibrate`` before 0.3 wrote a fixed cost's
  interval through 0, ``micro_batch_s = [-0.0019, 0.395]``; every draw is cut to the range, so such
  a file still loads, its draws kept in range), and, for the response lengths, a median end with the
  sigma in effect (and a sigma end with the median) must not overflow a draw
  (:func:`~pipesim.core.validate.check_tail`), as the values must not. An interval need not hold its
  value: ``--set calibration.values.KEY`` asks what-ifs outside it, and ``--intervals`` draws values
  outside it.

Every error is a :class:`~pipesim.plan.checks.PlanError` naming ``calibration.values.KEY`` or
``calibration.intervals.KEY``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pipesim.compute.roofline import MAX_FIXED_COST_S
from pipesim.core.validate import FieldError, check_tail, shown
from pipesim.plan.checks import PlanError, Table, is_number, number

__all__ = [
    "CALIBRATED",
    "CALIBRATION_KEYS",
    "PROFILE_KEYS",
    "MAX_STEP_TIME_S",
    "RANGES",
    "calibrated",
    "calibrated_sync",
    "check_value",
    "logged_design",
    "with_logged_design",
    "value_range",
]

CALIBRATION_KEYS = (
    "values",
    "intervals",
    "method",
    "residuals",
    "log",
    "log_sha256",
    "steps",
    "not_identified",
    "seed",
    "design",
)
PROFILE_KEYS = (
    "fwd_bwd_efficiency",
    "fwd_efficiency",
    "micro_batch_s",
    "optimizer_step_s",
    "step_s",
    "sample_s",
)
"""The framework profile's constants a calibration fits (:data:`pipesim.compute.phasefit.FITTED`)."""
CALIBRATED = (
    "mfu",
    "step_overhead_s",
    "iteration_overhead_s",
    "response_median_tokens",
    "response_sigma",
    "sync_time_s",
    "drift_per_version",
    *PROFILE_KEYS,
)
"""The keys of ``[calibration.values]`` a run applies (see :mod:`pipesim.plan.runspec`)."""
MAX_STEP_TIME_S = 7 * 86400.0
"""The longest seconds a calibrated time per step may be (``sync_time_s``, ``step_overhead_s``, the
profile's fixed costs), a week: the longest time a training log's ``timing_s/*`` cell may hold
(:data:`pipesim.calibrate.log.MAX_TIMING_S`), so what a log fits stays loadable; a longer step is a
unit slip, and its run's numbers nonsense (a draw of ``[0, 1e308]`` made an idle ratio of 1e-306)."""
_WEEK = (0.0, MAX_STEP_TIME_S, False)
RANGES: dict[str, tuple[float, float, bool]] = {
    "mfu": (0.0, 1.0, True),
    "fwd_bwd_efficiency": (0.0, 1.0, True),
    "fwd_efficiency": (0.0, 1.0, True),
    "iteration_overhead_s": (0.0, MAX_FIXED_COST_S, False),
    "drift_per_version": (-1.0, math.inf, True),
    "response_median_tokens": (0.0, math.inf, True),
    "response_sigma": (0.0, math.inf, False),
    **{k: _WEEK for k in ("sync_time_s", "step_overhead_s", "micro_batch_s", "optimizer_step_s")},
    **{k: _WEEK for k in ("step_s", "sample_s")},
}
"""``key -> (lo, hi, open below)`` of each calibrated value: the MFU and the efficiencies in (0, 1]
(``TrainerConfig``, ``FrameworkProfile``), the decode overhead a fixed cost of at most an hour
(``EngineConfig``), a drift above -1 (lengths shrinking, never to 0), a median above 0
(``workload.response``), a sigma >= 0, the times per step up to :data:`MAX_STEP_TIME_S`."""
_RESPONSE = {"response_median_tokens": "median_tokens", "response_sigma": "sigma"}


def value_range(key: str) -> tuple[float, float, bool]:
    """``(lo, hi, open below)`` of a calibrated value (:data:`RANGES`; a key not there ``[0, inf)``)."""
    return RANGES.get(key, (0.0, math.inf, False))


def check_value(where: str, key: str, x: object, closed: bool = False) -> float:
    """``x`` as a float if it is a finite number in ``key``'s range (``closed``: its open bound
    included, as an interval's end may be); PlanError naming ``where`` otherwise."""
    lo, hi, open_below = value_range(key)
    strict = open_below and not closed
    what = f" {'>' if strict else '>='} {lo:g}" + (f" and <= {hi:g}" if hi < math.inf else "")
    return number(
        where,
        x,
        None if strict else lo,
        None if hi == math.inf else hi,
        above=lo if strict else None,
        what=what,
    )


def calibrated(data: Mapping[str, Any]) -> dict[str, float]:
    """The values of a run spec's ``[calibration.values]`` (``data``: the spec's tables), checked,
    and its ``[calibration.intervals]`` checked against them (module docstring)."""
    cal = Table("calibration", data.get("calibration", {}), CALIBRATION_KEYS)
    out: dict[str, float] = {}
    if "values" in cal:
        v = cal.table("values", CALIBRATED)
        out = {k: check_value(v.name(k), k, v.raw(k)) for k in CALIBRATED if k in v}
    if "intervals" in cal:
        t = cal.table("intervals", CALIBRATED)
        for k in CALIBRATED:
            if k in t:
                _interval(t.name(k), k, t.raw(k), data, out)
    return out


def _interval(where: str, key: str, v: object, data: Mapping[str, Any], values: dict[str, float]) -> None:
    """One ``[lo, hi]`` of ``[calibration.intervals]`` (module docstring)."""
    if not isinstance(v, list | tuple) or len(v) != 2:
        raise PlanError(f"{where} must be a list of two numbers [lo, hi], got {shown(v)}", where)
    lo, hi = v
    for end, x in (("lower", lo), ("upper", hi)):
        if end == "upper" and isinstance(x, float) and x == math.inf:
            continue  # open above
        if not is_number(x):
            raise PlanError(
                f"{where}: the {end} end must be a finite number"
                + (" (or inf: open above)" if end == "upper" else "")
                + f", got {shown(x)}",
                where,
            )
        if end == "lower" and x < value_range(key)[0]:  # cut there by every draw (predict.py)
            continue
        try:
            check_value(f"{where} ({end} end)", key, x, closed=True)
        except PlanError as e:
            raise PlanError(f"{e} (the range of calibration.values.{key})", where) from None
    if lo > hi:
        raise PlanError(f"{where} must be [lo, hi] with lo <= hi, got {shown(v)}", where)
    if key in _RESPONSE:
        other = "response_sigma" if key == "response_median_tokens" else "response_median_tokens"
        with_ = _in_effect(data, values, other)
        for x in (lo, hi):
            if with_ is None or not math.isfinite(x):
                continue
            median, sigma = (x, with_) if key == "response_median_tokens" else (with_, x)
            try:
                check_tail(("response_median_tokens", "response_sigma"), median, sigma)
            except FieldError as e:
                raise PlanError(f"{where}: {e}", where) from None


def _in_effect(data: Mapping[str, Any], values: dict[str, float], key: str) -> float | None:
    """The calibrated value of ``key``, else ``workload.response``'s, else None (a trace, a default)."""
    if key in values:
        return values[key]
    wl = data.get("workload")
    r = wl.get("response") if isinstance(wl, Mapping) else None
    x = r.get(_RESPONSE[key]) if isinstance(r, Mapping) else None
    return float(x) if x is not None and is_number(x) else None


CALIBRATED_OVER = {
    "model.mfu": "mfu",
    "workload.response.median_tokens": "response_median_tokens",
    "workload.response.sigma": "response_sigma",
    "workload.drift_per_version": "drift_per_version",
    "run.sync_time_s": "sync_time_s",
}
"""The table keys a ``[calibration.values]`` value overrides (:func:`plan_tables`), by the value."""


def check_sets_not_calibrated(data: Mapping[str, Any], sets: Sequence[str]) -> None:
    """PlanError naming the key where a ``--set`` changes a table value the spec's calibration
    overrides: the run would ignore it (``--set workload.response.median_tokens=2000`` on a
    calibrated spec ran unchanged, silently)."""
    cal = data.get("calibration")
    values = cal.get("values") if isinstance(cal, Mapping) else None
    if not isinstance(values, Mapping):
        return
    for pair in sets:
        key = pair.partition("=")[0].strip()
        if (ck := CALIBRATED_OVER.get(key)) is not None and ck in values:
            raise PlanError(
                f"{key}: the spec's [calibration.values] {ck} = {values[ck]!r} overrides it, so this "
                f"--set would change nothing; --set calibration.values.{ck}=... changes the run",
                key,
            )


def logged_design(data: Mapping[str, Any]) -> Any:
    """The design the calibration's log was measured on (a :class:`~pipesim.plan.space.Design`):
    ``calibration.design`` where the table names one (:func:`with_logged_design` writes it before
    a ``--set design.KEY`` moves the spec's own), else the spec's ``[design]``, which ``pipesim
    calibrate`` writes as it fitted; None without either. PlanError naming
    ``calibration.design.KEY`` for a bad one."""
    from pipesim.plan.runspec_checks import read_design

    cal = data.get("calibration")
    if isinstance(cal, Mapping) and "design" in cal:
        try:
            return read_design(cal["design"])
        except PlanError as e:
            where = f"calibration.{e.field}" if e.field else "calibration.design"
            raise PlanError(str(e).replace("design", "calibration.design", 1), where) from None
    return None if data.get("design") is None else read_design(data["design"])


def with_logged_design(data: Mapping[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """``data`` with its ``[design]`` kept as ``calibration.design`` where a calibrated weight sync
    is there to scale and a ``--set`` pair is about to change the design (``design.KEY=...``): the
    sync was measured on the file's design, not on the one set (:func:`calibrated_sync`)."""
    out = dict(data)
    cal = out.get("calibration")
    if not isinstance(cal, Mapping) or "design" in cal or not isinstance(out.get("design"), Mapping):
        return out
    values = cal.get("values")
    moves = any(p.partition("=")[0].strip().split(".")[0] == "design" for p in sets)
    if moves and isinstance(values, Mapping) and "sync_time_s" in values:
        out["calibration"] = {**cal, "design": dict(out["design"])}
    return out


def calibrated_sync(spec: Any, cal: Mapping[str, float], logged: Any) -> Any:
    """``spec`` (a :class:`~pipesim.plan.space.PlanSpec`) with the calibrated ``sync_time_s``
    applied as a factor on the weight-sync model: ``sync_scale`` times ``measured / modelled``, the
    modelled sync (:func:`pipesim.plan.build.sync_seconds`: ``run.sync_time_s`` where given, else
    the cluster's :class:`~pipesim.compute.sync.SyncModel`) of the ``logged`` design. The logged
    design then syncs in the measured seconds, and every other design in its modelled seconds
    times the same factor: the sync model's gather, transfer and load move with the trainer's GPU
    count, the placement and the engine's tp, which the one measurement does not see. Before, the
    measured seconds replaced every design's sync: a 12:4 split of a log measured colocated
    (1.02 s) ran its 1.98 s sync at 0.97 s. Where there is no model to scale (no logged design,
    one that does not fit the cluster, a modelled or measured 0 s), the measured seconds are every
    design's, as before."""
    measured = cal.get("sync_time_s")
    if measured is None:
        return spec
    modelled = 0.0
    if logged is not None:
        from pipesim.plan.build import design_cluster, sync_seconds

        try:
            _, cluster = design_cluster(spec, logged)
            modelled = float(sync_seconds(spec, logged, cluster))
        except (PlanError, ValueError):
            modelled = 0.0
    if not (measured > 0 and 0 < modelled < math.inf):
        return spec.with_(sync_time_s=measured)
    return spec.with_(sync_scale=spec.sync_scale * measured / modelled)
