"""The aggregate view's count panels are time-weighted means per bin, tick without repeats, and
list every version in a legend that needs no scrolling (a walkthrough of long and small runs).

Before: "episodes in flight" counted generating segments at each bin's middle, so a bin whose
middle fell in a 5 s weight sync read 0 in flight while every slot held a paused episode (some 20
white gaps in a 2,500-step run), and the buffer was sampled the same way; ``,d`` ticks over 0-2
read 0, 1, 1, 2, 2; the version legend beside the panel scrolled (11 of 20 versions in view).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesim import AgentDurations, PartialRollout, PipelineConfig, Scenario, run
from pipesim.io.viz import aggregate_view


def _scenario(n_slots: int, steps: int) -> Scenario:
    return Scenario(
        pipeline=PipelineConfig(
            n_slots=n_slots, batch_size=n_slots, train_time_s=30, sync_time_s=5, max_staleness=2, steps=steps
        ),
        durations=AgentDurations(tool_median_s=3.0, mean_turns=6, draws="numpy"),
        weight_update=PartialRollout(),
        seed=0,
        name="mine",
    )


@pytest.fixture(scope="module")
def long_run() -> object:
    return run(_scenario(8, 300))


@pytest.fixture(scope="module")
def small_run() -> object:
    return run(_scenario(2, 3))


def _stack_total(fig: object) -> np.ndarray:
    """The in-flight stack's height in each bin (the stack infers zero where a trace has no point)."""
    (buf,) = [t for t in fig.data if t.name == "buffer depth"]  # type: ignore[attr-defined]
    mid = np.asarray(buf.x, dtype=float)
    total = np.zeros(len(mid))
    for t in fig.data:  # type: ignore[attr-defined]
        if t.type == "scatter" and t.stackgroup == "flight":
            total[np.searchsorted(mid, np.asarray(t.x, dtype=float))] += np.asarray(t.y, dtype=float)
    return total


def _occupancy(res: object, edges: np.ndarray) -> np.ndarray:
    """Episodes on a slot per bin, the slow way: each episode from its start to its end (or the
    run's end), overlap with each bin over the bin's width."""
    eps = res.episode_table  # type: ignore[attr-defined]
    T = float(res.sim_time_s)  # type: ignore[attr-defined]
    start = eps["start_s"].to_numpy(dtype=float)
    end = np.where(np.isnan(eps["end_s"].to_numpy(dtype=float)), T, eps["end_s"].to_numpy(dtype=float))
    ok = eps["status"].to_numpy() != "aborted"
    lo, hi = edges[:-1, None], edges[1:, None]
    overlap = np.clip(np.minimum(end[ok], hi) - np.maximum(start[ok], lo), 0, None)
    return overlap.sum(axis=1) / np.diff(edges)


def test_in_flight_is_the_time_weighted_mean_of_episodes_on_a_slot(
    long_run: object, small_run: object
) -> None:
    for res in (long_run, small_run):
        fig = aggregate_view(res, n_bins=400)
        edges = np.linspace(0.0, res.sim_time_s, 401)  # type: ignore[attr-defined]
        got = _stack_total(fig)
        assert np.allclose(got, _occupancy(res, edges), atol=1e-6)


def test_a_long_partial_rollout_shows_no_false_drops_in_flight(long_run: object) -> None:
    """Every slot holds an episode all along (it generates or waits out a sync): no bin reads 0."""
    fig = aggregate_view(long_run)
    total = _stack_total(fig)
    n_slots = long_run.scenario.pipeline.n_slots  # type: ignore[attr-defined]
    assert total.min() > 0.9 * n_slots and total.max() <= n_slots + 1e-9


