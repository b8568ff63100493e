"""Follow-ups of the fuzzing walkthrough's fixes (cd22d02): each bad input is refused by an error
naming its own key or field, before any run. Each row failed before (refused naming another key,
refused only mid-run or from inside numpy, a bare ZeroDivisionError, or a --set order that
mattered); the last tests check that valid input still builds and runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pipesim
from pipesim.compute.catalog import MODELS
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig, ReplicaCost
from pipesim.compute.gpus import GPUS
from pipesim.compute.trainer import MIN_EFFICIENCY
from pipesim.compute.workload import TokenWorkload
from pipesim.core.validate import FieldError
from pipesim.io.overrides import apply_overrides
from pipesim.plan import runspec, specfile
from pipesim.plan.checks import PlanError
from pipesim.plan.runspec_checks import check_design
from pipesim.policies.groups import WholeGroups
from pipesim.policies.replicas import LeastLoaded
from pipesim.policies.verl import VerlMessageQueue

RUN_SPEC, PLAN_SPEC = "examples/run_qwen3_8b.toml", "examples/plan_qwen3_8b.toml"
H100, QWEN = GPUS["h100-sxm"], MODELS["qwen3-0.6b"]
TINY = 5e-324  # the smallest float: halved (one direction of NVLink), it is 0


# 1. an mfu below the trainer's floor is model.mfu's error, in a run spec and a plan spec


@pytest.mark.parametrize("mfu", ["1e-320", "1e-6", "0.00009"])
def test_a_run_spec_s_tiny_mfu_is_named_model_mfu(mfu: str) -> None:
    with pytest.raises(PlanError) as e:
        runspec.load(RUN_SPEC, ["run.steps=2", f"model.mfu={mfu}"])
    assert e.value.field == "model.mfu", str(e.value)
    assert "design.placement" not in str(e.value)


@pytest.mark.parametrize("sets", [["model.mfu=1e-6"], ["model.mfu=1e-6", 'model.framework="fsdp2-dense"']])
def test_a_plan_spec_s_tiny_mfu_is_a_bad_value_of_model_mfu(sets: list[str]) -> None:
    with pytest.raises(PlanError) as e:  # it loaded, and the plan said the model cannot be trained
        specfile.load(PLAN_SPEC, sets)
    assert e.value.field == "model.mfu", str(e.value)


def test_a_plan_spec_built_in_code_refuses_a_tiny_mfu() -> None:
    spec = specfile.load(PLAN_SPEC)
    with pytest.raises(PlanError) as e:
        dataclasses.replace(spec, mfu=MIN_EFFICIENCY / 10)
    assert e.value.field == "model.mfu"
    assert dataclasses.replace(spec, mfu=MIN_EFFICIENCY).mfu == MIN_EFFICIENCY  # the floor itself holds


def test_check_design_names_the_trainer_s_field_by_its_run_spec_key() -> None:
    run = runspec.load(RUN_SPEC, ["run.steps=2"])
    spec = run.plan
    object.__setattr__(spec, "mfu", 1e-320)  # past the spec's own check: the design check's mapping
    with pytest.raises(PlanError) as e:
        check_design(spec, run.design)
    assert e.value.field == "model.mfu", str(e.value)
    assert str(e.value).startswith("model.mfu")


# 2. VerlMessageQueue of groups: a batch that is not whole groups, or a queue below the batch, is
# refused when the scenario is built (it was refused at the run's first batch, naming batch_size)


def _scenario(batching: Any, batch_size: int = 16) -> pipesim.Scenario:
    return pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=batch_size), batching=batching)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: _scenario(VerlMessageQueue(samples_per_group=3)), "batching.samples_per_group"),
        (
            lambda: _scenario(VerlMessageQueue(samples_per_group=4)).with_(batch_size=18),
            "batching.samples_per_group",
        ),
        (lambda: _scenario(VerlMessageQueue(max_queue_size=8)), "batching.max_queue_size"),
    ],
)
def test_a_verl_queue_that_no_batch_fits_is_refused_at_construction(
    build: Callable[[], Any], field: str
) -> None:
    with pytest.raises(FieldError) as e:
        build()
    assert e.value.field == field


def test_a_verl_queue_of_whole_groups_still_runs() -> None:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=12, n_slots=24, steps=2),
        batching=VerlMessageQueue(samples_per_group=3),
    )
    result = pipesim.run(sc)
    assert len(result.train_log) == 2


# 3. run_compute's routing: a numpy value is no routing rule, even where one replica never routes

ENGINE = EngineConfig(model=QWEN, gpu=H100, max_model_len=4096)
WORK = TokenWorkload(prompt=256, max_response_tokens=1024)
SMALL = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=8, steps=1))


@pytest.mark.parametrize("n_gpus", [2, 3])  # one replica (it was ignored), two (Replicas refused it)
@pytest.mark.parametrize("routing", [np.int64(3), np.float64(1.0), np.array([0, 1]), LeastLoaded])
def test_run_compute_refuses_a_routing_that_is_not_a_rule(n_gpus: int, routing: Any) -> None:
    with pytest.raises(FieldError) as e:
        run_compute(
            SMALL, Cluster(engine=ENGINE, n_gpus=n_gpus, trainer_gpus=1), WORK, seed=0, routing=routing
        )
    assert e.value.field == "routing"


def test_run_compute_still_takes_a_routing_rule() -> None:
    run = run_compute(
        SMALL, Cluster(engine=ENGINE, n_gpus=2, trainer_gpus=1), WORK, seed=0, routing=LeastLoaded()
    )
    assert run.ledger.trained > 0


# 4. an engine's collectives over a link too slow to time: named, not a ZeroDivisionError


@pytest.mark.parametrize(
    ("model", "tp", "ep", "rate", "field"),
    [
        ("qwen3-8b", 2, 1, "nvlink_bandwidth_bytes_per_s", "gpu.nvlink_bandwidth_bytes_per_s"),
        ("qwen3-8b", 16, 1, "network_bandwidth_bytes_per_s", "gpu.network_bandwidth_bytes_per_s"),
    ],
)
def test_a_replica_s_all_reduce_checks_its_link(model: str, tp: int, ep: int, rate: str, field: str) -> None:
    gpu = dataclasses.replace(H100, **{rate: TINY})
    with pytest.raises(FieldError) as e:
        ReplicaCost(EngineConfig(model=MODELS[model], gpu=gpu, max_model_len=4096, tp=tp, ep=ep))
    assert e.value.field == field


def test_a_moe_replica_s_collectives_check_their_link() -> None:
    gpu = dataclasses.replace(H100, nvlink_bandwidth_bytes_per_s=TINY)
    config = EngineConfig(model=MODELS["qwen3-30b-a3b"], gpu=gpu, max_model_len=4096, tp=4, ep=4)
    with pytest.raises(FieldError) as e:
        ReplicaCost(config)
    assert e.value.field == "gpu.nvlink_bandwidth_bytes_per_s"


def test_a_single_gpu_replica_reads_no_link() -> None:
    """A replica of one GPU crosses no link: a GPU without a usable NVLink figure still times it
    (it raised ZeroDivisionError, 0.0 / 0.0, for a collective it never runs)."""
    gpu = dataclasses.replace(H100, nvlink_bandwidth_bytes_per_s=TINY, network_bandwidth_bytes_per_s=TINY)
    slow, fast = ReplicaCost(EngineConfig(model=QWEN, gpu=gpu, max_model_len=4096)), ReplicaCost(ENGINE)
    assert slow.linear_s(64) == fast.linear_s(64) > 0


# 5. --set pairs that settle each other's refusal: the order does not matter


PLAIN = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=16))


@pytest.mark.parametrize(
    ("base", "pairs"),
    [
        (_scenario(WholeGroups(4)), ["batch_size=18", "batching=WholeGroups(3)"]),
        (PLAIN, ["batching=WholeGroups(3)", "batch_size=18"]),
        (PLAIN, ["batching=VerlMessageQueue(samples_per_group=3)", "batch_size=18"]),
        (PLAIN, ["batching=VerlMessageQueue(max_queue_size=8)", "batch_size=8"]),
        (PLAIN, ["replicas=Replicas(100)", "n_slots=200"]),
        (PLAIN, ["admission=RollGroupAdmission(1)", "max_staleness=0"]),  # as before
    ],
)
def test_set_pairs_that_settle_each_other_apply_in_either_order(
    base: pipesim.Scenario, pairs: list[str]
) -> None:
    forward, _ = apply_overrides(base, pairs)
    backward, _ = apply_overrides(base, pairs[::-1])
    assert forward == backward
    assert forward == base.with_(
        **{k: getattr(forward, k) for k in ("pipeline", "batching", "replicas", "admission")}
    )
    for pair in pairs:  # each value is the one set
        key, text = pair.split("=", 1)
        value = getattr(forward.pipeline, key, None) if "(" not in text else getattr(forward, key)
        assert str(value) == text or type(value).__name__ == text.split("(")[0]


@pytest.mark.parametrize(
    ("pairs", "field", "named"),
    [
        (["batching=WholeGroups(3)"], "batching.samples_per_group", "batching="),  # nothing settles it
        (["batching=WholeGroups(3)", "steps=3"], "batching.samples_per_group", "batching="),
        (["batching=WholeGroups(3)", "batch_size=0"], "pipeline.batch_size", "batch_size="),  # bad alone
        (["batch_size=0", "batch_size=16"], "pipeline.batch_size", "batch_size="),  # not waited on
        (["replicas=Replicas(100)", "seed=3"], "pipeline.n_slots", "replicas="),
    ],
)
def test_an_unsettled_or_bad_set_is_still_refused_naming_its_field(
    pairs: list[str], field: str, named: str
) -> None:
    with pytest.raises(FieldError) as e:
        apply_overrides(PLAIN, pairs)
    assert e.value.field == field, str(e.value)
    assert str(e.value).startswith(named)


# 6. roofline's split: the names other modules import from it are its own still


def test_roofline_re_exports_the_efficiency_names() -> None:
    from pipesim.compute import efficiency, roofline

    for name in efficiency.__all__:
        assert getattr(roofline, name) is getattr(efficiency, name)
