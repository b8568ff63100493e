"""Results that last (``RunResult.save`` / ``pipesim.load``, ``pipesim run --save``, ``report DIR``,
``trace DIR``) and the notebook displays (``_repr_html_``, ``pipesim.compare``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import pytest

import pipesim
from pipesim import RetryFailed, Scenario, Timeout, run
from pipesim.io.cli import main
from pipesim.io.registry import get_scenario
from pipesim.io.saved import SavedRun, SavedRunError
from tests.test_saved_integrity import reseal

SMALL = ["--set", "n_slots=8", "--set", "batch_size=8", "--set", "steps=3", "--set", "pool_size=none"]


@pytest.fixture(scope="module")
def busy_run() -> pipesim.RunResult:
    """A run with partial rollouts, retried failures and timeouts: every status and column used."""
    scen = get_scenario("fig13.1-async").with_(
        failures=RetryFailed(hazard_per_s=0.002), timeout=Timeout(cap_s=200.0), pool_size=400
    )
    return run(scen)


def _same_summary(a: dict[str, float], b: dict[str, float]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert (math.isnan(a[k]) and math.isnan(b[k])) or a[k] == b[k], k


def test_save_and_load_give_equal_tables_summary_and_scenario(
    busy_run: pipesim.RunResult, tmp_path: Path
) -> None:
    r = busy_run
    assert r.summary()["episodes_failed"] > 0 and r.summary()["episodes_truncated"] > 0
    out = r.save(tmp_path / "run")
    assert sorted(p.name for p in out.iterdir()) == [
        "episodes.parquet",
        "events.parquet",
        "lineage.parquet",
        "manifest.json",
        "meta.json",
        "scenario.json",
        "summary.json",
        "trained.parquet",
    ]
    loaded = pipesim.load(out)
    assert isinstance(loaded, SavedRun)
    pd.testing.assert_frame_equal(loaded.events, r.events)
    pd.testing.assert_frame_equal(loaded.trained, r.trained)
    pd.testing.assert_frame_equal(loaded.episode_table, r.episode_table)
    assert isinstance(loaded.events["kind"].dtype, pd.CategoricalDtype)
    assert isinstance(loaded.events["lane"].dtype, pd.CategoricalDtype)
    _same_summary(loaded.summary(), r.summary())
    assert loaded.scenario == r.scenario
    assert loaded.sim_time_s == r.sim_time_s
    assert loaded.sync_log == [tuple(x) for x in r.sync_log]
    assert [t[1:] for t in loaded.train_log] == [t[1:] for t in r.train_log]
    # the saved run saves again to the same thing
    again = pipesim.load(loaded.save(tmp_path / "again"))
    pd.testing.assert_frame_equal(again.events, r.events)


def test_summary_json_is_plain_json(tmp_path: Path) -> None:
    scen = Scenario().with_(n_slots=4, batch_size=4, steps=1)
    r = run(scen)
    p = r.save(tmp_path / "r")
    data = json.loads((p / "summary.json").read_text())  # strict JSON: NaN written as "nan"
    assert data["throughput_per_hour"] == r.summary()["throughput_per_hour"]
    _same_summary(pipesim.load(p).summary(), r.summary())


def _other_directory(d: Path) -> None:
    d.mkdir()
    (d / "keep.txt").write_text("mine")


@pytest.mark.parametrize(
    ("make", "call"),
    [
        (lambda d: None, pipesim.load),  # no such directory
        (Path.mkdir, pipesim.load),  # empty: no meta.json
        (lambda d: d.write_text("x"), pipesim.load),  # a file, not a directory
        (_other_directory, lambda d: run(Scenario().with_(n_slots=4, batch_size=4, steps=1)).save(d)),
    ],
    ids=["load-missing", "load-empty", "load-a-file", "save-into-another-directory"],
)
def test_load_and_save_name_the_path_they_refuse(tmp_path: Path, make: Any, call: Any) -> None:
    """The path as a whole is refused: field "", file the path; a refused save writes nothing."""
    path = tmp_path / "target"
    make(path)
    before = sorted(f.name for f in path.iterdir()) if path.is_dir() else None
    with pytest.raises(SavedRunError) as info:
        call(path)
    assert (info.value.field, info.value.file) == ("", str(path)), str(info.value)
    assert (sorted(f.name for f in path.iterdir()) if path.is_dir() else None) == before


def test_cli_run_save_then_report_and_trace_from_the_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "runs" / "saved"  # missing parents are made
    assert main(["run", "async-eta1", *SMALL, "--save", str(d)]) == 0
    loaded = pipesim.load(d)
    assert loaded.scenario.pipeline.n_slots == 8
    page = tmp_path / "page.html"
    assert main(["report", str(d), "--out", str(page)]) == 0
    html = page.read_text()
    assert html.count("Plotly.newPlot") == 2  # the timeline and the aggregate view
    assert "episodes / hour" in html
    trace = tmp_path / "trace.json"
    assert main(["trace", str(d), "--out", str(trace)]) == 0
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e.get("cat") == "gen" for e in events) == int((loaded.events["kind"] == "gen").sum())


@pytest.mark.parametrize(
    "argv, message",
    [
        (["report", "{tmp}/nothere", "--out", "{tmp}/x.html"], "no such directory"),
        (["trace", "{tmp}/empty", "--out", "{tmp}/t.json"], "no meta.json"),
        (["run", "async-eta1", *SMALL, "--save", "{tmp}/f.txt"], "is a file"),
        (["run", "async-eta1", *SMALL, "--save", "{tmp}/f.txt/deeper"], "is a file, not a directory"),
    ],
)
def test_cli_saved_run_errors_are_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "f.txt").write_text("x")
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err


def test_repr_html_of_scenario_and_run(busy_run: pipesim.RunResult) -> None:
    s = busy_run.scenario._repr_html_()
    assert s.startswith("<table") and "n_slots" in s and "RetryFailed" in s
    r = busy_run._repr_html_()
    assert "episodes / hour" in r and f"{busy_run.summary()['throughput_per_hour']:,.0f}"[:3] in r
    assert "<script" not in r


def test_compare_gives_a_table_and_a_figure() -> None:
    base = Scenario().with_(n_slots=8, batch_size=8, steps=3)
    cmp = pipesim.compare({"sync": base, "eta1": base.with_(max_staleness=1)})
    table, fig = cmp
    assert list(table.columns) == ["sync", "eta1"]
    assert table.loc["staleness mean", "sync"] == 0.0
    assert table.loc["episodes / hour", "eta1"] > table.loc["episodes / hour", "sync"]
    assert isinstance(fig, go.Figure) and sum(t.type == "bar" for t in fig.data) == 4  # a bar per panel
    assert "<table" in cmp._repr_html_()  # one design: row one-design of test_refusals_policies.py


def test_views_of_a_loaded_run_equal_the_runs(busy_run: pipesim.RunResult, tmp_path: Path) -> None:
    from pipesim.io.viz import aggregate_view, timeline

    loaded = pipesim.load(busy_run.save(tmp_path / "run"))

    def marks(fig: go.Figure) -> dict[str, list[float]]:
        return {str(t.name): sorted(t.x) for t in fig.data if t.type == "scatter" and t.mode == "markers"}

    assert marks(timeline(loaded)) == marks(timeline(busy_run))
    assert "retry of a failed or aborted episode" in marks(timeline(loaded))
    a, b = aggregate_view(loaded), aggregate_view(busy_run)
    assert [list(t.y) for t in a.data if t.type == "scatter"] == [
        list(t.y) for t in b.data if t.type == "scatter"
    ]


def test_a_run_on_a_given_pool_saves_the_pool_and_runs_again(tmp_path: Path) -> None:
    """``run(sc, pool).save()`` recorded the scenario's duration model as if it had drawn the run;
    the saved run now keeps the tasks it consumed, and runs again from them to the same summary."""
    import numpy as np

    sc = Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=3, train_time_s=1.0))
    pool = np.linspace(1.0, 9.0, 200)
    r = run(sc, pool)
    assert r.pool is not None and 12 <= len(r.pool) < 200  # the consumed prefix, not all 200
    assert np.array_equal(r.pool, pool[: len(r.pool)])
    loaded = pipesim.load(r.save(tmp_path / "given"))
    assert loaded.pool is not None and np.array_equal(loaded.pool, r.pool)
    assert "a pool of" in loaded._repr_html_()
    _same_summary(run(loaded.scenario, loaded.pool).summary(), r.summary())
    drawn = run(sc)
    assert drawn.pool is None
    again = pipesim.load(drawn.save(tmp_path / "given"))  # overwriting drops the old pool
    assert again.pool is None and not (tmp_path / "given" / "pool.parquet").exists()


def test_a_run_with_a_policy_outside_the_catalog_loads_with_a_warning(tmp_path: Path) -> None:
    """It loaded silently with the default policies in place of the run's own."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Mine:  # a local class: outside the catalog
        def admits(self, p: pipesim.PipelineView) -> bool:
            return p.started < (p.version + 1) * p.batch_size

    sc = Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=2), admission=Mine())
    with pytest.warns(UserWarning, match="admission: .*Mine is not in the policy catalog") as saving:
        path = run(sc).save(tmp_path / "mine")
    assert "default policies" in str(saving[0].message)  # said when saving, not only when loading
    with pytest.warns(UserWarning, match="outside the catalog"):
        loaded = pipesim.load(path)
    assert not loaded.scenario_exact and "Mine" in loaded.scenario_repr
    # the stand-in says what it is: run again, its results carry the name
    assert "stand-in" in loaded.scenario.name and loaded.scenario != sc
    assert "policies as run" in loaded._repr_html_()
    assert pipesim.load(run(Scenario()).save(tmp_path / "plain")).scenario_exact


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{}", "throughput_per_hour"),  # the first headline key it lacks
        ("[1, 2]", ""),  # not an object of numbers: the whole file
        ('{"throughput_per_hour": "x"}', "throughput_per_hour"),
        ('{"gen_util": true}', "gen_util"),
        ("{", ""),  # not JSON
    ],
    ids=["empty", "list", "text", "bool", "broken"],
)
def test_an_edited_summary_is_named_at_load(tmp_path: Path, text: str, field: str) -> None:
    """An edited summary.json made ``report`` fail later with a KeyError (or a format error)."""
    small = Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=2))
    path = run(small).save(tmp_path / "r")
    (path / "summary.json").write_text(text)
    reseal(path)  # an edit made along with its hashes: the summary's own checks still refuse it
    with pytest.raises(SavedRunError) as info:
        pipesim.load(path)
    assert (info.value.field, info.value.file) == (field, str(path / "summary.json")), str(info.value)


