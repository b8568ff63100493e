"""What a mutation audit of this stop's new code (the pool refusal, the calibrated sync's logged
setup, episode_table's dtypes, compare's width) found no test catching. Each test fails under its
one-line mutant; the numbers are the unmutated code's, checked by hand where said."""

from __future__ import annotations

import io
import os
import shutil

import pytest

import pipesim
from pipesim import PipelineConfig, Scenario
from pipesim.core.errors import MAX_DURATION_POOL as M
from pipesim.core.validate import CrossFieldError
from pipesim.io import cli_compare
from pipesim.io.cli_compare import comparison_text
from pipesim.io.registry import get_scenario
from pipesim.workload.durations import LogNormalDurations
from pipesim.workload.pool_bound import pool_tasks


def _refusal(**pipeline: int) -> CrossFieldError:
    with pytest.raises(CrossFieldError) as e:
        Scenario(pipeline=PipelineConfig(**pipeline), durations=LogNormalDurations(30.0, 1.0))
    return e.value


@pytest.mark.parametrize(
    ("pipeline", "field"),
    [
        # (3 + 1) x 50,000 = 200,000 against 100 x 50,000 = 5,000,000: max_staleness is the largest
        ({"steps": 3, "max_staleness": 100, "batch_size": 50_000, "n_slots": 8}, "pipeline.max_staleness"),
        # (3 + 1) x 10**6 against 4 x 10**6: steps' term counts its + 1
        ({"steps": 3, "max_staleness": 4, "batch_size": 1_000_000, "n_slots": 8}, "pipeline.steps"),
    ],
)
def test_the_refusal_names_the_largest_term(pipeline: dict[str, int], field: str) -> None:
    assert _refusal(**pipeline).field == field


def test_each_fix_that_fits_alone_is_offered_down_to_its_floor() -> None:
    """max_staleness 0 and steps 1 are fixes when they fit: the floors are 0 and 1."""
    b, n = 64, 64
    said = str(_refusal(steps=(M - n) // b - 1, max_staleness=3, batch_size=b, n_slots=n))
    assert "max_staleness <= 0" in said and "steps <= 65,531" in said
    said = str(_refusal(steps=5, max_staleness=0, batch_size=(M - n) // 2, n_slots=n))
    assert "steps <= 1," in said and "batch_size <= 699,040" in said


def test_a_filtering_pool_keeps_the_float_arithmetic_below_2_53() -> None:
    """ceil(1.5 x 1,616 / 0.8) + 16 = 3,046 in floats (every pool drawn before this stop); the
    exact rational path gives 3,047 and is only for sizes past a float's range."""
    assert pool_tasks(99, 0, 16, 16, 0.2) == 3046
    assert pool_tasks(1, 0, 8, 8, 0.1) == 48


def test_a_run_where_no_episode_has_ended_has_a_float_end_column() -> None:
    """Only an episode still running: ``end_s`` is float64 (NaN), as the empty table's, not None."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_results_columns import RUNNING, _episode, _result

    table = _result([_episode(0, 2.0, None, RUNNING, 1, 0)], [], 5.0).episode_table
    assert table["end_s"].dtype == "float64" and table["discarded_s"].dtype == "float64"
    assert table.dtypes.to_dict() == _result([], [], 0.0).episode_table.dtypes.to_dict()


def test_one_seed_wraps_too_and_a_stream_without_isatty_is_not_a_terminal() -> None:
    designs = {f"d{eta}": get_scenario("fig13.1-async").with_(steps=2, max_staleness=eta) for eta in range(6)}
    cmp = pipesim.compare(designs, seeds=1)
    assert max(len(line) for line in comparison_text(cmp).splitlines()) > 40
    assert max(len(line) for line in comparison_text(cmp, width=40).splitlines()) <= 40
    assert cli_compare._terminal_width(object()) is None  # type: ignore[arg-type]


def test_the_command_passes_a_terminals_width(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(shutil, "get_terminal_size", lambda *a: os.terminal_size((60, 40)))
    seen: list[int | None] = []
    real = cli_compare.comparison_text
    monkeypatch.setattr(
        cli_compare, "comparison_text", lambda cmp, width=None: seen.append(width) or real(cmp, width)
    )
    cmp = pipesim.compare(
        {"a": get_scenario("fig13.1-sync").with_(steps=2), "b": get_scenario("fig13.1-async").with_(steps=2)}
    )
    from types import SimpleNamespace

    cli_compare._show(SimpleNamespace(json=None, html=None, designs=["a", "b"]), cmp, Tty())
    assert seen == [60]


@pytest.mark.parametrize("name", ["my_models/config.json", "config.json"])
def test_a_relative_logged_model_path_without_a_base_falls_back_to_the_measured_sync(name: str) -> None:
    """A calibration.model naming a relative config.json, read without the file's folder (from_dict
    with no base): the logged setup cannot be built, so the measured seconds stand (not a PlanError
    out of reading the path)."""
    from pathlib import Path

    from pipesim.plan.build import design_cluster, sync_seconds
    from pipesim.plan.runspec import from_dict, read

    data = read(Path(__file__).resolve().parents[1] / "examples" / "run_verl_8gpu.toml")
    data["run"] = {"steps": 3, "seed": 0}
    data["calibration"] = {"values": {"sync_time_s": 0.3}, "model": {**data["model"], "name": name}}
    rs = from_dict(data)
    assert float(sync_seconds(rs.plan, rs.design, design_cluster(rs.plan, rs.design)[1])) == pytest.approx(
        0.3
    )
