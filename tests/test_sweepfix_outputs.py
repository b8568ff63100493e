"""What ``pipesim sweep`` writes, from a user's walkthrough.

1. A sweep over a preset's own parameters (``systems:roll --over async_generation_ratio=0,1``)
   wrote an ``--html`` page with no figure and a CSV whose only column for the axis was ``design``.
2. The page said ``95% t interval over 2 seeds (0..1)`` of seeds 7 and 8.
6. A Ctrl-C after every cell had finished and the outputs were written exited 130 saying the sweep
   "stopped before it finished".
7. The t table held 3 decimals (3.182 at df 3, exact 3.182446); ``--over``'s unknown-key message
   listed ``durations.FIELD`` keys it refuses; a failed cell's row dropped the exception's notes.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim.io.cli_sweep as cli_sweep
from pipesim.io.cli import main
from pipesim.io.sweep_exec import run_cell
from pipesim.io.sweep_grid import t_quantile_975

ROLL = ["sweep", "systems:roll", "--set", "steps=2", "--workers", "1", "--quiet"]


def _figures(page: Path) -> int:
    return page.read_text().count("Plotly.newPlot")


def test_a_sweep_over_a_presets_parameter_draws_it_and_has_its_column(tmp_path: Path) -> None:
    csv, page = tmp_path / "roll.csv", tmp_path / "roll.html"
    argv = [*ROLL, "--over", "async_generation_ratio=0,1", "--set", "seed=7", "--seeds", "2"]
    assert main([*argv, "--csv", str(csv), "--html", str(page)]) == 0
    assert _figures(page) == 2  # throughput and staleness against async_generation_ratio
    runs = pd.read_csv(csv)
    assert list(runs["async_generation_ratio"]) == [0, 0, 1, 1]
    assert list(runs["design"])[0] == "async_generation_ratio=0"  # the design's label is kept
    text = page.read_text()
    assert "over 2 seeds (7, 8)" in text and "(0..1)" not in text  # 2. the seeds that ran


def test_two_preset_axes_and_a_pipeline_axis_each_get_a_figure(tmp_path: Path) -> None:
    csv, page = tmp_path / "areal.csv", tmp_path / "areal.html"
    argv = ["sweep", "systems:areal", "--set", "steps=2", "--workers", "1", "--quiet"]
    axes = ["--over", "max_head_offpolicyness=0,2", "--over", "n_slots=32,64", "--over", "batch_size=32,64"]
    assert main([*argv, *axes, "--csv", str(csv), "--html", str(page)]) == 0
    assert _figures(page) == 6
    runs = pd.read_csv(csv)
    assert {"max_head_offpolicyness", "n_slots", "batch_size"} <= set(runs.columns)
    assert sorted(set(zip(runs["max_head_offpolicyness"], runs["n_slots"]))) == [
        (0, 32), (0, 64), (2, 32), (2, 64),
    ]  # fmt: skip


def test_an_axis_that_undoes_a_preset_axis_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """``max_head_offpolicyness`` sets ``max_staleness``: swept together, each cell's staleness
    undid the preset's eta without a word (eta 0 ran at staleness 1)."""
    argv = ["sweep", "systems:areal", "--over", "max_head_offpolicyness=0,4", "--over", "max_staleness=0,1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "max_staleness" in err and "max_head_offpolicyness" in err


def test_an_interrupt_after_every_cell_finished_exits_0_with_the_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The signal lands while the CSV is written (as one did in the walkthrough, after the table
    was printed): the outputs are whole, so the command says so and exits 0."""
    csv = tmp_path / "all.csv"
    real = cli_sweep.write_runs

    def write_then_signal(*args: Any, **kwargs: Any) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        real(*args, **kwargs)

    monkeypatch.setattr(cli_sweep, "write_runs", write_then_signal)
    assert main([*ROLL, "--over", "async_generation_ratio=0,1", "--csv", str(csv)]) == 0
    assert not pd.read_csv(csv)["partial"].any() and len(pd.read_csv(csv)) == 2
    err = capsys.readouterr().err
    assert "outputs are complete" in err and "stopped before it finished" not in err


T_EXACT = {1: 12.7062047, 2: 4.3026527, 3: 3.1824463, 10: 2.2281389, 20: 2.0859634, 30: 2.0422725}
"""Published 97.5% quantiles of Student's t (scipy.stats.t.ppf(0.975, df), 8 digits)."""


@pytest.mark.parametrize("df", sorted(T_EXACT))
def test_the_t_table_is_exact_to_six_digits(df: int) -> None:
    assert t_quantile_975(df) == pytest.approx(T_EXACT[df], rel=1e-7)


def test_the_table_and_the_expansion_agree_where_they_meet() -> None:
    values = [t_quantile_975(df) for df in range(1, 40)]
    assert all(a > b for a, b in zip(values, values[1:]))
    assert t_quantile_975(31) == pytest.approx(2.0395134, abs=2e-6)  # the expansion, from 31 on


def test_over_lists_only_the_keys_it_takes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scen = tmp_path / "mine.yaml"
    scen.write_text(
        "schema_version: 1\nname: mine\npipeline: {n_slots: 8, batch_size: 8, steps: 2}\n"
        "durations: {type: LogNormalDurations, median_s: 60.0, sigma: 0.8}\n"
    )
    assert main(["sweep", str(scen), "--over", "foo=1,2"]) == 2
    err = capsys.readouterr().err
    listed = err.split("valid keys:")[1]
    assert "max_staleness" in listed and "durations.median_s" in listed and " seed," not in listed
    assert main(["sweep", str(scen), "--set", "foo=30"]) == 2  # --set still lists them: it takes them
    assert "durations.median_s" in capsys.readouterr().err


def _raises_with_a_note(scenario: Any) -> dict[str, float]:
    exc = KeyError("my-bug")
    exc.add_note("raised by the admission policy AdmitsRaises during the pipesim run")
    raise exc


def test_a_failed_rows_error_keeps_the_exceptions_notes() -> None:
    from pipesim.io.registry import build, resolve

    row = run_cell(0, build(resolve("synchronous"), [])[0], _raises_with_a_note)
    assert row["status"] == "failed"
    assert row["error"].startswith("KeyError: 'my-bug'")
    assert "raised by the admission policy AdmitsRaises" in row["error"]
