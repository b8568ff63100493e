"""``python -m scenarios.cosim --retable A.json --json B.json`` wrote A's table over an existing
B.json holding other runs, unread (the results-file check skipped every ``--retable``). It is
refused as a rerun onto a file with runs is; rewriting A itself, or a new file, still works."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scenarios import cosim
from tests.test_results_file_safety import cosim_runs


def _call(argv: list[str]) -> int:
    try:
        return cosim.main(argv) or 0
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    path = tmp_path / "a.json"
    path.write_text(json.dumps(cosim_runs(2)))
    return path


def test_a_retable_onto_another_file_with_runs_is_refused(
    stored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "b.json"
    other.write_text(json.dumps(cosim_runs(3)))
    before = other.read_bytes()
    assert _call(["--retable", str(stored), "--json", str(other)]) == 2
    assert other.read_bytes() == before
    err = capsys.readouterr().err
    assert str(other) in err and "3 finished runs" in err


def test_a_retable_onto_a_broken_file_is_refused(stored: Path, tmp_path: Path) -> None:
    other = tmp_path / "b.json"
    other.write_text('{"runs": [,,]}')
    assert _call(["--retable", str(stored), "--json", str(other)]) == 2
    assert other.read_text() == '{"runs": [,,]}'


@pytest.mark.parametrize("target", ["same", "new"])
def test_a_retable_rewrites_its_own_file_or_a_new_one(stored: Path, tmp_path: Path, target: str) -> None:
    out = stored if target == "same" else tmp_path / "new.json"
    assert _call(["--retable", str(stored), "--json", str(out)]) == 0
    assert len(json.loads(out.read_text())["runs"]) == 2


def test_a_record_without_a_summary_key_the_table_reads_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It stopped --retable with a KeyError from the table."""
    data = cosim_runs(2)
    del data["runs"][1]["summary"]["staleness_mean"]
    path = tmp_path / "a.json"
    path.write_text(json.dumps(data))
    assert _call(["--retable", str(path)]) == 2
    err = capsys.readouterr().err
    assert "runs[1]" in err and "staleness_mean" in err and "Traceback" not in err
