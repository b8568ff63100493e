"""Regressions found by a deep Hypothesis run (more examples, other seeds than CI's).

Episodes that finish at the same instant on different replicas reached the buffer in the order
SimPy fired the replicas' wake-ups, which depends on when each was scheduled; a pause of every
replica (even one of no length) re-armed them in index order, so InFlightUpdate(0.0) and
OverlappedSwap could train different episodes from the same run. Reordering the buffer afterwards
broke batch policies that keep their own place in it (VerlMessageQueue's group book); the fix
orders them before they are appended: the first replica to look at an instant finishes every
replica's completions due then, in one finishing order (``pipesim.core.slots.finish_together``).
Within one replica ties always went in start order (``Slots._finish_due``).
"""

from __future__ import annotations

import pipesim
from pipesim import (
    AReaLThrottle,
    DropStale,
    ExponentialDurations,
    InFlightUpdate,
    OverlappedSwap,
    PipelineConfig,
    Replicas,
    RetryFailed,
    RoundRobin,
    Scenario,
    Timeout,
)


def _decisions(sc: Scenario) -> list[tuple[object, ...]]:
    r = pipesim.run(sc)
    return [(e.id, e.task_id, e.replica, e.slot, e.start_s, e.end_s, e.version, e.status) for e in r.episodes]


def test_same_instant_completions_on_two_replicas_buffer_in_start_order() -> None:
    """Episodes 1 and 2 start together on two replicas and both hit the timeout at the same
    instant. They went to the buffer in the order the replicas' wake-ups were scheduled: under
    the overlapped swap episode 1 first, under an in-flight update of no load time (whose pause
    re-arms every replica in index order) episode 2 first, so DropStale requeued their tasks in
    opposite orders and the two runs differed from t = 139.6 s. Ties go to the buffer in start
    order on every path, so the two runs are the same decision for decision
    (tests/test_prop_policies.py::test_an_in_flight_update_without_load_time_is_an_overlapped_swap)."""
    sc = Scenario(
        pipeline=PipelineConfig(
            n_slots=6,
            batch_size=3,
            train_time_s=19.782051389445304,
            sync_time_s=0.0,
            max_staleness=3,
            steps=5,
        ),
        durations=ExponentialDurations(mean_s=39.05536671642411),
        admission=AReaLThrottle(max_concurrent=None),
        weight_update=OverlappedSwap(),
        batching=DropStale(requeue=True),
        seed=4501,
        pool_size=660,
        timeout=Timeout(cap_s=121.92793127709957),
        failures=RetryFailed(hazard_per_s=0.000987381808891487),
        replicas=Replicas(n_replicas=2, routing=RoundRobin()),
    )
    swap = _decisions(sc)
    tied = [e for e in swap if e[0] in (1, 2)]
    assert [e[2] for e in tied] == [1, 0] and tied[0][5] == tied[1][5]  # the tie across replicas
    assert _decisions(sc.with_(weight_update=InFlightUpdate(0.0))) == swap
    requeued = [e[1] for e in swap if e[0] >= 26 and e[1] in (1, 2)]
    assert requeued == [1, 2]  # requeued in the order they were buffered: start order


def test_the_shrunk_tie_trains_the_episode_that_started_first() -> None:
    """The shrunk case: episodes 0 and 1 start together on replicas 0 and 1 and are both cut at
    the 1 s timeout. Under the overlapped swap episode 1 reached the buffer first and was
    trained at step 1, under the in-flight update episode 0; now both train episode 0."""
    sc = Scenario(
        pipeline=PipelineConfig(
            n_slots=3, batch_size=1, train_time_s=0.0, sync_time_s=0.0, max_staleness=2, steps=2
        ),
        durations=ExponentialDurations(2.0),
        weight_update=OverlappedSwap(),
        seed=1,
        pool_size=160,
        timeout=Timeout(1.0),
        replicas=Replicas(2, RoundRobin()),
    )
    for wu in (OverlappedSwap(), InFlightUpdate(0.0)):
        eps = pipesim.run(sc.with_(weight_update=wu)).episodes[:2]
        assert [(e.replica, e.end_s) for e in eps] == [(0, 1.0), (1, 1.0)]
        assert [e.trained_step for e in eps] == [1, -1]
