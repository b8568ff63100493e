"""Past ``MAX_VERSION_LEGEND`` versions, the timeline's legend and the aggregate view's in-flight
stack list bands of consecutive versions (one rule, :func:`pipesim.io.viz.palette.version_band`):
every version in exactly one band, at most ``MAX_VERSION_LEGEND`` bands, and the stack's total
still the episodes in flight at each instant."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesim import run
from pipesim.io.registry import get_scenario
from pipesim.io.viz import aggregate_view, palette, timeline
from pipesim.io.viz.aggregate import in_flight_mean


@given(st.integers(1, 50_000))
def test_bands_partition_the_versions_into_at_most_the_legends_entries(n_versions: int) -> None:
    bands = [palette.version_band(v, n_versions) for v in range(n_versions)]
    assert len(set(bands)) <= palette.MAX_VERSION_LEGEND
    for v, (lo, hi, label) in enumerate(bands):
        assert lo <= v <= hi and label.startswith(f"v{lo}")
    firsts = [lo for lo, _, _ in bands]
    assert firsts == sorted(firsts)  # consecutive versions, in order
    if n_versions <= palette.MAX_VERSION_LEGEND:
        assert [label for _, _, label in bands] == [f"v{v}" for v in range(n_versions)]  # as before


@pytest.fixture(scope="module")
def many_versions() -> object:
    return run(get_scenario("async-eta1").with_(n_slots=4, batch_size=4, steps=40, pool_size=None))


def test_the_in_flight_stack_of_banded_versions_sums_to_the_episodes_in_flight(
    many_versions: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(palette, "MAX_VERSION_LEGEND", 7)
    fig = aggregate_view(many_versions, n_bins=200)
    stacked = [t for t in fig.data if t.type == "scatter" and t.stackgroup == "flight"]
    edges = np.linspace(0.0, many_versions.sim_time_s, 201)  # type: ignore[attr-defined]
    mid = (edges[:-1] + edges[1:]) / 2
    flight = in_flight_mean(many_versions.events, edges)  # type: ignore[attr-defined]
    assert len(flight) > 7 and len(stacked) <= 7
    assert len({t.name for t in stacked}) == len(stacked)
    total = np.zeros(len(mid))
    for t in stacked:
        total[np.searchsorted(mid, np.asarray(t.x))] += np.asarray(t.y)
    assert np.allclose(total, sum(flight.values()), rtol=1e-12, atol=1e-12)


def test_the_timeline_lists_one_entry_a_band_and_keeps_every_segment(
    many_versions: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    n_before = sum(len(t.x) for t in timeline(many_versions).data if t.type == "bar" and t.name[0] == "v")
    monkeypatch.setattr(palette, "MAX_VERSION_LEGEND", 7)
    fig = timeline(many_versions)
    bars = [t for t in fig.data if t.type == "bar"]
    bars = [t for t in bars if t.name.startswith("v")]  # not the trainer and sync lanes
    listed = [t.name for t in bars if t.showlegend is not False]
    assert len(listed) == len(set(listed)) <= 7
    assert {t.name for t in bars} == set(listed)  # every band has its one entry
    assert sum(len(t.x) for t in bars) == n_before  # each segment still drawn, in its colour
