"""Group batching, dynamic filtering and the colocated switching cost (issue 17).

``WholeGroups`` (pipesim/policies/groups.py) on hand-made buffers (a stub view), on the chapter's
engine and on the compute engine; the token ledger's closure with groups and filtering on
(hypothesis); and the offload/reload cost of a colocated step (pipesim/compute/cluster.py).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster, ComputeRun, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.offload import PCIE_X16_BYTES_PER_S, Offload
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.core.episode import Episode
from pipesim.core.validate import FieldError
from pipesim.policies import catalog
from pipesim.policies.groups import WholeGroups, filter_stream
from pipesim.testing import check_invariants
from tests.test_refusals_core import check_refusal

SMALL = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096, max_num_seqs=16)
WL = TokenWorkload(
    response=LogNormalLengths(300.0, 0.7),
    prompt=LogNormalLengths(100.0, 0.5),
    samples_per_prompt=4,
    max_response_tokens=800,
    max_prompt_tokens=200,
    difficulty_sigma=0.5,
)


# -- the policy on hand-made buffers ------------------------------------------------------------
@dataclass(eq=False)
class View:
    """The few parts of the port a batch policy reads, and ``requeue`` (hashed by identity: the
    policy keeps its per-run state by the run's view)."""

    batch_size: int = 8
    version: int = 0
    max_staleness: int = 0
    n_running: int = 1  # something is in flight unless a test says otherwise
    syncing: bool = False
    replicas: tuple[Any, ...] = ()
    requeued: list[tuple[int, int]] = field(default_factory=list)
    scenario: Any = field(default_factory=lambda: SimpleNamespace(seed=0))  # the filter reads its seed

    def requeue(self, tasks: Any, first: bool = False) -> None:
        self.requeued.extend(tasks)


class Run:
    """A buffer fed one finished episode at a time."""

    def __init__(self, policy: WholeGroups, **view: Any) -> None:
        self.policy, self.p, self.buffer = policy, View(**view), []  # type: ignore[var-annotated]
        self.next_id = 0
        self.batches: list[list[Episode]] = []
        self.discarded: list[Episode] = []

    def finish(self, task: int, version: int = 0) -> Episode:
        ep = Episode(self.next_id, task, 1.0, version)
        ep.end_s = float(self.next_id)
        self.next_id += 1
        self.buffer.append(ep)
        return ep

    def ask(self) -> list[Episode] | None:
        batch, gone = self.policy.select(self.buffer, self.p)  # type: ignore[arg-type]
        self.discarded += gone
        if batch is not None:
            self.batches.append(batch)
        return batch


def test_a_batch_is_whole_groups_in_completion_order() -> None:
    r = Run(WholeGroups(4), batch_size=8)
    for t in (0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11):  # group 1 completes first, then group 2
        r.finish(t)
    assert r.ask() is not None
    assert [e.task_id for e in r.batches[0]] == [4, 5, 6, 7, 8, 9, 10, 11]
    assert [e.task_id for e in r.buffer] == [0, 1, 2]  # group 0 waits for task 3
    assert r.ask() is None
    r.finish(3)
    assert r.ask() is None  # one complete group of the two a batch needs
    assert len(r.buffer) == 4


def test_a_relaunched_sample_fills_its_own_place() -> None:
    r = Run(WholeGroups(2), batch_size=2)
    r.finish(0)
    r.next_id += 1  # episode 1 (task 1) was aborted: it never reaches the buffer
    r.finish(1)  # its relaunch, same task id
    batch = r.ask()
    assert batch is not None and [e.id for e in batch] == [0, 2]


def test_two_finished_episodes_of_one_task_is_an_error() -> None:
    r = Run(WholeGroups(2), batch_size=2)
    r.finish(0)
    r.finish(0)
    with pytest.raises(pipesim.PipelineError, match="task 0 has two finished episodes"):
        r.ask()


def test_a_stale_sample_without_requeue_drops_its_whole_group_and_its_late_samples() -> None:
    r = Run(WholeGroups(3, drop_stale=True), batch_size=3, max_staleness=1)
    a, b = r.finish(0, version=0), r.finish(1, version=1)
    r.p.version = 2  # a (version 0) is now stale: task 0 will never run again
    assert r.ask() is None
    assert r.discarded == [a, b] and r.buffer == []
    late = r.finish(2, version=1)  # the group's last sample, still in flight then, arrives
    assert r.ask() is None and r.discarded[-1] is late and r.buffer == []
    for t in (3, 4, 5):
        r.finish(t, version=2)
    assert r.ask() is not None  # the next group trains: nothing waits for the dead one
    assert r.policy.stats(r.p).groups_expired == 1  # type: ignore[arg-type]


def test_a_stale_sample_with_requeue_is_rerun_and_its_group_completes() -> None:
    r = Run(WholeGroups(2, drop_stale=True, requeue=True), batch_size=2, max_staleness=0)
    old = r.finish(0, version=0)
    r.p.version = 1
    fresh = r.finish(1, version=1)
    assert r.ask() is None
    assert r.discarded == [old] and r.p.requeued == [(0, old.id)] and r.buffer == [fresh]
    again = r.finish(0, version=1)  # the requeued task, relaunched under the new weights
    batch = r.ask()
    assert batch is not None and set(batch) == {fresh, again}


def test_incomplete_groups_are_abandoned_when_nothing_in_flight_can_complete_them() -> None:
    r = Run(WholeGroups(2), batch_size=4)
    a, b, c = r.finish(0), r.finish(1), r.finish(2)  # group 1 misses task 3, lost for good
    assert r.ask() is None and r.discarded == []  # task 3 may still be in flight
    r.p.n_running = 0
    r.p.syncing = True
    assert r.ask() is None and r.discarded == []  # a sync may yet let admission start it
    r.p.syncing = False
    r.p.replicas = (type("Paused", (), {"accepting": False})(),)
    assert r.ask() is None and r.discarded == []  # a paused replica may yet start it
    r.p.replicas = ()
    assert r.ask() is None and r.discarded == [c] and r.buffer == [a, b]  # only the incomplete group
    assert r.policy.stats(r.p).groups_abandoned == 1  # type: ignore[arg-type]
    r.p.n_running = 1
    late = r.finish(3)  # should it come after all, it is discarded
    assert r.ask() is None and r.discarded[-1] is late


def test_rejected_groups_are_the_seeded_draws_and_never_trained() -> None:
    policy = WholeGroups(2, filter_rate=0.4, seed=7)
    rejected = policy.rejected(5000, run_seed=3)
    draws = filter_stream(3, 7).random(5000) < 0.4
    assert np.array_equal(rejected, draws)
    assert 0.35 < rejected.mean() < 0.45
    r = Run(policy, batch_size=2, scenario=SimpleNamespace(seed=3))
    for g in range(5000):
        r.finish(2 * g)
        r.finish(2 * g + 1)
        r.ask()
    trained = {e.task_id // 2 for b in r.batches for e in b}
    filtered = {e.task_id // 2 for e in r.discarded}
    assert filtered == set(np.flatnonzero(rejected)) and trained == set(np.flatnonzero(~rejected))
    assert r.policy.stats(r.p).filtered_ids == {e.id for e in r.discarded}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        (dict(samples_per_group=0), "samples_per_group"),
        (dict(samples_per_group=2, filter_rate=1.0), "filter_rate"),
        (dict(samples_per_group=2, filter_rate=-0.1), "filter_rate"),
        (dict(samples_per_group=2, seed=-1), "seed"),
        (dict(samples_per_group=2, drop_stale=1), "drop_stale"),
        (dict(samples_per_group=2, requeue=True), "requeue"),
    ],
)
def test_bad_fields_name_themselves(kw: dict[str, Any], name: str) -> None:
    check_refusal(lambda: WholeGroups(**kw), FieldError, name)


def test_batch_size_must_be_whole_groups() -> None:
    pipe = pipesim.PipelineConfig(batch_size=30, steps=1)
    grouped = lambda: pipesim.Scenario(pipeline=pipe, batching=WholeGroups(4))  # noqa: E731
    check_refusal(grouped, FieldError, "batching.samples_per_group")
    plain = pipesim.Scenario(pipeline=pipe)
    check_refusal(
        lambda: run_compute(plain, Cluster(engine=SMALL, n_gpus=2), WL, groups=True),
        FieldError,
        "samples_per_group",
    )
    bad = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=32, steps=1))
    check_refusal(
        lambda: run_compute(bad, Cluster(engine=SMALL, n_gpus=2), WL, groups=WholeGroups(8)),
        FieldError,
        "samples_per_group",
    )


