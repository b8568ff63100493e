"""Results that last: a run saved as a directory, and loaded back.

Layout of a saved run (format version 1)::

    RUN/
      meta.json        {"format": "pipesim-run", "version": 1, "sim_time_s": ..., "name": ...}
      summary.json     RunResult.summary()
      scenario.json    the scenario in scenario-file form (pipesim.io.scenario_files), or null
                       (with "scenario_repr") when a policy is outside the catalog
      events.parquet   RunResult.events   (kind and lane as Categoricals)
      trained.parquet  RunResult.trained
      episodes.parquet RunResult.episode_table
      lineage.parquet  episode_id, parent (the episode a retry relaunches, -1 for none): what the
                       timeline marks as retries
      pool.parquet     duration_s: the pool given to ``pipesim.run`` in place of the scenario's
                       duration model (the tasks it consumed), where one was given

Loading never executes code and never unpickles: Parquet holds plain columns, JSON plain data,
and the scenario goes through the scenario-file reader (policies named from the catalog).
:func:`load` returns a :class:`SavedRun`, which has what the views, the trace export and the
report read of a :class:`~pipesim.results.run.RunResult` (``events``, ``trained``,
``episode_table``, ``summary()``, ``scenario``, ``sim_time_s``, ``train_log``, ``sync_log``);
the engine's raw episode records are not kept, so a loaded run cannot be re-analysed below the
tables (re-run the scenario for that: it is deterministic given its seed).
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipesim.config import PipelineConfig, Scenario
from pipesim.io.scenario_schema import ScenarioFileError
from pipesim.results.run import EVENT_KINDS, RunResult

FORMAT, VERSION = "pipesim-run", 1
TABLES = {"events": "events.parquet", "trained": "trained.parquet", "episode_table": "episodes.parquet"}

__all__ = ["SavedRun", "SavedRunError", "is_saved_run", "load", "save"]


class SavedRunError(ValueError):
    """A directory that is not a readable saved run (names the path and what is wrong)."""


def json_number(x: Any) -> Any:
    """Summary values as JSON: NaN and infinities as strings (JSON has neither)."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x.item() if hasattr(x, "item") else x


def _from_json_num(x: Any) -> Any:
    return float(x) if isinstance(x, str) and x in ("nan", "inf", "-inf") else x


