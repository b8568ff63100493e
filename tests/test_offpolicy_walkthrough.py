"""What a user's walkthrough of docs/offpolicy.md and docs/cosim.md found: ``--resume`` over a
file of other settings pooled its runs with the new ones in one cell (a seed counted twice, 5- and
6-step runs averaged), and a repeated design or correction ran and counted every run twice."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from offpolicy.experiment import resume_mismatch
from offpolicy.rl import RLConfig
from scenarios.cosim import CosimConfig
from scenarios.cosim_report import cli


def runs(steps: int, lr: float) -> list[dict[str, object]]:
    return [{"seed": s, "steps": steps, "lr": lr} for s in (101, 202)]


@pytest.mark.parametrize(
    ("stored", "args", "needle"),
    [
        (runs(5, RLConfig().lr), argparse.Namespace(steps=6, lr=None), "--steps"),
        (runs(5, RLConfig().lr), argparse.Namespace(steps=5, lr=1e-3), "--lr"),
        (runs(5, 1e-3), argparse.Namespace(steps=5, lr=None), "--lr"),
    ],
    ids=["other-steps", "other-lr", "default-lr-against-another"],
)
def test_resuming_a_file_of_other_settings_is_refused(
    stored: list[dict[str, object]], args: argparse.Namespace, needle: str
) -> None:
    problem = resume_mismatch(stored, args)
    assert problem is not None and needle in problem


def test_resuming_a_file_of_the_same_settings_is_allowed() -> None:
    assert resume_mismatch(runs(5, RLConfig().lr), argparse.Namespace(steps=5, lr=None)) is None
    assert resume_mismatch(runs(5, 1e-3), argparse.Namespace(steps=5, lr=1e-3)) is None
    assert resume_mismatch([], argparse.Namespace(steps=5, lr=None)) is None
    lr_sweep = argparse.Namespace(steps=5, lr=None, lrs=[1e-3, 3e-4])  # lr is its axis
    assert resume_mismatch(runs(5, 1e-3) + runs(5, 3e-4), lr_sweep) is None


@pytest.mark.parametrize("flag", ["--designs", "--corrections"])
def test_a_repeated_design_or_correction_is_refused(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    value = "sync,sync" if flag == "--designs" else "none,none"
    with pytest.raises(SystemExit) as info:
        cli([flag, value, "--seeds", "1", "--steps", "1"])
    assert info.value.code == 2 and flag in capsys.readouterr().err


def test_a_cosim_resume_over_runs_of_other_steps_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = {"design": "sync", "correction": "none", "seed": 0, "batch_size": 8, "summary": {}}
    record |= {"evals": [], "steps": [{}, {}], "lr": RLConfig().lr, "gym": CosimConfig().gym}
    path = tmp_path / "cosim.json"
    path.write_text(json.dumps({"runs": [record]}))
    with pytest.raises(SystemExit) as info:
        cli(
            ["--designs", "sync", "--corrections", "none", "--seeds", "1", "--steps", "3"]
            + ["--json", str(path), "--resume"]
        )
    assert info.value.code == 2 and "--resume" in capsys.readouterr().err


def test_fp8_table_only_on_another_scripts_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It raised an IndexError from inside the table (a staleness JSON has no exact-sampler run)."""
    from offpolicy.fp8 import main

    path = tmp_path / "staleness.json"
    run = {"seed": 1, "correction": "none", "heldout": {"pass_rate": 0.5}, "history": [], "lag": 0}
    path.write_text(json.dumps({"runs": [run]}))
    with pytest.raises(SystemExit) as info:
        main(["--table-only", "--json", str(path)])
    assert info.value.code == 2 and "--table-only" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("call", "field"),
    [
        ("tis", "cap"),
        ("seq_tis", "cap"),
        ("mis_low", "low"),
        ("mis_negative", "low"),
        ("holm_nan", "pvalues[0]"),
        ("holm_above_1", "pvalues[1]"),
    ],
)
def test_a_nan_or_out_of_range_weight_knob_or_p_value_is_named(call: str, field: str) -> None:
    """NaN caps gave all-NaN weights, a NaN or negative band all-zero weights, and holm read NaN
    or 1.5 as a p-value of 1: each is refused, naming the argument."""
    import math

    import torch

    from offpolicy import stats
    from offpolicy.checks import FieldError
    from offpolicy.functional import mis_weights, seq_tis_weights, tis_weights

    a, b, mask = torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 3)
    calls = {
        "tis": lambda: tis_weights(a, b, mask, cap=math.nan),
        "seq_tis": lambda: seq_tis_weights(a, b, mask, cap=math.nan),
        "mis_low": lambda: mis_weights(a, b, mask, low=math.nan),
        "mis_negative": lambda: mis_weights(a, b, mask, low=-1.0, high=-0.5),
        "holm_nan": lambda: stats.holm([math.nan]),
        "holm_above_1": lambda: stats.holm([0.01, 1.5]),
    }
    with pytest.raises(FieldError) as info:
        calls[call]()
    assert info.value.field == field


