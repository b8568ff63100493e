"""Two modules over the style's ~400 lines were split: the comparison's figure
(:mod:`pipesim.io.compare_figure`) and the trace's size bound (:mod:`pipesim.io.trace_bounds`).
Every public name is still importable from the old module as the same object, and the bound is
read where it is patched: lowered in :mod:`pipesim.io.trace_bounds`, every check refuses (before a
run, before a CSV is parsed, after a run), the command included."""

from __future__ import annotations

from pathlib import Path

import pytest

import pipesim
from pipesim.io import compare, compare_figure, trace, trace_bounds
from pipesim.io.cli import main

MOVED = [
    (compare, compare_figure, ("COMPUTE_FIGURE_METRICS", "FIGURE_METRICS")),
    (
        trace,
        trace_bounds,
        (
            "FIT_MARGIN",
            "MAX_TRACE_EVENTS",
            "TooManyEvents",
            "check_event_count",
            "check_run_events",
            "csv_rows_at_least",
            "min_events",
        ),
    ),
]


@pytest.mark.parametrize(("old", "new", "names"), MOVED)
def test_every_moved_name_is_the_same_object_in_its_old_module(
    old: object, new: object, names: tuple
) -> None:
    for name in names:
        assert getattr(old, name) is getattr(new, name), name
        assert name in old.__all__ and name in new.__all__  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def small() -> pipesim.RunResult:
    return pipesim.run(pipesim.Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=3)))


def test_a_tiny_bound_patched_where_it_is_read_refuses_every_check(
    small: pipesim.RunResult,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    csv = tmp_path / "events.csv"
    small.events.to_csv(csv, index=False)
    assert trace.run_to_trace(small)["traceEvents"]  # at the real bound it traces
    monkeypatch.setattr(trace_bounds, "MAX_TRACE_EVENTS", 2)
    for check in (
        lambda: trace.run_to_trace(small),  # after the run: names a step count
        lambda: trace.events_to_trace(small.events),
        lambda: trace.check_run_events(3, 4),  # before a run
        lambda: trace_bounds.check_event_count(3),
    ):
        with pytest.raises(trace.TooManyEvents) as info:
            check()
        assert info.value.field == "events" and "more than the 2 a trace takes" in str(info.value)
    out = tmp_path / "t.json"
    assert main(["trace", str(csv), "--out", str(out)]) == 2  # the CSV counted before it is parsed
    assert "(its CSV lines past the header)" in capsys.readouterr().err and not out.exists()


def test_the_figure_draws_a_bar_per_design_in_each_panel(small: pipesim.RunResult) -> None:
    cmp = pipesim.compare({"A": small, "B": small})
    panels = [k for k, _ in compare.FIGURE_METRICS]
    bars = [t for t in cmp.figure.data if t.type == "bar"]  # and a text trace per panel: the values
    assert len(bars) == len(panels)
    assert all(list(bar.x) == ["A", "B"] for bar in bars)
    assert compare_figure.bar_label(0.625, lambda v: f"{v:.4f}") == "0.6250"
    assert compare_figure.error_gap(float("nan")) is None and compare_figure.error_gap(0.5) == 0.5