def save(result: RunResult | SavedRun, path: str | Path) -> Path:
    """Write ``result`` as a saved-run directory at ``path`` (created; an existing saved run there
    is overwritten, any other non-empty directory is refused). Returns the path."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise SavedRunError(f"{p}: exists and is not a directory")
    if p.is_dir() and any(p.iterdir()) and not is_saved_run(p):
        raise SavedRunError(f"{p}: a non-empty directory that is not a saved run; refusing to write into it")
    p.mkdir(parents=True, exist_ok=True)
    scen = result.scenario
    scenario_data: dict[str, Any] | None
    try:
        from pipesim.io.scenario_files import scenario_to_dict

        scenario_data = scenario_to_dict(scen)
    except ValueError:  # a policy outside the catalog: keep its repr, for people
        scenario_data = None
    for attr, name in TABLES.items():
        table: pd.DataFrame = getattr(result, attr)
        table.to_parquet(p / name, index=False)
    lineage = _lineage(result)
    if lineage is not None:
        lineage.to_parquet(p / "lineage.parquet", index=False)
    pool = getattr(result, "pool", None)
    if pool is not None:
        pd.DataFrame({"duration_s": np.asarray(pool, dtype=np.float64)}).to_parquet(
            p / "pool.parquet", index=False
        )
    elif (p / "pool.parquet").is_file():  # overwriting a saved run that had one
        (p / "pool.parquet").unlink()
    (p / "summary.json").write_text(
        json.dumps({k: json_number(v) for k, v in result.summary().items()}, indent=1)
    )
    (p / "scenario.json").write_text(
        json.dumps(
            {
                "scenario": scenario_data,
                "scenario_repr": repr(scen),
                "pipeline": dataclasses.asdict(scen.pipeline),
                "pool_given": pool is not None,  # the durations came from pool.parquet, not the model
            },
            indent=1,
        )
    )
    meta = {"format": FORMAT, "version": VERSION, "sim_time_s": result.sim_time_s, "name": scen.name}
    (p / "meta.json").write_text(json.dumps(meta, indent=1))
    return p


def _lineage(result: Any) -> pd.DataFrame | None:
    cols = getattr(result, "columns", None)
    if cols is not None:
        return pd.DataFrame({"episode_id": cols.id.astype("int64"), "parent": cols.parent.astype("int64")})
    return getattr(result, "lineage", None)


def is_saved_run(path: str | Path) -> bool:
    """Whether ``path`` is a directory written by :func:`save`."""
    meta = Path(path) / "meta.json"
    if not meta.is_file():
        return False
    try:
        return bool(json.loads(meta.read_text()).get("format") == FORMAT)
    except (json.JSONDecodeError, AttributeError, OSError):
        return False


@dataclass(frozen=True)
class SavedRun:
    """A run loaded from a saved directory: the tables, summary and scenario of a RunResult."""

    scenario: Scenario
    sim_time_s: float
    events: pd.DataFrame
    trained: pd.DataFrame
    episode_table: pd.DataFrame
    summary_data: dict[str, float]
    path: Path | None = None
    scenario_repr: str = ""
    lineage: pd.DataFrame | None = None
    """episode_id, parent per episode (parent -1 unless it relaunches a failed or aborted one)."""
    extra: dict[str, Any] = field(default_factory=dict)
    pool: np.ndarray | None = None
    """The durations the run was given in place of its scenario's duration model, or None."""
    scenario_exact: bool = True
    """False where a policy of the run was outside the catalog: ``scenario`` is then the saved
    pipeline with default policies, and only ``scenario_repr`` says what ran."""

    def summary(self) -> dict[str, float]:
        """The summary as it was saved (a copy)."""
        return dict(self.summary_data)

    @cached_property
    def train_log(self) -> list[tuple[int, float, float, int]]:
        """(step, start, end, version) of each training step, rebuilt from the events table."""
        t = self.events[self.events["kind"] == "train"]
        return [
            (i, float(a), float(b), int(v))
            for i, (a, b, v) in enumerate(zip(t["start_s"], t["end_s"], t["version"]))
        ]

    @cached_property
    def sync_log(self) -> list[tuple[float, float, int]]:
        """(start, end, version) of each weight sync, rebuilt from the events table."""
        s = self.events[self.events["kind"] == "sync"]
        return [(float(a), float(b), int(v)) for a, b, v in zip(s["start_s"], s["end_s"], s["version"])]

    def save(self, path: str | Path) -> Path:
        return save(self, path)

    def _repr_html_(self) -> str:
        from pipesim.io.html import run_html

        return run_html(self)


def _events_categoricals(ev: pd.DataFrame) -> pd.DataFrame:
    """Parquet keeps Categoricals (pyarrow dictionaries); make sure kind keeps every kind."""
    kind = ev.get("kind")
    if (
        kind is not None
        and isinstance(kind.dtype, pd.CategoricalDtype)
        and list(kind.cat.categories) != EVENT_KINDS
    ):
        ev["kind"] = ev["kind"].cat.set_categories(EVENT_KINDS)
    return ev


HEADLINE = ("throughput_per_hour", "gen_util", "staleness_mean", "staleness_max", "episodes_trained")
"""Keys of every run's summary that the views, the report and the notebook display read."""


