"""Admission and batch-assembly policies: each one's promise, checked on runs that could break it."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim import Episode, PipelineConfig, PipelineError, Scenario, TraceDurations, run
from pipesim.core.validate import FieldError
from pipesim.policies.admission import (
    AReaLThrottle,
    AsyncRatio,
    LagBound,
    OverSample,
    QueueAhead,
    StaleFraction,
)
from pipesim.policies.base import CountThrottle, Drain, OldestFinishedFirst, PartialRollout
from pipesim.policies.batching import DropStale, EvictStalest, LowestVersionFirst, WindowedFIFO
from pipesim.policies.faults import DropFailed
from pipesim.policies.updates import SyncEveryK
from pipesim.testing import admissions, batchings, check_invariants, policy_scenarios
from pipesim.workload.durations import LogNormalDurations
from tests.test_refusals_core import check_refusal

CFG = PipelineConfig(n_slots=16, batch_size=8, train_time_s=20.0, sync_time_s=5.0, max_staleness=1, steps=8)


def small(**kw: object) -> Scenario:
    base = Scenario(pipeline=CFG, durations=LogNormalDurations(40.0, 1.0), pool_size=2000, seed=3)
    return base.with_(**kw)


def trace(r: object) -> list[tuple[object, ...]]:
    return [(e.id, e.slot, e.start_s, e.end_s, e.version, e.status) for e in r.episodes]  # type: ignore[attr-defined]


def max_concurrency(r: object) -> int:
    points = sorted([(e.start_s, 1) for e in r.episodes] + [(e.end_s, -1) for e in r.episodes if e.end_s])  # type: ignore[attr-defined]
    n = best = 0
    for _, d in sorted(points, key=lambda x: (x[0], x[1])):
        n += d
        best = max(best, n)
    return best


# -- admission -------------------------------------------------------------------------------
def test_areal_without_drops_is_the_count_throttle() -> None:
    assert trace(run(small(admission=AReaLThrottle()))) == trace(run(small()))


def test_areal_caps_concurrency() -> None:
    r = run(small(admission=AReaLThrottle(max_concurrent=5)))
    check_invariants(r)
    assert max_concurrency(r) == 5 < max_concurrency(run(small()))


def test_lag_bound_of_eta_plus_one_batches_is_the_count_throttle() -> None:
    b = CFG.batch_size
    assert trace(run(small(admission=LagBound((1 + CFG.max_staleness) * b)))) == trace(run(small()))
    assert trace(run(small(admission=LagBound(2 * b + 3)))) != trace(run(small()))


def test_queue_ahead_bounds_untaken_work() -> None:
    k = 1.5
    r = run(small(admission=QueueAhead(k)))
    check_invariants(r)
    taken = {step: a for step, a, _, _ in r.train_log}
    cap = math.ceil(k * CFG.batch_size)
    for e in r.episodes:
        t = e.start_s
        untaken = sum(
            1
            for f in r.episodes
            if f.start_s <= t and not (f.trained_step >= 0 and taken[f.trained_step] <= t)
        )
        assert untaken <= cap + CFG.batch_size  # in flight + buffered <= cap, plus the batch taken at t
    assert max_concurrency(r) <= cap


@pytest.mark.parametrize("ratio", [0.25, 1.5])
def test_async_ratio_bounds_episodes_per_version(ratio: float) -> None:
    r = run(small(admission=AsyncRatio(ratio)))
    check_invariants(r)
    b = CFG.batch_size
    for v in range(CFG.steps):
        assert sum(e.version <= v for e in r.episodes) < (v + 1 + ratio) * b + 1


def test_stale_fraction_caps_starts_per_version() -> None:
    thr = 0.25
    r = run(small(admission=StaleFraction(thr)))
    check_invariants(r)
    counts = r.episode_table["version"].value_counts()
    assert counts.max() <= math.ceil((1 + thr) * CFG.batch_size)


def test_oversample_launches_more_than_a_batch_per_round() -> None:
    sync = small(max_staleness=0)
    over = run(sync.with_(admission=OverSample(2.0)))
    check_invariants(over)
    assert (over.episode_table["version"] == 0).sum() == 2 * CFG.batch_size
    assert (run(sync).episode_table["version"] == 0).sum() == CFG.batch_size


# -- batch assembly --------------------------------------------------------------------------
def fake(versions: list[int], b: int, v: int = 5, eta: int = 1) -> tuple[list[Episode], SimpleNamespace]:
    eps = [Episode(i, i, 1.0, ver) for i, ver in enumerate(versions)]
    requeued: list[tuple[int, int]] = []
    p = SimpleNamespace(
        batch_size=b,
        version=v,
        max_staleness=eta,
        requeued=requeued,
        requeue=lambda pairs: requeued.extend(pairs),
    )
    return eps, p


def test_lowest_version_first_and_windowed_fifo() -> None:
    eps, p = fake([3, 1, 4, 1, 5, 0], 3)
    buf = list(eps)
    batch, _ = LowestVersionFirst().select(buf, p)  # type: ignore[arg-type]
    assert [e.version for e in batch] == [1, 1, 0] and [e.version for e in buf] == [3, 4, 5]
    buf = list(eps)
    batch, _ = WindowedFIFO(window=4).select(buf, p)  # type: ignore[arg-type]
    assert [e.id for e in batch] == [0, 1, 3]


def test_windowed_fifo_interpolates() -> None:
    fifo = trace(run(small(batching=OldestFinishedFirst())))
    assert trace(run(small(batching=WindowedFIFO(window=CFG.batch_size)))) == fifo
    assert trace(run(small(batching=WindowedFIFO(window=10**6)))) == trace(
        run(small(batching=LowestVersionFirst()))
    )


def test_drop_stale_unit() -> None:
    eps, p = fake([5, 3, 4, 2, 5], 2, v=5, eta=1)
    buf = list(eps)
    batch, dropped = DropStale(requeue=True).select(buf, p)  # type: ignore[arg-type]
    assert [e.version for e in dropped] == [3, 2] and [e.version for e in batch] == [5, 4]
    assert p.requeued == [(1, 1), (3, 3)]


def test_drop_stale_keeps_eta_where_the_throttle_does_not() -> None:
    plain = run(small())
    assert plain.summary()["staleness_max"] > CFG.max_staleness
    for requeue in (False, True):
        r = run(small(admission=AReaLThrottle(), batching=DropStale(requeue)))
        check_invariants(r)  # includes the promised bound
        s = r.summary()
        assert s["staleness_max"] <= CFG.max_staleness and s["episodes_discarded"] > 0
        if requeue:  # every dropped task comes back as a new episode
            relaunched = {e.parent for e in r.episodes if e.parent >= 0}
            dropped = [e for e in r.episodes if e.status == "discarded"]
            assert {e.id for e in dropped if e.end_s and e.end_s < r.train_log[-1][1]} <= relaunched


def test_count_throttle_loses_its_headroom_to_drops() -> None:
    """The chapter's throttle counts dropped episodes: each drop spends eta's headroom for good."""
    r = run(small(batching=DropStale()).with_(steps=20))  # drops stop once no headroom is left
    assert r.summary()["episodes_discarded"] == CFG.max_staleness * CFG.batch_size
    with pytest.raises(PipelineError, match="CountThrottle admits no further episode") as info:
        run(small(failures=DropFailed(1 / 200)).with_(steps=20))  # failures keep dropping: it stalls
    # the message names the cause and the ways out (it named the throttle alone)
    assert "(DropFailed) still count as started" in str(info.value) and "AReaLThrottle" in str(info.value)
    check_invariants(run(small(admission=AReaLThrottle(), failures=DropFailed(1 / 200)).with_(steps=20)))


def test_evict_stalest() -> None:
    eps, p = fake([2, 0, 3, 1, 4], 2)
    buf = list(eps)
    batch, evicted = EvictStalest(capacity=3).select(buf, p)  # type: ignore[arg-type]
    assert sorted(e.version for e in evicted) == [0, 1] and [e.version for e in batch] == [2, 3]
    with pytest.raises(PipelineError, match="capacity"):
        run(small(batching=EvictStalest(capacity=CFG.batch_size - 1)))
    r = run(small(admission=AReaLThrottle(), batching=EvictStalest(capacity=CFG.batch_size)))
    check_invariants(r)


def test_never_admitting_is_an_error_not_a_hang() -> None:
    class Never:
        def admits(self, p: object) -> bool:
            return False

    with pytest.raises(PipelineError, match="stalled"):
        run(small(admission=Never()))


def test_zero_time_relaunch_loop_is_detected() -> None:
    class RequeueEverything:
        def select(self, buffer: list[Episode], p: object) -> tuple[None, list[Episode]]:
            out = list(buffer)
            buffer.clear()
            p.requeue([(e.task_id, e.id) for e in out])  # type: ignore[attr-defined]
            return None, out

    sc = Scenario(pipeline=CFG, durations=TraceDurations.from_values([0.0] * 64), pool_size=64)
    with pytest.raises(PipelineError, match="no progress"):
        run(sc.with_(admission=AReaLThrottle(), batching=RequeueEverything()))


def test_dropping_everything_forever_is_detected_not_simulated_forever() -> None:
    """A skipped sync leaves the engine on version 0 while the trainer is on 1, and DropStale with
    eta = 0 then drops (and requeues) every episode: time advances, but no batch ever forms."""
    sc = Scenario(
        pipeline=PipelineConfig(n_slots=2, batch_size=6, train_time_s=35.0, sync_time_s=40.0, steps=4),
        admission=AReaLThrottle(),
        weight_update=SyncEveryK(2, Drain()),
        batching=DropStale(requeue=True),
    )
    with pytest.raises(PipelineError, match="since the trainer last took a batch"):
        run(sc)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: AReaLThrottle(0), "max_concurrent"),
        (lambda: QueueAhead(0.5), "batches_ahead"),
        (lambda: AsyncRatio(-1), "ratio"),
        (lambda: AsyncRatio(float("nan")), "ratio"),
        (lambda: LagBound(0), "max_lag_samples"),
        (lambda: StaleFraction(-0.1), "staleness_threshold"),
        (lambda: StaleFraction(0.5, 0), "sync_every"),
        (lambda: OverSample(0.9), "factor"),
        (lambda: WindowedFIFO(0), "window"),
        (lambda: EvictStalest(0), "capacity"),
        (lambda: DropStale("yes"), "requeue"),  # type: ignore[arg-type]
    ],
)
def test_bad_parameters_name_the_field(make: object, field: str) -> None:
    check_refusal(make, FieldError, field)  # type: ignore[arg-type]


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 64), st.integers(1, 64))
def test_a_lag_bound_below_the_batch_is_refused_at_construction(lag: int, batch: int) -> None:
    """A lag bound below the batch could never start a whole batch: refused when the scenario is
    built, naming ``admission.max_lag_samples`` (the run stalled with a PipelineError before); at
    or above the batch it runs."""
    cfg = PipelineConfig(n_slots=16, batch_size=batch, train_time_s=20.0, sync_time_s=5.0, steps=2)
    make = lambda: small(pipeline=cfg, admission=LagBound(lag))  # noqa: E731
    if lag < batch:
        check_refusal(make, FieldError, "admission.max_lag_samples")
    else:
        check_invariants(run(make()))


@settings(max_examples=30, deadline=None)
@given(policy_scenarios(weight_updates=[PartialRollout()], failures=[None], with_timeouts=False))
def test_admission_and_batching_keep_the_invariants(sc: Scenario) -> None:
    check_invariants(run(sc), sc)


def test_strategies_draw_every_family() -> None:
    from hypothesis import Phase, find

    # find's own budget of draws (2,000), the first hit taken as drawn: shrinking it to a minimal
    # one (which nothing here reads) was most of the test's time
    first = settings(max_examples=2000, database=None, phases=[Phase.generate])
    for cls in (AReaLThrottle, QueueAhead, AsyncRatio, LagBound, StaleFraction, OverSample, CountThrottle):
        assert isinstance(find(admissions(), lambda a, c=cls: isinstance(a, c), settings=first), cls)
    for cls in (DropStale, EvictStalest, WindowedFIFO, LowestVersionFirst):
        assert isinstance(find(batchings(), lambda a, c=cls: isinstance(a, c), settings=first), cls)