def _saved_with_pool(tmp_path: Path) -> Path:
    sc = Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=2, train_time_s=1.0))
    return run(sc, [float(1 + i % 5) for i in range(100)]).save(tmp_path / "run")


@pytest.mark.parametrize(
    ("edit", "file", "field"),
    [
        (lambda d: (d / "pool.parquet").unlink(), "pool.parquet", "pool_given"),  # scenario.json's flag
        (
            lambda d: pd.DataFrame({"duration_s": [float("nan")]}).to_parquet(d / "pool.parquet"),
            "pool.parquet",
            "duration_s[0]",
        ),
        (lambda d: pd.DataFrame({"x": [1.0]}).to_parquet(d / "pool.parquet"), "pool.parquet", "duration_s"),
        (lambda d: (d / "scenario.json").write_text("{nope"), "scenario.json", ""),
        (lambda d: (d / "scenario.json").write_text("[]"), "scenario.json", ""),
        (lambda d: (d / "scenario.json").write_text('{"scenario": null}'), "scenario.json", "pipeline"),
        (lambda d: pd.DataFrame({"a": [1]}).to_parquet(d / "events.parquet"), "events.parquet", "kind"),
        (lambda d: pd.DataFrame().to_parquet(d / "trained.parquet"), "trained.parquet", "episode_id"),
        (lambda d: (d / "events.parquet").write_text("not parquet"), "events.parquet", ""),
    ],
    ids=[
        "no-pool",
        "nan-pool",
        "pool-column",
        "scenario-json",
        "scenario-list",
        "no-pipeline",
        "events",
        "trained",
        "corrupt",
    ],
)
def test_an_edited_saved_run_is_named_at_load(tmp_path: Path, edit: Any, file: str, field: str) -> None:
    """Each loaded silently (a missing pool re-ran on the model) or failed later, inside report or
    trace, with a KeyError or a library's error that named no file."""
    path = _saved_with_pool(tmp_path)
    edit(path)
    reseal(path)  # an edit made along with its hashes: the loader's own checks still refuse it
    with pytest.raises(SavedRunError) as info:
        pipesim.load(path)
    assert (info.value.field, info.value.file) == (field, str(path / file)), str(info.value)


def test_a_saved_meta_with_a_bad_version_or_time_is_named(tmp_path: Path) -> None:
    path = _saved_with_pool(tmp_path)
    meta = json.loads((path / "meta.json").read_text())
    for bad in ({"version": True}, {"version": -5}, {"sim_time_s": "abc"}):
        (path / "meta.json").write_text(json.dumps({**meta, **bad}))
        reseal(path)
        with pytest.raises(SavedRunError):
            pipesim.load(path)
