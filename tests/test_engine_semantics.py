"""Semantics the engine and the policies must keep, each pinned by a trace of a small run.

Every test here was written against a bug or a hand-made mutation that the rest of the suite
let through (issue 16): which version replicas other than the first publish, ``started_at_version``,
episodes due at the very instant a sync starts, the reset cadence of ``StaleFraction``, a
fractional ``QueueAhead``, ``AbortReprefill``'s token accounting, the order ``AbortRestart``
relaunches in, ``Drain`` with several replicas, and a discard that must wake the controller.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import pipesim
from pipesim import (
    AbortReprefill,
    AbortRestart,
    AReaLThrottle,
    Drain,
    DropStale,
    PartialRollout,
    PerReplicaSync,
    PipelineConfig,
    QueueAhead,
    Replicas,
    Scenario,
    StaleFraction,
    TraceDurations,
)
from pipesim.core.engine import Pipeline
from pipesim.core.episode import ABORTED, TRAINED, Episode
from pipesim.core.errors import PipelineError
from pipesim.testing import InvariantError, check_invariants

pytestmark = pytest.mark.timeout(60)


def _scenario(values: list[float], **kw: Any) -> Scenario:
    cfg = {k: kw.pop(k) for k in list(kw) if k in PipelineConfig.__dataclass_fields__}
    return Scenario(
        pipeline=PipelineConfig(**cfg),
        durations=TraceDurations.from_values(values),
        pool_size=len(values),
        **kw,
    )


def _pipeline(sc: Scenario, **kw: Any) -> Pipeline:
    """The run of ``sc`` on its drawn pool (``kw``: the pipeline's seams and options)."""
    p = Pipeline(sc, pipesim.draw_pool(sc).tolist(), **kw)
    p.run()
    return p


# -- replicas ---------------------------------------------------------------------------------------
def test_every_replica_publishes_the_new_version_with_per_replica_syncs() -> None:
    sc = Scenario(
        pipeline=PipelineConfig(
            n_slots=6, batch_size=4, train_time_s=5, sync_time_s=3, max_staleness=1, steps=5
        ),
        durations=pipesim.ExponentialDurations(mean_s=10.0),
        weight_update=PerReplicaSync(sync_times_s=(1.0, 2.0, 4.0)),
        replicas=Replicas(3),
        seed=3,
    )
    p = _pipeline(sc)
    assert [e.version for e in p.engines] == [sc.pipeline.steps] * 3
    syncs = [u for u in p.updates if u.kind == "sync"]
    for r in range(3):
        mine = [u for u in syncs if u.replica == r]
        assert [u.version_after for u in mine] == list(range(1, sc.pipeline.steps + 1))
    for ep in p.episodes:  # an episode carries its own replica's version at its start
        published = [u for u in syncs if u.replica == ep.replica and u.end_s <= ep.start_s]
        assert ep.version == len(published), (ep.id, ep.replica, ep.start_s)


@pytest.mark.parametrize("seed", range(10))
def test_drain_with_replicas_never_trains_an_episode_under_two_versions(seed: int) -> None:
    sc = Scenario(
        pipeline=PipelineConfig(n_slots=8, batch_size=8, max_staleness=1, steps=6),
        weight_update=Drain(),
        replicas=Replicas(2),
        seed=seed,
    )
    r = pipesim.run(sc)
    assert (r.trained["versions_spanned"] == 1).all()
    check_invariants(r)


class DrainThatDoesNotWait(Drain):
    """A Drain that lies: it keeps Drain's promise but syncs without waiting for the engines."""

    def sync(self, p: Any) -> Any:
        p.begin_sync(pause=True)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


def test_the_kit_catches_a_drain_that_lets_episodes_span_versions() -> None:
    caught = 0
    for seed in range(10):
        sc = Scenario(
            pipeline=PipelineConfig(n_slots=8, batch_size=8, max_staleness=1, steps=6),
            weight_update=DrainThatDoesNotWait(),
            replicas=Replicas(2),
            seed=seed,
        )
        try:
            check_invariants(pipesim.run(sc))
        except InvariantError as exc:
            assert "single version" in str(exc)
            caught += 1
    assert caught >= 5


# -- the controller wakes for every change that can open admission ------------------------------------
@pytest.mark.parametrize("admission", [QueueAhead(1.0), AReaLThrottle(max_concurrent=1)])
def test_a_discard_wakes_the_controller(admission: Any) -> None:
    sc = Scenario(
        pipeline=PipelineConfig(n_slots=1, batch_size=1, steps=2),
        admission=admission,
        batching=DropStale(requeue=False),
        seed=0,
    )
    r = pipesim.run(sc)  # used to stop with a false "stalled" error
    assert len(r.train_log) == 2
    check_invariants(r)


# -- versions and counters ----------------------------------------------------------------------------
def test_started_at_version_counts_the_episodes_launched_before_each_publication() -> None:
    sc = Scenario(
        pipeline=PipelineConfig(
            n_slots=5, batch_size=3, train_time_s=4, sync_time_s=2, max_staleness=2, steps=6
        ),
        durations=pipesim.ExponentialDurations(mean_s=6.0),
        seed=11,
    )
    p = _pipeline(sc)
    assert len(p.started_at_version) == sc.pipeline.steps + 1
    for v, (_, end_s, version) in enumerate(p.sync_log, start=1):
        assert version == v
        before = sum(1 for e in p.episodes if e.start_s < end_s or (e.start_s == end_s and e.version < v))
        assert p.started_at_version[v] == before


def test_an_episode_due_when_a_sync_starts_finishes_before_the_pause() -> None:
    # B = 1, one slot: episode 0 ends at 5, training takes 5, the sync starts at 10 -- exactly when
    # episode 1 (started at 5, 5 s long) is due. It finishes at 10 under version 0, unpaused.
    sc = _scenario(
        [5.0, 5.0, 5.0, 5.0, 5.0],
        n_slots=1,
        batch_size=1,
        train_time_s=5,
        sync_time_s=2,
        max_staleness=1,
        steps=2,
    )
    p = _pipeline(sc)
    e1 = p.episodes[1]
    assert (e1.start_s, e1.end_s, e1.version) == (5.0, 10.0, 0)
    assert p.sync_log[0][0] == 10.0
    assert e1.update_from == e1.update_to  # no update lived through
    r = pipesim.run(sc)
    assert r.trained.set_index("episode_id").loc[1, "versions_spanned"] == 1


def test_stale_fraction_resets_its_counter_every_sync_every_versions() -> None:
    rule = StaleFraction(staleness_threshold=0.5, sync_every=2)
    b = 4  # cap = ceil(1.5 * 4 * 2) = 12 per window of two versions
    marks = [0, 7, 12, 20, 31]

    def view(version: int, started: int) -> SimpleNamespace:
        return SimpleNamespace(batch_size=b, version=version, started=started, started_at_version=marks)

    assert rule.admits(view(1, 11)) and not rule.admits(view(1, 12))  # window opened at version 0
    assert rule.admits(view(2, 12 + 11)) and not rule.admits(view(2, 12 + 12))  # reset at version 2
    assert not rule.admits(view(3, 12 + 12))  # version 3 still counts from version 2's mark


def test_queue_ahead_rounds_a_fractional_queue_up() -> None:
    rule = QueueAhead(batches_ahead=1.3)  # 1.3 * 4 = 5.2 -> 6 places
    assert math.ceil(1.3 * 4) == 6
    for running, buffered, ok in [(5, 0, True), (3, 2, True), (6, 0, False), (2, 4, False)]:
        p = SimpleNamespace(
            batch_size=4, n_running=running, n_buffered=buffered, buffer=SimpleNamespace(items=[0] * buffered)
        )
        assert rule.admits(p) is ok, (running, buffered)


# -- what weight updates do to episodes in flight -------------------------------------------------------
def test_abort_reprefill_charges_tokens_generated_since_the_last_reprefill() -> None:
    # One slot, B = 1: episode 0 runs 10 s; training 2 s; syncs of 1 s. Episode 1 (40 s) starts
    # at 10 and lives through the syncs after steps 1 (t = 12) and 2.
    rates = AbortReprefill(decode_rate_tok_s=10.0, prefill_rate_tok_s=100.0)
    sc = _scenario(
        [10.0, 40.0, 1.0, 1.0, 1.0],
        n_slots=1,
        batch_size=1,
        train_time_s=2,
        sync_time_s=1,
        max_staleness=3,
        steps=2,
        weight_update=rates,
    )
    p = _pipeline(sc)
    e1 = p.episodes[1]
    # first sync at 12: generated 2 s -> 20 tokens -> 0.2 s re-prefill
    # the second sync: episode 2 starts? no: one slot is busy with episode 1, so step 2 waits.
    assert e1.reprefill_tokens == pytest.approx(20.0)
    assert e1.reprefill_s == pytest.approx(0.2)
    assert e1.end_s == pytest.approx(10.0 + 40.0 + 1.0 + 0.2)


def test_abort_reprefill_excludes_earlier_reprefill_seconds() -> None:
    rule = AbortReprefill(decode_rate_tok_s=10.0, prefill_rate_tok_s=100.0)
    ep = SimpleNamespace(reprefill_s=0.5)
    seconds, tokens = rule.reprefill(ep, generated_s=3.5)  # type: ignore[arg-type]
    assert tokens == pytest.approx(30.0) and seconds == pytest.approx(0.3)


def test_abort_restart_relaunches_aborted_tasks_first_in_their_finishing_order() -> None:
    # 3 slots, B = 1, a ratio rule that does not count dropped work. Episode 0 (1 s) is trained
    # first; at the sync (t = 2) episodes 1 and 2 (30 s, 20 s) are in flight: both are aborted and
    # relaunched before any new task, the one due sooner (episode 2) first.
    sc = _scenario(
        [1.0, 30.0, 20.0] + [1.0] * 12,
        n_slots=3,
        batch_size=1,
        train_time_s=1,
        sync_time_s=1,
        steps=2,
        admission=pipesim.AsyncRatio(2.0),
        weight_update=AbortRestart(restart=True),
    )
    p = _pipeline(sc)
    first_aborts = [e for e in p.episodes if e.status == ABORTED and e.end_s == 2.0]
    assert sorted(e.id for e in first_aborts) == [1, 2]
    assert all(e.lost_s == 2.0 for e in first_aborts)
    after = [e for e in p.episodes if e.start_s == 3.0]  # the instant the sync ends
    assert [(e.task_id, e.parent) for e in after[:2]] == [(2, 2), (1, 1)]
    assert after[2].parent == -1 and after[2].task_id == 3  # then the next new task


def test_partial_rollout_pauses_and_resumes_the_same_episode() -> None:
    sc = _scenario(
        [10.0, 30.0] + [5.0] * 10,
        n_slots=2,
        batch_size=1,
        train_time_s=2,
        sync_time_s=3,
        max_staleness=1,
        steps=4,
        weight_update=PartialRollout(),
    )
    p = _pipeline(sc)
    e1 = p.episodes[1]
    assert e1.end_s is not None and e1.status == TRAINED
    paused = sum(b - a for a, b, _ in p.sync_log if a < e1.end_s)
    assert paused >= 6.0  # at least two syncs of 3 s fell inside it
    assert e1.end_s == pytest.approx(e1.start_s + 30.0 + paused)


# -- the episode source at a sync -------------------------------------------------------------------
class _Recording:
    """An episode source of fixed durations that records what each publish is handed."""

    def __init__(self) -> None:
        self.handed: list[int] = []

    def work_s(self, episode_id: int, task: int, version: int, parent: int) -> float:
        return 4.0 + (episode_id % 7) * 0.37  # longer than a training step: in flight at syncs

    def publish(self, version: int, running: Any) -> dict[int, float]:
        self.handed.append(len(running))
        return {}


class _Promising(_Recording):
    def __init__(self, fixed: bool) -> None:
        super().__init__()
        self.fixed = fixed

    def fixed_work(self) -> bool:
        return self.fixed


def _syncing() -> Scenario:
    """Episodes in flight at each of 6 syncs (partial rollouts), where a source may re-cost them."""
    return _scenario(
        [1.0] * 200,
        batch_size=8,
        steps=6,
        n_slots=8,
        max_staleness=1,
        train_time_s=1.0,
        sync_time_s=0.5,
        weight_update=PartialRollout(),
    )


@pytest.mark.parametrize("fixed", [None, False, True])
def test_a_sync_lists_the_episodes_in_flight_unless_the_source_promises_fixed_work(
    fixed: bool | None,
) -> None:
    sc = _syncing()
    source = _Recording() if fixed is None else _Promising(fixed)
    p = _pipeline(sc, source=source)
    assert len(source.handed) == 6
    if fixed:  # FixedWork: handed nothing, at no cost per episode in flight
        assert source.handed == [0] * 6
    else:
        assert sum(source.handed) > 0  # episodes were in flight at the syncs
    # without the shortcut (check_promises compares the two) every source is handed them
    plain = _Promising(True)
    _pipeline(sc, source=plain, options=pipesim.EngineOptions(hints=False))
    assert sum(plain.handed) > 0
    # the run is the same whatever the source promised
    ref = _pipeline(sc, source=_Recording())
    assert [(e.start_s, e.end_s) for e in p.episodes] == [(e.start_s, e.end_s) for e in ref.episodes]


class _Seconds(_Recording):
    """A source whose ``work_s`` answers ``value`` (not a float)."""

    def __init__(self, value: object) -> None:
        super().__init__()
        self.value = value

    def work_s(self, episode_id: int, task: int, version: int, parent: int) -> float:
        return self.value  # type: ignore[return-value]


@pytest.mark.parametrize("value", [4, np.float32(4.0), np.int64(4), np.float64(4.0)])
def test_a_source_answering_an_int_or_a_numpy_real_runs_as_its_float(value: object) -> None:
    """An episode's seconds are floats (the compiled episode checks it): a real of another type
    is converted, and the run is the one of the float."""
    sc = _scenario([1.0] * 40, batch_size=4, steps=3, n_slots=4, max_staleness=1)
    got = _pipeline(sc, source=_Seconds(value))
    ref = _pipeline(sc, source=_Seconds(4.0))
    assert [(e.start_s, e.end_s, e.duration_s) for e in got.episodes] == [
        (e.start_s, e.end_s, e.duration_s) for e in ref.episodes
    ]
    assert {type(e.duration_s) for e in got.episodes} == {float}


@pytest.mark.parametrize("value", ["4", None, True, [4.0], -1.0, math.nan, math.inf])
def test_a_source_answering_no_seconds_is_named(value: object) -> None:
    """Not a number, or negative (an episode ended before it started), or not finite (a clock
    overflow that named no one)."""
    sc = _scenario([1.0] * 40, batch_size=4, steps=3, n_slots=4)
    msg = r"^_Seconds\.work_s \(at t=0 s, version 0 of 3\) must be finite seconds >= 0, got "
    with pytest.raises(PipelineError, match=msg):
        _pipeline(sc, source=_Seconds(value))


class _Recosting(_Recording):
    """A source that re-costs every episode in flight at each publish to ``value`` seconds."""

    def __init__(self, value: object) -> None:
        super().__init__()
        self.value = value

    def publish(self, version: int, running: Any) -> dict[int, float]:
        return {ep.id: self.value for ep, _ in running}


def test_a_recost_in_numpy_float32_runs_as_its_float() -> None:
    """A numpy float32 carried into the clock made the pure run differ from the compiled one."""
    sc = _syncing()
    got = _pipeline(sc, source=_Recosting(np.float32(9.1)))
    ref = _pipeline(sc, source=_Recosting(float(np.float32(9.1))))
    assert type(got.env.now) is float and got.env.now == ref.env.now
    assert [(e.end_s, e.duration_s) for e in got.episodes] == [(e.end_s, e.duration_s) for e in ref.episodes]


@pytest.mark.parametrize("value", ["9", -3.0, math.nan])
def test_a_recost_that_is_no_seconds_is_named(value: object) -> None:
    sc = _syncing()
    with pytest.raises(PipelineError, match=r"^_Recosting\.publish \(at t=.*\) must be finite seconds >= 0"):
        _pipeline(sc, source=_Recosting(value))


def test_a_relaunch_with_a_parent_that_is_no_int_is_named() -> None:
    """The parent is an episode id, an int field of the episode (a numpy int was a TypeError from
    inside the run in the compiled build)."""

    class RelaunchWithNumpyParent:
        def select(self, buffer: list[Episode], p: Any) -> tuple[None, list[Episode]]:
            if buffer:
                p.relaunch(0, buffer[0].task_id, np.int64(buffer[0].id))
            return None, []

    sc = _scenario([1.0] * 40, batch_size=4, steps=2, n_slots=4, batching=RelaunchWithNumpyParent())
    with pytest.raises(PipelineError, match=r"relaunch: parent must be an int .*got np\.int64\(0\)"):
        _pipeline(sc)


def test_a_requeue_with_a_parent_that_is_no_int_is_named() -> None:
    class RequeueWithNumpyParent:
        def select(self, buffer: list[Episode], p: Any) -> tuple[None, list[Episode]]:
            if buffer:
                p.requeue([(buffer[0].task_id, np.int64(buffer[0].id))])
            return None, []

    sc = _scenario([1.0] * 40, batch_size=4, steps=2, n_slots=4, batching=RequeueWithNumpyParent())
    with pytest.raises(PipelineError, match=r"requeue: parent must be an int .*got np\.int64\(0\)"):
        _pipeline(sc)


class _Stretching(AbortReprefill):
    """AbortReprefill whose charge is ``value`` (seconds and tokens alike)."""

    def __init__(self, value: object) -> None:
        object.__setattr__(self, "value", value)

    def reprefill(self, ep: Episode, generated_s: float) -> tuple[float, float]:
        return self.value, self.value  # type: ignore[attr-defined,return-value]


def test_a_stretch_in_numpy_float32_runs_as_its_float() -> None:
    sc = _scenario([5.0] * 60, batch_size=4, steps=4, n_slots=6, max_staleness=2, train_time_s=1.0)
    got = _pipeline(sc.with_(weight_update=_Stretching(np.float32(0.3))))
    ref = _pipeline(sc.with_(weight_update=_Stretching(float(np.float32(0.3)))))
    assert type(got.env.now) is float and got.env.now == ref.env.now
    assert [e.end_s for e in got.episodes] == [e.end_s for e in ref.episodes]


@pytest.mark.parametrize("value", ["0.3", -1.0, math.inf])
def test_a_stretch_that_is_no_seconds_is_named(value: object) -> None:
    sc = _scenario([5.0] * 60, batch_size=4, steps=4, n_slots=6, max_staleness=2, train_time_s=1.0)
    with pytest.raises(
        PipelineError, match=r"^a stretch of weight update _Stretching must be finite seconds >= 0"
    ):
        _pipeline(sc.with_(weight_update=_Stretching(value)))