def test_the_buffer_is_the_mean_over_each_bin(long_run: object) -> None:
    """The buffer's integral over the run equals the episode-seconds spent waiting (each finished
    episode from its end to the start of the step that trains it), however the bins fall."""
    res = long_run
    fig = aggregate_view(res, n_bins=400)
    (buf,) = [t for t in fig.data if t.name == "buffer depth"]
    width = res.sim_time_s / 400  # type: ignore[attr-defined]
    tr = res.trained.set_index("episode_id")["step"]  # type: ignore[attr-defined]
    starts = np.array(sorted(a for _, a, _, _ in res.train_log))  # type: ignore[attr-defined]
    eps = res.episode_table  # type: ignore[attr-defined]
    waited = 0.0
    for _, e in eps[eps["status"] == "trained"].iterrows():
        waited += starts[int(tr[e["episode_id"]])] - e["end_s"]
    for _, e in eps[eps["status"] == "buffered"].iterrows():
        waited += res.sim_time_s - e["end_s"]  # type: ignore[attr-defined]
    assert float(np.sum(buf.y)) * width == pytest.approx(waited, rel=1e-6)


def _labels(step: float, fmt: str, top: float) -> list[str]:
    """The tick labels d3 prints for ``fmt`` (``,d`` or ``,.N~f``) from 0 to ``top``."""
    n = int(math.floor(top / step + 1e-9))
    if fmt == ",d":
        return [f"{round(k * step):,d}" for k in range(n + 1)]
    decimals = int(fmt[2:-2])
    return [f"{k * step:,.{decimals}f}".rstrip("0").rstrip(".") for k in range(n + 1)]


@given(st.floats(1e-3, 1e7))
def test_count_ticks_never_repeat_a_label(top: float) -> None:
    from pipesim.io.viz.aggregate import count_ticks

    step, fmt = count_ticks(top)
    labels = _labels(step, fmt, top)
    assert len(labels) == len(set(labels)) >= 5  # 0 and at least 4 ticks past it
    assert len(labels) <= 11


def test_the_small_runs_count_axes_print_each_tick_once(small_run: object) -> None:
    fig = aggregate_view(small_run)
    for axis in (fig.layout.yaxis, fig.layout.yaxis2):
        assert axis.dtick is not None and axis.tick0 == 0
        labels = _labels(axis.dtick, axis.tickformat, axis.range[1])
        assert len(labels) == len(set(labels)) >= 3


def test_the_version_legend_wraps_under_the_panel_with_room_for_every_row(long_run: object) -> None:
    """Horizontal under the in-flight panel, every entry listed, and the gap to the next panel holds
    all its planned rows (a vertical legend beside the panel scrolled: 11 of 20 versions in view)."""
    fig = aggregate_view(long_run)  # 300 steps, 302 versions: 61 bands such as v295-v299
    names = [t.name for t in fig.data if t.type == "scatter" and t.stackgroup == "flight"]
    assert 40 < len(names) <= 64
    legend = fig.layout.legend
    assert legend.orientation == "h" and legend.maxheight is None
    from pipesim.io.viz.aggregate import legend_rows, legend_share

    text_px, rows = legend_rows(len(names), max(len(n) for n in names))
    assert legend.entrywidthmode == "fraction" and legend.entrywidth == pytest.approx(legend_share(text_px))
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    gap_px = (fig.layout.yaxis.domain[0] - fig.layout.yaxis2.domain[1]) * plot_px
    assert gap_px >= 22 * (rows + 1) + 28  # the first panel's ticks, the title and the rows
    assert (fig.layout.yaxis.domain[0] - legend.y) * plot_px >= 20  # under the tick labels


@given(st.integers(1, 64), st.integers(2, 11))
def test_legend_rows_hold_every_entry_within_the_planned_width(n: int, chars: int) -> None:
    from pipesim.io.viz.aggregate import LEGEND_WIDTH_PX, legend_rows

    text_px, rows = legend_rows(n, chars)
    per_row = -(-n // rows)
    assert text_px >= 7 * chars and per_row * (text_px + 40) <= LEGEND_WIDTH_PX
    assert rows * per_row >= n and rows <= 13
