"""Guards a mutation audit found missing in the timeline and the aggregate view: the in-flight
axis holds the whole stack, the staleness ticks reach the largest staleness, the training step's
hover ends at its end, retry marks sit at the retries' starts, and the instant counts take an
interval's start and not its end."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pipesim import RetryFailed, Timeout, run
from pipesim.io.registry import get_scenario
from pipesim.io.viz import aggregate_view, timeline
from pipesim.io.viz.aggregate import buffer_depth, in_flight, in_flight_mean
from pipesim.io.viz.segments import retried_ids
from tests.test_vizfix2_buffer_discarded import buffer_intervals


@pytest.fixture(scope="module")
def res() -> Any:
    return run(get_scenario("fig13.1-async"))


@pytest.fixture(scope="module")
def retrying() -> Any:
    scen = get_scenario("fig13.1-async").with_(
        failures=RetryFailed(hazard_per_s=0.003), timeout=Timeout(cap_s=150.0), pool_size=600
    )
    return run(scen)


@pytest.mark.parametrize("n_bins", [3, 400])
def test_the_in_flight_axis_holds_the_whole_stack(res: Any, n_bins: int) -> None:
    """Three bins, each holding several versions: the stack's peak is above every single band's."""
    fig = aggregate_view(res, n_bins=n_bins)
    edges = np.linspace(0.0, float(res.sim_time_s), n_bins + 1)
    bands = in_flight_mean(res.events, edges)
    peak = float(np.sum(list(bands.values()), axis=0).max())
    assert fig.layout.yaxis.range[0] == 0 and fig.layout.yaxis.range[1] >= peak
    if n_bins == 3:
        assert peak > 1.05 * max(float(b.max()) for b in bands.values())  # the case can tell


def test_staleness_ticks_are_every_staleness_up_to_the_largest(res: Any) -> None:
    smax = int(res.trained["staleness"].max())
    assert 0 < smax <= 10
    fig = aggregate_view(res)
    assert list(fig.layout.yaxis4.tickvals) == list(range(smax + 1))


def test_the_training_steps_hover_runs_from_its_start_to_its_end(res: Any) -> None:
    (bar,) = [t for t in timeline(res).data if t.name == "training step"]
    train = res.events[res.events["kind"] == "train"]
    cd = np.asarray(bar.customdata, dtype=float)
    assert np.allclose(np.asarray(bar.base, dtype=float), train["start_s"].to_numpy(float))
    assert np.allclose(cd[:, 1], train["end_s"].to_numpy(float))
    assert np.array_equal(cd[:, 0], train["version"].to_numpy(float))
    assert (cd[:, 1] > np.asarray(bar.base, dtype=float)).all()  # not "X s to X s"
    assert "%{base" in bar.hovertemplate and "%{customdata[1]" in bar.hovertemplate


def test_retry_marks_sit_at_the_start_of_the_episodes_they_name(retrying: Any) -> None:
    (marks,) = [t for t in timeline(retrying).data if t.name == "retry of a failed or aborted episode"]
    ids = np.asarray(marks.customdata)[:, 0].astype(int)
    assert len(ids) > 0 and sorted(ids) == sorted(retried_ids(retrying).tolist())
    start = retrying.episode_table.set_index("episode_id")["start_s"]
    assert np.allclose(np.asarray(marks.x, dtype=float), start.loc[ids].to_numpy(float))
    end = retrying.episode_table.set_index("episode_id")["end_s"].loc[ids].to_numpy(float)
    assert (np.nan_to_num(end, nan=np.inf) > np.asarray(marks.x, dtype=float)).all()  # the case can tell


def _open_at(t: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    return ((start[None, :] <= t[:, None]) & (t[:, None] < end[None, :])).sum(axis=1)  # type: ignore[no-any-return]


def test_in_flight_counts_a_segment_from_its_start_and_not_at_its_end(res: Any) -> None:
    gen = res.events[res.events["kind"] == "gen"]
    t = np.unique(np.concatenate([gen["start_s"], gen["end_s"]]).astype(float))
    counts = in_flight(res.events, t)
    assert set(counts) == set(int(v) for v in gen["version"].unique())
    for v, g in gen.groupby("version"):
        want = _open_at(t, g["start_s"].to_numpy(float), g["end_s"].to_numpy(float))
        assert (counts[int(v)] == want).all(), v


def test_buffer_depth_counts_an_episode_from_its_end_and_not_once_it_leaves(res: Any) -> None:
    enter, leave = buffer_intervals(res)
    t = np.unique(np.concatenate([enter, leave[np.isfinite(leave)]]))
    assert (buffer_depth(res, t) == _open_at(t, enter, leave)).all()
