"""The pipesim CLI, mostly in-process through ``main(argv)`` (importing torch per call is slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pipesim.cli import main

SMALL = ["--set", "n_slots=8", "--set", "batch_size=8", "--set", "steps=3", "--set", "pool_size=none"]


def test_list_names_builtins(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--keys"]) == 0
    out = capsys.readouterr().out
    for name in (
        "synchronous",
        "one-step-drain",
        "async-eta1",
        "async-eta2",
        "async-eta4-drain",
        "fig13.1-sync",
    ):
        assert any(line.startswith(name + " ") for line in out.splitlines()), name
    assert "max_staleness" in out and "Drain" in out


def test_run_reproduces_chapter_synchronous(capsys: pytest.CaptureFixture[str]) -> None:
    expected = json.loads((Path(__file__).parent / "data" / "chapter13_expected.json").read_text())
    assert main(["run", "synchronous"]) == 0
    out = capsys.readouterr().out
    line = [ln for ln in out.splitlines() if ln.startswith("throughput_per_hour")][0]
    assert float(line.split()[1].replace(",", "")) == pytest.approx(
        expected["designs"]["synchronous"]["result"]["throughput"], rel=1e-3
    )


def test_run_writes_json_events_trace_html_and_trace_rebuilds(tmp_path: Path) -> None:
    j, ev, tr, html = tmp_path / "run.json", tmp_path / "ev.csv", tmp_path / "t1.json", tmp_path / "t.html"
    argv = ["run", "async-eta1", *SMALL, "--set", "weight_update=drain", "--seed", "3"]
    assert main([*argv, "--json", str(j), "--events", str(ev), "--trace", str(tr), "--html", str(html)]) == 0
    payload = json.loads(j.read_text())
    assert payload["scenario"]["pipeline"]["n_slots"] == 8 and payload["scenario"]["seed"] == 3
    assert "Drain" in payload["scenario"]["weight_update"]
    assert payload["summary"]["staleness_max"] <= 1  # drain bounds staleness by eta
    events = pd.read_csv(ev)
    assert set(events["kind"]) >= {"gen", "train", "sync"}
    # trace from the run file is the same trace
    t2 = tmp_path / "t2.json"
    assert main(["trace", str(j), "--out", str(t2)]) == 0
    assert json.loads(t2.read_text()) == json.loads(tr.read_text())
    trace = json.loads(tr.read_text())["traceEvents"]
    xs = [e for e in trace if e["ph"] == "X"]
    assert len([e for e in xs if e["cat"] == "gen"]) == (events["kind"] == "gen").sum()
    assert len([e for e in xs if e["cat"] == "sync"]) == 3
    assert all(e["dur"] >= 0 and "ts" in e for e in xs)
    assert "Plotly.newPlot" in html.read_text()
    # from the events table as well
    t3 = tmp_path / "t3.json"
    assert main(["trace", str(ev), "--out", str(t3)]) == 0
    assert len([e for e in json.loads(t3.read_text())["traceEvents"] if e["ph"] == "X"]) == len(xs)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "synchronous", "--set", "n_slot=8"], "valid keys: n_slots"),
        (["run", "synchronous", "--set", "n_slots=eight"], "n_slots: expected int, got 'eight'"),
        (["run", "synchronous", "--set", "n_slots=0"], "n_slots must be an integer >= 1"),
        (["run", "synchronous", "--set", "weight_update=nope"], "valid policies"),
        (["run", "nope"], "valid scenarios: synchronous"),
        (["sweep", "synchronous", "--over", "max_staleness=a,b"], "max_staleness: expected int"),
        (["sweep", "synchronous", "--over", "bogus=1,2"], "valid keys"),
        (["run", "synchronous", "--events", "x.txt"], "--events"),
        (["trace", "missing.json", "--out", "t.json"], "no such file"),
    ],
)
def test_bad_input_exits_2_with_message(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_sweep_local_pool_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv, html = tmp_path / "a.csv", tmp_path / "a.html"
    argv = [
        "sweep",
        "synchronous",
        *SMALL,
        "--over",
        "max_staleness=0,1",
        "--over",
        "weight_update=partialrollout,drain",
    ]
    assert (
        main([*argv, "--seeds", "2", "--workers", "2", "--csv", str(csv), "--html", str(html), "--quiet"])
        == 0
    )
    runs = pd.read_csv(csv)
    assert len(runs) == 8 and (runs["status"] == "ok").all()
    assert "throughput_per_hour_mean" in capsys.readouterr().out
    assert html.read_text().count("Plotly.newPlot") == 4


@pytest.mark.slow
def test_sweep_dask_local_matches_process_pool(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    argv = ["sweep", "synchronous", *SMALL, "--over", "max_staleness=0,2", "--seeds", "2", "--quiet"]
    assert main([*argv, "--workers", "2", "--csv", str(tmp_path / "p.csv")]) == 0
    assert main([*argv, "--dask", "local", "--csv", str(tmp_path / "d.csv")]) == 0
    assert pd.read_csv(tmp_path / "p.csv").equals(pd.read_csv(tmp_path / "d.csv"))


def test_entry_point_module_exit_code() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pipesim", "run", "no-such-design"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "valid scenarios" in proc.stderr and "Traceback" not in proc.stderr
