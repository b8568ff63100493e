"""The aggregate view draws each bin's value over its own bin.

Before: the buffer, slots-generating and trainer-busy lines put each bin's value at the bin's
middle with line shape "hv" (hold until the next point), so bin k's value was drawn from bin k's
middle to bin k+1's, half a bin late, and the hover said "at" the middle; the in-flight stack
joined the middles with straight lines. Now every series is a step whose steps fall on the bin
edges (points at the middles, shape "hvh"), and its hover names the bin's span (customdata).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pipesim import run
from pipesim.io.registry import get_scenario
from pipesim.io.viz import aggregate_view
from tests.test_vizfix2_buffer_discarded import buffer_intervals, per_bin

N_BINS = 20
LINES = ("buffer depth", "slots generating", "trainer busy")


@pytest.fixture(scope="module")
def res() -> Any:
    return run(get_scenario("fig13.1-async"))


@pytest.fixture(scope="module")
def fig(res: Any) -> Any:
    return aggregate_view(res, n_bins=N_BINS)


def edges_of(res: Any) -> np.ndarray:
    return np.linspace(0.0, float(res.sim_time_s), N_BINS + 1)


def drawn_at(trace: Any, t: float) -> float:
    """The value plotly's line of ``trace`` draws at ``t``, by its line shape (NaN off its ends)."""
    x, y = np.asarray(trace.x, dtype=float), np.asarray(trace.y, dtype=float)
    if not x[0] <= t <= x[-1]:
        return float("nan")
    shape = trace.line.shape or "linear"
    if shape == "hv":  # hold each point's value until the next point
        return float(y[np.searchsorted(x, t, side="right") - 1])
    if shape == "vh":
        return float(y[np.searchsorted(x, t, side="left")])
    if shape == "hvh":  # the step halfway between two points
        return float(y[np.searchsorted((x[:-1] + x[1:]) / 2, t, side="right")])
    assert shape == "linear", shape
    return float(np.interp(t, x, y))


def slow_mean(edges: np.ndarray, start: Any, end: Any, capacity: float = 1.0) -> np.ndarray:
    return np.clip(per_bin(edges, np.asarray(start, float), np.asarray(end, float)) / capacity, 0, 1)


def bin_values(res: Any) -> dict[str, np.ndarray]:
    """Each line's value per bin, computed here from the tables."""
    edges, ev = edges_of(res), res.events
    gen, train = ev[ev["kind"] == "gen"], ev[ev["kind"] == "train"]
    n_slots = res.scenario.pipeline.n_slots
    return {
        "buffer depth": per_bin(edges, *buffer_intervals(res)),
        "slots generating": slow_mean(edges, gen["start_s"], gen["end_s"], n_slots),
        "trainer busy": slow_mean(edges, train["start_s"], train["end_s"]),
    }


def inside(edges: np.ndarray) -> list[tuple[int, float]]:
    """A few instants inside each bin (both sides of its middle), by bin."""
    w = np.diff(edges)
    return [(k, edges[k] + f * w[k]) for k in range(len(w)) for f in (0.05, 0.3, 0.7, 0.95)]


def test_the_value_drawn_inside_bin_k_is_bin_ks(res: Any, fig: Any) -> None:
    want = bin_values(res)
    for name in LINES:
        (trace,) = [t for t in fig.data if t.name == name]
        checked = 0
        for k, t in inside(edges_of(res)):
            got = drawn_at(trace, t)
            if got == got:  # the line's first and last half bins are before and after its ends
                assert got == pytest.approx(want[name][k], abs=1e-9), (name, k, t)
                checked += 1
        assert checked >= 4 * N_BINS - 4, name


def test_the_stack_drawn_inside_bin_k_is_the_episodes_in_flight_in_bin_k(res: Any, fig: Any) -> None:
    edges, ev = edges_of(res), res.events
    on_slot = ev[ev["kind"].isin(["gen", "pause"])]
    want = per_bin(edges, on_slot["start_s"].to_numpy(float), on_slot["end_s"].to_numpy(float))
    stack = [t for t in fig.data if t.type == "scatter" and t.stackgroup == "flight"]
    assert len(stack) >= 2
    for k, t in inside(edges)[2:-2]:  # off the first and last half bins
        total = sum(np.nan_to_num(drawn_at(s, t)) for s in stack)  # "infer zero" off a trace's points
        assert total == pytest.approx(want[k], abs=1e-9), (k, t)


def test_every_series_steps_on_the_bin_edges_and_its_hover_names_the_bin(res: Any, fig: Any) -> None:
    edges = edges_of(res)
    mid = (edges[:-1] + edges[1:]) / 2
    series = [t for t in fig.data if t.name in LINES or (t.type == "scatter" and t.stackgroup == "flight")]
    assert len(series) >= 5
    for t in series:
        x = np.asarray(t.x, dtype=float)
        k = np.searchsorted(edges, x) - 1  # each point's bin
        assert np.allclose(x, mid[k], rtol=0, atol=1e-9), t.name  # at its bin's middle
        assert t.line.shape == "hvh", t.name  # so the step between two points falls on an edge
        if t.name in LINES:
            assert np.array_equal(k, np.arange(N_BINS)), t.name  # every bin, in order
        span = np.asarray(t.customdata, dtype=float)
        assert np.allclose(span, np.column_stack([edges[k], edges[k + 1]])), t.name
        assert "%{customdata[0]" in t.hovertemplate and "%{customdata[1]" in t.hovertemplate
        assert "%{x" not in t.hovertemplate, t.name  # no longer "at" the middle
