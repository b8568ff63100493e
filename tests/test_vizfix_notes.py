"""What a sweep's or a run's numbers cannot say, said: seeds that replay a trace, and the time
after the last training step that throughput counts.

Before: ``pipesim sweep trace.yaml --seeds 3`` printed ``274.3 [274.3, 274.3]`` (the trace ignores
the generator, so the three seeds were one run) without a word; a 3-step run of a draining design
spent 469 s of its 1,530 s after its last training step (the final drain and sync), which
throughput (trained / sim_time_s, as the chapter counts it) includes, without a word.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from pipesim import run
from pipesim.io.cli import main
from pipesim.io.registry import get_scenario
from pipesim.io.sweep_grid import aggregate

TRACE = [45.0, 58.9, 35.2, 20.2, 29.9, 18.4, 47.5, 150.3, 28.9, 25.7, 69.9, 62.0, 49.5, 19.5]


def _trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "trace.yaml"
    values = "\n".join(f"  - {v}" for v in TRACE * 4)
    path.write_text(
        "schema_version: 1\nname: trace\n"
        "pipeline: {n_slots: 4, batch_size: 4, train_time_s: 30, sync_time_s: 5, max_staleness: 1,"
        " steps: 3}\n"
        f"durations:\n  type: TraceDurations\n  cycle: true\n  values:\n{values}\n"
        "weight_update: {type: PartialRollout}\n"
    )
    return path


def test_seeds_that_repeat_one_run_have_no_interval() -> None:
    runs = pd.DataFrame(
        {
            "design": ["same"] * 3 + ["varied"] * 3,
            "seed": [0, 1, 2] * 2,
            "status": "ok",
            "thr": [274.3, 274.3, 274.3, 270.0, 280.0, 275.0],
            "stale": [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        }
    )
    agg = aggregate(runs, ["design"], ["thr", "stale"]).set_index("design")
    same, varied = agg.loc["same"], agg.loc["varied"]
    assert same["n_seeds"] == 3 and same["thr_mean"] == pytest.approx(274.3)
    assert all(math.isnan(same[f"{m}_{e}"]) for m in ("thr", "stale") for e in ("lo", "hi"))
    assert varied["thr_lo"] < varied["thr_mean"] < varied["thr_hi"]
    assert varied["stale_lo"] == varied["stale_hi"] == 1.0  # one constant metric of varied runs: kept


def test_a_sweep_of_a_trace_says_its_seeds_measure_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "t.csv"
    argv = ["sweep", str(_trace_file(tmp_path)), "--over", "max_staleness=0,1", "--workers", "1", "--quiet"]
    assert main([*argv, "--seeds", "3", "--csv", str(csv)]) == 0
    err = capsys.readouterr().err
    assert "trace" in err and "every cell" in err
    table = pd.read_csv(csv)
    assert not any(c.startswith("_") for c in table.columns)  # the side value is no CSV column
    assert main([*argv, "--seeds", "1"]) == 0
    assert "trace" not in capsys.readouterr().err  # one seed: the one-seed note says it


@pytest.mark.parametrize(
    ("scenario", "steps", "noted"),
    [("async-eta4-drain", 3, True), ("async-eta4-drain", 30, False), ("synchronous", 3, False)],
)
def test_run_notes_a_long_tail_after_the_last_training_step(
    scenario: str, steps: int, noted: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", scenario, "--set", f"steps={steps}"]) == 0
    err = capsys.readouterr().err
    res = run(get_scenario(scenario).with_(steps=steps))
    ev = res.events
    tail = (res.sim_time_s - ev[ev["kind"] == "train"]["end_s"].max()) / res.sim_time_s
    assert noted == (tail > 0.10)
    assert ("after its last training step" in err) == noted
    if noted:
        assert f"{tail:.0%}" in err and "docs/usage.md" in err


def test_sweep_notes_runs_with_a_long_tail_and_keeps_the_default_bounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "s.csv"
    argv = ["sweep", "async-eta4-drain", "--set", "steps=3", "--over", "max_staleness=1,4"]
    assert main([*argv, "--seeds", "2", "--workers", "1", "--quiet", "--csv", str(csv)]) == 0
    err = capsys.readouterr().err
    assert "in 4 of 4 runs" in err and "docs/sweeps.md" in err
    assert "_tail_share" not in pd.read_csv(csv).columns


def test_a_side_value_is_no_metric_and_the_default_bounds_can_be_restored() -> None:
    from pipesim.io.sweep_exec import SIGNED_SUMMARY
    from pipesim.io.sweep_grid import Cell, collect

    scen = get_scenario("synchronous")
    cells = [Cell(i, {"design": "a", "seed": i}, scen) for i in range(2)]
    results = {
        i: {"throughput_per_hour": 1.0 + i, "length_bias_excess": -0.1, "_tail": 0.3} for i in range(2)
    }
    plain = collect(
        cells, {i: {**r, "status": "ok", "error": ""} for i, r in results.items()}, SIGNED_SUMMARY
    )
    loose = collect(cells, {i: {**r, "status": "ok", "error": ""} for i, r in results.items()}, None)
    assert "_tail" in plain.runs and "_tail" not in plain.metrics
    restored = loose.with_signed(SIGNED_SUMMARY)
    assert (restored.nonnegative, restored.shares) == (plain.nonnegative, plain.shares)
    assert "throughput_per_hour" in restored.nonnegative and "length_bias_excess" not in restored.nonnegative
