"""``trained.versions_spanned`` is the number of weight versions an episode generated under: the
distinct versions of its generation segments (``Episode.segments``). It was ``newest - version + 1``,
which counts versions ``SyncEveryK(k)`` never published (a 0 -> 2 episode read 3)."""

from __future__ import annotations

from hypothesis import given, settings

from pipesim import PipelineConfig, Scenario, TraceDurations, run
from pipesim.policies.base import PartialRollout
from pipesim.policies.updates import SyncEveryK
from pipesim.testing import policy_scenarios


def _segment_versions(r: object) -> dict[int, int]:
    """Per trained episode, the distinct versions of its segments, one episode at a time
    (``Episode.segments``: a zero-length segment, as at a zero-second sync, counts too)."""
    ups = list(r.updates)  # type: ignore[attr-defined]
    return {e.id: len({v for v, _, _ in e.segments(ups)}) for e in r.episodes if e.status == "trained"}  # type: ignore[attr-defined]


def test_sync_every_k_counts_only_published_versions() -> None:
    sc = Scenario(
        pipeline=PipelineConfig(
            n_slots=2, batch_size=2, train_time_s=5, sync_time_s=1, max_staleness=2, steps=4
        ),
        durations=TraceDurations.from_values([10, 20, 100, 40, 50, 60, 70, 80, 90, 100]),
        weight_update=SyncEveryK(2, PartialRollout()),
    )
    r = run(sc)
    spanned = dict(zip(r.trained["episode_id"], r.trained["versions_spanned"], strict=True))
    assert spanned[5] == spanned[6] == 2  # versions 0 and 2: version 1 was never published
    segments = _segment_versions(r)
    assert all(spanned[e] == segments[e] for e in spanned)


@settings(max_examples=60, deadline=None)
@given(
    policy_scenarios(
        weight_updates=[PartialRollout(), SyncEveryK(2, PartialRollout()), SyncEveryK(3, PartialRollout())]
    )
)
def test_versions_spanned_is_the_segments_distinct_versions(sc: Scenario) -> None:
    r = run(sc)
    segments = _segment_versions(r)
    for e, n in zip(r.trained["episode_id"], r.trained["versions_spanned"], strict=True):
        assert n == segments[int(e)], (e, n, segments[int(e)])
