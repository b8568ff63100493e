"""A results file is never written over unread, and what is wrong with one is said by name.

The four result-writing commands (``offpolicy.staleness``, ``lr_sweep``, ``fp8`` and
``scenarios.cosim``) refuse, before any run, a ``--json`` file that exists and is not a readable
results file of theirs (not JSON, another command's file), naming the file and why; a file with
nothing in it is written over (it holds no run). ``scenarios.cosim`` also says on Ctrl-C that its
``--json`` was not changed, re-runs incomplete stored runs on ``--resume`` and refuses malformed
ones naming the record and the field; ``--perf`` warms up before its timed runs. The statistics and
``train_offpolicy`` name a bad argument.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from offpolicy import RLConfig, fp8, lr_sweep, staleness
from offpolicy.checks import FieldError
from offpolicy.stats import paired_t, sign_flip_p, t_interval
from offpolicy.update import train_offpolicy
from scenarios import cosim, cosim_perf, cosim_report
from scenarios.cosim_checks import TABLE_SUMMARY_KEYS

Main = Callable[[list[str]], int]


class RunStarted(Exception):
    """Raised where a command would start its first run."""


@pytest.fixture(autouse=True)
def no_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def started(*args: Any, **kwargs: Any) -> Any:
        raise RunStarted

    for module in (staleness, lr_sweep, fp8):
        monkeypatch.setattr(module, "load_base", started)
    monkeypatch.setattr(cosim_report, "run_grid", started)


def offpolicy_runs(n: int) -> dict[str, Any]:
    hist = [{"reward": 0.2, "mismatch": 0.0, "over_cap": 0.0, "clip_frac": 0.01}] * 2
    run = {"lag": 0, "correction": "none", "lr": 3e-4, "steps": 2, "gym": "issue", "history": hist}
    held = {"pass_rate": 0.4, "reads": 1.0, "invalid": 0.0}
    return {"command": "test", "runs": [dict(run, seed=s, heldout=held) for s in range(n)]}


def cosim_record(seed: int, evals: int = 3) -> dict[str, Any]:
    """A whole cosim run record of 2 steps evaluated every step (``evals``: how many it made)."""
    return dict(
        design="sync", correction="none", seed=seed, gym="issue", lr=RLConfig().lr, train_steps=2,
        eval_every=1, eval_episodes=8, batch_size=64,
        summary=dict.fromkeys(TABLE_SUMMARY_KEYS, 0.5) | {"sim_hours": 0.1},
        evals=[{"step": s, "sim_h": 0.1 * s, "pass_rate": 0.2 + 0.1 * s} for s in range(evals)],
        steps=[], diverged=None,
    )  # fmt: skip


def cosim_runs(n: int) -> dict[str, Any]:
    return {"table": [], "runs": [cosim_record(s) for s in range(n)]}


GRID = {
    "staleness": (staleness.main, ["--lags", "0", "--corrections", "none"], offpolicy_runs),
    "lr_sweep": (lr_sweep.main, ["--lrs", "3e-4", "--lags", "0"], offpolicy_runs),
    "fp8": (fp8.main, [], offpolicy_runs),
    "cosim": (cosim.main, ["--designs", "sync", "--corrections", "none", "--eval-every", "1"], cosim_runs),
}
OTHER = {"staleness": cosim_runs, "lr_sweep": cosim_runs, "fp8": cosim_runs, "cosim": offpolicy_runs}


def broken(kind: str, command: str) -> str:
    """The text of a results file of ``command`` broken as ``kind`` says, and what the refusal names."""
    own = json.dumps(GRID[command][2](12), indent=1)
    return {
        "doubled comma": own.replace('"runs"', '"runs" ,,', 1),
        "stray brace": own + "}",
        "cut short": own[: len(own) // 2],
        "other command": json.dumps(OTHER[command](3)),
    }[kind]


def run_refused(main: Main, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("kind", ["doubled comma", "stray brace", "cut short", "other command"])
@pytest.mark.parametrize("command", list(GRID))
def test_a_file_that_is_not_this_commands_results_is_not_written_over(
    command: str, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main, extra, _ = GRID[command]
    path = tmp_path / "runs.json"
    path.write_text(broken(kind, command))
    before = path.read_bytes()
    err = run_refused(main, [*extra, "--seed-list", "9", "--steps", "2", "--json", str(path)], capsys)
    assert f"--json {path}" in err
    assert ("results file of" if kind == "other command" else "not JSON (") in err, err
    assert path.read_bytes() == before


@pytest.mark.parametrize("text", ["", "\n  \n", "{}"])
@pytest.mark.parametrize("command", list(GRID))
def test_a_file_with_nothing_in_it_is_written_over(command: str, text: str, tmp_path: Path) -> None:
    """An empty file holds no run, so writing over it loses nothing: the runs start."""
    main, extra, _ = GRID[command]
    path = tmp_path / "runs.json"
    path.write_text(text)
    with pytest.raises(RunStarted):
        main([*extra, "--seed-list", "9", "--steps", "2", "--json", str(path)])


READERS = {
    "staleness --resume": (
        staleness.main,
        ["--lags", "0", "--corrections", "none", "--steps", "2", "--resume"],
    ),
    "staleness --table-only": (staleness.main, ["--table-only"]),
    "cosim --resume": (cosim.main, [*GRID["cosim"][1], "--seed-list", "0", "--steps", "2", "--resume"]),
    "cosim --retable": (cosim.main, ["--retable"]),
}


@pytest.mark.parametrize("reader", list(READERS))
def test_reading_a_broken_file_says_not_json_at_its_line(
    reader: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main, argv = READERS[reader]
    path = tmp_path / "runs.json"
    path.write_text(broken("cut short", "cosim" if reader.startswith("cosim") else "staleness"))
    before = path.read_bytes()
    err = run_refused(
        main, [*argv, str(path)] if argv == ["--retable"] else [*argv, "--json", str(path)], capsys
    )
    assert str(path) in err and "not JSON (" in err and " line " in err and " column " in err, err
    assert path.read_bytes() == before


@pytest.mark.parametrize("reader", list(READERS))
def test_reading_the_other_scripts_file_names_its_writer(
    reader: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main, argv = READERS[reader]
    path = tmp_path / "runs.json"
    cosim_reader = reader.startswith("cosim")
    path.write_text(json.dumps(offpolicy_runs(2) if cosim_reader else cosim_runs(2)))
    err = run_refused(
        main, [*argv, str(path)] if argv == ["--retable"] else [*argv, "--json", str(path)], capsys
    )
    writer = "python -m offpolicy.staleness" if cosim_reader else "python -m scenarios.cosim"
    assert str(path) in err and f"a results file of {writer}" in err, err


def test_cosim_interrupt_before_a_run_says_its_json_was_not_changed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(cosim_report, "run_grid", interrupted)
    path = tmp_path / "i2.json"
    path.write_text(json.dumps(cosim_runs(2)))
    before = path.read_bytes()
    argv = [*GRID["cosim"][1], "--seed-list", "0,1,2", "--steps", "2", "--json", str(path), "--resume"]
    assert cosim.main(argv) == 130
    err = capsys.readouterr().err
    assert f"no run had finished; {path} was not changed" in err and "no run was saved" not in err, err
    assert path.read_bytes() == before


def test_cosim_resume_runs_an_incomplete_record_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    def grid(*args: Any, done: Any = (), **kwargs: Any) -> Any:
        seen["done"] = [r["seed"] for r in done]
        raise RunStarted

    monkeypatch.setattr(cosim_report, "run_grid", grid)
    path = tmp_path / "runs.json"
    stored = cosim_runs(3)
    stored["runs"][1]["evals"] = []  # stopped before its evaluations: not a finished run
    path.write_text(json.dumps(stored))
    with pytest.raises(RunStarted):
        cosim.main(
            [*GRID["cosim"][1], "--seed-list", "0,1,2", "--steps", "2", "--json", str(path), "--resume"]
        )
    assert seen["done"] == [0, 2]
    assert f"{path}: 1 incomplete run(s) left out, run again" in capsys.readouterr().err


MALFORMED = [
    ("design", "bogus", "runs[1].design"),
    ("seed", "5", "runs[1].seed"),
    ("seed", True, "runs[1].seed"),
    ("batch_size", 0, "runs[1].batch_size"),
    ("summary", {"final_pass_rate": math.nan}, "runs[1].summary.final_pass_rate"),
    ("summary", dict.fromkeys(TABLE_SUMMARY_KEYS, 0.5) | {"sim_hours": "x"}, "runs[1].summary.sim_hours"),
    ("summary", {"final_pass_rate": 0.5, "sim_hours": 0.1}, "runs[1].summary lacks"),
    ("evals", [{"step": 0, "sim_h": 0.0, "pass_rate": math.nan}], "runs[1].evals[0].pass_rate"),
    ("evals", [{"step": "0", "sim_h": 0.0, "pass_rate": 0.5}], "runs[1].evals[0].step"),
    ("evals", [{"step": 0, "sim_h": math.inf, "pass_rate": 0.5}], "runs[1].evals[0].sim_h"),
]


@pytest.mark.parametrize("mode", ["--retable", "--resume"])
@pytest.mark.parametrize(("field", "value", "named"), MALFORMED)
def test_cosim_refuses_a_malformed_record_naming_its_index_and_field(
    mode: str, field: str, value: Any, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.json"
    stored = cosim_runs(3)
    stored["runs"][1][field] = value
    path.write_text(json.dumps(stored))  # NaN as JSON's NaN, as Python writes it
    before = path.read_bytes()
    if mode == "--retable":
        argv = ["--retable", str(path)]
    else:
        argv = [*GRID["cosim"][1], "--seed-list", "0", "--steps", "2", "--json", str(path), "--resume"]
    err = run_refused(cosim.main, argv, capsys)
    assert f"{path}: {named} " in err, err
    assert path.read_bytes() == before


def test_perf_charges_no_one_time_cost_to_its_first_timed_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first ``train_rl`` of a process pays a one-time cost (here 0.2 s of CPU, the others
    0.02 s): it is paid before the timed runs, so every ratio is about the same."""
    calls: list[str] = []

    def spin(seconds: float) -> None:
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass

    def train_rl(*args: Any) -> None:
        spin(0.2 if not calls else 0.02)
        calls.append("train_rl")

    def run_cosim(cfg: Any, model: Any = None) -> Any:
        calls.append("cosim")
        return SimpleNamespace(cpu_s=0.02, counts={})

    for name, fake in (("train_rl", train_rl), ("run_cosim", run_cosim), ("build_tokenizer", lambda: None)):
        monkeypatch.setattr(cosim_perf, name, fake)
    monkeypatch.setattr(cosim_perf, "make_rl_base", lambda tok, cfg: torch.nn.Linear(1, 1))
    monkeypatch.setattr(cosim_perf, "make_tasks", lambda *args: [])
    out = cosim_perf.perf_protocol("sync", 2, (2, 1, 3), log=False)
    assert max(out["ratios"]) / min(out["ratios"]) < 2.0, out["ratios"]


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: t_interval(["a", "b"]), "values"),  # type: ignore[list-item]
        (lambda: sign_flip_p([0.1, "x"]), "diffs"),  # type: ignore[list-item]
        (lambda: paired_t([0.1, 0.2], [0.1, "y"]), "b"),  # type: ignore[list-item]
    ],
)
def test_a_value_that_is_not_a_number_is_named(call: Callable[[], Any], field: str) -> None:
    with pytest.raises(FieldError) as info:
        call()
    assert info.value.field == field and f"{field}[" in str(info.value), str(info.value)


def test_train_offpolicy_refuses_a_lag_of_steps_or_more_as_the_cli_does() -> None:
    model = torch.nn.Linear(1, 1)
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(FieldError) as info:
        train_offpolicy(model, [], None, RLConfig(), steps=2, lag=5)  # type: ignore[arg-type]
    assert info.value.field == "lag" and "steps 2" in str(info.value), str(info.value)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