def _read_summary(path: Path) -> dict[str, float]:
    """summary.json as a dict of numbers: a JSON object, every value a number (NaN and the
    infinities as strings), the headline keys present; else a SavedRunError naming the key."""
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SavedRunError(f"{path}: not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise SavedRunError(f"{path}: must be a JSON object of numbers, got {type(raw).__name__}")
    summary = {}
    for k, v in raw.items():
        v = _from_json_num(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise SavedRunError(f"{path}: {k!r} must be a number, got {v!r:.40}")
        summary[str(k)] = v
    missing = [k for k in HEADLINE if k not in summary]
    if missing:
        raise SavedRunError(f"{path}: lacks {', '.join(missing)} (edited, or not written by RunResult.save)")
    return summary


COLUMNS = {
    "events": ("kind", "lane", "slot", "replica", "start_s", "end_s", "version", "episode_id"),
    "trained": ("episode_id", "step", "trained_version", "version", "staleness", "duration_s"),
    "episode_table": ("episode_id", "task_id", "duration_s", "status", "start_s", "end_s", "version"),
}
"""The columns of each table that the views, the report and the trace export read."""


@contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Any error reading ``path`` becomes a :class:`SavedRunError` naming it (one line)."""
    try:
        yield
    except (SavedRunError, ScenarioFileError):
        raise  # they name the file already
    except (KeyError, TypeError, ValueError, AttributeError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SavedRunError(f"{path}: {'lacks ' if isinstance(exc, KeyError) else ''}{first}") from None


def load(path: str | Path) -> SavedRun:
    """Read a directory written by ``RunResult.save`` (or :func:`save`)."""
    p = Path(path)
    if not p.exists():
        raise SavedRunError(f"{p}: no such directory")
    if not p.is_dir():
        raise SavedRunError(f"{p}: not a directory (a saved run is a directory written by RunResult.save)")
    try:
        meta = json.loads((p / "meta.json").read_text())
    except FileNotFoundError:
        raise SavedRunError(f"{p}: not a saved run (no meta.json)") from None
    except json.JSONDecodeError as exc:
        raise SavedRunError(f"{p / 'meta.json'}: not JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise SavedRunError(f"{p}: meta.json is not a pipesim saved run")
    version = meta.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= VERSION:
        raise SavedRunError(
            f"{p}: saved-run format version {meta.get('version')!r}; this pipesim reads up to {VERSION}"
        )
    missing = [n for n in (*TABLES.values(), "summary.json", "scenario.json") if not (p / n).is_file()]
    if missing:
        raise SavedRunError(f"{p}: incomplete saved run, missing {', '.join(missing)}")
    with _reading(p / "meta.json"):
        sim_time_s = float(meta["sim_time_s"])
        if not math.isfinite(sim_time_s) or sim_time_s < 0:
            raise ValueError(f"sim_time_s must be a finite time >= 0, got {meta['sim_time_s']!r}")
    tables = {}
    for attr, name in TABLES.items():
        with _reading(p / name):
            table = pd.read_parquet(p / name)
            lacking = [c for c in COLUMNS[attr] if c not in table.columns]
            if lacking:
                raise ValueError(f"lacks the columns {', '.join(lacking)} (edited, or not written by save)")
            tables[attr] = table
    summary = _read_summary(p / "summary.json")
    with _reading(p / "scenario.json"):
        sc = json.loads((p / "scenario.json").read_text())
        if not isinstance(sc, dict):
            raise ValueError(f"must be a JSON object, got {type(sc).__name__}")
        if sc.get("scenario") is not None:
            from pipesim.io.scenario_files import scenario_from_dict

            scenario = scenario_from_dict(sc["scenario"], source=str(p / "scenario.json"))
        else:  # a policy was outside the catalog: the saved pipeline with default policies stands in
            scenario = Scenario(
                pipeline=PipelineConfig(**sc["pipeline"]), name=str(meta.get("name", "scenario"))
            )
            warnings.warn(
                f"{p}: a policy of this run is outside the catalog, so its scenario is shown as the saved "
                f"pipeline with default policies; SavedRun.scenario_repr has the run's own: "
                f"{str(sc.get('scenario_repr', ''))[:200]}",
                stacklevel=2,
            )
        pool_given = sc.get("pool_given", False)
        if not isinstance(pool_given, bool):
            raise ValueError(f"pool_given must be true or false, got {pool_given!r}")
    pool_file = p / "pool.parquet"
    pool = None
    if pool_given or pool_file.exists():
        with _reading(pool_file):
            if not pool_file.is_file():
                raise ValueError(
                    "missing: the run was given a pool (scenario.json says pool_given), saved here"
                )
            if not pool_given:
                raise ValueError(
                    "present, but scenario.json says the run drew its own pool (pool_given false)"
                )
            from pipesim.workload.durations import as_durations

            pool = as_durations(pd.read_parquet(pool_file)["duration_s"].to_numpy(), "duration_s")
            if not len(pool):
                raise ValueError("holds no durations")
    return SavedRun(
        scenario=scenario,
        sim_time_s=sim_time_s,
        events=_events_categoricals(tables["events"]),
        trained=tables["trained"],
        episode_table=tables["episode_table"],
        summary_data=summary,
        path=p,
        scenario_repr=str(sc.get("scenario_repr", "")),
        lineage=pd.read_parquet(p / "lineage.parquet") if (p / "lineage.parquet").is_file() else None,
        pool=pool,
        scenario_exact=sc.get("scenario") is not None,
    )
