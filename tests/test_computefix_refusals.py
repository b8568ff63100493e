"""Refusals the physics review found missing: a trainer layout Megatron refuses (expert
parallelism on a dense model, or on GPUs its groups do not tile), a micro-batch budget below the
longest sample on the Python API path (the plan and run-spec paths refused it already), and a
prompt longer than the context, which named ``max_response_tokens (1)``."""

from __future__ import annotations

import dataclasses

import pytest

import pipesim
from pipesim.compute import GPUS, MODELS, FrameworkProfile, ModelSpec
from pipesim.compute.cluster import Cluster, ComputeRun, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.profiles import profile
from pipesim.compute.trainer import TrainerConfig
from pipesim.compute.workload import AgentTurns, LogNormalLengths, TokenWorkload
from tests.test_refusals_core import check_refusal

H100 = GPUS["h100-sxm"]
MOE, DENSE = MODELS["qwen3-30b-a3b"], MODELS["qwen3-8b"]


def _moe_profile(**kw: int) -> FrameworkProfile:
    return dataclasses.replace(profile("megatron-moe"), **kw)


@pytest.mark.parametrize(
    ("model", "n_gpus", "prof", "field"),
    [
        (DENSE, 4, "megatron-moe", "profile"),  # no experts to split
        (MODELS["qwen3-0.6b"], 8, "megatron-moe", "profile"),
        (DENSE, 8, _moe_profile(ep=2), "profile"),  # a custom profile too
        (MOE, 10, "megatron-moe", "n_gpus"),  # ep 8 does not divide the data-parallel size 10
        (MOE, 12, "megatron-moe", "n_gpus"),
        (MOE, 24, _moe_profile(ep=8, tp=2), "n_gpus"),  # tp 2 x ep 8 = 16 does not divide 24
        (MOE, 48, _moe_profile(ep=3), "profile"),  # 3 does not divide 128 experts
    ],
)
def test_a_layout_megatron_refuses_is_refused(
    model: ModelSpec, n_gpus: int, prof: str | FrameworkProfile, field: str
) -> None:
    check_refusal(
        lambda: TrainerConfig(model=model, gpu=H100, n_gpus=n_gpus, profile=prof), ValueError, field
    )


@pytest.mark.parametrize(
    ("n_gpus", "prof"), [(8, "megatron-moe"), (16, "megatron-moe"), (24, "megatron-moe")]
)
def test_a_layout_megatron_runs_is_accepted(n_gpus: int, prof: str) -> None:
    t = TrainerConfig(model=MOE, gpu=H100, n_gpus=n_gpus, profile=prof)
    assert t.step_time_s(1e6, 512) > 0
    # and the dense profiles still take a dense model
    for name in ("megatron-dense", "fsdp2-dense", "ideal"):
        assert TrainerConfig(model=DENSE, gpu=H100, n_gpus=4, profile=name).step_time_s(1e6, 512) > 0


ENGINE = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=H100, max_model_len=4096)
WORK = TokenWorkload(
    response=LogNormalLengths(300.0, 0.5), prompt=512, samples_per_prompt=4, max_response_tokens=3000
)
SCENARIO = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=16, steps=1, max_staleness=0))


def _run(trainer: TrainerConfig, work: TokenWorkload = WORK) -> ComputeRun:
    return run_compute(
        SCENARIO, Cluster(engine=ENGINE, n_gpus=4, trainer_gpus=2), work, seed=0, trainer=trainer
    )


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"micro_batch_tokens": 100}, "trainer.micro_batch_tokens"),
        ({"micro_batch_tokens": 3511}, "trainer.micro_batch_tokens"),  # one short of 512 + 3,000
        ({"log_prob_micro_batch_tokens": 2048}, "trainer.log_prob_micro_batch_tokens"),
        ({"micro_batch_tokens": 1755, "sequence_parallel": 2}, "trainer.micro_batch_tokens"),
    ],
)
def test_run_compute_refuses_a_micro_batch_below_the_longest_sample(kw: dict[str, int], field: str) -> None:
    trainer = TrainerConfig(model=ENGINE.model, gpu=H100, n_gpus=2, **kw)
    check_refusal(lambda: _run(trainer), ValueError, field)


def test_the_budget_counts_an_agent_episode_whole() -> None:
    """Two turns of 1,000 and an observation of 200 after a 512-token prompt: 2,712 tokens."""
    work = dataclasses.replace(
        WORK, max_response_tokens=1000, agent=AgentTurns(turns=2, tool_latency_s=0.1, observation_tokens=200)
    )
    assert work.max_sequence_tokens == 2712
    short = TrainerConfig(model=ENGINE.model, gpu=H100, n_gpus=2, micro_batch_tokens=2711)
    check_refusal(lambda: _run(short, work), ValueError, "trainer.micro_batch_tokens")
    enough = TrainerConfig(model=ENGINE.model, gpu=H100, n_gpus=2, micro_batch_tokens=2712)
    assert _run(enough, work).ledger.closes()


def test_a_budget_that_holds_the_longest_sample_runs() -> None:
    """Exactly the longest sample is enough (verl asserts >=); the default budget is not checked."""
    for kw in ({"micro_batch_tokens": 3512}, {"micro_batch_tokens": 1756, "sequence_parallel": 2}, {}):
        trainer = TrainerConfig(model=ENGINE.model, gpu=H100, n_gpus=2, **kw)
        assert _run(trainer).ledger.closes()


@pytest.mark.parametrize(
    ("work", "field"),
    [
        (TokenWorkload(prompt=4096, max_prompt_tokens=5000, max_response_tokens=1), "prompt"),
        (TokenWorkload(prompt=5000, max_prompt_tokens=5000, max_response_tokens=1), "prompt"),
        (
            TokenWorkload(prompt=LogNormalLengths(300.0, 0.5), max_prompt_tokens=4096, max_response_tokens=1),
            "max_prompt_tokens",
        ),
        # the prompt leaves room: the response is what to lower
        (TokenWorkload(prompt=4095, max_prompt_tokens=5000, max_response_tokens=2), "max_response_tokens"),
    ],
)
def test_a_context_refusal_names_the_field_at_fault(work: TokenWorkload, field: str) -> None:
    check_refusal(lambda: work.check_context(4096), ValueError, field)
    trainer = TrainerConfig(model=ENGINE.model, gpu=H100, n_gpus=2)
    check_refusal(lambda: _run(trainer, work), ValueError, field)


def test_a_prompt_that_leaves_one_token_fits() -> None:
    TokenWorkload(prompt=4095, max_prompt_tokens=5000, max_response_tokens=1).check_context(4096)


def test_the_longest_sample_must_be_a_number_above_zero() -> None:
    """check_longest_sample(nan) passed every budget (nan < budget is False)."""
    from pipesim.compute import GPUS, MODELS, TrainerConfig
    from pipesim.core.validate import FieldError

    tc = TrainerConfig(model=MODELS["qwen3-8b"], gpu=GPUS["h100-sxm"], n_gpus=8, micro_batch_tokens=4096)
    for bad in (float("nan"), 0, -5.0):
        with pytest.raises(FieldError) as err:
            tc.check_longest_sample(bad)  # type: ignore[arg-type]
        assert err.value.field == "longest_tokens"