def test_the_catalog_finds_it_once_its_module_is_registered() -> None:
    saved = list(catalog._registered)
    try:
        assert "WholeGroups" in catalog.register_module("pipesim.policies.groups")
        policy = WholeGroups(8, filter_rate=0.25, drop_stale=True)
        assert catalog.kinds_of(WholeGroups) == ("batching",)
        assert catalog.parse_policy(catalog.to_text(policy)) == policy
    finally:
        catalog._registered[:] = saved
        catalog._cache = None


# -- on the chapter's engine -------------------------------------------------------------------
@pytest.mark.parametrize(
    "policy",
    [
        WholeGroups(4),
        WholeGroups(4, filter_rate=0.3),
        WholeGroups(4, drop_stale=True),
        WholeGroups(4, filter_rate=0.2, drop_stale=True, requeue=True),
    ],
    ids=["plain", "filter", "stale", "filter-requeue"],
)
def test_every_trained_batch_is_whole_groups_on_the_slots_engine(policy: WholeGroups) -> None:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=32, n_slots=32, steps=8, max_staleness=1),
        admission=pipesim.AReaLThrottle(),
        batching=policy,
        pool_size=3000,
    )
    r = pipesim.run(sc)
    check_invariants(r)
    trained = [e for e in r.episodes if e.status == pipesim.TRAINED]
    assert len(trained) == 8 * 32
    per = Counter((e.trained_step, e.task_id // 4) for e in trained)
    assert set(per.values()) == {4}
    rejected = set(np.flatnonzero(policy.rejected(1000)))
    assert not {g for _, g in per} & rejected


def test_filtering_with_a_throttle_that_counts_every_start_stops_with_an_error() -> None:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=32, steps=5),
        batching=WholeGroups(4, filter_rate=0.3),
        pool_size=3000,
    )
    with pytest.raises(pipesim.PipelineError, match="CountThrottle"):
        pipesim.run(sc)


