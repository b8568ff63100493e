"""Sweep figures of a grid with more than one axis draw one line, or one bar, per cell.

A walkthrough of the docs' sweep (``max_staleness`` x ``weight_update``) found ``lines_figure``
drawing one line per design, which zig-zagged through both weight updates at every x, and
``design_comparison_figure`` stacking all 18 cells into one "synchronous" bar (the axes read their
sums). These run a small real sweep and check the figures' data against its aggregate table.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pandas as pd
import pytest

from pipesim.io.registry import get_scenario
from pipesim.io.sweeps import sweep
from pipesim.io.viz import design_comparison_figure, lines_figure
from pipesim.io.viz.sweep import DESIGN_PANELS
from pipesim.policies.base import Drain, PartialRollout

ETAS = [2, 0, 1]  # given out of numeric order: lines still run left to right
POLICIES = ["PartialRollout()", "Drain()"]  # given against alphabetical order: kept as given


@pytest.fixture(scope="module")
def agg() -> pd.DataFrame:
    with ThreadPoolExecutor(2) as pool:
        res = sweep(
            get_scenario("synchronous").with_(pool_size=None, steps=2),
            over={"max_staleness": ETAS, "weight_update": [PartialRollout(), Drain()]},
            seeds=2,
            executor=pool,
            timeout_s=None,
            progress=False,
        )
    out = res.aggregate
    assert len(out) == len(ETAS) * len(POLICIES) and list(out["weight_update"].unique()) == POLICIES
    return out


def _lines(fig: Any) -> list[Any]:
    """The series of a figure: lines over a numeric x, points (no lines) over a category x."""
    return [t for t in fig.data if t.mode in ("lines+markers", "markers")]


def _cell(agg: pd.DataFrame, **where: Any) -> pd.Series:
    rows = agg
    for k, v in where.items():
        rows = rows[rows[k] == v]
    assert len(rows) == 1, where
    return rows.iloc[0]


@pytest.mark.parametrize("metric", ["throughput_per_hour", "gen_util"])
def test_a_line_per_value_of_the_other_axis_through_each_x_once(agg: pd.DataFrame, metric: str) -> None:
    fig = lines_figure(agg, "max_staleness", metric)
    lines = _lines(fig)
    assert [t.name for t in lines] == POLICIES  # one per weight update, in the order given
    assert fig.layout.legend.title.text == "weight_update"
    for t in lines:
        xs = list(t.x)
        assert xs == sorted(set(ETAS))  # in order, each x once: no sawtooth
        for x, y in zip(xs, t.y):
            assert y == pytest.approx(_cell(agg, max_staleness=x, weight_update=t.name)[f"{metric}_mean"])


def test_a_category_x_keeps_the_order_given(agg: pd.DataFrame) -> None:
    fig = lines_figure(agg, "weight_update", "throughput_per_hour")
    lines = _lines(fig)
    assert all(t.mode == "markers" for t in lines)  # unordered categories: no line joins them
    assert len(lines) == len(ETAS)  # one per staleness bound
    assert fig.layout.legend.title.text == "max_staleness"
    assert list(fig.layout.xaxis.categoryarray) == POLICIES
    for t in lines:
        assert list(t.x) == POLICIES
        eta = int(t.name)
        for x, y in zip(t.x, t.y):
            assert y == pytest.approx(
                _cell(agg, max_staleness=eta, weight_update=x)["throughput_per_hour_mean"]
            )


def test_two_designs_and_two_axes_draw_a_line_per_combination(agg: pd.DataFrame) -> None:
    other = agg.assign(design="other", throughput_per_hour_mean=agg["throughput_per_hour_mean"] + 1.0)
    both = pd.concat([agg, other], ignore_index=True)
    lines = _lines(lines_figure(both, "max_staleness", "throughput_per_hour"))
    assert len(lines) == 2 * len(POLICIES)
    assert len({t.name for t in lines}) == len(lines)
    assert {t.name for t in lines} == {f"{d}, {p}" for d in ("synchronous", "other") for p in POLICIES}
    for t in lines:
        design, policy = t.name.split(", ")
        assert list(t.x) == sorted(ETAS)
        for x, y in zip(t.x, t.y):
            want = _cell(both, design=design, max_staleness=x, weight_update=policy)
            assert y == pytest.approx(want["throughput_per_hour_mean"])


def test_the_comparison_draws_one_bar_per_cell(agg: pd.DataFrame) -> None:
    fig = design_comparison_figure(agg)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars] == [m for m, _ in DESIGN_PANELS]
    for t in bars:
        groups, etas = t.x  # two levels: the weight update over the staleness bound
        cells = list(zip(groups, etas))
        assert len(cells) == len(set(cells)) == len(agg)  # no two bars share a label
        assert list(dict.fromkeys(groups)) == POLICIES
        for (policy, eta), y in zip(cells, t.y):
            # each bar is its cell's value, not a sum of several cells
            assert y == pytest.approx(
                _cell(agg, max_staleness=int(eta), weight_update=policy)[f"{t.name}_mean"]
            )
    (marker,) = [t for t in fig.data if t.name == "max staleness"]
    assert [list(v) for v in marker.x] == [list(v) for v in bars[0].x]
    assert "staleness bound eta" in fig.layout.xaxis.title.text


def test_a_one_axis_slice_labels_its_bars_by_that_axis(agg: pd.DataFrame) -> None:
    one = agg[agg["max_staleness"] == 1]
    bar = [t for t in design_comparison_figure(one).data if t.type == "bar"][0]
    assert list(bar.x) == POLICIES  # not "synchronous" twice
    for policy, y in zip(bar.x, bar.y):
        assert y == pytest.approx(_cell(one, weight_update=policy)["throughput_per_hour_mean"])


def test_rows_no_axis_tells_apart_are_refused(agg: pd.DataFrame) -> None:
    twice = pd.concat([agg, agg], ignore_index=True)
    with pytest.raises(ValueError, match="pick one slice"):
        lines_figure(twice, "max_staleness", "throughput_per_hour")
    with pytest.raises(ValueError, match="pick one slice"):
        design_comparison_figure(twice)
