"""GroupAffinity: a prompt group's samples stay on one replica (slots and compute engine alike)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pytest

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.core.validate import FieldError
from pipesim.testing import check_invariants
from tests.test_refusals_core import check_refusal


@dataclass
class FakeReplica:
    index: int
    accepting: bool = True
    n_running: int = 0


@dataclass
class FakePipeline:
    upcoming_task: int = 0


def test_a_group_goes_home_while_home_accepts_and_moves_home_when_it_does_not() -> None:
    rule = pipesim.GroupAffinity(4).fresh()
    view = FakePipeline()
    rule.bind(view)  # type: ignore[arg-type]
    engines = [FakeReplica(0, n_running=5), FakeReplica(1, n_running=2), FakeReplica(2, n_running=3)]
    assert rule.choose(engines).index == 1  # type: ignore[arg-type, union-attr]  # least loaded
    engines[1].n_running = 9  # busier now, but still group 0's home
    view.upcoming_task = 3
    assert rule.choose(engines).index == 1  # type: ignore[arg-type, union-attr]
    view.upcoming_task = 4  # group 1: its own choice (replica 2 is least loaded now)
    assert rule.choose(engines).index == 2  # type: ignore[arg-type, union-attr]
    engines[1].accepting = False
    view.upcoming_task = 2  # group 0's home is full: the fallback picks, and becomes home
    assert rule.choose(engines).index == 2  # type: ignore[arg-type, union-attr]
    engines[1].accepting = True
    assert rule.choose(engines).index == 2  # type: ignore[arg-type, union-attr]
    for e in engines:
        e.accepting = False
    assert rule.choose(engines) is None  # type: ignore[arg-type]


def test_bad_group_affinity_and_routing_name_the_field() -> None:
    check_refusal(lambda: pipesim.GroupAffinity(0), FieldError, "group_size")
    check_refusal(lambda: pipesim.GroupAffinity(4, fallback=object()), FieldError, "fallback")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="bind"):
        pipesim.GroupAffinity(4).choose([FakeReplica(0)])  # type: ignore[list-item]
    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=2048)
    wl = TokenWorkload(response=LogNormalLengths(64.0, 0.5), prompt=64, max_response_tokens=256)
    cluster = Cluster(engine=eng, n_gpus=3, trainer_gpus=1)
    check_refusal(
        lambda: run_compute(pipesim.Scenario(), cluster, wl, routing=object()), FieldError, "routing"
    )  # type: ignore[arg-type]
    assert pipesim.GroupAffinity(8) == pipesim.GroupAffinity(8) != pipesim.GroupAffinity(4)
    assert repr(pipesim.GroupAffinity(8)) == "GroupAffinity(group_size=8)"
    over_rr = pipesim.GroupAffinity(8, pipesim.RoundRobin())
    assert repr(over_rr) == "GroupAffinity(group_size=8, fallback=RoundRobin())"


def _replicas_of_groups(result: pipesim.RunResult, group_size: int) -> dict[int, set[int]]:
    where: dict[int, set[int]] = defaultdict(set)
    for e in result.episodes:
        where[e.task_id // group_size].add(e.replica)
    return where


@pytest.mark.parametrize("weight_update", [pipesim.Drain(), pipesim.PartialRollout()])
def test_with_room_on_every_replica_each_group_runs_on_one_replica(weight_update: object) -> None:
    """128 slots per replica and B = 32: home always has a free slot, so no group is ever split;
    the same scenario with LeastLoaded splits groups (so the check can fail)."""
    cfg = pipesim.PipelineConfig(n_slots=256, batch_size=32, steps=6, max_staleness=1)
    affine = pipesim.Scenario(
        pipeline=cfg, weight_update=weight_update, replicas=pipesim.Replicas(2, pipesim.GroupAffinity(4))
    )
    result = pipesim.run(affine)
    check_invariants(result)
    where = _replicas_of_groups(result, 4)
    assert len(where) > 20 and all(len(r) == 1 for r in where.values())
    assert {r for rs in where.values() for r in rs} == {0, 1}  # both replicas are used
    spread = pipesim.run(affine.with_(replicas=pipesim.Replicas(2, pipesim.LeastLoaded())))
    assert any(len(r) > 1 for r in _replicas_of_groups(spread, 4).values())
    again = pipesim.run(affine)  # each run gets a fresh rule: no home is carried over
    assert [(e.task_id, e.replica, e.end_s) for e in again.episodes] == [
        (e.task_id, e.replica, e.end_s) for e in result.episodes
    ]


def test_full_replicas_split_groups_but_keep_the_invariants() -> None:
    cfg = pipesim.PipelineConfig(n_slots=6, batch_size=8, steps=5, max_staleness=2)
    sc = pipesim.Scenario(pipeline=cfg, replicas=pipesim.Replicas(3, pipesim.GroupAffinity(4)))
    result = pipesim.run(sc)
    check_invariants(result)
    assert sum(e.status == "trained" for e in result.episodes) == 40


def test_group_affinity_lets_a_group_share_its_prompt_across_four_replicas() -> None:
    eng = EngineConfig(
        model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096, share_group_prefix=True
    )
    wl = TokenWorkload(
        response=LogNormalLengths(64.0, 0.5), prompt=1024, samples_per_prompt=8, max_response_tokens=256
    )
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=64, steps=3, max_staleness=1),
        weight_update=pipesim.PartialRollout(),
    )
    cluster = Cluster(engine=eng, n_gpus=5, trainer_gpus=1)
    spread = run_compute(sc, cluster, wl, seed=2, slots_per_replica=32)
    kept = run_compute(sc, cluster, wl, seed=2, slots_per_replica=32, routing=pipesim.GroupAffinity(8))
    for run in (spread, kept):
        assert run.ledger.closes(), run.ledger
        check_invariants(run.result)
    prefill = [sum(e["prefill_tokens"] for e in r.engines) for r in (spread, kept)]
    shared = [sum(e["shared_prefix_tokens"] for e in r.engines) for r in (spread, kept)]
    assert prefill[1] < prefill[0] and shared[1] > shared[0]
    where = _replicas_of_groups(kept.result, 8)
    assert sum(len(r) == 1 for r in where.values()) > 0.8 * len(where)


def test_upcoming_task_is_the_oldest_requeued_task_then_the_next_new_one() -> None:
    from pipesim.core.engine import Pipeline

    p = Pipeline(pipesim.Scenario(), [1.0] * 50)
    assert p.upcoming_task == 0
    p.next_task = 5
    p.requeue([(2, -1), (3, -1)])
    assert p.upcoming_task == 2
    p.requeued.popleft()
    assert p.upcoming_task == 3
    p.requeued.clear()
    assert p.upcoming_task == 5
