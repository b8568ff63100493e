"""What a saved run's contents must say, beyond their hashes (used by :mod:`pipesim.io.saved`).

The hashes of :mod:`pipesim.io.saved_files` catch a file changed after the save; these checks
catch a run whose files disagree with each other, however it came about (a format-1 run, which
has no hashes; a summary edited and re-hashed). Each refusal is a :class:`SavedRunError` naming
the file and the field.

- :func:`read_summary`: ``summary.json`` is a JSON object of numbers (NaN and the infinities as
  strings) with the headline keys the views read.
- :func:`check_columns`: each table has the columns the views, the report and the trace read.
- :func:`check_summary`: the summary's counts are those of the tables they come from, as
  :meth:`pipesim.results.run.RunResult.summary` computes them: ``episodes_launched`` the rows of
  ``episodes.parquet``, ``episodes_trained`` the rows of ``trained.parquet`` (and the episodes
  whose status is ``trained``), the other ``episodes_*`` counts the episodes of each status (and
  the truncated ones, and the relaunches in ``lineage.parquet``), ``sim_time_s`` that of
  ``meta.json``, ``staleness_mean`` / ``staleness_max`` those of the trained table's
  ``staleness``, and ``throughput_per_hour`` the trained episodes per simulated hour; and the
  means and shares the tables give exactly: ``staleness_newest_mean`` / ``_max`` from
  ``staleness_newest``, ``trained_duration_mean`` and ``launched_duration_mean`` the mean
  ``duration_s`` of ``trained.parquet`` and ``episodes.parquet``, ``length_bias`` their ratio,
  ``never_trained_share`` 1 - trained / launched, ``truncated_share`` the trained episodes a
  timeout cut. A key the summary lacks is not checked (only the headline keys are required).
- :func:`check_events`: ``events.parquet``'s values are what the views read: integer slots,
  replicas, versions and episode ids (a NaN there stopped the report with "cannot convert float
  NaN to integer", naming no file), intervals inside the run, known kinds, and one ``train``
  event per trained step.
- :func:`scenario_record` / :func:`read_scenario`: ``scenario.json``'s scenario, written and read
  back with a :class:`~pipesim.policies.missing.MissingPolicy` in each slot whose policy this
  process cannot build (its module not registered, or outside the catalog at the save); they live
  in :mod:`pipesim.io.saved_scenario` (they build scenarios through the policy catalog, which no
  check here needs) and are re-exported here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError
from pipesim.io.saved_files import SavedRunError, reading, same_value
from pipesim.io.saved_scenario import OLD_STAND_IN as OLD_STAND_IN  # re-exported
from pipesim.io.saved_scenario import STAND_IN_SLOTS as STAND_IN_SLOTS  # re-exported
from pipesim.io.saved_scenario import STAND_IN_TAIL as STAND_IN_TAIL  # re-exported
from pipesim.io.saved_scenario import read_scenario as read_scenario  # re-exported: saved
from pipesim.io.saved_scenario import saved_name as saved_name  # re-exported: saved
from pipesim.io.saved_scenario import scenario_record as scenario_record  # re-exported: saved

HEADLINE = ("throughput_per_hour", "gen_util", "staleness_mean", "staleness_max", "episodes_trained")
"""Keys of every run's summary that the views, the report and the notebook display read."""

COLUMNS = {
    "events": ("kind", "lane", "slot", "replica", "start_s", "end_s", "version", "episode_id"),
    "trained": (
        "episode_id",
        "step",
        "trained_version",
        "version",
        "staleness",
        "staleness_newest",
        "duration_s",
    ),
    "episode_table": ("episode_id", "task_id", "duration_s", "status", "start_s", "end_s", "version"),
    "lineage": ("episode_id", "parent"),
}
"""The columns of each table that the views, the report and the trace export read."""

