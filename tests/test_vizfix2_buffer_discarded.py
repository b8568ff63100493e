"""The aggregate view's buffer depth against an independent count: a discarded episode waits in
the buffer from its end until the batch policy drops it (the episode table's ``discarded_s``),
not until the next training step starts.

Before: under ``DropStale`` (fig13.1-async, pool 600, 20 bins) bins 14-16 read 9.86, 10.0, 10.0
where the count gives 7.0 each: episode 23, dropped at its end (424.2 s), was drawn waiting until
the next step's start (529.8 s). A table saved before ``discarded_s`` existed keeps the old rule.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pipesim import DropStale, run
from pipesim.io.registry import get_scenario
from pipesim.io.viz import aggregate_view
from pipesim.io.viz.aggregate import buffer_depth, buffer_mean


@pytest.fixture(scope="module")
def dropping() -> Any:
    return run(get_scenario("fig13.1-async").with_(batching=DropStale(), pool_size=600))


def buffer_intervals(res: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each finished episode's time in the buffer, the slow way: from its end until its training
    step's start if trained, its ``discarded_s`` if discarded, never if still buffered."""
    starts = {int(s): a for s, a in enumerate(sorted(a for _, a, _, _ in res.train_log))}
    step = dict(zip(res.trained["episode_id"], res.trained["step"]))
    enter, leave = [], []
    for _, e in res.episode_table.iterrows():
        if e["status"] == "trained":
            out = starts[int(step[e["episode_id"]])]
        elif e["status"] == "discarded":
            out = e["discarded_s"]
        elif e["status"] == "buffered":
            out = np.inf  # still there at the run's end
        else:
            continue
        enter.append(float(e["end_s"]))
        leave.append(float(out))
    return np.array(enter), np.array(leave)


def per_bin(edges: np.ndarray, enter: np.ndarray, leave: np.ndarray) -> np.ndarray:
    """The mean number of intervals [enter, leave) open over each bin, bin by bin."""
    lo, hi = edges[:-1, None], edges[1:, None]
    overlap = np.clip(np.minimum(leave, hi) - np.maximum(enter, lo), 0, None)
    return overlap.sum(axis=1) / np.diff(edges)  # type: ignore[no-any-return]


def test_the_run_drops_episodes_some_while_after_they_end(dropping: Any) -> None:
    """The scenario exercises the fix: drops, and at least one between two steps' starts."""
    eps = dropping.episode_table
    gone = eps[eps["status"] == "discarded"]
    assert len(gone) >= 2 and gone["discarded_s"].notna().all()
    assert (gone["discarded_s"] >= gone["end_s"]).all()


@pytest.mark.parametrize("n_bins", [20, 400])
def test_buffer_depth_is_the_independent_count(dropping: Any, n_bins: int) -> None:
    fig = aggregate_view(dropping, n_bins=n_bins)
    (buf,) = [t for t in fig.data if t.name == "buffer depth"]
    edges = np.linspace(0.0, float(dropping.sim_time_s), n_bins + 1)
    want = per_bin(edges, *buffer_intervals(dropping))
    assert np.allclose(np.asarray(buf.y, dtype=float), want, rtol=1e-9, atol=1e-9)


def test_buffer_depth_at_instants_is_the_independent_count(dropping: Any) -> None:
    enter, leave = buffer_intervals(dropping)
    t = np.unique(np.concatenate([enter, leave, np.linspace(0, float(dropping.sim_time_s), 997)]))
    want = ((enter[None, :] <= t[:, None]) & (t[:, None] < leave[None, :])).sum(axis=1)
    assert (buffer_depth(dropping, t) == want).all()


def test_a_table_saved_before_discarded_s_keeps_the_next_step_rule(dropping: Any) -> None:
    """Without the column a dropped episode leaves at the first step start at or after its end."""
    eps = dropping.episode_table
    old = SimpleNamespace(
        episode_table=eps.drop(columns="discarded_s"),
        events=dropping.events,
        trained=dropping.trained,
        sim_time_s=dropping.sim_time_s,
    )
    starts = np.sort(dropping.events.query("kind == 'train'")["start_s"].to_numpy())
    enter, leave = buffer_intervals(dropping)
    gone = eps["status"].to_numpy()[eps["status"].isin(["trained", "buffered", "discarded"])] == "discarded"
    nxt = np.searchsorted(starts, enter[gone], side="left")
    leave[gone] = np.where(nxt < len(starts), starts[np.minimum(nxt, len(starts) - 1)], dropping.sim_time_s)
    edges = np.linspace(0.0, float(dropping.sim_time_s), 21)
    assert np.allclose(buffer_mean(old, edges), per_bin(edges, enter, leave), atol=1e-9)
