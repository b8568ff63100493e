"""What a saved run's values must be, beyond its counts (used by :mod:`pipesim.io.saved`).

:mod:`pipesim.io.saved_checks` checks the summary's counts against the tables; this module checks
the rest of what is exact for every run pipesim saves, each refusal a
:class:`~pipesim.io.saved_files.SavedRunError` naming the file and the field:

- :func:`read_meta`: ``meta.json``'s ``sim_time_s`` a JSON number (finite, >= 0) and ``name`` a
  string.
- :func:`check_tables`: the columns the checks and views compute with hold what they mean:
  ``trained.parquet``'s ``staleness``, ``staleness_newest``, ``step`` and ids integers, its and
  ``episodes.parquet``'s ``duration_s`` finite seconds >= 0, ``lineage.parquet``'s ids integers
  (each table checked inside its own file's wrapper, so an error names that file).
- :func:`check_values`: the summary's shares (``gen_util``, the idle ratios, ``truncated_share``,
  ``never_trained_share``) in [0, 1], its times, counts and means >= 0 (counts whole), no key
  :meth:`~pipesim.results.run.RunResult.summary` does not write (a compute run's summary is a
  superset and is not checked for unknown keys). The values the tables give exactly are compared
  with them in one place, :func:`pipesim.io.saved_checks.check_summary`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError
from pipesim.io.html import LAUNCHED_PARTS  # the places a launched episode ends up
from pipesim.io.saved_files import SavedRunError, reading

__all__ = ["SUMMARY_KEYS", "check_tables", "check_values", "read_meta"]

SHARES = (
    "gen_util",
    "gen_util_active",
    "gen_util_total",
    "truncated_share",
    "never_trained_share",
    "trainer/idle_ratio",
    "rollouter/idle_ratio",
    "trainer_idle_ratio",
    "rollout_idle_ratio",
)
"""Summary keys that are shares of a whole: in [0, 1] (NaN for a run of no time)."""

NONNEGATIVE = (
    "throughput_per_hour",
    "staleness_mean",
    "staleness_max",
    "staleness_newest_mean",
    "staleness_newest_max",
    "trained_duration_mean",
    "launched_duration_mean",
    "length_bias",
    "lost_work_s",
    "reprefill_tokens",
    "sim_time_s",
)
"""Summary keys that are times, tokens or means of them: >= 0."""

COUNTS = ("episodes_launched", *LAUNCHED_PARTS, "episodes_restarted", "episodes_truncated")
"""Summary keys that count episodes: whole numbers >= 0."""

SUMMARY_KEYS = frozenset(SHARES + NONNEGATIVE + COUNTS)
"""Every key :meth:`pipesim.results.run.RunResult.summary` writes, and the old names it wrote
(``trainer_idle_ratio``, ``rollout_idle_ratio``: :mod:`pipesim.results.names`)."""


def read_meta(path: Path, meta: dict[str, Any]) -> float:
    """meta.json's ``sim_time_s`` (a JSON number, finite, >= 0), its ``name`` checked as text."""
    with reading(path):
        t = meta.get("sim_time_s")
        if "sim_time_s" not in meta:
            raise FieldError("lacks sim_time_s (the run's simulated seconds)", "sim_time_s")
        if isinstance(t, bool) or not isinstance(t, int | float):
            raise FieldError(f"sim_time_s must be a number, got {shown(t)}", "sim_time_s")
        if not math.isfinite(t) or t < 0:
            raise FieldError(f"sim_time_s must be a finite time >= 0, got {shown(t)}", "sim_time_s")
        if not isinstance(meta.get("name"), str):
            what = "lacks name" if "name" not in meta else f"name must be text, got {shown(meta['name'])}"
            raise FieldError(f"{what} (the scenario's name)", "name")
    return float(t)


def _ints(table: pd.DataFrame, cols: tuple[str, ...]) -> None:
    for col in cols:
        if col in table.columns and not (
            pd.api.types.is_integer_dtype(table[col]) and not pd.api.types.is_bool_dtype(table[col])
        ):
            raise FieldError(f"{col} must hold integers, got {table[col].dtype} values", col)


def _seconds(table: pd.DataFrame, col: str) -> None:
    if col not in table.columns:
        return
    s = table[col]
    if not pd.api.types.is_float_dtype(s) and not pd.api.types.is_integer_dtype(s):
        raise FieldError(f"{col} must hold seconds (numbers), got {s.dtype} values", col)
    v = s.to_numpy(dtype=float)
    bad = ~(np.isfinite(v) & (v >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise FieldError(f"{col} must be seconds >= 0, got {shown(float(v[i]))} in row {i}", col)


def check_tables(
    directory: Path, trained: pd.DataFrame, episodes: pd.DataFrame, lineage: pd.DataFrame | None
) -> None:
    """Refuse a table column whose type or values cannot be what a run wrote, naming file and column."""
    with reading(directory / "trained.parquet"):
        _ints(trained, ("episode_id", "step", "trained_version", "version", "staleness", "staleness_newest"))
        _seconds(trained, "duration_s")
    with reading(directory / "episodes.parquet"):
        _ints(episodes, ("episode_id", "task_id", "slot", "replica", "version"))
        _seconds(episodes, "duration_s")
        if "truncated" in episodes.columns and not pd.api.types.is_bool_dtype(episodes["truncated"]):
            raise FieldError(
                f"truncated must hold true/false, got {episodes['truncated'].dtype}", "truncated"
            )
    if lineage is not None:
        with reading(directory / "lineage.parquet"):
            _ints(lineage, ("episode_id", "parent"))


def check_values(
    directory: Path,
    summary: dict[str, float],
    episodes: pd.DataFrame,
    trained: pd.DataFrame,
    engine: str,
) -> None:
    """Refuse a summary value out of its range or an unknown key (a value the tables give exactly
    is compared with them by :func:`pipesim.io.saved_checks.check_summary`)."""
    path = directory / "summary.json"

    def refuse(key: str, why: str) -> SavedRunError:
        return SavedRunError(f"{path}: {key} is {shown(summary[key])}, {why}", key)

    if engine == "slots" and (unknown := sorted(set(summary) - SUMMARY_KEYS)):
        raise SavedRunError(
            f"{path}: {shown(unknown[0])} is not a key RunResult.summary writes "
            "(edited, or not written by save)",
            unknown[0],
        )
    for key in SHARES:
        v = summary.get(key)
        if v is not None and not math.isnan(v) and not 0 <= v <= 1 + 1e-9:
            raise refuse(key, "but it is a share: it must be in [0, 1]")
    for key in NONNEGATIVE + COUNTS:
        v = summary.get(key)
        if v is not None and not math.isnan(v) and v < 0:
            raise refuse(key, "but it must be >= 0")
    for key in COUNTS:
        v = summary.get(key)
        if v is not None and not math.isnan(v) and not float(v).is_integer():
            raise refuse(key, "but it counts episodes: it must be a whole number")
