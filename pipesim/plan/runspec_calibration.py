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

* ``design``, ``cluster``, ``model``: the setup a calibrated ``sync_time_s`` was measured on,
  where the spec's own tables are another (:func:`with_logged_design` writes them before a
  ``--set`` moves those); the sync is a factor on the sync model taken there (:func:`calibrated_sync`).

Every error is a :class:`~pipesim.plan.checks.PlanError` naming ``calibration.values.KEY`` or
``calibration.intervals.KEY`` (``calibration.design.KEY``, ... for the logged setup).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipesim.compute.roofline import MAX_FIXED_COST_S
from pipesim.core.validate import FieldError, check_tail, shown
from pipesim.plan.checks import PlanError, Table, is_number, number

__all__ = [
    "CALIBRATED",
    "CALIBRATION_KEYS",
    "LOGGED_TABLES",
    "LoggedSetup",
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
    "cluster",
    "model",
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


LOGGED_TABLES = ("design", "cluster", "model")
"""The tables a calibrated weight sync was measured on: the design, and the cluster and model the
sync model reads (the GPUs, their count and links, the weights, the trainer's profile). A ``--set``
pair that moves one keeps the file's as ``calibration.TABLE`` first (:func:`with_logged_design`)."""


@dataclass(frozen=True)
class LoggedSetup:
    """The setup a calibration's log was measured on where ``calibration.cluster`` or
    ``calibration.model`` names it (:func:`logged_design`): the logged ``design``, and ``data``,
    the run spec's tables with those in place of ``[cluster]`` and ``[model]`` (``base`` resolves
    their relative paths)."""

    design: Any
    data: Mapping[str, Any]
    base: Path | None = None

    def spec(self, cal: Mapping[str, float]) -> Any:
        """The :class:`~pipesim.plan.space.PlanSpec` of the logged setup, every calibrated value
        but the sync applied (:func:`pipesim.plan.runspec.plan_spec`); PlanError naming
        ``calibration.cluster.KEY`` or ``calibration.model.KEY`` for a bad one. None where another
        table fails, or a relative ``calibration.model.name`` without ``base`` (a path read from
        the working folder): the run spec's own tables read, so the factor is taken on its setup,
        as before ``calibration.cluster`` was written."""
        from pipesim.plan.runspec import plan_spec, plan_tables

        rest = {k: v for k, v in cal.items() if k != "sync_time_s"}
        try:
            return plan_spec(plan_tables(self.data), rest, self.base)
        except PlanError as e:
            table = (e.field or "").split(".")[0]
            cal_t = self.data.get("calibration")
            if table not in ("cluster", "model") or not isinstance(cal_t, Mapping) or table not in cal_t:
                return None
            name = self.data["model"].get("name") if isinstance(self.data.get("model"), Mapping) else None
            if e.field == "model.name" and self.base is None and _maybe_relative_path(name):
                return None
            where = f"calibration.{e.field}"
            msg = str(e).replace(e.field, where, 1) if e.field in str(e) else f"{where}: {e}"
            raise PlanError(f"{msg} (the setup the calibrated sync_time_s was measured on)", where) from None


def _maybe_relative_path(name: object) -> bool:
    """Whether a ``model.name`` may be a relative path (a ``config.json`` or its folder)."""
    return isinstance(name, str) and not Path(name).is_absolute() and ("/" in name or name.endswith(".json"))


def logged_design(data: Mapping[str, Any], base: Path | None = None) -> Any:
    """The design the calibration's log was measured on (a :class:`~pipesim.plan.space.Design`):
    ``calibration.design`` where the table names one (:func:`with_logged_design` writes it before
    a ``--set design.KEY`` moves the spec's own), else the spec's ``[design]``, which ``pipesim
    calibrate`` writes as it fitted; None without either. Where ``calibration.cluster`` or
    ``calibration.model`` names the cluster or model it was measured on (written before a ``--set
    cluster.KEY`` or ``model.KEY``), a :class:`LoggedSetup` of that design on them (``base``
    resolves their relative paths). PlanError naming ``calibration.design.KEY`` for a bad design,
    ``calibration.cluster`` or ``calibration.model`` for one that is not a table."""
    from pipesim.plan.runspec_checks import read_design

    cal = data.get("calibration")
    design = None if data.get("design") is None else read_design(data["design"])
    if isinstance(cal, Mapping) and "design" in cal:
        try:
            design = read_design(cal["design"])
        except PlanError as e:
            where = f"calibration.{e.field}" if e.field else "calibration.design"
            raise PlanError(str(e).replace("design", "calibration.design", 1), where) from None
    if design is None or not isinstance(cal, Mapping) or not any(k in cal for k in ("cluster", "model")):
        return design
    tables = dict(data)
    for k in ("cluster", "model"):
        if k in cal:
            if not isinstance(cal[k], Mapping):
                raise PlanError(
                    f"calibration.{k} must be a table (the [{k}] keys the log was measured on), "
                    f"got {shown(cal[k])}",
                    f"calibration.{k}",
                )
            tables[k] = dict(cal[k])
    return LoggedSetup(design, tables, base)


def with_logged_design(data: Mapping[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """``data`` with each of its :data:`LOGGED_TABLES` (``[design]``, ``[cluster]``, ``[model]``)
    that a ``--set`` pair is about to change (``design.KEY=...``) kept as ``calibration.TABLE``,
    where a calibrated weight sync is there to scale and the calibration names none yet: the sync
    was measured on the file's setup, not on the one set (:func:`calibrated_sync`). Before, only
    the design was kept: ``--set cluster.n_gpus=16`` on a spec logged on 8 GPUs took the factor on
    16, and synced in 0.29 s for the 2.54 s the factor times the 16-GPU model gives."""
    out = dict(data)
    cal = out.get("calibration")
    if not isinstance(cal, Mapping):
        return out
    values = cal.get("values")
    if not isinstance(values, Mapping) or "sync_time_s" not in values:
        return out
    moved = {p.partition("=")[0].strip().split(".")[0] for p in sets}
    kept = {
        k: dict(out[k])
        for k in LOGGED_TABLES
        if k in moved and k not in cal and isinstance(out.get(k), Mapping)
    }
    if kept:
        out["calibration"] = {**cal, **kept}
    return out


def calibrated_sync(spec: Any, cal: Mapping[str, float], logged: Any) -> Any:
    """``spec`` (a :class:`~pipesim.plan.space.PlanSpec`) with the calibrated ``sync_time_s``
    applied as a factor on the weight-sync model: ``sync_scale`` times ``measured / modelled``, the
    modelled sync (:func:`pipesim.plan.build.sync_seconds`: ``run.sync_time_s`` where given, else
    the cluster's :class:`~pipesim.compute.sync.SyncModel`) of the ``logged`` design (a
    :class:`LoggedSetup`: that design on the cluster and model the log was measured on; a design:
    on ``spec``'s). The logged setup then syncs in the measured seconds, and every other design,
    cluster or model in its modelled seconds times the same factor: the sync model's gather,
    transfer and load move with the trainer's GPU count, the placement, the engine's tp, the GPUs,
    their links and the weights, which the one measurement does not see. Before, the measured
    seconds replaced every design's sync: a 12:4 split of a log measured colocated (1.02 s) ran its
    1.98 s sync at 0.97 s. Where there is no model to scale (no logged design, one that does not
    fit its cluster, a modelled or measured 0 s), the measured seconds are every design's, as
    before."""
    measured = cal.get("sync_time_s")
    if measured is None:
        return spec
    at, design = spec, logged
    if isinstance(logged, LoggedSetup):
        at, design = logged.spec(cal) or spec, logged.design
    modelled = 0.0
    if design is not None:
        from pipesim.plan.build import design_cluster, sync_seconds

        try:
            _, cluster = design_cluster(at, design)
            modelled = float(sync_seconds(at, design, cluster))
        except (PlanError, ValueError):
            modelled = 0.0
    if not (measured > 0 and 0 < modelled < math.inf):
        return spec.with_(sync_time_s=measured)
    return spec.with_(sync_scale=spec.sync_scale * measured / modelled)
