"""OpenRLHF async: every batch is generated under one version (``VLLMLock``), also with fewer
slots than the batch; ``partial_rollout`` re-prefills the samples in flight instead; ``BatchDrain``
under every family.

OpenRLHF ``ppo_trainer_async.py`` (HEAD 3c3be62): the generator holds ``VLLMLock`` for a whole
``generate_samples`` batch and ``broadcast_to_vllm`` waits on it. The preset's ``Drain`` blocked
admission from the sync request on, mid-batch: with 32 slots and a batch of 64 it trained versions
{0, 1}, {1, 2}, ... per step (mean staleness 0.375).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim import TraceDurations
from pipesim.core.errors import PipelineError
from pipesim.core.validate import FieldError
from pipesim.policies.updates import AbortReprefill, BatchDrain, SyncEveryK
from pipesim.results.run import RunResult
from pipesim.testing import check_invariants, check_promises, policy_scenarios
from pipesim.workload.durations import LogNormalDurations
from scenarios import systems
from tests.test_engine_paths import EAGER, SERIAL, TICK, same_traces

FIXED_100 = TraceDurations.from_values([100.0], cycle=True)


def versions_per_step(r: RunResult) -> list[set[int]]:
    tr = r.trained
    return [set(tr.loc[tr["step"] == s, "version"]) for s in sorted(set(tr["step"]))]


def test_the_hand_calculation_32_slots_batch_64() -> None:
    """Batch 0: 0-200 (two rounds of 32), trained 200-260 at v0. Batch 1 starts at 200 under v0;
    the broadcast asked for at 260 waits for it (lock) until 400, syncs 400-410; batch 2 starts at
    410 under v1, and so on: every batch one version, each after the first exactly 1 stale."""
    sc = systems.openrlhf_async(n_slots=32, batch_size=64, steps=4).with_(durations=FIXED_100)
    r = pipesim.run(sc)
    check_invariants(r, sc)
    assert versions_per_step(r) == [{0}, {0}, {1}, {2}]
    assert r.trained.groupby("step")["staleness"].mean().tolist() == [0.0, 1.0, 1.0, 1.0]
    assert r.trained["staleness"].mean() == 0.75
    assert [(a, b) for a, b, _ in r.sync_log][:2] == [(400.0, 410.0), (610.0, 620.0)]


def test_the_hand_calculation_takes_the_same_way_without_the_pass_in_place() -> None:
    """The drain succeeds before the controller's pass of its instant; ``settled`` waits for it.
    Without the pass in place (SERIAL), with a wake-up per completion (EAGER) and with other events
    in the queue (TICK) the trace is the same."""
    sc = systems.openrlhf_async(n_slots=32, batch_size=64, steps=4, seed=1)
    same_traces(sc, EAGER, TICK, SERIAL)
    tied = sc.with_(durations=FIXED_100, pool_size=1024)
    runs = same_traces(tied, EAGER, TICK, SERIAL)
    assert runs[0] is not None and runs[0].started_at_version[:3] == [0, 128, 192]


@settings(max_examples=30, deadline=None)
@given(
    batch=st.integers(2, 12),
    slots=st.sampled_from(["fewer", "equal", "more"]),
    queue=st.integers(1, 3),
    tied=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_every_trained_batch_has_one_version(
    batch: int, slots: str, queue: int, tied: bool, seed: int
) -> None:
    n_slots = {"fewer": max(1, batch // 2 - 1 + seed % 2), "equal": batch, "more": 2 * batch + 1}[slots]
    sc = systems.openrlhf_async(
        async_queue_size=queue, n_slots=n_slots, batch_size=batch, steps=5, train_time_s=20.0, seed=seed
    )
    sc = sc.with_(
        durations=TraceDurations.from_values([10.0, 30.0], cycle=True) if tied else LogNormalDurations()
    )
    r = pipesim.run(sc)
    check_invariants(r, sc)
    assert all(len(v) == 1 for v in versions_per_step(r)), versions_per_step(r)
    assert (r.trained["versions_spanned"] == 1).all()
    # a whole batch: the episodes a trained step took were launched together, as one batch
    tr = r.trained
    assert all(set(tr.loc[tr["step"] == s, "episode_id"] // batch) == {s} for s in range(5))


def test_partial_rollout_reprefills_and_keeps_the_batches() -> None:
    """``--train.partial_rollout_enable``: no lock; the broadcast pauses generation for the sync
    and in-flight samples re-prefill under the new weights (vLLM's ``pause_generation`` with its
    default ``clear_cache=True``: tests/test_pause_kv.py). Admission is unchanged."""
    sc = systems.openrlhf_async(partial_rollout=True, n_slots=32, batch_size=64, steps=6)
    assert isinstance(sc.weight_update, AbortReprefill)
    assert isinstance(systems.openrlhf_async().weight_update, BatchDrain)
    r = pipesim.run(sc)
    check_invariants(r, sc)
    # the sync starts once training ends, never waiting for the batch in flight
    for (_, _, end, _), (start, _, _) in zip(r.train_log, r.sync_log, strict=True):
        assert start == end
    assert r.trained["versions_spanned"].max() > 1
    locked = pipesim.run(systems.openrlhf_async(n_slots=32, batch_size=64, steps=6))
    assert locked.trained["versions_spanned"].max() == 1


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_partial_rollout_must_be_a_bool(bad: Any) -> None:
    with pytest.raises(FieldError) as info:
        systems.openrlhf_async(partial_rollout=bad)
    assert info.value.field == "partial_rollout"


@settings(max_examples=40, deadline=None)
@given(policy_scenarios(weight_updates=st.sampled_from([BatchDrain(), SyncEveryK(2, BatchDrain())])))
def test_batch_drain_keeps_its_promises_under_every_family(sc: pipesim.Scenario) -> None:
    """Any admission rule, batch policy, failures, timeouts, replicas: the run ends (no hang), keeps
    the invariants and the single-version promise, and the shortcuts change nothing."""
    check_promises(sc)


@dataclass(frozen=True)
class StopsMidBatch:
    """Admits 3 more than whole batches: every batch after the first stops 3 short of whole."""

    def admits(self, p: pipesim.PipelineView) -> bool:
        return p.started < (p.version + 1) * p.batch_size + 3


def test_a_batch_that_cannot_go_on_does_not_hold_the_sync() -> None:
    """Nothing runs and the controller's pass starts nothing: the sync goes ahead on empty engines."""
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=8, steps=4, train_time_s=5.0, sync_time_s=1.0),
        admission=StopsMidBatch(),
        weight_update=BatchDrain(),
        durations=TraceDurations.from_values([10.0], cycle=True),
    )
    r = pipesim.run(sc)
    check_invariants(r, sc)
    assert len(r.train_log) == 4 and (r.trained["versions_spanned"] == 1).all()


