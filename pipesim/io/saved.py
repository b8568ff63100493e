"""Results that last: a run saved as a directory, and loaded back.

Layout of a saved run (format version 2; docs/saved-runs.md says what it guarantees)::

    RUN/
      manifest.json    every other file's size and SHA-256, and the manifest's own hash
                       (pipesim.io.saved_files)
      meta.json        {"format": "pipesim-run", "version": 2, "sim_time_s": ..., "name": ...}
      summary.json     RunResult.summary()
      scenario.json    the scenario in scenario-file form (pipesim.io.scenario_files), its repr and
                       the module of each user policy; where a policy is outside the catalog, null,
                       the rest in "scenario_partial" and that policy's text in "missing_policies"
      events.parquet   RunResult.events   (kind and lane as Categoricals)
      trained.parquet  RunResult.trained
      episodes.parquet RunResult.episode_table
      lineage.parquet  episode_id, parent (the episode a retry relaunches, -1 for none): what the
                       timeline marks as retries
      pool.parquet     duration_s: the pool given to ``pipesim.run`` in place of the scenario's
                       duration model (the tasks it consumed), where one was given

:func:`save` writes the directory whole or not at all (into a temporary sibling, then renamed;
an existing saved run there is replaced only once the new one is complete). :func:`load` checks
the manifest first (:func:`pipesim.io.saved_files.verified_files`: a file missing, added or changed
since the save is refused by name), parses the very bytes it hashed, each file inside one wrapper
(any failure is a :class:`SavedRunError` naming the file), and checks the summary's counts
against the tables (:mod:`pipesim.io.saved_checks`), meta.json, the columns' types and the
summary's ranges and exact means (:mod:`pipesim.io.saved_values`), and the scenario against its
repr, its pipeline block and the tables, a field removed refused by name rather than read as its
default (:mod:`pipesim.io.saved_agree`). Format 1 (no manifest, pipesim before the
hashes) still loads, with an :class:`UnverifiedRunWarning`; re-saving it writes format 2.

Loading never executes code and never unpickles: Parquet holds plain columns, JSON plain data,
and the scenario goes through the scenario-file reader (policies named from the catalog). A
policy this process cannot build (its module not registered here, or outside the catalog at the
save) stands in as a :class:`~pipesim.policies.missing.MissingPolicy`, which refuses to run
(:func:`pipesim.io.saved_checks.read_scenario`; docs/saved-runs.md). :func:`load` returns a
:class:`SavedRun`, which has what the views, the trace export and the report read of a
:class:`~pipesim.results.run.RunResult` (``events``, ``trained``,
``episode_table``, ``summary()``, ``scenario``, ``sim_time_s``, ``train_log``, ``sync_log``);
the engine's raw episode records are not kept, so a loaded run cannot be re-analysed below the
tables (re-run the scenario for that: it is deterministic given its seed and pipesim's
version: a run saved before December 2026 with a default pool drew its durations otherwise,
docs/saved-runs.md).
"""

from __future__ import annotations

import dataclasses
import io
import json
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipesim.config import Scenario
from pipesim.core.errors import shown
from pipesim.core.validate import FieldError, refuse
from pipesim.io.saved_agree import check_scenario, check_scenario_tables
from pipesim.io.saved_checks import HEADLINE as HEADLINE
from pipesim.io.saved_checks import (
    check_events,
    check_summary,
    json_number,
    read_scenario,
    read_summary,
    saved_name,
    scenario_record,
)
from pipesim.io.saved_files import (
    MANIFEST,
    MANIFEST_FORMAT,
    SavedRunError,
    UnverifiedRunWarning,
    read_manifest,
    reading,
    write_run_dir,
)
from pipesim.io.saved_open import FORMAT as FORMAT  # re-exported
from pipesim.io.saved_open import REQUIRED as REQUIRED  # re-exported
from pipesim.io.saved_open import TABLES as TABLES  # re-exported
from pipesim.io.saved_open import VERSION as VERSION  # re-exported
from pipesim.io.saved_open import _engine, _events_categoricals, _open, _read_pool
from pipesim.io.saved_scenario import compute_stand_in
from pipesim.io.saved_values import check_tables, check_values, read_meta
from pipesim.policies.missing import fix_hint, plain
from pipesim.results.run import RunResult

__all__ = ["SavedRun", "SavedRunError", "UnverifiedRunWarning", "is_saved_run", "json_number", "load", "save"]


