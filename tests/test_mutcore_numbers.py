"""Core and built-in policy rules a mutation audit found untested, each checked on a run or a call
where a one-line change to the rule shows (off-by-one windows, floor for ceil, ``<`` for ``<=``,
requeue order, the colocated pause's exact float, routing ties).

Each test states the rule as a relation or a closed form and pins a number only where exactness is
the point (the colocated fold)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

import pipesim
from pipesim import PipelineConfig, Scenario, TraceDurations, run
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.core.seams import EngineOptions
from pipesim.policies.admission import AReaLThrottle, OverSample, QueueAhead
from pipesim.policies.base import CountThrottle
from pipesim.policies.faults import DropFailed, RequeueFailed, Timeout
from pipesim.policies.replicas import LeastLoaded, Replicas, RoundRobin
from pipesim.policies.roll import RollReplayBuffer
from pipesim.policies.synccost import WeightSyncCost
from pipesim.policies.updates import AbortRestart
from pipesim.policies.verl import VerlRollouter, verl_put_accepted
from pipesim.workload.durations import LogNormalDurations
from scenarios.systems import roll_rlvr
from tests.test_compute_overlong import ENGINE, WORK

LN = LogNormalDurations(40.0, 1.0)


def _ln(seed: int, **kw: Any) -> Scenario:
    """The chapter-style lognormal run: LN durations, pool 3000, train 20 s, sync 8 s."""
    pipe = {"train_time_s": 20.0, "sync_time_s": 8.0, **kw.pop("pipeline")}
    return Scenario(pipeline=PipelineConfig(**pipe), durations=LN, pool_size=3000, seed=seed, **kw)


# --- P9: OverSample's extra episodes are rounded up ------------------------------------------------


@pytest.mark.parametrize(("factor", "batch_size"), [(1.5, 3), (1.2, 4)])
def test_oversample_launches_ceil_of_its_extra_share_at_once(factor: float, batch_size: int) -> None:
    """``started - dropped < (v + 1 + eta) B + ceil((factor - 1) B)``: at t = 0 (v = 0, nothing
    dropped, slots to spare) exactly that many start; a fractional extra share rounds up."""
    eta = 0
    sc = _ln(5, pipeline=dict(n_slots=16, batch_size=batch_size, max_staleness=eta, steps=4))
    r = run(sc.with_(admission=OverSample(factor=factor)))
    at_zero = sum(1 for e in r.episodes if e.start_s == 0.0)
    extra = (factor - 1) * batch_size
    assert extra != int(extra)  # the case where rounding matters
    assert at_zero == (1 + eta) * batch_size + math.ceil(extra)


# --- P20: AbortRestart puts the aborted tasks ahead of those already requeued ----------------------


def test_abort_restart_relaunches_the_aborted_ahead_of_tasks_already_waiting() -> None:
    """At an AbortRestart sync the aborted tasks go to the *front* of the requeue: each one is
    relaunched before any task that was already waiting there (CountThrottle leaves a backlog of
    earlier aborts waiting, so a later sync finds the queue non-empty)."""
    sc = _ln(
        2,
        pipeline=dict(n_slots=8, batch_size=2, max_staleness=4, steps=4),
        admission=CountThrottle(),
        weight_update=AbortRestart(),
        failures=RequeueFailed(0.001),
    )
    r = run(sc)
    eps = r.episodes
    child = {e.parent: e for e in eps if e.parent >= 0}  # the relaunch of each lost episode
    lost = [e for e in eps if e.status in ("aborted", "failed")]
    checked = 0
    for u in r.updates:
        t = u.start_s
        here = [e for e in lost if e.status == "aborted" and e.end_s == t]
        waiting = [e for e in lost if (e.end_s or 0.0) < t and (e.id not in child or child[e.id].start_s > t)]
        if not here or not waiting:
            continue
        later = [child[e.id] for e in waiting if e.id in child]
        for w in later:
            for a in here:
                assert a.id in child and child[a.id].id < w.id, (t, a.task_id, w.task_id)
        checked += len(later)
    assert checked > 0  # some sync found a backlog that was relaunched afterwards


# --- P30: DropOverlong's min_items hint is 1 -------------------------------------------------------

# ENGINE and WORK: test_compute_overlong's, a heavy tail under a low cap


def _overlong_run(options: EngineOptions | None) -> Any:
    cfg = PipelineConfig(batch_size=16, steps=4, max_staleness=2)
    sc = Scenario(
        pipeline=cfg,
        batching=pipesim.DropOverlong(),
        admission=AReaLThrottle(),
        weight_update=pipesim.PartialRollout(),
    )
    out = run_compute(sc, Cluster(engine=ENGINE, n_gpus=2, trainer_gpus=1), WORK, seed=5, options=options)
    return out.result


def test_drop_overlong_hint_changes_nothing_on_the_compute_engine() -> None:
    """DropOverlong discards a cut sample as soon as the trainer looks, so its ``min_items`` hint
    must be 1 (one buffered sample can be dropped): the run with hints acted on is the run with
    every shortcut off, discard times included."""
    fast = _overlong_run(None)
    plain = _overlong_run(EngineOptions(hints=False))
    table = fast.episode_table
    assert (table["status"] == "discarded").any()
    assert fast.sim_time_s == plain.sim_time_s
    pd.testing.assert_frame_equal(table, plain.episode_table, check_exact=True)


# --- P31: WeightSyncCost reads bytes_per_param -----------------------------------------------------


def test_weight_sync_cost_scales_with_bytes_per_param() -> None:
    """Seconds are params x bytes / bandwidth: fp8 (1 byte) moves in half the bf16 time (a factor
    of two is exact in floats)."""
    fp8 = WeightSyncCost(32.8, 100.0, bytes_per_param=1.0)
    bf16 = WeightSyncCost(32.8, 100.0, bytes_per_param=2.0)
    assert fp8.gigabytes == 32.8 and bf16.gigabytes == 2 * 32.8
    assert 2 * fp8.sync_time_s == bf16.sync_time_s
    assert WeightSyncCost(32.8, 100.0, bytes_per_param=4.0).sync_time_s == 2 * bf16.sync_time_s


# --- P34 / P33: ROLL RLVR windows and garbage collection -------------------------------------------


def test_roll_rlvr_windows_round_group_marks_up_and_train_every_step() -> None:
    """A window holds the groups whose *first* sample started in it (ceil of the start marks over
    n): with two samples a prompt, a group split across a version change belongs to the earlier
    window only, and every step still gets a full batch."""
    steps, b = 6, 8
    sc = roll_rlvr(
        2, samples_per_prompt=2, n_slots=4, batch_size=b, steps=steps, train_time_s=20.0, sync_time_s=5.0
    )
    s = run(sc).summary()
    assert s["episodes_trained"] == steps * b


def test_roll_gc_expires_the_window_at_v_minus_r() -> None:
    """After the batch at version v, ROLL's gc aborts every prompt of windows <= v - r: a sample of
    such a window that finishes later is discarded, never left buffered."""
    r_ratio, steps = 1, 6
    sc = Scenario(
        pipeline=PipelineConfig(
            n_slots=4, batch_size=4, train_time_s=20.0, sync_time_s=5.0, max_staleness=0, steps=steps
        ),
        durations=LN,
        pool_size=3000,
        seed=2,
        admission=QueueAhead(3.0),
        batching=RollReplayBuffer(r_ratio, 1),
    )
    r = run(sc)
    last_v = steps - 1  # the version of the last batch
    buffered = [e for e in r.episodes if e.status == "buffered"]
    assert all(e.version > last_v - r_ratio for e in buffered), [(e.id, e.version) for e in buffered]
    s = r.summary()
    assert (s["episodes_discarded"], s["episodes_buffered"]) == (4, 0)


# --- C12: a colocated pause of exactly train_time_s counts as train_time_s --------------------------


def test_colocated_training_pause_is_added_as_the_nominal_float() -> None:
    """Colocated, each running episode lives through the training pause: its end is ``start + d``
    with each pause's *nominal* length added one at a time (the chapter's ``end += t``), not the
    clock difference, which can be a last bit off. Checked exactly on every finished episode."""
    cfg = PipelineConfig(
        n_slots=8, batch_size=4, train_time_s=0.1, sync_time_s=0.0, max_staleness=1, steps=6, colocated=True
    )
    r = run(Scenario(pipeline=cfg, durations=LogNormalDurations(4.1, 1.0), pool_size=3000, seed=1))
    nominal = {"train": cfg.train_time_s, "sync": cfg.sync_time_s}
    folded = 0
    for e in r.episodes:
        if e.end_s is None:
            continue
        end = e.start_s + e.duration_s
        for u in r.updates:
            if u.paused and e.start_s <= u.start_s < end:
                end += nominal[u.kind]
        assert e.end_s == end, (e.id, e.end_s, end)
        folded += end != e.start_s + e.duration_s
    assert folded > 0
    # episode 16 lives through one training pause whose clock length is not 0.1 as floats go
    e16 = next(e for e in r.episodes if e.id == 16)
    assert e16.end_s is not None
    pause = next(u for u in r.updates if u.kind == "train" and e16.start_s <= u.start_s < e16.end_s)
    assert pause.end_s - pause.start_s != 0.1
    assert e16.end_s == (e16.start_s + e16.duration_s) + 0.1


# --- L3 / L6: an episode exactly at the timeout is not truncated ------------------------------------


@pytest.mark.parametrize("faults", [False, True])
def test_episode_exactly_at_the_timeout_is_not_truncated(faults: bool) -> None:
    """Timeout(cap) cuts episodes *longer* than cap; one of exactly cap seconds finishes whole (both
    branches of the lifecycle: without failures, and with a failure rule that never fires)."""
    values = [60.0, 30.0, 90.0, 20.0]
    cap = 60.0
    kw: dict[str, Any] = {"failures": DropFailed(1e-9), "admission": AReaLThrottle()} if faults else {}
    cfg = PipelineConfig(
        n_slots=4, batch_size=4, train_time_s=10.0, sync_time_s=1.0, max_staleness=0, steps=2
    )
    sc = Scenario(
        pipeline=cfg,
        durations=TraceDurations.from_values(values, cycle=True),
        pool_size=100,
        seed=1,
        timeout=Timeout(cap),
        **kw,
    )
    r = run(sc)
    assert any(values[e.task_id % 4] == cap and e.end_s is not None for e in r.episodes)
    truncated = {e.id for e in r.episodes if e.truncated}
    assert truncated == {e.id for e in r.episodes if values[e.task_id % 4] > cap} == {2, 6}


# --- RP1 / RP2 / RP4: routing ----------------------------------------------------------------------


def _engine(index: int, accepting: bool, n_running: int) -> Any:
    return SimpleNamespace(index=index, accepting=accepting, n_running=n_running)


def test_round_robin_resumes_after_the_replica_it_chose() -> None:
    """Round robin skips a replica that is not accepting and starts the next search after the one
    it chose (not after the one it started from)."""
    es = [_engine(0, True, 0), _engine(1, False, 4), _engine(2, True, 0)]
    rr = RoundRobin()
    assert [getattr(rr.choose(es), "index", None) for _ in range(3)] == [0, 2, 0]


def test_least_loaded_breaks_a_tie_by_the_lowest_index() -> None:
    es = [_engine(0, True, 1), _engine(1, True, 1)]
    assert getattr(LeastLoaded().choose(es), "index", None) == 0


@pytest.mark.parametrize(("n_replicas", "n_slots", "split"), [(2, 5, [3, 2]), (3, 8, [3, 3, 2])])
def test_replicas_give_the_spare_slots_to_the_first_replicas(
    n_replicas: int, n_slots: int, split: list[int]
) -> None:
    got = Replicas(n_replicas).slots_per_replica(n_slots)
    assert sum(got) == n_slots and max(got) - min(got) <= 1
    assert got == sorted(got, reverse=True) == split


# --- V5 / V2: verl fully async's queue bound and freshness check ------------------------------------


def test_verl_rollouter_starts_nothing_while_its_queue_is_full() -> None:
    """``_should_pause_generation``: no new sample while the message queue holds ``max_queue_size``
    (VerlRollouter.closed), so at every start fewer than that many finished samples wait untrained.
    The counter's own cap (int(4 x 5) = 20) is far above, so only the queue bound holds it."""
    qmax = 4
    cfg = PipelineConfig(
        n_slots=16, batch_size=4, train_time_s=30.0, sync_time_s=1.0, max_staleness=0, steps=8
    )
    sc = Scenario(
        pipeline=cfg,
        durations=LogNormalDurations(10.0, 0.5),
        pool_size=3000,
        seed=1,
        admission=VerlRollouter(staleness_threshold=4.0, max_queue_size=qmax),
    )
    r = run(sc)
    taken = {step: start for step, start, _end, _v in r.train_log}  # when each batch left the queue

    def queued_at(t: float) -> int:
        return sum(
            1
            for o in r.episodes
            if o.end_s is not None
            and o.end_s <= t
            and o.status in ("trained", "buffered")
            and (o.trained_step < 0 or taken[o.trained_step] > t)
        )

    worst = max(queued_at(e.start_s) for e in r.episodes)
    assert worst == qmax - 1  # reached, never exceeded


def test_verl_put_accepts_a_lag_equal_to_the_threshold() -> None:
    """A sample is dropped only when the lag is *above* staleness_threshold."""
    assert verl_put_accepted(3, 2, 1.0)
    assert verl_put_accepted(3, 3, 0.0)
    assert not verl_put_accepted(3, 1, 1.0)
