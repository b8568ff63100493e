"""What keeps a long run's page linear in its size (the times are in
``benchmarks/bench_timeline_html.py``): the sync bands are one shape whatever the number of syncs,
the in-flight stack holds each version's own bins only, and a saved run above
``AGGREGATE_EPISODES`` episodes gets the aggregate view as the run itself does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pipesim
from pipesim import run
from pipesim.io.registry import get_scenario
from pipesim.io.viz import aggregate_view, run_views, timeline
from pipesim.io.viz.aggregate import _support, in_flight_mean


@pytest.fixture(scope="module")
def long_run() -> pipesim.RunResult:
    return run(get_scenario("async-eta1").with_(n_slots=4, batch_size=4, steps=60, pool_size=None))


def test_sync_bands_are_one_shape_however_many_syncs(long_run: pipesim.RunResult) -> None:
    fig = timeline(long_run)
    (band,) = fig.layout.shapes
    assert band.layer == "below" and band.opacity == 0.25 and band.line.width == 0
    rects = band.path.split("Z")[:-1]
    assert len(rects) == len(long_run.sync_log) == 60
    for rect, (a, b, _) in zip(rects, long_run.sync_log):
        assert rect == f"M{a:.6f},-0.5H{b:.6f}V3.5H{a:.6f}"  # 4 slot rows: -0.5 to 3.5


def test_in_flight_stack_keeps_each_versions_bins_and_the_zeros_around_them(
    long_run: pipesim.RunResult,
) -> None:
    fig = aggregate_view(long_run)
    stacked = {t.name: t for t in fig.data if t.type == "scatter" and t.stackgroup == "flight"}
    edges = np.linspace(0.0, long_run.sim_time_s, 401)
    mid = (edges[:-1] + edges[1:]) / 2
    total = 0
    for v, counts in in_flight_mean(long_run.events, edges).items():
        t = stacked[f"v{v}"]
        assert t.stackgaps == "infer zero"
        full = np.zeros(len(mid))
        full[np.searchsorted(mid, np.asarray(t.x))] = np.asarray(t.y)
        assert (full == counts).all()  # the stack's inferred zeros give back every bin
        total += len(t.x)
    assert total < len(stacked) * len(mid) / 4  # a version is in flight for a few bins only


@pytest.mark.parametrize(
    ("counts", "keep"),
    [
        ([0, 0, 3, 1, 0, 0, 0], [0, 1, 1, 1, 1, 0, 0]),
        ([2, 0, 0, 0, 0, 0, 1], [1, 1, 0, 0, 0, 1, 1]),
        ([0, 0, 0], [1, 0, 0]),  # none in flight at a bin's middle: one zero keeps its legend entry
    ],
)
def test_support_is_the_nonzero_bins_and_their_neighbours(counts: list[int], keep: list[int]) -> None:
    assert _support(np.asarray(counts)).tolist() == [bool(k) for k in keep]


def test_a_saved_run_past_the_episode_bound_gets_the_aggregate_view(
    long_run: pipesim.RunResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the bound counted a RunResult's episodes only: a saved run of 2M episodes drew a timeline
    monkeypatch.setattr("pipesim.io.viz.AGGREGATE_EPISODES", long_run.columns.n - 1)
    loaded = pipesim.load(long_run.save(tmp_path / "run"))
    assert len(run_views(long_run)) == len(run_views(loaded)) == 1
    monkeypatch.setattr("pipesim.io.viz.AGGREGATE_EPISODES", long_run.columns.n)
    assert len(run_views(long_run)) == len(run_views(loaded)) == 2
