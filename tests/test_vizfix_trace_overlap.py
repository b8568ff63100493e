"""A trace's slices on one thread must nest: an events table with two rows overlapping on one
track (a slot's lane, the trainer, the sync) is refused, naming the later row.

Before: ``pipesim trace EVENTS.csv`` wrote an edited file's episode, moved onto a busy slot, as two
overlapping slices on one thread, which Perfetto draws wrongly. A run's own events never overlap
on a track (a slot runs one episode at a time, its pauses between that episode's segments; the
trainer and the sync one step each): the last test runs the policies that split, abort, retry and
spread episodes, and the check passes them all.
"""

from __future__ import annotations

import pandas as pd
import pytest

import pipesim
from pipesim.core.validate import FieldError
from pipesim.io.trace import events_to_trace

COLUMNS = ["kind", "lane", "start_s", "end_s", "version", "episode_id"]
BASE = [
    ("gen", "r0/slot0", 0.0, 30.0, 0, 0),
    ("gen", "r0/slot1", 0.0, 50.0, 0, 1),
    ("train", "trainer", 50.0, 110.0, 0, -1),
    ("sync", "sync", 110.0, 120.0, 1, -1),
    ("gen", "r0/slot0", 120.0, 150.0, 1, 2),
    ("train", "trainer", 150.0, 210.0, 1, -1),
    ("sync", "sync", 210.0, 220.0, 2, -1),
]


def _events(extra: list[tuple[object, ...]]) -> pd.DataFrame:
    return pd.DataFrame(BASE + extra, columns=COLUMNS)


@pytest.mark.parametrize(
    ("extra", "row"),
    [
        ([("gen", "r0/slot0", 10.0, 50.0, 0, 3)], 7),  # an episode moved onto a busy slot
        ([("pause", "r0/slot1", 40.0, 60.0, 0, 1)], 7),  # a pause inside the slot's episode
        ([("train", "trainer", 100.0, 120.0, 0, -1)], 7),  # two steps at once
        ([("sync", "sync", 205.0, 215.0, 2, -1)], 6),  # two syncs at once: row 6 starts later
        ([("gen", "r0/slot0", 0.0, 30.0, 0, 3)], 7),  # the same interval twice
    ],
    ids=["gen", "pause", "train", "sync", "duplicate"],
)
def test_rows_overlapping_on_a_track_are_refused(extra: list[tuple[object, ...]], row: int) -> None:
    with pytest.raises(FieldError) as info:
        events_to_trace(_events(extra))
    assert info.value.field == f"start_s[{row}]"
    assert f"row {row} of the events" in str(info.value)


def test_the_earlier_row_starting_later_is_named() -> None:
    """Rows out of order in the file: the one that starts later on the track is named."""
    events = _events([]).iloc[[4, 0, 1, 2, 3, 5, 6]].reset_index(drop=True)
    events.loc[0, "start_s"] = 20.0  # slot 0's second episode now starts inside its first (row 1)
    with pytest.raises(FieldError) as info:
        events_to_trace(events)
    assert info.value.field == "start_s[0]"


@pytest.mark.parametrize(
    "extra",
    [
        [("gen", "r0/slot0", 30.0, 60.0, 0, 3)],  # starts as the slot's last one ends
        [("gen", "r1/slot0", 10.0, 50.0, 0, 3)],  # the same times on another replica's slot
        [("gen", "r0/slot0", 30.0, 30.0, 0, 3), ("pause", "r0/slot0", 30.0, 40.0, 0, 3)],  # zero length
    ],
    ids=["touching", "other-lane", "zero-length"],
)
def test_rows_that_only_touch_or_sit_on_other_tracks_are_kept(extra: list[tuple[object, ...]]) -> None:
    trace = events_to_trace(_events(extra))
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(BASE) + len(extra)


SCENARIOS = {
    "partial rollouts (pauses)": dict(weight_update=pipesim.PartialRollout()),
    "abort and restart": dict(weight_update=pipesim.AbortRestart()),
    "colocated": dict(colocated=True),  # a pipeline field
    "replicas": dict(replicas=pipesim.Replicas(2)),
    "failures and timeouts": dict(
        failures=pipesim.RetryFailed(hazard_per_s=0.002), timeout=pipesim.Timeout(cap_s=150)
    ),
}


@pytest.mark.parametrize("policies", list(SCENARIOS.values()), ids=list(SCENARIOS))
@pytest.mark.parametrize("seed", [0, 1])
def test_a_runs_own_events_are_never_refused(policies: dict[str, object], seed: int) -> None:
    policies = dict(policies)
    pipeline = {k: policies.pop(k) for k in list(policies) if k == "colocated"}
    config = pipesim.PipelineConfig(n_slots=8, batch_size=8, steps=4, max_staleness=1, **pipeline)  # type: ignore[arg-type]
    run = pipesim.run(pipesim.Scenario(pipeline=config, seed=seed, **policies))  # type: ignore[arg-type]
    assert run.events["kind"].isin(["gen", "train", "sync"]).any()
    trace = events_to_trace(run.events, run.episode_table)
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == len(run.events)