@pytest.mark.parametrize(
    ("n", "drop_stale", "rate", "update", "seed"),
    [
        (4, True, 0.0, pipesim.PartialRollout(), 0),
        (8, True, 0.6, pipesim.PartialRollout(), 69),  # stalled at version 0 before abandoning
        (2, False, 0.6, pipesim.PartialRollout(), 11),
        (8, False, 0.3, pipesim.Drain(), 61),
    ],
)
def test_a_group_that_loses_a_sample_to_a_failure_never_blocks_the_run(
    n: int, drop_stale: bool, rate: float, update: Any, seed: int
) -> None:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=4 * n, n_slots=32, steps=6, max_staleness=1),
        admission=pipesim.AReaLThrottle(),
        weight_update=update,
        batching=WholeGroups(n, filter_rate=rate, seed=seed, drop_stale=drop_stale),
        failures=pipesim.DropFailed(hazard_per_s=5e-4),  # type: ignore[arg-type]
        pool_size=20_000,
        seed=seed,
    )
    r = pipesim.run(sc)
    statuses = Counter(e.status for e in r.episodes)
    assert statuses[pipesim.FAILED] > 0 and statuses[pipesim.TRAINED] == 6 * 4 * n
    check_invariants(r)


# -- on the compute engine ---------------------------------------------------------------------
def _run(
    design: str, seed: int, trainer_gpus: int, filter_rate: float, **kw: Any
) -> tuple[ComputeRun, WholeGroups]:
    eta = 0 if design == "sync" else 1
    updates: dict[str, Any] = {
        "sync": pipesim.Drain(),
        "async": pipesim.PartialRollout(),
        "restart": pipesim.AbortRestart(),
        "stale": pipesim.PartialRollout(),
    }
    update = updates[design]
    policy = WholeGroups(4, filter_rate=filter_rate, seed=seed, drop_stale=design == "stale")
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=32, steps=4, max_staleness=eta),
        admission=pipesim.AReaLThrottle(),
        weight_update=update,
    )
    cluster = Cluster(engine=SMALL, n_gpus=4, trainer_gpus=trainer_gpus)
    return run_compute(sc, cluster, WL, seed=seed, slots_per_replica=24, groups=policy, **kw), policy