def _history_run(steps: int, seed: int, **keys: object) -> dict[str, object]:
    """A run whose step i has reward i / steps (so a window's mean says which steps it read; a
    reward is a share of episodes fixed, so it lies in [0, 1], which the tables check)."""
    row = {"mismatch": 0.0, "over_cap": 0.0, "health_p99": 0.0, "health_max": 0.0}
    history = [dict(row, reward=i / steps) for i in range(steps)]
    return {
        "steps": steps,
        "seed": seed,
        "history": history,
        "heldout": {"pass_rate": 0.5, "reads": 1.0},
        **keys,
    }


@pytest.mark.parametrize("steps", [4, 8, 10, 30])
def test_reward_windows_read_what_their_headers_say(steps: int) -> None:
    """At 8 steps, 'last 10' read steps [-2:] (the last 2): the window is min(10, steps), and the
    header says which; at 10 steps and more nothing changes."""
    from offpolicy.fp8 import fp8_table
    from offpolicy.lr_sweep import lr_table

    w = min(10, steps)
    last = sum(range(steps - w, steps)) / w / steps
    first = sum(range(w)) / w / steps

    def mean_of(cell: str) -> float:  # a cell prints its mean to 2 or 3 decimals
        return float(cell.split()[0])

    lr_runs = [_history_run(steps, s, lr=1e-3, lag=0, correction="none") for s in (0, 1)]
    head, row = lr_table(lr_runs).splitlines()[:2]
    assert f"reward [0-{w}) | reward last {w} |" in head
    assert mean_of(row.split("|")[2]) == pytest.approx(first, abs=0.006)
    assert mean_of(row.split("|")[3]) == pytest.approx(last, abs=0.006)
    fp8_runs = [_history_run(steps, s, sampler=n, correction="none") for s in (0, 1) for n in ("exact",)]
    fp8_runs += [_history_run(steps, s, sampler="fp8", correction="tis") for s in (0, 1)]
    head, row = fp8_table(fp8_runs, ["tis"]).splitlines()[:2]
    assert f"last-{w} reward" in head
    assert mean_of(row.split("|")[6]) == pytest.approx(last, abs=0.0006)


def test_the_reward_figure_is_the_same_bytes_for_the_same_runs(tmp_path: Path) -> None:
    """plotly's div id was a random uuid, so re-rendering committed results changed the file."""
    from offpolicy.experiment import write_reward_figure

    runs = [_history_run(12, s, lag=lag, correction="none") for s in (0, 1) for lag in (0, 2)]
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    write_reward_figure(runs, a, ("lag", "correction"), "reward")
    write_reward_figure(runs, b, ("lag", "correction"), "reward")
    assert a.read_bytes() == b.read_bytes()
    assert not list(tmp_path.glob("*.tmp"))  # written through a temporary file, none left
