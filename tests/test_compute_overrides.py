"""run_compute refuses the scenario fields it would ignore, and three policy fixes from a probe.

Before: ``sync_time_s=100``, ``train_time_s=500``, ``n_slots=3``, ``durations=...``,
``Scenario(seed=5)`` and ``colocated=True`` on a split cluster all gave the default run's summary,
byte for byte; a ``Scenario.replicas`` routing was replaced by LeastLoaded. A GroupAffinity
fallback was never bound (a RuntimeError from inside the run), ``Scenario(seed=2**64)`` failed in
torch, and SlimeAsyncWorker stalled mid-run at a batch it can never form.
"""

from __future__ import annotations

from typing import Any

import pytest

import pipesim
from pipesim import PipelineConfig, Scenario
from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.core.errors import PipelineError
from pipesim.core.validate import FieldError
from pipesim.policies.replicas import GroupAffinity, Replicas
from pipesim.policies.systems import SlimeAsyncWorker
from pipesim.workload.durations import ExponentialDurations
from tests.test_refusals_core import check_refusal

ENGINE = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=2048)
SPLIT = Cluster(engine=ENGINE, n_gpus=2, trainer_gpus=1)
WORK = TokenWorkload(response=LogNormalLengths(64.0, 0.5), prompt=32, max_response_tokens=256)


def _scenario(**pipeline: Any) -> Scenario:
    return Scenario(pipeline=PipelineConfig(batch_size=8, steps=2, max_staleness=1, **pipeline))


@pytest.mark.parametrize(
    ("scenario", "field"),
    [
        (_scenario(sync_time_s=100.0), "pipeline.sync_time_s"),
        (_scenario(train_time_s=500.0), "pipeline.train_time_s"),
        (_scenario(n_slots=3), "pipeline.n_slots"),
        (_scenario(colocated=True), "pipeline.colocated"),
        (_scenario().with_(durations=ExponentialDurations(10.0)), "durations"),
        (_scenario().with_(replicas=Replicas(2, GroupAffinity(4))), "replicas"),
    ],
    ids=["sync_time_s", "train_time_s", "n_slots", "colocated", "durations", "replicas"],
)
def test_a_field_the_cluster_sets_is_refused(scenario: Scenario, field: str) -> None:
    check_refusal(lambda: run_compute(scenario, SPLIT, WORK), FieldError, field)


def test_the_scenario_seed_seeds_the_token_lengths() -> None:
    by_scenario = run_compute(_scenario().with_(seed=5), SPLIT, WORK).summary()
    by_keyword = run_compute(_scenario(), SPLIT, WORK, seed=5).summary()
    default = run_compute(_scenario(), SPLIT, WORK).summary()
    assert by_scenario == by_keyword
    assert by_scenario["tokens_generated"] != default["tokens_generated"]  # seed 5 is not seed 0
    check_refusal(lambda: run_compute(_scenario().with_(seed=5), SPLIT, WORK, seed=3), FieldError, "seed")


def test_a_seed_above_torchs_range_is_named() -> None:
    check_refusal(lambda: Scenario(seed=2**64), FieldError, "seed")
    Scenario(seed=2**64 - 1, durations=pipesim.LogNormalDurations(50.0, 0.8))  # numpy: any seed
    Scenario(seed=2**32 - 1)  # the chapter's torch draws keep 32 bits (tests/test_seed_aliasing.py)


def test_a_group_affinity_fallback_is_bound() -> None:
    sc = pipesim.Scenario(
        pipeline=PipelineConfig(steps=3, max_staleness=2),
        replicas=Replicas(2, GroupAffinity(4, fallback=GroupAffinity(2))),
    )
    assert pipesim.run(sc).summary()["episodes_trained"] == 3 * 64  # was a RuntimeError


@pytest.mark.parametrize("cap", [2, 32])
def test_slime_worker_refuses_a_batch_it_can_never_form(cap: int) -> None:
    sc = pipesim.Scenario(pipeline=PipelineConfig(steps=3), admission=SlimeAsyncWorker(max_concurrent=cap))
    with pytest.raises(PipelineError, match=r"batch_size 64 can never form with max_concurrent"):
        pipesim.run(sc)


def test_slime_worker_runs_just_below_the_bound() -> None:
    sc = pipesim.Scenario(pipeline=PipelineConfig(steps=3), admission=SlimeAsyncWorker(max_concurrent=33))
    assert pipesim.run(sc).summary()["episodes_trained"] == 3 * 64
