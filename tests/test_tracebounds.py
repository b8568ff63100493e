"""The trace's size bound asked before the work, where the last checks still loaded or ran first:
``pipesim trace`` of a ``.csv`` events table (its rows counted from below by its line ends, before
pandas reads it), of a run spec (``kind = "compute"``) or a compute run's run file (``run.steps`` x
its batch), and ``pipesim run ... --trace`` of a slot scenario or a run spec (before the run; without
``--trace`` the same run goes ahead).

The bound (:data:`pipesim.io.trace_bounds.MAX_TRACE_EVENTS`, where it is read) is monkeypatched
low, so every run here is a few steps. Where the point is that nothing is read or run, the reader
or the run is replaced by one that fails the test if it is called.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any
from unittest import mock

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pipesim.io.trace_bounds as bounds_mod
from pipesim.io.cli import main
from pipesim.io.trace import csv_rows_at_least, min_events
from pipesim.plan.runspec import dumps, load
from tests.test_runspec import SPEC

SMALL = ["--set", "steps=3", "--set", "n_slots=8", "--set", "batch_size=8"]
"""A slot run of 3 steps of 8 episodes: at least 3 x (8 + 1) = 27 events."""
LOW = 10
"""A bound below the fewest events of every run here (27 and 3 x (16 + 1) = 51)."""


def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("read or run although the size check refuses it")


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small slot run's events as CSV, a run spec (test_runspec's: 3 steps of 16 samples) and
    that spec's run file."""
    d = tmp_path_factory.mktemp("tracebounds")
    paths = {"csv": d / "ev.csv", "spec": d / "run.toml", "specjson": d / "spec-run.json"}
    assert main(["run", "async-eta2", *SMALL, "--events", str(paths["csv"])]) == 0
    paths["spec"].write_text(dumps(SPEC))
    assert main(["run", str(paths["spec"]), "--json", str(paths["specjson"])]) == 0
    return paths


