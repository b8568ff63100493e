"""What a new user's walkthrough misread, fixed where it was said.

- ``pipesim compare --seeds 2 --html``: the values sat inside the bars, where the lower whisker
  crossed them ("5,011" read ",011"), and a zero bar (a synchronous design's mean staleness) had no
  room for its 0. The values are now a text trace per panel, above each bar's upper whisker.
- The plan's legend called eta "the admission's staleness bound"; it is a lead (docs/runspec.md).
- ``--set design.tp=3`` read "qwen3-8b does not fit", which reads as memory; a head count is a
  divisibility rule, said as "cannot run at tp=3". Memory still "does not fit".
- ``timing_s/param_sync`` 1.089 beside syncs of 1.188 s each: the note says it is per step.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import pipesim
from pipesim.io.cli import main
from pipesim.io.compare_figure import comparison_figure
from pipesim.io.registry import get_scenario
from pipesim.plan import runspec
from pipesim.plan.checks import PlanError
from pipesim.plan.report import LEGEND

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "run_qwen3_8b.toml"
PANELS = (("throughput_per_hour", "episodes / hour"), ("staleness_mean", "mean staleness (versions)"))


def _labels(fig: Any) -> dict[int, Any]:
    """Each panel's value trace (its x axis: 1, 2, ...), the text traces drawn over the bars."""
    return {int((t.xaxis or "x")[1:] or 1): t for t in fig.data if t.type == "scatter" and t.mode}


def _check_values_readable(fig: Any, bounds: dict[str, dict[str, tuple[float, float]]] | None) -> None:
    bars = [t for t in fig.data if t.type == "bar"]
    labels = _labels(fig)
    assert len(labels) == len(bars)
    for j, bar in enumerate(bars, start=1):
        assert bar.textposition == "none"  # not inside the bar, under its whiskers
        text = labels[j]
        assert "text" in text.mode and text.textposition == "top center"
        assert list(text.text) == list(bar.text) and list(text.x) == list(bar.x)
        for i, (v, at) in enumerate(zip(bar.y, text.y)):
            plus = None if bar.error_y is None or bar.error_y.array is None else bar.error_y.array[i]
            top = v + (plus or 0.0)
            assert at == pytest.approx(max(top, 0.0)), (j, i)  # above the whisker, not crossed by it
    assert all(t for bar in bars for t in bar.text)  # every value is written, a zero as "0"


def test_values_sit_above_the_error_bars_and_a_zero_is_a_visible_0() -> None:
    summaries = {
        "sync": {"throughput_per_hour": 5011.0, "staleness_mean": 0.0},
        "async": {"throughput_per_hour": 6048.0, "staleness_mean": 1.74},
    }
    bounds = {
        "sync": {"throughput_per_hour": (3000.0, 7000.0), "staleness_mean": (0.0, 0.0)},
        "async": {"throughput_per_hour": (5299.0, 6797.0), "staleness_mean": (1.715, 1.765)},
    }
    for b in (None, bounds):
        fig = comparison_figure(summaries, PANELS, b)
        _check_values_readable(fig, b)
        (zero,) = [t for t in _labels(fig).values() if t.text[0] == "0"]
        assert zero.y[0] == 0.0  # the synchronous design's staleness: a 0 on the axis
    with_ci = comparison_figure(summaries, PANELS, bounds)
    assert _labels(with_ci)[1].y[0] == pytest.approx(7000.0)  # 5,011 written above its 7,000 whisker


def test_a_missing_value_writes_no_label() -> None:
    fig = comparison_figure({"a": {"throughput_per_hour": 12.5}, "b": {}}, PANELS[:1])
    (text,) = _labels(fig).values()
    assert list(text.text) == ["12.50", ""] and math.isnan(text.y[1])