STATUS_COUNTS = {
    "episodes_in_flight": "running",
    "episodes_buffered": "buffered",
    "episodes_discarded": "discarded",
    "episodes_aborted": "aborted",
    "episodes_failed": "failed",
}
"""Summary keys that count the episodes of one status (``episodes.parquet``'s ``status``)."""


def json_number(x: Any) -> Any:
    """Summary values as JSON: NaN and infinities as strings (JSON has neither)."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x.item() if hasattr(x, "item") else x


def _from_json_num(x: Any) -> Any:
    return float(x) if isinstance(x, str) and x in ("nan", "inf", "-inf") else x


def read_summary(path: Path, data: bytes) -> dict[str, float]:
    """summary.json as a dict of numbers: a JSON object, every value a number (NaN and the
    infinities as strings), the headline keys present; else a SavedRunError naming the key."""
    with reading(path):
        try:
            raw = json.loads(data.decode("utf-8"))
        except json.JSONDecodeError as exc:
            raise FieldError(f"not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise SavedRunError(f"{path}: must be a JSON object of numbers, got {type(raw).__name__}")
    summary = {}
    for k, v in raw.items():
        v = _from_json_num(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise SavedRunError(f"{path}: {shown(k)} must be a number, got {shown(v)}", str(k))
        summary[str(k)] = v
    missing = [k for k in HEADLINE if k not in summary]
    if missing:
        raise SavedRunError(
            f"{path}: lacks {', '.join(missing)} (edited, or not written by RunResult.save)", missing[0]
        )
    return summary


def check_columns(table: pd.DataFrame, which: str) -> None:
    """A ValueError (inside :func:`reading`) when ``table`` lacks a column that is read."""
    lacking = [c for c in COLUMNS[which] if c not in table.columns]
    if lacking:
        raise FieldError(
            f"lacks the columns {', '.join(lacking)} (edited, or not written by save)", lacking[0]
        )


def _mean(values: pd.Series) -> float:
    return float(values.to_numpy(dtype=float).mean()) if len(values) else 0.0


def _exact(episodes: pd.DataFrame, trained: pd.DataFrame) -> dict[str, tuple[float, str]]:
    n_eps, n_trained = len(episodes), len(trained)
    out: dict[str, tuple[float, str]] = {}
    t_mean, l_mean = _mean(trained["duration_s"]), _mean(episodes["duration_s"])
    out["trained_duration_mean"] = (t_mean, "trained.parquet's duration_s")
    out["launched_duration_mean"] = (l_mean, "episodes.parquet's duration_s")
    out["length_bias"] = (
        t_mean / l_mean if l_mean > 0 else math.nan,
        "the mean duration_s trained / launched",
    )
    out["never_trained_share"] = (1 - n_trained / n_eps if n_eps else 0.0, "1 - trained / launched episodes")
    if "staleness_newest" in trained.columns:
        new = trained["staleness_newest"].to_numpy()
        src = "trained.parquet's staleness_newest"
        out["staleness_newest_max"] = (float(new.max()) if n_trained else 0.0, src)
        out["staleness_newest_mean"] = (int(new.sum()) / n_trained if n_trained else 0.0, src)
    if "truncated" in episodes.columns:
        cut = int((episodes["truncated"].astype(bool) & (episodes["status"].astype(str) == "trained")).sum())
        out["truncated_share"] = (cut / n_trained if n_trained else 0.0, "the trained episodes a timeout cut")
    return out


def _expected(
    episodes: pd.DataFrame, trained: pd.DataFrame, lineage: pd.DataFrame | None, sim_time_s: float
) -> dict[str, tuple[float, str]]:
    """Each checked summary key -> (the value the tables give, where it comes from)."""
    status = episodes["status"].astype(str)
    n_trained = len(trained)
    stale = trained["staleness"].to_numpy()
    out: dict[str, tuple[float, str]] = {
        "episodes_launched": (float(len(episodes)), "the rows of episodes.parquet"),
        "episodes_trained": (float(n_trained), "the rows of trained.parquet"),
        "sim_time_s": (sim_time_s, "meta.json's sim_time_s"),
        "staleness_max": (float(stale.max()) if n_trained else 0.0, "trained.parquet's staleness"),
        "staleness_mean": (
            int(stale.sum()) / n_trained if n_trained else 0.0,
            "trained.parquet's staleness",
        ),
        "throughput_per_hour": (
            n_trained / sim_time_s * 3600 if sim_time_s > 0 else math.nan,
            "the rows of trained.parquet per simulated hour",
        ),
    }
    for key, name in STATUS_COUNTS.items():
        out[key] = (float((status == name).sum()), f"the episodes of status {name} in episodes.parquet")
    if "truncated" in episodes.columns:
        out["episodes_truncated"] = (
            float(episodes["truncated"].astype(bool).sum()),
            "the truncated episodes in episodes.parquet",
        )
    out.update(_exact(episodes, trained))
    if lineage is not None:
        out["episodes_restarted"] = (
            float((lineage["parent"] >= 0).sum()),
            "the relaunches in lineage.parquet",
        )
    return out


def check_summary(
    directory: Path,
    summary: dict[str, float],
    episodes: pd.DataFrame,
    trained: pd.DataFrame,
    lineage: pd.DataFrame | None,
    sim_time_s: float,
) -> None:
    """Refuse a summary whose counts are not those of the tables, naming the field."""
    with reading(directory / "episodes.parquet"):
        n_status = int((episodes["status"].astype(str) == "trained").sum())
        if n_status != len(trained):
            raise FieldError(
                f"{n_status} episodes have status trained, but trained.parquet has {len(trained)} rows",
                "status",
            )
    with reading(directory / "trained.parquet"):
        expected = _expected(episodes, trained, lineage, sim_time_s)
    for key, (want, source) in expected.items():
        if key in summary and not same_value(float(summary[key]), want):
            raise SavedRunError(
                f"{directory / 'summary.json'}: {key} is {shown(summary[key])}, but {source} make it "
                f"{shown(want)} (edited, or not written by RunResult.save)",
                key,
            )


EVENT_INTS = ("slot", "replica", "version", "episode_id")
"""The events' integer columns (the lanes and the timeline's ids)."""


def check_events(directory: Path, events: pd.DataFrame, trained: pd.DataFrame, sim_time_s: float) -> None:
    """Refuse an events table the views cannot read or that contradicts the run, naming the column."""
    from pipesim.results.events import EVENT_KINDS

    with reading(directory / "events.parquet"):
        for col in EVENT_INTS:
            if not pd.api.types.is_integer_dtype(events[col]):
                raise FieldError(f"{col} must hold integers, got {events[col].dtype} values", col)
        for col in ("start_s", "end_s"):
            if not pd.api.types.is_numeric_dtype(events[col]) or pd.api.types.is_bool_dtype(events[col]):
                raise FieldError(f"{col} must hold seconds, got {events[col].dtype} values", col)
        start, end = events["start_s"].to_numpy(float), events["end_s"].to_numpy(float)
        top = sim_time_s * (1 + 1e-9) + 1e-9
        bad = ~(np.isfinite(start) & np.isfinite(end) & (start >= 0) & (start <= end) & (end <= top))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise FieldError(
                f"row {i}: interval [{shown(float(start[i]))}, {shown(float(end[i]))}] s is not inside "
                f"the run's [0, {shown(sim_time_s)}] s (edited, or not written by save)",
                "start_s",
            )
        kinds = set(events["kind"].astype(str))
        if not kinds <= set(EVENT_KINDS):
            other = sorted(kinds - set(EVENT_KINDS))
            raise FieldError(f"kind holds {other}; the kinds are {EVENT_KINDS}", "kind")
        n_train = int((events["kind"].astype(str) == "train").sum())
        steps = int(trained["step"].max()) + 1 if len(trained) else 0
        if n_train < steps:
            raise FieldError(
                f"holds {n_train} train events, but trained.parquet trains {steps} steps "
                "(edited, or not written by save)",
                "kind",
            )