def _parquet(table: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    table.to_parquet(buf, index=False)
    return buf.getvalue()


def _json(data: Any) -> bytes:
    return json.dumps(data, indent=1).encode()


def save(
    result: RunResult | SavedRun,
    path: str | Path,
    summary: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
) -> Path:
    """Write ``result`` as a saved-run directory at ``path`` (created with its parents; an
    existing saved run there is replaced, any other non-empty directory is refused), atomically:
    a save that fails leaves ``path`` as it was. Returns the path.

    A compute run (``result.engine == "compute"``: ``pipesim run SPEC --save``) keeps the summary
    its command printed (``summary``: the compute summary, a superset of the kernel's) and its run
    spec (``spec``: the spec's data and the recipe) in ``meta.json``, with ``"engine":
    "compute"``. Its scenario is the kernel's stand-in (the compute engine reads its pipeline and
    policies, not its durations or train time): rerun it from the spec, not from the scenario."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise SavedRunError(f"{p}: exists and is not a directory")
    if p.is_dir() and any(p.iterdir()) and not is_saved_run(p):
        raise SavedRunError(f"{p}: a non-empty directory that is not a saved run; refusing to write into it")
    scen = result.scenario
    record, why = scenario_record(scen)
    if why:  # a policy outside the catalog: kept as text, for people
        warnings.warn(
            f"{p}: {why}. The run is saved with that policy's text only: loaded back, its scenario "
            "holds a placeholder in that slot, which refuses to run (not default policies, which "
            "would run another design)",
            UserWarning,
            stacklevel=3,
        )
    files = {name: _parquet(getattr(result, attr)) for attr, name in TABLES.items()}
    lineage = _lineage(result)
    if lineage is not None:
        files["lineage.parquet"] = _parquet(lineage)
    pool = getattr(result, "pool", None)
    if pool is not None:
        files["pool.parquet"] = _parquet(pd.DataFrame({"duration_s": np.asarray(pool, dtype=np.float64)}))
    shown_summary = result.summary() if summary is None else summary
    files["summary.json"] = _json({k: json_number(v) for k, v in shown_summary.items()})
    files["scenario.json"] = _json(
        {
            **record,
            "scenario_repr": _repr_of(result),
            "pipeline": dataclasses.asdict(scen.pipeline),
            "pool_given": pool is not None,  # the durations came from pool.parquet, not the model
        }
    )
    meta: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "sim_time_s": result.sim_time_s,
        "name": saved_name(scen),
    }
    if (engine := getattr(result, "engine", "slots")) != "slots":
        meta["engine"] = engine
    if spec is None:  # a loaded compute run saved again keeps its spec
        spec = getattr(result, "runspec", None)
    if spec is not None:
        meta["runspec"] = spec
    files["meta.json"] = _json(meta)
    write_run_dir(p, files)
    return p


def _repr_of(result: Any) -> str:
    """scenario.json's ``scenario_repr``: the scenario's repr; a loaded compute run's as it was
    saved (its scenario now holds the stand-in's placeholder, :func:`compute_stand_in`)."""
    kept = getattr(result, "scenario_repr", "")
    if getattr(result, "engine", "slots") == "compute" and isinstance(result, SavedRun) and kept:
        return str(kept)
    return repr(result.scenario)


def _lineage(result: Any) -> pd.DataFrame | None:
    cols = getattr(result, "columns", None)
    if cols is not None:
        return pd.DataFrame({"episode_id": cols.id.astype("int64"), "parent": cols.parent.astype("int64")})
    return getattr(result, "lineage", None)


def is_saved_run(path: str | Path) -> bool:
    """Whether ``path`` is a directory written by :func:`save` (its meta.json, or its manifest,
    says so; a run whose meta.json is damaged is still one, to be replaced or refused by load).
    Each is read bounded, as a manifest is (a few KB; a large file in its place is not one)."""
    for name, key, value in (("meta.json", "format", FORMAT), (MANIFEST, "format", MANIFEST_FORMAT)):
        f = Path(path) / name
        try:
            if f.is_file() and json.loads(read_manifest(f)).get(key) == value:
                return True
        except (ValueError, AttributeError, OSError, RecursionError):
            continue
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
    """False where a policy of the run could not be rebuilt here: ``scenario`` then holds a
    :class:`~pipesim.policies.missing.MissingPolicy` in its slot, which refuses to run, and
    ``scenario_repr`` says what ran. Always False for a compute run (``engine == "compute"``)."""
    engine: str = "slots"
    """The engine that ran it (``RunResult.engine``): ``"compute"`` for a run spec's run, whose
    ``scenario`` is the kernel's stand-in (named ``... (stand-in: compute engine not rebuilt)``, its
    durations a placeholder that refuses to run: :func:`pipesim.io.saved_scenario.compute_stand_in`);
    ``runspec`` then holds the spec to rerun it from:
    ``pipesim.plan.runspec.run(pipesim.plan.runspec.from_dict(saved.runspec["runspec"]))``."""
    runspec: dict[str, Any] | None = None
    """A compute run's spec, as ``pipesim run SPEC --save`` kept it: ``{"runspec": the spec's
    data, "recipe": {"scenario": file, "set": [...], "seed": n}}``; None for a slot run."""

    def summary(self) -> dict[str, float]:
        """The summary as it was saved (a copy); a metric renamed since reads by both names
        (:mod:`pipesim.results.names`)."""
        from pipesim.results.names import Summary, renamed

        return Summary(renamed(self.summary_data))

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


def load(path: str | Path) -> SavedRun:
    """Read a directory written by ``RunResult.save`` (or :func:`save`); a :class:`SavedRunError`
    naming the file (and the field) for any file missing, added, corrupted or inconsistent."""
    p = Path(path)
    files, meta = _open(p)
    sim_time_s = read_meta(p / "meta.json", meta)
    tables = {attr: files.table(name, attr) for attr, name in TABLES.items()}
    summary = read_summary(p / "summary.json", files.raw("summary.json"))
    sc = files.json_of("scenario.json")
    with reading(p / "scenario.json"):
        if not isinstance(sc, dict):
            raise FieldError(f"must be a JSON object, got {type(sc).__name__}")
        scenario, missing = read_scenario(sc, str(meta.get("name", "scenario")), str(p / "scenario.json"))
        if missing:  # its name says it is a stand-in (read_scenario)
            slots = ", ".join(m.slot for m in missing)
            warnings.warn(
                f"{p}: its {slots} policy could not be rebuilt in this process ("
                + "; ".join(f"{plain(m.slot)}: {plain(m.text, 120)} {_why_missing(m)}" for m in missing)
                + f"), so its scenario holds a placeholder there (MissingPolicy) that refuses to run: "
                f"{fix_hint(missing[0].module)}. The saved tables, summary and report read as they "
                "are; SavedRun.scenario_repr has the run's scenario as it ran",
                stacklevel=2,
            )
        key = "scenario" if sc.get("scenario") is not None else "scenario_partial"
        check_scenario(
            p / "scenario.json", sc, scenario, missing, key if sc.get(key) is not None else "pipeline"
        )
        pool_given = sc.get("pool_given", False)
        if not isinstance(pool_given, bool):
            raise refuse("pool_given", f"must be true or false, got {shown(pool_given)}")
    pool = _read_pool(files, pool_given)
    engine = _engine(meta, p)
    if engine == "compute" and not missing:  # the kernel's stand-in: marked so, and it refuses to run
        kept = sc.get("scenario")
        table = kept.get("durations") if isinstance(kept, dict) else None
        if table is None:
            from pipesim.io.scenario_files import policy_to_dict

            table = policy_to_dict(scenario.durations, "durations")
        scenario = compute_stand_in(scenario, table)
    lineage = files.table("lineage.parquet", "lineage") if files.has("lineage.parquet") else None
    check_tables(p, tables["trained"], tables["episode_table"], lineage)
    check_summary(p, summary, tables["episode_table"], tables["trained"], lineage, sim_time_s)
    check_values(p, summary, tables["episode_table"], tables["trained"], engine)
    check_events(p, tables["events"], tables["trained"], sim_time_s)
    check_scenario_tables(p, scenario, tables["events"], tables["episode_table"])
    return SavedRun(
        scenario=scenario,
        sim_time_s=sim_time_s,
        events=_events_categoricals(tables["events"]),
        trained=tables["trained"],
        episode_table=tables["episode_table"],
        summary_data=summary,
        path=p,
        scenario_repr=str(sc.get("scenario_repr", "")),
        lineage=lineage,
        pool=pool,
        scenario_exact=not missing and engine == "slots",
        engine=engine,
        runspec=meta.get("runspec") if isinstance(meta.get("runspec"), dict) else None,
    )


def _why_missing(m: Any) -> str:
    """Why placeholder ``m`` stands in: its class is not registered here, or had no name to save."""
    if m.data is not None:
        return "is not registered here"
    return "was outside the catalog when the run was saved"
