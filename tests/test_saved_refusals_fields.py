"""A hand-edited saved run is refused, naming the file and the field, not loaded silently wrong.

Each case edits a freshly saved small run (one file), reseals its manifest (so the hashes pass and
the loader's checks below them are what refuse it) and loads it: the error is a
:class:`~pipesim.io.saved.SavedRunError` (a ``ValueError``) whose message names the edited file
and whose field is the edited field. A field removed from ``scenario.json`` used to load as its
default (64 slots and 20 steps for a 16-slot 3-step run); out-of-range or contradicted summary
values, wrongly typed columns and a ``meta.json`` without its name used to load as they were.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim
from pipesim.io.registry import get_scenario
from pipesim.io.saved import SavedRunError
from pipesim.io.saved_values import SUMMARY_KEYS
from tests.test_saved_integrity import reseal


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """async-eta1 on 16 slots, 3 steps (a set pool_size, partial rollouts): a small saved run."""
    scen = get_scenario("async-eta1")
    scen = dataclasses.replace(
        scen, pipeline=dataclasses.replace(scen.pipeline, n_slots=16, batch_size=16, steps=3)
    )
    d = tmp_path_factory.mktemp("saved") / "run"
    pipesim.run(scen).save(d)
    return d


def _del(*path: str) -> Callable[[Any], None]:
    def edit(j: Any) -> None:
        for k in path[:-1]:
            j = j[k]
        del j[path[-1]]

    return edit


def _set(value: Any, *path: str) -> Callable[[Any], None]:
    def edit(j: Any) -> None:
        for k in path[:-1]:
            j = j[k]
        j[path[-1]] = value

    return edit


def _col(col: str, fn: Callable[[pd.Series], Any]) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def edit(t: pd.DataFrame) -> pd.DataFrame:
        t = t.copy()
        t[col] = fn(t[col])
        return t

    return edit


def _drop(col: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
    return lambda t: t.drop(columns=[col])


SC, SUM, META = "scenario.json", "summary.json", "meta.json"
CASES: list[tuple[str, str, Callable[[Any], Any], str]] = [
    # scenario.json: a field removed loads as its default; a value against the repr, pipeline, tables
    ("del n_slots", SC, _del("scenario", "pipeline", "n_slots"), "scenario.pipeline.n_slots"),
    ("del steps", SC, _del("scenario", "pipeline", "steps"), "scenario.pipeline.steps"),
    ("del seed", SC, _del("scenario", "seed"), "scenario.seed"),
    ("del pool_size", SC, _del("scenario", "pool_size"), "scenario.pool_size"),
    ("del weight_update", SC, _del("scenario", "weight_update"), "scenario.weight_update"),
    ("del durations", SC, _del("scenario", "durations"), "scenario.durations"),
    (
        "del tool_median_s",
        SC,
        _del("scenario", "durations", "tool_median_s"),
        "scenario.durations.tool_median_s",
    ),
    ("n_slots 32", SC, _set(32, "scenario", "pipeline", "n_slots"), "scenario.pipeline.n_slots"),
    ("steps 5", SC, _set(5, "scenario", "pipeline", "steps"), "scenario.pipeline.steps"),
    ("pipeline block", SC, _set(99, "pipeline", "n_slots"), "pipeline.n_slots"),
    ("repr lies", SC, _set("Scenario(lies)", "scenario_repr"), "scenario_repr"),
    # summary.json: shares, signs, unknown keys, values the tables give exactly
    ("gen_util 1.5", SUM, _set(1.5, "gen_util"), "gen_util"),
    ("gen_util -0.2", SUM, _set(-0.2, "gen_util"), "gen_util"),
    ("idle 7", SUM, _set(7, "trainer/idle_ratio"), "trainer/idle_ratio"),
    ("truncated_share 2", SUM, _set(2.0, "truncated_share"), "truncated_share"),
    ("lost_work_s -5", SUM, _set(-5.0, "lost_work_s"), "lost_work_s"),
    ("staleness_newest_max -3", SUM, _set(-3, "staleness_newest_max"), "staleness_newest_max"),
    ("staleness_newest_max 5", SUM, _set(5, "staleness_newest_max"), "staleness_newest_max"),
    ("trained_duration_mean", SUM, _set(1e9, "trained_duration_mean"), "trained_duration_mean"),
    ("never_trained_share", SUM, _set(0.9, "never_trained_share"), "never_trained_share"),
    ("unknown key", SUM, _set(1, "bogus"), "bogus"),
    # meta.json
    ("meta name deleted", META, _del("name"), "name"),
    ("meta name 5", META, _set(5, "name"), "name"),
    ("meta sim_time_s text", META, lambda j: _set(str(j["sim_time_s"]), "sim_time_s")(j), "sim_time_s"),
    # the tables
    ("duration_s -5", "trained.parquet", _col("duration_s", lambda s: s * 0 - 5.0), "duration_s"),
    ("duration_s text", "trained.parquet", _col("duration_s", lambda s: s.astype(str)), "duration_s"),
    ("no staleness_newest", "trained.parquet", _drop("staleness_newest"), "staleness_newest"),
    ("staleness float", "trained.parquet", _col("staleness", lambda s: s.astype(float)), "staleness"),
    ("lineage parent text", "lineage.parquet", _col("parent", lambda s: s.astype(str)), "parent"),
]


def _edited(src: Path, dst: Path, name: str, edit: Callable[[Any], Any]) -> Path:
    shutil.copytree(src, dst)
    f = dst / name
    if name.endswith(".json"):
        data = json.loads(f.read_text())
        edit(data)
        f.write_text(json.dumps(data, indent=1))
    else:
        edit(pd.read_parquet(f)).to_parquet(f, index=False)
    reseal(dst)
    return dst


def test_the_saved_run_itself_loads(saved: Path) -> None:
    loaded = pipesim.load(saved)
    assert loaded.scenario.pipeline.n_slots == 16
    assert set(loaded.summary_data) <= SUMMARY_KEYS


@pytest.mark.parametrize(("name", "file", "edit", "field"), CASES, ids=[c[0] for c in CASES])
def test_an_edited_field_is_refused_naming_file_and_field(
    saved: Path, tmp_path: Path, name: str, file: str, edit: Callable[[Any], Any], field: str
) -> None:
    d = _edited(saved, tmp_path / "run", file, edit)
    with pytest.raises(SavedRunError) as err:
        pipesim.load(d)
    msg = str(err.value)
    assert msg.startswith(str(d / file)), msg
    assert err.value.field == field, msg
    assert field.split(".")[-1] in msg, msg


def test_format_1_run_with_a_field_removed_is_refused(saved: Path, tmp_path: Path) -> None:
    """The documented format-1 path (no manifest, version 1) is checked below the hashes too."""
    d = tmp_path / "run"
    shutil.copytree(saved, d)
    (d / "manifest.json").unlink()
    meta = json.loads((d / META).read_text())
    (d / META).write_text(json.dumps({**meta, "version": 1}))
    sc = json.loads((d / SC).read_text())
    del sc["scenario"]["pipeline"]["n_slots"], sc["scenario"]["pipeline"]["steps"]
    (d / SC).write_text(json.dumps(sc))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(SavedRunError) as err:
            pipesim.load(d)
    assert str(err.value).startswith(str(d / SC))
    assert err.value.field == "scenario.pipeline.n_slots"


def test_the_committed_format_1_fixture_still_loads() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = pipesim.load(Path(__file__).parent / "data" / "saved-run-v1")
    assert loaded.scenario.pipeline.n_slots == 4