@dataclass(frozen=True)
class WaitsForever:
    """A sync that waits on ``settled`` forever: it never leaves the instant."""

    def blocks_admission(self, p: pipesim.PipelineView) -> bool:
        return p.syncing

    def sync(self, p: pipesim.PipelineView) -> Generator[Any, Any, None]:
        p.begin_sync(pause=True)
        while True:
            yield p.settled()


def test_a_sync_spinning_on_settled_is_refused_not_a_hang() -> None:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=2), weight_update=WaitsForever()
    )
    with pytest.raises(PipelineError, match=r"WaitsForever\.sync yielded [\d,]+ events in a row"):
        pipesim.run(sc)


def test_the_compute_engine_runs_the_preset_one_version_a_batch() -> None:
    from pipesim.compute import GPUS, MODELS
    from pipesim.compute.cluster import Cluster, run_compute
    from pipesim.compute.cost import EngineConfig
    from pipesim.compute.workload import LogNormalLengths, TokenWorkload

    engine = EngineConfig(
        model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=2048, max_num_seqs=16
    )
    work = TokenWorkload(response=LogNormalLengths(150.0, 0.7), prompt=64, max_response_tokens=400)
    cluster = Cluster(engine=engine, n_gpus=3, trainer_gpus=1)
    for per in (3, 16):  # 6 slots (fewer than the batch of 16), then 32
        out = run_compute(
            systems.openrlhf_async(batch_size=16, steps=4), cluster, work, seed=1, slots_per_replica=per
        )
        check_invariants(out.result)
        assert all(len(v) == 1 for v in versions_per_step(out.result))
        assert versions_per_step(out.result) == [{0}, {0}, {1}, {2}]
