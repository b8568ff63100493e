"""``pipesim trace RUN.json`` of a compute run traces the run the file records (its ``runspec``),
not the run spec file as it is now: edited, the file's run is not traced; deleted, the trace is
not refused. A note on stderr says so (docs/viz.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipesim.io.cli import main

SPEC = Path(__file__).resolve().parent.parent / "examples" / "run_verl_8gpu.toml"


def _end_s(path: Path) -> float:
    events = json.loads(path.read_text())
    rows = events["traceEvents"] if isinstance(events, dict) else events
    return max(e.get("ts", 0) + e.get("dur", 0) for e in rows)


def test_trace_of_a_compute_run_is_the_recorded_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "v.toml"
    spec.write_text(SPEC.read_text())
    run_json = tmp_path / "v.json"
    assert main(["run", str(spec), "--set", "run.steps=2", "--json", str(run_json)]) == 0
    capsys.readouterr()  # the run's own notes (its slot shares): the trace's are read below
    first = tmp_path / "t1.json"
    assert main(["trace", str(run_json), "--out", str(first)]) == 0
    assert "note" not in capsys.readouterr().err  # the file builds the run recorded: no note
    text = spec.read_text()
    assert "n_gpus = 8\n" in text
    spec.write_text(text.replace("n_gpus = 8\n", "n_gpus = 16\n"))
    edited = tmp_path / "t2.json"
    assert main(["trace", str(run_json), "--out", str(edited)]) == 0
    assert "has changed since the run" in capsys.readouterr().err
    assert edited.read_text() == first.read_text()
    spec.unlink()
    gone = tmp_path / "t3.json"
    assert main(["trace", str(run_json), "--out", str(gone)]) == 0
    assert "gone" in capsys.readouterr().err
    assert gone.read_text() == first.read_text()
    assert _end_s(gone) > 0


def test_trace_set_and_seed_apply_over_the_recorded_spec(tmp_path: Path) -> None:
    spec = tmp_path / "v.toml"
    spec.write_text(SPEC.read_text())
    run_json = tmp_path / "v.json"
    assert main(["run", str(spec), "--set", "run.steps=2", "--json", str(run_json)]) == 0
    spec.unlink()
    base, longer = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["trace", str(run_json), "--out", str(base)]) == 0
    assert main(["trace", str(run_json), "--out", str(longer), "--set", "run.steps=4"]) == 0
    assert _end_s(longer) > _end_s(base)
    bad = tmp_path / "c.json"
    assert main(["trace", str(run_json), "--out", str(bad), "--set", "run.stepz=4"]) == 2
    assert not bad.exists()