@pytest.mark.parametrize(
    ("kind", "never"),
    [
        ("csv", "pandas.read_csv"),
        ("spec", "pipesim.plan.runspec.run"),
        ("specjson", "pipesim.plan.runspec.run"),
    ],
)
def test_trace_refuses_a_large_run_before_reading_or_running_it(
    made: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    never: str,
) -> None:
    out = tmp_path / "t.json"
    monkeypatch.setattr(bounds_mod, "MAX_TRACE_EVENTS", LOW)
    monkeypatch.setattr(never, _never)
    assert main(["trace", str(made[kind]), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    named = str(made["spec"] if kind == "specjson" else made[kind])  # the run file's spec
    assert f"{named}" in err and "events:" in err and f"more than the {LOW} a trace takes" in err
    assert not out.exists()


@pytest.mark.parametrize("kind", ["csv", "spec", "specjson"])
def test_trace_still_traces_a_run_at_the_bound(
    made: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The checks before the work refuse nothing a trace takes: with the bound at the run's own
    count of events, each source traces it."""
    if kind == "csv":
        n = len(pd.read_csv(made["csv"]))
    else:
        from pipesim.plan.runspec import run

        n = len(run(load(made["spec"])).result.events)
    monkeypatch.setattr(bounds_mod, "MAX_TRACE_EVENTS", n)
    out = tmp_path / "t.json"
    assert main(["trace", str(made[kind]), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["traceEvents"]


@pytest.mark.parametrize("kind", ["scenario", "spec"])
def test_run_refuses_a_trace_too_large_before_running(
    made: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kind: str,
) -> None:
    """``pipesim run --trace`` of a run sure to exceed the bound runs nothing and writes nothing
    (before, the run went ahead and its other outputs were written, then the trace was refused)."""
    src, extra = ("async-eta2", SMALL) if kind == "scenario" else (str(made["spec"]), [])
    never = "pipesim.io.api.run" if kind == "scenario" else "pipesim.plan.runspec.run"
    trace, js = tmp_path / "t.json", tmp_path / "r.json"
    monkeypatch.setattr(bounds_mod, "MAX_TRACE_EVENTS", LOW)
    monkeypatch.setattr(never, _never)
    assert main(["run", src, *extra, "--json", str(js), "--trace", str(trace)]) == 2
    err = capsys.readouterr().err
    assert "--trace" in err and "events:" in err and f"more than the {LOW} a trace takes" in err
    assert not trace.exists() and not js.exists()


@pytest.mark.parametrize("kind", ["scenario", "spec"])
def test_run_without_trace_runs_past_the_bound(
    made: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    src, extra = ("async-eta2", SMALL) if kind == "scenario" else (str(made["spec"]), [])
    monkeypatch.setattr(bounds_mod, "MAX_TRACE_EVENTS", LOW)
    js = tmp_path / "r.json"
    assert main(["run", src, *extra, "--json", str(js)]) == 0
    assert json.loads(js.read_text())["summary"]


@pytest.mark.parametrize(
    "design",
    [
        {},
        {"placement": "colocated", "eta": 0, "update": "drain"},
        {"update": "abort"},
        {"oversample": 1.5},
        {"eta": 2, "sync_every": 2},
    ],
)
def test_min_events_bounds_a_compute_run_from_below(tmp_path: Path, design: dict[str, Any]) -> None:
    """The bound a run spec's trace is refused by is never above the run's own count of events:
    its engine trains the same buffer's batches of ``batch_size`` samples, one train row a step."""
    from pipesim.plan.runspec import run

    path = tmp_path / "run.toml"
    path.write_text(dumps({**SPEC, "design": {**SPEC["design"], **design}}))
    rs = load(path)
    assert len(run(rs).result.events) >= min_events(rs.steps, rs.plan.batch_size) > 0


LINES = st.lists(st.text(alphabet='a1, \t\r"', max_size=6), max_size=12)


@given(lines=LINES, trailing=st.booleans(), chunk=st.integers(1, 5), cap=st.integers(0, 12))
def test_csv_rows_at_least_never_exceeds_what_pandas_reads(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], trailing: bool, chunk: int, cap: int
) -> None:
    """Any text, in chunks of any size: the count is None, or at most the rows pandas reads (a
    count past ``cap`` only says "more than cap"), and exact for a table without quotes or blank
    lines where it stops short of the cap."""
    text = "h,x\n" + "\n".join(lines) + ("\n" if trailing else "")
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_bytes(text.encode())
    with mock.patch.object(bounds_mod, "_CHUNK_BYTES", chunk):
        got = csv_rows_at_least(path, cap)
    try:
        rows = len(pd.read_csv(io.StringIO(text)))
    except (ValueError, pd.errors.ParserError):
        rows = None  # no table: only the bound's soundness against a table is asked
    if got is None or rows is None:
        return
    assert got <= rows
    plain = '"' not in text and "\r" not in text and all(line.strip(" \t") for line in lines)
    if plain and got <= cap:  # every line a row: counted to the end
        assert got == rows - (0 if trailing or not lines else 1)


@pytest.mark.parametrize(
    "text",
    ["h\n1\n\n2\n", "h\n1\n \t\n2\n", "\nh\n1\n", "h\r\n1\r\n\r\n2\r\n", 'h\n"1\n2"\n3\n', "h\n1\x00\n"],
)
def test_csv_rows_at_least_gives_no_count_where_lines_are_not_rows(tmp_path: Path, text: str) -> None:
    """A blank line (pandas skips it), a quote (a field may hold a line end) or a NUL byte: no
    count, and the reader decides; in 1-byte chunks too (a blank line across a chunk's edge)."""
    path = tmp_path / "t.csv"
    path.write_bytes(text.encode())
    assert csv_rows_at_least(path, 100) is None
    with mock.patch.object(bounds_mod, "_CHUNK_BYTES", 1):
        assert csv_rows_at_least(path, 100) is None


def test_csv_rows_at_least_stops_past_the_cap(tmp_path: Path) -> None:
    """It reads no further than the cap needs: a table of many rows counts just past it."""
    path = tmp_path / "t.csv"
    path.write_text("h\n" + "1\n" * 10_000)
    with mock.patch.object(bounds_mod, "_CHUNK_BYTES", 8):
        got = csv_rows_at_least(path, 100)
    assert got is not None and 100 < got < 110
    assert csv_rows_at_least(path, 10**6) == 10_000
