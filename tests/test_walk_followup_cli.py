"""Follow-ups of the walkthrough's CLI fixes:

- ``pipesim trace README.md`` said only what a scenario file is (``pipesim run``'s message), though
  trace also takes a run file, a saved run's directory and an events table: its message names them;
- ``pipesim report --seeds`` had no upper bound: it takes compare's and sweep's, ``MAX_SEEDS``;
- ``pipesim plan``'s SPEC help said "plan spec", though plan also takes a run spec;
- ``pipesim profile``'s options did not state their defaults in ``--help``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from pipesim.io.cli import main
from pipesim.io.cli_parser import build_parser
from pipesim.io.compare_seeds import MAX_SEEDS
from pipesim.plan.options import parser as plan_parser

pytestmark = pytest.mark.timeout(60)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


# -- trace's message for a file it cannot read ---------------------------------------------------


@pytest.mark.parametrize("name", ["README.md", "run.json.bak", "notes"])
def test_trace_names_every_input_it_takes_for_a_file_it_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text("# not a run\n")
    assert main(["trace", name, "--out", "x.json"]) == 2
    err = _one_line(capsys)
    assert repr(name) in err, err
    # trace's inputs: a run file, a saved run's directory, an events table, a scenario or run spec
    for takes in (".json", "--save", ".parquet", ".csv", ".toml", ".yaml", "file.py:factory"):
        assert takes in err, (takes, err)
    assert not (tmp_path / "x.json").exists()


def test_run_keeps_its_own_message_for_a_file_it_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pipesim run`` takes scenarios only: its message is the scenario builder's, unchanged."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("# not a run\n")
    assert main(["run", "README.md"]) == 2
    err = _one_line(capsys)
    assert "'README.md'" in err and ".parquet" not in err, err


def test_trace_still_runs_a_registered_name_and_a_scenario_file(tmp_path: Path) -> None:
    assert main(["trace", "fig13.1-async", "--out", str(tmp_path / "a.json")]) == 0
    assert main(["export", "fig13.1-async", "--out", str(tmp_path / "s.toml")]) == 0
    assert main(["trace", str(tmp_path / "s.toml"), "--out", str(tmp_path / "b.json")]) == 0


# -- report --seeds ------------------------------------------------------------------------------


@pytest.mark.parametrize("seeds", [0, MAX_SEEDS + 1, 100_000])
def test_report_seeds_is_bounded_as_compares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seeds: int
) -> None:
    out = tmp_path / "r.html"
    assert main(["report", "--seeds", str(seeds), "--out", str(out)]) == 2
    err = _one_line(capsys)
    assert "--seeds" in err and str(MAX_SEEDS) in err, err
    assert not out.exists()


def test_report_takes_seeds_up_to_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MAX_SEEDS itself is taken (the report is stubbed: it is the bound checked, not the report)."""
    import pipesim.io.report

    got: dict[str, Any] = {}

    def fake(out: str, seeds: int, **_: Any) -> Path:
        got["seeds"] = seeds
        return Path(out)

    monkeypatch.setattr(pipesim.io.report, "build_report", fake)
    assert main(["report", "--seeds", str(MAX_SEEDS), "--out", str(tmp_path / "r.html")]) == 0
    assert got["seeds"] == MAX_SEEDS


# -- help texts ----------------------------------------------------------------------------------


def _subparser(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = sub.choices[name]
    return parser


def test_plan_spec_help_says_it_takes_a_run_spec_too() -> None:
    spec = next(a for a in plan_parser()._actions if a.dest == "spec")
    assert spec.help is not None and "plan spec" in spec.help and "run spec" in spec.help, spec.help


def test_profile_help_states_every_options_default() -> None:
    options = [a for a in _subparser("profile")._actions if a.option_strings and a.dest != "help"]
    assert len(options) >= 10
    for action in options:
        said = action.help or ""
        assert "default" in said or action.required, (action.dest, said)
        if action.default is not None:  # the value itself, as the help writes a list
            assert str(action.default).replace(",", ", ") in said, (action.dest, said)
