"""Size bounds checked before the work: ``pipesim fit`` refuses a trace past the project's log bound
(:data:`pipesim.core.readfile.LOG_MAX_BYTES`) before reading it, in every format it reads, and
``pipesim trace`` refuses a run too large to trace before loading it (a saved run's or a Parquet
table's events, counted from the Parquet footer) or rerunning it (a run file's or a scenario's
run, bounded below by steps x (batch_size + 1)).

The bounds are monkeypatched low, so every file here is a few KB. Where the point is that nothing
is read or run, the reader or the run is replaced by one that fails the test if it is called.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipesim.io.cli import main
from pipesim.io.fit_readers import FitError, read_table

N = 40
CAP = 64
"""A cap below every trace file written here (each is a few hundred bytes)."""


def _write(path: Path) -> Path:
    """``N`` positive durations in column ``d`` of ``path``, in the format its suffix names."""
    df = pd.DataFrame({"d": np.linspace(1.0, 40.0, N)})
    suffix = path.suffix
    if suffix == ".csv":
        df.to_csv(path, index=False)
    elif suffix == ".tsv":
        df.to_csv(path, sep="\t", index=False)
    elif suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    elif suffix == ".json":
        df.to_json(path, orient="records")
    else:
        df.to_parquet(path, index=False)
    return path


def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("read or run although the size check refuses it")


FORMATS = [".csv", ".tsv", ".jsonl", ".json", ".parquet"]


@pytest.mark.parametrize("suffix", FORMATS)
def test_fit_refuses_a_trace_past_the_cap_before_reading_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    path = _write(tmp_path / f"t{suffix}")
    monkeypatch.setattr("pipesim.io.fit_readers.LOG_MAX_BYTES", CAP, raising=False)
    for reader in ("read_csv", "read_json"):
        monkeypatch.setattr(f"pipesim.io.fit_readers.pd.{reader}", _never)
    monkeypatch.setattr("pipesim.io.fit_readers.read_parquet", _never)
    with pytest.raises(FitError) as info:
        read_table(path)
    assert info.value.file == str(path) and info.value.field == ""
    assert str(path) in str(info.value) and "sample" in str(info.value)


@pytest.mark.parametrize("suffix", FORMATS)
def test_fit_reads_a_trace_at_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str) -> None:
    """The bound is the file's size: one of exactly the cap is read, one byte less refuses it."""
    path = _write(tmp_path / f"t{suffix}")
    size = path.stat().st_size
    monkeypatch.setattr("pipesim.io.fit_readers.LOG_MAX_BYTES", size)
    assert len(read_table(path)) == N
    monkeypatch.setattr("pipesim.io.fit_readers.LOG_MAX_BYTES", size - 1)
    with pytest.raises(FitError):
        read_table(path)


def test_fit_command_refuses_with_exit_2_naming_the_file_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "big.csv")
    out = tmp_path / "fit.json"
    monkeypatch.setattr("pipesim.io.fit_readers.LOG_MAX_BYTES", CAP, raising=False)
    assert main(["fit", str(path), "--column", "d", "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "head -n 1" in err  # the remedy for a CSV: a sample of its rows
    assert not out.exists()


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_trace_rows_counts_without_reading_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    from pipesim.io.fit_readers import trace_rows

    path = _write(tmp_path / f"t{suffix}")
    monkeypatch.setattr("pipesim.io.fit_readers.read_parquet", _never)
    monkeypatch.setattr("pipesim.io.fit_readers.pd.read_csv", _never)
    header = suffix in (".csv", ".tsv")
    assert trace_rows(path) == N + header


def test_trace_rows_does_not_guess(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """None for what it cannot count cheaply (a JSON array), or what the reader will refuse."""
    from pipesim.io.fit_readers import trace_rows

    assert trace_rows(_write(tmp_path / "t.json")) is None
    assert trace_rows(tmp_path / "missing.csv") is None
    assert trace_rows(tmp_path) is None
    big = _write(tmp_path / "big.csv")
    monkeypatch.setattr("pipesim.io.fit_readers.LOG_MAX_BYTES", CAP, raising=False)
    assert trace_rows(big) is None


def test_fit_says_how_many_rows_it_reads_only_for_a_long_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "t.csv")
    assert main(["fit", str(path), "--column", "d"]) == 0
    assert "reading about" not in capsys.readouterr().err
    monkeypatch.setattr("pipesim.io.cli_fit.NOTED_ROWS", N - 1)
    assert main(["fit", str(path), "--column", "d"]) == 0
    err = capsys.readouterr().err
    assert f"reading about {N + 1} rows of {path}" in err


# -- pipesim trace ---------------------------------------------------------------------------------
SMALL = ["--set", "steps=3", "--set", "n_slots=8", "--set", "batch_size=8"]
"""A run of 3 steps of 8 episodes: at least 3 x (8 + 1) = 27 events."""


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small run saved, its run file and its events table."""
    d = tmp_path_factory.mktemp("run")
    paths = {"saved": d / "saved", "json": d / "run.json", "parquet": d / "ev.parquet"}
    argv = ["run", "async-eta2", *SMALL, "--save", str(paths["saved"]), "--json", str(paths["json"])]
    assert main([*argv, "--events", str(paths["parquet"])]) == 0
    return paths


@pytest.mark.parametrize(
    ("kind", "never"),
    [
        ("saved", "pipesim.io.cli_trace.load_saved"),
        ("parquet", "pipesim.io.parquet.read_parquet"),
        ("json", "pipesim.io.api.run"),
        ("scenario", "pipesim.io.api.run"),
    ],
)
def test_trace_refuses_a_large_run_before_loading_or_running_it(
    made: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    never: str,
) -> None:
    src = "async-eta2" if kind == "scenario" else str(made[kind])
    extra = SMALL if kind == "scenario" else []
    out = tmp_path / "t.json"
    monkeypatch.setattr("pipesim.io.trace_bounds.MAX_TRACE_EVENTS", 10)  # below 27, the least such a run has
    monkeypatch.setattr(never, _never)
    assert main(["trace", src, *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{src}: events:" in err and "more than the 10 a trace takes" in err
    assert not out.exists()


@pytest.mark.parametrize("kind", ["saved", "parquet", "json", "scenario"])
def test_trace_still_traces_a_run_below_the_bound(
    made: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The checks before the work refuse nothing a trace takes: with the bound at the run's own
    count of events, each source traces it."""
    import pipesim.io.trace_bounds as bounds_mod
    from pipesim.io.parquet import read_parquet

    n = len(read_parquet(made["parquet"]))
    monkeypatch.setattr(bounds_mod, "MAX_TRACE_EVENTS", n)
    src = "async-eta2" if kind == "scenario" else str(made[kind])
    extra = SMALL if kind == "scenario" else []
    out = tmp_path / "t.json"
    assert main(["trace", src, *extra, "--out", str(out)]) == 0
    assert json.loads(out.read_text())["traceEvents"]


@pytest.mark.parametrize(
    "name", ["synchronous", "one-step-drain", "async-eta2", "async-eta4-drain", "systems:areal"]
)
@pytest.mark.parametrize("sets", [[], ["colocated=true"]])
def test_min_events_bounds_a_run_from_below(name: str, sets: list[str]) -> None:
    """The bound a rerun is refused by is never above the run's own count of events: a run it
    refuses could not have been traced."""
    from pipesim.io.api import run
    from pipesim.io.cli_common import build_scenario
    from pipesim.io.trace import min_events

    scenario, _ = build_scenario(name, ["steps=4", *sets], 0)
    p = scenario.pipeline
    assert len(run(scenario).events) >= min_events(p.steps, p.batch_size) > 0