@pytest.mark.parametrize("seeds", [1, 2])
def test_compare_writes_every_value_at_one_seed_and_more(seeds: int) -> None:
    a, b = get_scenario("fig13.1-sync").with_(steps=2), get_scenario("fig13.1-async").with_(steps=2)
    cmp = pipesim.compare({"sync": a, "async": b}, seeds=seeds)
    bars = [t for t in cmp.figure.data if t.type == "bar"]
    staleness = [bar for bar in bars if bar.name.startswith("mean staleness")][0]
    assert staleness.text[0] == "0"  # synchronous
    for j, text in _labels(cmp.figure).items():
        assert list(text.text) == list(bars[j - 1].text)
        assert text.textposition == "top center"
    assert bars[0].textposition == "none"


def test_the_plan_legend_calls_eta_a_lead_not_a_staleness_bound() -> None:
    assert "eta = the admission's lead" in LEGEND
    assert "eta = the admission's staleness bound" not in LEGEND
    assert "staleness bound only under drain" in LEGEND  # where it is one (docs/runspec.md)


def test_a_tp_the_heads_refuse_is_a_rule_not_memory() -> None:
    with pytest.raises(PlanError) as info:
        runspec.load(EXAMPLE, ["design.tp=3"])
    said = str(info.value)
    assert info.value.field == "design.tp"
    assert "cannot run at tp=3: tp must divide the model's n_heads" in said, said
    assert "does not fit" not in said


def test_a_model_too_big_for_the_gpu_still_does_not_fit() -> None:
    sets = ['model.name="qwen3-32b"', 'cluster.gpu="l40s"', "design.tp=1", "design.placement=8"]
    with pytest.raises(PlanError) as info:
        runspec.load(EXAMPLE, sets)
    said = str(info.value)
    assert info.value.field == "design.tp"
    assert said.count("does not fit") == 1 and "GiB" in said and "cannot run" not in said, said


def test_the_param_sync_note_gives_a_sync_s_own_time() -> None:
    from pipesim.io.cli_runspec import param_sync_note

    steps = [(i, 10.0 * i + 5, 10.0 * i + 9, 0) for i in range(12)]
    run = SimpleNamespace(sync_log=[(10.0 * i, 10.0 * i + 1.188, i) for i in range(12)], train_log=steps)
    note = param_sync_note(run, {"timing_s/param_sync": 1.089})
    assert note is not None and "\n" not in note
    assert "per step" in note and "/ 12 steps" in note and "1.188 s" in note and "12 syncs" in note
    assert param_sync_note(SimpleNamespace(sync_log=[], train_log=steps), {"timing_s/param_sync": 0}) is None


def test_pipesim_run_prints_the_note_and_keeps_the_number(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(EXAMPLE), "--set", "run.steps=3"]) == 0
    got = capsys.readouterr()
    rows = {p[0]: p[1] for ln in got.out.splitlines() if len(p := ln.split()) == 2}
    assert "timing_s/param_sync" in rows  # the column keeps its name and its number
    (note,) = [ln for ln in got.err.splitlines() if ln.startswith("note: timing_s/param_sync is per step")]
    assert "a sync took" in note


def test_a_kv_budget_short_of_one_sequence_still_does_not_fit() -> None:
    sets = ['model.name="qwen3-32b"', "model.max_model_len=16384", "model.gpu_memory_utilization=0.8"]
    with pytest.raises(PlanError) as info:
        runspec.load(Path(__file__).resolve().parents[1] / "examples" / "run_verl_8gpu.toml", sets)
    said = str(info.value)
    assert info.value.field == "design.tp"
    assert "does not fit" in said and "KV budget" in said and "cannot run" not in said, said


def test_the_labels_are_not_clipped_and_the_axis_holds_the_highest() -> None:
    summaries = {"a": {"throughput_per_hour": 5011.0}, "b": {"throughput_per_hour": 6048.0}}
    bounds = {"a": {"throughput_per_hour": (3000.0, 7000.0)}, "b": {"throughput_per_hour": (5299.0, 6797.0)}}
    fig = comparison_figure(summaries, PANELS[:1], bounds)
    (text,) = _labels(fig).values()
    assert text.cliponaxis is False
    include = fig.layout.yaxis.autorangeoptions.include
    top = max(include) if isinstance(include, (list, tuple)) else include
    assert top > max(text.y)  # room above the highest label
