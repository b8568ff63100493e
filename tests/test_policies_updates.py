"""Weight updates, timeouts, failures, replicas, sync costs: each promise, on a run that could break it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings

from pipesim import PipelineConfig, Scenario, TraceDurations, run
from pipesim.core.validate import FieldError
from pipesim.io.scenario_files import dumps, loads
from pipesim.policies.admission import AReaLThrottle
from pipesim.policies.base import Drain, PartialRollout
from pipesim.policies.faults import DropFailed, RequeueFailed, RetryFailed, Timeout
from pipesim.policies.replicas import LeastLoaded, PerReplicaSync, Replicas, RoundRobin
from pipesim.policies.synccost import WeightSyncCost, sync_time_table
from pipesim.policies.updates import AbortReprefill, AbortRestart, InFlightUpdate, OverlappedSwap, SyncEveryK
from pipesim.results.run import RunResult
from pipesim.testing import InvariantError, check_invariants, policy_scenarios
from pipesim.workload.durations import LogNormalDurations
from tests.test_refusals_core import check_refusal

CFG = PipelineConfig(n_slots=16, batch_size=8, train_time_s=20.0, sync_time_s=8.0, max_staleness=2, steps=8)


def small(**kw: object) -> Scenario:
    base = Scenario(pipeline=CFG, durations=LogNormalDurations(40.0, 1.0), pool_size=3000, seed=5)
    return base.with_(**kw)


def checked(sc: Scenario) -> RunResult:
    r = run(sc)
    check_invariants(r, sc)
    return r


def generated(r: RunResult, ep: object) -> float:
    """Seconds an episode generated: its wall time minus the pauses it sat through."""
    return ep.end_s - ep.start_s - r._paused_within(ep, r.sim_time_s)  # type: ignore[attr-defined]


def spans(r: RunResult) -> set[int]:
    return set(r.trained["versions_spanned"])


def test_abort_reprefill_charges_tokens_over_prefill_rate() -> None:
    pol = AbortReprefill(decode_rate_tok_s=40.0, prefill_rate_tok_s=2000.0)
    r = checked(small(weight_update=pol))
    s = r.summary()
    assert s["reprefill_tokens"] > 0
    for ep in r.episodes:
        assert math.isclose(ep.reprefill_s, ep.reprefill_tokens / 2000.0, abs_tol=1e-9)
        if ep.end_s is not None:  # work done = duration + re-prefill: nothing else was added or lost
            assert math.isclose(generated(r, ep), ep.duration_s + ep.reprefill_s, rel_tol=1e-9, abs_tol=1e-6)
    assert r.sim_time_s > run(small()).sim_time_s


def test_abort_restart_counts_lost_work_and_never_mixes_versions() -> None:
    r = checked(small(admission=AReaLThrottle(), weight_update=AbortRestart()))
    s = r.summary()
    aborted = [e for e in r.episodes if e.status == "aborted"]
    assert aborted and s["episodes_aborted"] == len(aborted)
    assert math.isclose(s["lost_work_s"], sum(generated(r, e) for e in aborted), rel_tol=1e-9)
    parents = {e.parent: e for e in r.episodes if e.parent >= 0}
    for e in aborted:  # restarted from scratch: same task, a fresh episode
        if e.id in parents:
            assert parents[e.id].task_id == e.task_id and parents[e.id].start_s >= e.end_s
    assert spans(r) == {1}
    drop = checked(small(admission=AReaLThrottle(), weight_update=AbortRestart(restart=False)))
    assert drop.summary()["episodes_restarted"] == 0 and drop.summary()["episodes_aborted"] > 0


def test_in_flight_update_pauses_only_for_the_load() -> None:
    r = checked(small(weight_update=InFlightUpdate(load_time_s=0.5)))
    syncs = [u for u in r.updates if u.kind == "sync"]
    assert syncs and all(math.isclose(u.end_s - u.start_s, 0.5) and u.paused for u in syncs)
    assert max(spans(r)) > 1  # sequences continue under new weights
    assert r.summary()["throughput_per_hour"] > run(small()).summary()["throughput_per_hour"]
    bad = run(small(weight_update=InFlightUpdate(load_time_s=0.5)))
    object.__setattr__(bad, "scenario", bad.scenario.with_(weight_update=InFlightUpdate(0.1)))
    with pytest.raises(InvariantError) as info:  # the kit checks the promise
        check_invariants(bad)
    assert info.value.invariant == "promised pause bound"


def test_overlapped_swap_never_pauses() -> None:
    r = checked(small(weight_update=OverlappedSwap()))
    assert not any(u.paused for u in r.updates) and len(r.updates) == CFG.steps
    assert all(u.start_s == u.end_s for u in r.updates)
    s = r.summary()
    assert math.isclose(s["gen_util"], s["gen_util_active"])


@pytest.mark.parametrize("inner", [PartialRollout(), Drain()])
def test_sync_every_k_moves_weights_every_k_steps(inner: object) -> None:
    r = checked(small(weight_update=SyncEveryK(2, inner)))  # type: ignore[arg-type]
    assert [u.version_after for u in r.updates] == [2, 4, 6, 8]
    assert set(r.episode_table["version"]) <= {0, 2, 4, 6}
    assert [v for *_, v in r.train_log] == list(range(CFG.steps))


def test_colocated_generation_pauses_while_training() -> None:
    r = checked(small(colocated=True))  # the kit asserts no generation inside a paused interval
    trains = [u for u in r.updates if u.kind == "train"]
    assert len(trains) == CFG.steps
    assert r.summary()["throughput_per_hour"] < run(small()).summary()["throughput_per_hour"]


def test_timeout_flags_truncated_episodes_and_matches_clamping() -> None:
    pool = LogNormalDurations(40.0, 1.0).sample(3000, np.random.default_rng(5))
    cap = float(np.quantile(pool, 0.9))
    r = checked(small(timeout=Timeout(cap)))
    for e in r.episodes:
        assert e.truncated == (e.duration_s > cap and e.status not in ("running", "aborted", "failed"))
    clamped = run(small(durations=TraceDurations.from_values(np.minimum(pool, cap))))
    assert r.sim_time_s == clamped.sim_time_s
    s = r.summary()
    assert 0 < s["truncated_share"] == r.trained["truncated"].mean()


def test_failures_are_seeded_and_biased_toward_long_episodes() -> None:
    sc = small(admission=AReaLThrottle(), failures=DropFailed(1 / 300), pool_size=6000).with_(steps=20)
    a, b = checked(sc), run(sc)
    assert a.events.equals(b.events)
    assert not a.events.equals(run(sc.with_(seed=6)).events)
    failed = [e for e in a.episodes if e.status == "failed"]
    done = [e for e in a.episodes if e.end_s is not None and e.status != "failed"]
    assert failed and all(e.trained_step < 0 for e in failed)
    mean = lambda xs: sum(e.duration_s for e in xs) / len(xs)  # noqa: E731
    assert mean(failed) > mean(done)  # constant hazard: long episodes fail more
    s = a.summary()
    assert s["episodes_failed"] == len(failed) and s["lost_work_s"] > 0
    assert s["trained_duration_mean"] < s["launched_duration_mean"]  # dropping failures biases short


def test_retry_restarts_at_once_and_requeue_keeps_the_task() -> None:
    for pol in (RetryFailed(1 / 300), RequeueFailed(1 / 300)):
        r = checked(small(admission=AReaLThrottle(), failures=pol, pool_size=6000))
        children = {e.parent: e for e in r.episodes if e.parent >= 0}
        failed = [e for e in r.episodes if e.status == "failed"]
        assert failed and r.summary()["episodes_restarted"] == len(children)
        for e in failed:
            if e.id in children:
                c = children[e.id]
                assert c.task_id == e.task_id and c.duration_s == e.duration_s
                if isinstance(pol, RetryFailed):
                    assert (c.start_s, c.replica) == (e.end_s, e.replica)


def test_retry_bypasses_a_closed_admission() -> None:
    """During a drain no episode may start, except the retry of a failed one."""
    sc = small(admission=AReaLThrottle(), weight_update=Drain(), pool_size=6000)
    retry = run(sc.with_(failures=RetryFailed(1 / 300)))
    requeue = run(sc.with_(failures=RequeueFailed(1 / 300)))

    def during_drain(r: RunResult) -> int:  # launches between a train end and the next sync start
        gaps = [(b, s0) for (_, _, b, _), (s0, _, _) in zip(r.train_log, r.sync_log)]
        return sum(any(b < e.start_s < s0 for b, s0 in gaps) for e in r.episodes)

    assert during_drain(retry) > 0 and during_drain(requeue) == 0


def test_replicas_route_and_sync_separately() -> None:
    rr = checked(small(replicas=Replicas(4, RoundRobin())))
    assert sorted(set(rr.episode_table["replica"])) == [0, 1, 2, 3]
    first = rr.episodes[:4]
    assert [e.replica for e in first] == [0, 1, 2, 3]
    ll = checked(
        small(replicas=Replicas(4, LeastLoaded()), weight_update=PerReplicaSync((1.0, 2.0, 4.0, 8.0)))
    )
    per = {u.replica: u.end_s - u.start_s for u in ll.updates}
    assert per == {0: 1.0, 1: 2.0, 2: 4.0, 3: 8.0}
    check_refusal(lambda: small(replicas=Replicas(32)), FieldError, "pipeline.n_slots")
    check_refusal(  # at construction, not at the run's first sync
        lambda: small(replicas=Replicas(2), weight_update=PerReplicaSync((1.0,))),
        FieldError,
        "weight_update.sync_times_s",
    )


def test_per_replica_sync_takes_a_list_as_a_tuple_and_refuses_a_bare_number() -> None:
    """A list (as --set and YAML give it) hashes and round-trips as the file's tuple; a bare 1.0
    was a TypeError naming nothing."""
    sc = small(replicas=Replicas(2), weight_update=PerReplicaSync([1.0, 2.0]))  # type: ignore[arg-type]
    assert hash(sc) == hash(small(replicas=Replicas(2), weight_update=PerReplicaSync((1.0, 2.0))))
    assert sc == loads(dumps(sc))
    check_refusal(lambda: PerReplicaSync(1.0), FieldError, "sync_times_s")  # type: ignore[arg-type]


def test_weight_sync_cost_reproduces_section_13_1() -> None:
    c = WeightSyncCost(params_billion=32.8, bandwidth_gb_s=100.0)
    assert math.isclose(c.gigabytes, 65.6) and math.isclose(c.sync_time_s, 0.656)
    rows = {name: (gb, times) for name, gb, times in sync_time_table()}
    assert [round(t, 2) for t in rows["Qwen3-32B"][1]] == [0.66, 6.56, 65.6]
    assert [round(t, 2) for t in rows["Qwen3-8B"][1]] == [0.16, 1.64, 16.4]


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: AbortReprefill(decode_rate_tok_s=0), "decode_rate_tok_s"),
        (lambda: AbortReprefill(prefill_rate_tok_s=-1), "prefill_rate_tok_s"),
        (lambda: AbortRestart(restart=1), "restart"),  # type: ignore[arg-type]
        (lambda: InFlightUpdate(load_time_s=-1), "load_time_s"),
        (lambda: SyncEveryK(0), "k"),
        (lambda: SyncEveryK(2, inner=3), "inner"),  # type: ignore[arg-type]
        (lambda: Timeout(0), "cap_s"),
        (lambda: DropFailed(0), "hazard_per_s"),
        (lambda: RetryFailed(float("inf")), "hazard_per_s"),
        (lambda: Replicas(0), "n_replicas"),
        (lambda: PerReplicaSync((1.0, -2.0)), "sync_times_s[1]"),
        (lambda: WeightSyncCost(32.8, 0), "bandwidth_gb_s"),
        (lambda: PipelineConfig(colocated=1), "colocated"),  # type: ignore[arg-type]
        (lambda: Scenario(timeout=5.0), "timeout"),  # type: ignore[arg-type]
    ],
)
def test_bad_parameters_name_the_field(make: object, field: str) -> None:
    check_refusal(make, FieldError, field)  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None)
@given(policy_scenarios())
def test_every_policy_family_keeps_the_invariants(sc: Scenario) -> None:
    """Random combinations of every family: weight updates, failures, timeouts, replicas included."""
    a = run(sc)
    check_invariants(a, sc)
    assert a.events.equals(run(sc).events)  # the same seed gives the same trace