@settings(max_examples=16, deadline=None)
@given(
    st.sampled_from(["sync", "async", "restart", "stale"]),
    st.integers(0, 2**16),
    st.sampled_from([0, 2]),
    st.sampled_from([0.0, 0.25, 0.6]),
)
def test_ledger_closes_with_groups_and_filtering(
    design: str, seed: int, trainer_gpus: int, rate: float
) -> None:
    run, policy = _run(design, seed, trainer_gpus, rate)
    led, eps = run.ledger, run.result.episodes
    assert led.closes(), led
    s = run.summary()
    assert s["tokens_generated"] == pytest.approx(
        s["tokens_trained"] + s["tokens_discarded"] + s["tokens_buffered"] + s["tokens_in_flight"]
    )
    assert s["tokens_discarded"] == pytest.approx(
        s["tokens_discarded_stale"]
        + s["tokens_discarded_filtered"]
        + s["tokens_discarded_aborted"]
        + s["tokens_discarded_failed"]
    )
    assert s["groups_trained"] == 4 * 32 / 4
    trained = Counter((e.trained_step, e.task_id // 4) for e in eps if e.status == pipesim.TRAINED)
    assert set(trained.values()) == {4}
    rejected = set(np.flatnonzero(policy.rejected(10_000, run.result.scenario.seed)))
    filtered_groups = {e.task_id // 4 for e in eps if e.id in run.groups.filtered_ids}  # type: ignore[union-attr]
    assert filtered_groups <= rejected and not {g for _, g in trained} & rejected
    assert s["groups_filtered"] == len(filtered_groups)
    if rate == 0.0:
        assert led.discarded_filtered == 0.0


def test_filtering_costs_generation_not_a_trainer_place() -> None:
    plain, _ = _run("sync", 3, 2, 0.0)
    filt, _ = _run("sync", 3, 2, 0.4)
    assert filt.ledger.discarded_filtered > 0
    assert filt.summary()["groups_filtered"] > 0
    assert filt.result.summary()["episodes_trained"] == plain.result.summary()["episodes_trained"]
    assert filt.ledger.generated > plain.ledger.generated
    assert filt.summary()["step_time_s_mean"] > plain.summary()["step_time_s_mean"]


# -- colocated switching cost ------------------------------------------------------------------
def test_the_switch_cost_is_weights_and_trainer_state_over_the_host_link() -> None:
    eng = EngineConfig(model=MODELS["qwen3-8b"], gpu=GPUS["h100-sxm"], tp=1, max_model_len=16384)
    cl = Cluster(engine=eng, n_gpus=8)
    bw = PCIE_X16_BYTES_PER_S[5] * 0.8
    n = MODELS["qwen3-8b"].n_params
    expected = 2 * (eng.weight_bytes_per_gpu + 12.0 * n / 8) / bw
    assert cl.switch_time_s() == pytest.approx(expected)
    assert 1.0 < expected < 1.3  # 16.4 GB of weights and 12.3 GB of trainer state per GPU, at 50 GB/s
    level2 = Cluster(engine=eng, n_gpus=8, offload=Offload(sleep_level=2, trainer_offload=False, fixed_s=0.5))
    assert level2.switch_time_s() == 0.5
    assert Cluster(engine=eng, n_gpus=8, trainer_gpus=4).switch_time_s() == 0.0  # disaggregated
    a100 = EngineConfig(model=MODELS["qwen3-8b"], gpu=GPUS["a100-80gb"], max_model_len=16384)
    assert Cluster(engine=a100, n_gpus=8).switch_time_s() == pytest.approx(
        2 * (a100.weight_bytes_per_gpu + 12.0 * n / 8) / (PCIE_X16_BYTES_PER_S[4] * 0.8)
    )


def test_an_offload_that_never_ends_names_its_fields() -> None:
    cl = Cluster(engine=SMALL, n_gpus=2, offload=Offload(host_bandwidth_bytes_per_s=1e-300))
    check_refusal(cl.switch_time_s, FieldError, "host_bandwidth_bytes_per_s")


def test_a_colocated_sync_step_grows_by_exactly_the_switch_cost() -> None:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=32, steps=3), weight_update=pipesim.Drain()
    )
    cl = Cluster(engine=SMALL, n_gpus=2, offload=Offload(fixed_s=0.25))
    free = run_compute(sc, cl, WL, seed=5, slots_per_replica=24, switch_time_s=0.0)
    paid = run_compute(sc, cl, WL, seed=5, slots_per_replica=24)
    switch = cl.switch_time_s()
    assert paid.switch_time_s == switch > 0.25
    assert paid.result.sim_time_s - free.result.sim_time_s == pytest.approx(3 * switch, rel=1e-9)
    assert paid.summary()["step_time_s_mean"] - free.summary()["step_time_s_mean"] == pytest.approx(switch)
    assert paid.ledger.generated == pytest.approx(free.ledger.generated)
    over = run_compute(sc, cl, WL, seed=5, slots_per_replica=24, switch_time_s=2.0)
    assert over.result.sim_time_s - free.result.sim_time_s == pytest.approx(6.0)
    split = run_compute(sc, Cluster(engine=SMALL, n_gpus=2, trainer_gpus=1), WL, seed=5)
    assert split.switch_time_s == 0.0  # disaggregated GPUs never switch
    assert math.isfinite(split.summary()["step_time_s_mean"])
    with pytest.raises(FieldError) as e:  # a switch time given for them is refused, not zeroed
        run_compute(sc, Cluster(engine=SMALL, n_gpus=2, trainer_gpus=1), WL, seed=5, switch_time_s=2.0)
    assert e.value.field == "switch_time_s"
