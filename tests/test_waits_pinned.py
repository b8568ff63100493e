"""The buffer wait behind ``AfterNextBatch`` (``pipesim.core.waits``), pinned where a mutation
audit found changes that every other test let through.

Each case pins what a one-line change broke: the wait's threshold (``>= n``, not ``> n`` nor
``>= n - 1``), the replica re-aimed at a new wait (``kick``), the pass deferred behind a wait that
an in-place completion fired (``poke``), the smallest of several pending waits
(``buffer_need``), and ``AfterNextBatch``'s own rules (admission open while it waits for the
batch, its promises passed on from ``inner``). Where the durations are drawn (numpy), the test
compares the default engine with :meth:`EngineOptions.plain` (a wake-up for every completion, no
shortcut) rather than golden times; trace-driven cases, whose event times are exact sums, also
pin the times.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import pytest

import pipesim
from pipesim import Drain, PartialRollout, PipelineConfig, PipelineError, Scenario, TraceDurations
from pipesim.core.engine import Pipeline
from pipesim.core.seams import EngineOptions
from pipesim.io.api import draw_pool
from pipesim.policies.admission import BatchThrottle, QueueAhead
from pipesim.policies.updates import AbortReprefill, AfterNextBatch, BatchDrain
from pipesim.testing import check_promises
from scenarios.systems import verl_one_step_off_policy


def sync_starts(sc: Scenario, options: EngineOptions | None = None) -> list[float]:
    """When each sync began, run with ``options`` (the default engine where None)."""
    p = Pipeline(sc, draw_pool(sc).tolist(), options=options or EngineOptions())
    p.run()
    return [start for start, _, _ in p.sync_log]


def same_as_plain(sc: Scenario) -> list[float]:
    """The default engine's sync starts, asserted equal to the plain engine's (exactly)."""
    fast = sync_starts(sc)
    assert fast == sync_starts(sc, EngineOptions.plain())
    return fast


def test_a_wait_the_buffer_already_meets_fires_at_once() -> None:
    """``buffered_at_least(n)`` with exactly ``n`` buffered succeeds now (``>= n``): a slow
    trainer leaves the batch waiting in the buffer, and each sync starts as its step ends. With
    ``> n`` the wait needs an episode the throttle never starts, and the run stalls."""
    cfg = PipelineConfig(
        n_slots=4, batch_size=4, train_time_s=1000.0, sync_time_s=1.0, max_staleness=1, steps=3
    )
    r = pipesim.run(Scenario(pipeline=cfg, weight_update=AfterNextBatch(PartialRollout())))
    assert len(r.sync_log) == 3
    for (start, _, _), (_, _, train_end, _) in zip(r.sync_log, r.train_log, strict=True):
        assert start == train_end  # (start, end, version) and (step, start, end, version)


def test_the_wait_needs_the_whole_batch() -> None:
    """Seven 1 s episodes and one of 50 s per batch of 4 on 8 slots: the second batch holds the
    50 s straggler, so the first sync waits for it (t = 50), not for three episodes (t = 1)."""
    cfg = PipelineConfig(
        n_slots=8, batch_size=4, train_time_s=10.0, sync_time_s=1.0, max_staleness=1, steps=2
    )
    sc = Scenario(
        pipeline=cfg,
        weight_update=AfterNextBatch(PartialRollout()),
        durations=TraceDurations((1.0,) * 7 + (50.0,), cycle=True),
    )
    assert same_as_plain(sc) == [50.0, 61.0]


def test_a_new_wait_re_aims_a_sleeping_replica() -> None:
    """A wait asked while the lone replica sleeps past completions re-aims it (``kick``), so the
    completion that reaches the batch wakes the waiter on time: the default engine agrees with the
    plain one, and the run keeps its promises."""
    cfg = PipelineConfig(n_slots=8, batch_size=2, train_time_s=2.0, sync_time_s=3.0, max_staleness=1, steps=5)
    sc = Scenario(
        pipeline=cfg, admission=QueueAhead(2.0), weight_update=AfterNextBatch(PartialRollout()), seed=86
    )
    starts = same_as_plain(sc)
    assert starts[0] == pytest.approx(36.326, abs=1e-3)
    check_promises(sc)


def test_a_pass_a_fired_wait_defers_runs_at_the_end_of_the_instant() -> None:
    """A replica's own in-place completion fires the wait; the controller pass it deferred must
    still run (``poke``) so the episodes freed meanwhile start: trace-driven, exact times."""
    cfg = PipelineConfig(n_slots=3, batch_size=8, train_time_s=4.0, sync_time_s=1.0, max_staleness=3, steps=5)
    sc = Scenario(
        pipeline=cfg,
        weight_update=AfterNextBatch(BatchDrain()),
        durations=TraceDurations((3.0, 0.0, 1.0, 5.0, 5.0, 5.0, 0.0, 2.0, 3.0), cycle=True),
        seed=72,
    )
    assert same_as_plain(sc) == [23.0, 40.0, 49.0, 58.0, 68.0]


@dataclass(frozen=True)
class EitherWait:
    """Sync once the buffer holds a batch, or (never, in practice) a hundred: two waits pending."""

    def blocks_admission(self, p: Any) -> bool:
        return bool(p.syncing)

    def pauses_only(self) -> bool:
        return True

    def sync(self, p: Any) -> Generator[Any, Any, None]:
        if p.version + 1 < p.config.steps:
            yield p.buffered_at_least(p.batch_size) | p.buffered_at_least(100 * p.batch_size)
        p.begin_sync(pause=True)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


def test_the_smallest_pending_wait_is_the_one_a_sleeping_replica_serves() -> None:
    """``buffer_need`` is the fewest episodes any pending wait needs: with the largest, the lone
    replica sleeps past the completion that meets the small wait, and the default engine syncs
    later than the plain one."""
    cfg = PipelineConfig(n_slots=8, batch_size=4, train_time_s=2.0, sync_time_s=1.0, max_staleness=2, steps=5)
    sc = Scenario(pipeline=cfg, weight_update=EitherWait(), seed=3)
    assert len(same_as_plain(sc)) == 5
    check_promises(sc)


def test_after_next_batch_with_drain_agrees_with_the_plain_engine() -> None:
    """Agent durations, two batches queued ahead, a draining inner sync: the admission stays open
    while the sync waits for the batch (else the run stalls at t = 327 s), and only while the
    buffer is short of a batch. Times drawn with numpy: the plain engine is the reference, and
    the times are pinned loosely."""
    cfg = PipelineConfig(n_slots=4, batch_size=8, train_time_s=4.0, sync_time_s=3.0, max_staleness=1, steps=5)
    sc = Scenario(pipeline=cfg, admission=QueueAhead(2.0), weight_update=AfterNextBatch(Drain()), seed=98)
    sc = sc.with_(pool_size=4 * sc.default_pool_size)
    starts = same_as_plain(sc)
    assert starts == pytest.approx([362.63, 641.42, 889.09, 1042.73, 1319.45], abs=0.01)


def test_after_next_batch_with_drain_keeps_admitting_while_it_waits() -> None:
    """``BatchThrottle`` and ``Drain`` inside ``AfterNextBatch``: with admission blocked while
    the sync waits for the batch, the batch never fills and the run stalls (t = 13 s)."""
    cfg = PipelineConfig(n_slots=2, batch_size=5, train_time_s=1.0, sync_time_s=1.0, max_staleness=1, steps=3)
    sc = Scenario(
        pipeline=cfg,
        admission=BatchThrottle(),
        weight_update=AfterNextBatch(Drain()),
        durations=TraceDurations((4.0, 0.0, 4.0, 5.0, 0.0), cycle=True),
        seed=20,
    )
    try:
        starts = same_as_plain(sc)
    except PipelineError as exc:  # pragma: no cover - the failure this test exists for
        pytest.fail(f"stalled: {exc}")
    assert len(starts) == 3


def test_after_next_batch_passes_its_inner_promises_on() -> None:
    cfg = PipelineConfig(n_slots=4, batch_size=4, train_time_s=1.0, sync_time_s=1.0, max_staleness=1, steps=3)
    sc = Scenario(pipeline=cfg, weight_update=AfterNextBatch(Drain()))
    assert AfterNextBatch(Drain()).single_version(sc) is True
    assert AfterNextBatch(AbortReprefill()).pauses_only() is False
    assert AfterNextBatch(Drain()).pauses_only() is True


def test_verl_one_step_off_pauses_generation_at_every_sync() -> None:
    """``BatchDrain`` syncs with generation paused (verl's ``sync_rollout_weights`` runs between
    batches): every update record says so."""
    r = pipesim.run(verl_one_step_off_policy())
    assert r.updates
    assert all(u.paused for u in r.updates)
