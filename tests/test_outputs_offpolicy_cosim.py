"""The experiment scripts never replace one output with another, nor a study's finished runs.

``--json run.txt`` had its results replaced by the table written beside it (``.txt``; the staleness
figure, ``.html``, likewise), ``--html`` equal to ``--json`` by the figure, and a rerun without
``--resume`` onto a results file silently kept only its own runs: each is now a usage error (exit
2) naming the flag, made before any training, and the file is left byte for byte as it was. Also:
a cosim run that never reached its target says so (not ``target at nan h``), and a paired row of
fewer than 10 seeds says ``no claim (n < 10)``, not ``significant (...)`` (nor, later, a t-test's
``p < 0.05`` beside a sign-flip ``p=0.250``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mismatch.cli import main as mismatch_main
from offpolicy import fp8, lr_sweep, staleness
from offpolicy.experiment import paired_table
from scenarios import cosim, cosim_report

QUICK = ["--seed-list", "1", "--steps", "2", "--eval-every", "0"]
COSIM = ["--designs", "sync", "--corrections", "none", "--seed-list", "1", "--steps", "2"]


@pytest.fixture(autouse=True)
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every refusal comes before any training: reaching it fails the test at once."""

    def reached(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a run started: the refusal must come before any training")

    for module in (staleness, lr_sweep, fp8):
        monkeypatch.setattr(module, "load_base", reached)
    monkeypatch.setattr(cosim_report, "run_cosim", reached)
    monkeypatch.setattr("mismatch.cli.run", reached)


def refused(main: Callable[[list[str]], int], argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The usage error (exit 2) ``main(argv)`` stops with, as printed on stderr."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def offpolicy_file(path: Path, n: int, steps: int = 2) -> bytes:
    """A results file of ``n`` finished staleness runs at ``steps`` steps (the default lr)."""
    hist = [{"reward": 0.2, "mismatch": 0.0, "over_cap": 0.0, "clip_frac": 0.01}] * steps
    run = {"lag": 0, "correction": "none", "lr": 3e-4, "steps": steps, "gym": "issue", "history": hist}
    runs = [dict(run, seed=s, heldout={"pass_rate": 0.4, "reads": 1.0, "invalid": 0.0}) for s in range(n)]
    path.write_text(json.dumps({"command": "test", "runs": runs}, indent=1))
    return path.read_bytes()


@pytest.mark.parametrize(
    ("main", "name", "extra"),
    [
        (staleness.main, "run.txt", ["--lags", "0", "--corrections", "none"]),
        (staleness.main, "run.html", ["--lags", "0", "--corrections", "none"]),
        (lr_sweep.main, "run.txt", ["--lrs", "1e-3", "--lags", "0"]),
        (fp8.main, "run.txt", ["--corrections", "tis"]),
    ],
    ids=["staleness-txt", "staleness-html", "lr-sweep-txt", "fp8-txt"],
)
def test_a_json_name_the_table_or_figure_would_take_is_refused(
    main: Callable[[list[str]], int],
    name: str,
    extra: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / name
    path.write_text("the user's own file\n")
    err = refused(main, [*extra, *QUICK, "--json", str(path)], capsys)
    assert f"--json (the {'figure' if name.endswith('.html') else 'table'} beside it) {path}" in err
    assert "is also --json" in err and err.count("error:") == 1
    assert path.read_text() == "the user's own file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no table or figure beside it either


def test_table_only_onto_a_txt_json_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = offpolicy_file(tmp_path / "run.txt", 2)
    err = refused(staleness.main, ["--table-only", "--json", str(tmp_path / "run.txt")], capsys)
    assert "is also --json" in err
    assert (tmp_path / "run.txt").read_bytes() == before


@pytest.mark.parametrize("html", ["s.json", "s.txt"])
def test_staleness_html_on_the_json_or_its_table_is_refused(
    html: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = offpolicy_file(tmp_path / "s.json", 1)
    argv = ["--lags", "0", "--corrections", "none", *QUICK, "--resume"]
    err = refused(
        staleness.main, [*argv, "--json", str(tmp_path / "s.json"), "--html", str(tmp_path / html)], capsys
    )
    assert f"--html {tmp_path / html} is also --json" in err
    assert (tmp_path / "s.json").read_bytes() == before


def test_cosim_html_on_the_json_or_the_retabled_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"runs": []}')
    err = refused(cosim.main, [*COSIM, "--json", str(path), "--html", str(path)], capsys)
    assert f"--html {path} is also --json" in err
    err = refused(cosim.main, ["--retable", str(path), "--html", str(path)], capsys)
    assert f"--html {path} is also --retable" in err
    assert path.read_text() == '{"runs": []}'


@pytest.mark.parametrize("source", ["--json", "--from-json"])
def test_mismatch_html_on_the_json_is_refused(
    source: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "same.x"
    path.write_text("keep\n")
    run = ["--tiny"] if source == "--json" else []
    err = refused(mismatch_main, [*run, source, str(path), "--html", str(path)], capsys)
    assert f"--html {path} is also {source}" in err
    assert path.read_text() == "keep\n"


@pytest.mark.parametrize(
    ("main", "extra", "how"),
    [
        (staleness.main, ["--lags", "0", "--corrections", "none"], "pass --resume to continue them, or "),
        (lr_sweep.main, ["--lrs", "3e-4", "--lags", "0"], "pass --resume to continue them, or "),
        (fp8.main, [], "pass --resume to continue them, or "),
    ],
    ids=["staleness", "lr-sweep", "fp8"],
)
def test_a_rerun_without_resume_onto_finished_runs_is_refused(
    main: Callable[[list[str]], int],
    extra: list[str],
    how: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "ow.json"
    before = offpolicy_file(path, 12)
    err = refused(main, [*extra, "--seed-list", "9", "--steps", "2", "--json", str(path)], capsys)
    assert f"--json {path} holds 12 finished runs; {how}choose another path (or delete it)" in err
    assert path.read_bytes() == before


def test_resume_and_table_only_still_read_a_file_of_finished_runs(tmp_path: Path) -> None:
    """The refusal is for a rerun only: --resume goes on to train (here: stopped at load_base),
    --table-only re-renders, and a new path or a file of another shape is written as before."""
    path = tmp_path / "ow.json"
    offpolicy_file(path, 2)
    with pytest.raises(AssertionError, match="a run started"):
        staleness.main(["--lags", "0", "--corrections", "none", *QUICK, "--json", str(path), "--resume"])
    assert lr_sweep.main(["--table-only", "--json", str(path)]) == 0
    other = tmp_path / "other.json"
    other.write_text("{}")
    with pytest.raises(AssertionError, match="a run started"):
        staleness.main(["--lags", "0", "--corrections", "none", *QUICK, "--json", str(other)])


def cosim_file(path: Path, n: int) -> bytes:
    """A cosim --json file of ``n`` finished runs (the record keys only)."""
    run = {"design": "sync", "correction": "none", "batch_size": 64, "summary": {}, "evals": []}
    path.write_text(json.dumps({"table": [], "runs": [dict(run, seed=s) for s in range(n)]}))
    return path.read_bytes()


@pytest.mark.parametrize(
    ("mode", "how"),
    [(["--seed-list", "9"], "pass --resume to continue them, or "), (["--perf", "sync"], "")],
    ids=["grid", "perf"],
)
def test_cosim_rerun_without_resume_onto_finished_runs_is_refused(
    mode: list[str], how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ow.json"
    before = cosim_file(path, 12)
    err = refused(cosim.main, [*mode, "--steps", "2", "--json", str(path)], capsys)
    assert f"--json {path} holds 12 finished runs; {how}choose another path (or delete it)" in err
    assert path.read_bytes() == before


def test_cosim_line_of_a_run_that_never_reached_its_target(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fake(cfg: Any) -> Any:
        hours = math.nan if cfg.rl.seed == 1 else 0.25
        summary = {"final_pass_rate": 0.4, "time_to_target_h": hours, "sim_hours": 0.5}
        return SimpleNamespace(summary=lambda: summary, diverged=None, cpu_s=1.0)

    monkeypatch.setattr(cosim_report, "run_cosim", fake)
    cosim_report.run_grid(["sync"], ["none"], [1, 2], cosim_report.CosimConfig(steps=2))
    never, reached = capsys.readouterr().out.splitlines()
    assert "seed 1: final 0.400, target never reached, 0.50 h simulated" in never and "nan" not in never
    assert "seed 2: final 0.400, target at 0.250 h, 0.50 h simulated" in reached


def test_a_paired_row_under_ten_seeds_makes_no_significance_claim() -> None:
    def run(lag: int, seed: int, rate: float) -> dict[str, Any]:
        return {"lag": lag, "correction": "none", "seed": seed, "heldout": {"pass_rate": rate}}

    runs = [run(0, s, 0.8 + 0.01 * s) for s in range(3)] + [run(8, s, 0.2 + 0.02 * s) for s in range(3)]
    runs += [run(4, s, r) for s, r in enumerate((0.9, 0.7, 0.85))]
    lines = paired_table(runs, [((8, "none"), (0, "none")), ((4, "none"), (0, "none"))]).splitlines()
    assert lines[1].endswith("| p=0.250 | no claim (n < 10)")
    assert lines[2].endswith("| no claim (n < 10)")
    assert not any("significant" in line for line in lines)
