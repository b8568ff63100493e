"""The compute-grounded configs refuse a bad field with a :class:`FieldError` naming it, through
the shared checks (``check_int`` / ``check_number``). Rows: id, call, ``err.field``; never the
sentence. A real that is not a Python number is refused (its float is taken:
``tests/test_core_bad_input.py``); an integer field refuses a numpy integer, a float and a bool."""

from __future__ import annotations

import dataclasses
import decimal
import fractions
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipesim import PipelineConfig, Scenario
from pipesim.compute import (
    GPUS,
    HF_CONFIGS,
    MODELS,
    ComputeTrainer,
    Efficiency,
    FrameworkProfile,
    ModelSpec,
    PhaseObservation,
    SyncModel,
    TrainerConfig,
)
from pipesim.compute.balance import rank_loads, rank_samples
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.measured import read_measurements, refused_tp, score
from pipesim.compute.offload import Offload
from pipesim.compute.overrides import check_overridden
from pipesim.compute.phasefit import fit_profile
from pipesim.compute.profiles import profile, profiles
from pipesim.compute.roofline import check_ep, check_tp, kernel_time_s
from pipesim.compute.series import ReplicaSeries
from pipesim.compute.source import TokenSource
from pipesim.compute.workload import AgentTurns, EmpiricalLengths, LogNormalLengths, TokenWorkload
from pipesim.core.validate import FieldError
from pipesim.io.overrides import apply_overrides
from pipesim.plan import runspec
from pipesim.plan.checks import PlanError
from pipesim.policies.faults import DropFailed, RetryFailed, Timeout
from pipesim.policies.groups import WholeGroups
from pipesim.policies.replicas import Replicas
from pipesim.workload.durations import ExponentialDurations
from tests.test_refusals_core import check_refusal

H100, QWEN = GPUS["h100-sxm"], MODELS["qwen3-0.6b"]


def _cluster(**kw: Any) -> Cluster:
    return Cluster(engine=EngineConfig(model=QWEN, gpu=H100), **{"n_gpus": 2, "trainer_gpus": 1, **kw})


INTS: list[tuple[str, Callable[[Any], Any]]] = [  # an integer field, and how to build with it
    ("prompt", lambda x: TokenWorkload(prompt=x)),
    ("max_response_tokens", lambda x: TokenWorkload(max_response_tokens=x)),
    ("turns", lambda x: AgentTurns(turns=x)),
    ("observation_tokens", lambda x: AgentTurns(observation_tokens=x)),
    ("tokens[1]", lambda x: EmpiricalLengths((5, x))),
    ("n_gpus", lambda x: _cluster(n_gpus=x)),
]

REALS: list[tuple[str, Callable[[Any], Any]]] = [  # a float field, and how to build with it
    ("median_tokens", lambda x: LogNormalLengths(x)),
    ("tool_latency_s", lambda x: AgentTurns(tool_latency_s=x)),
]

ROWS: list[tuple[str, Callable[[], Any], str]] = [
    (f"{field}-{type(v).__name__}", (lambda make=make, v=v: make(v)), field)
    for field, make in INTS
    for v in (np.int64(100), 100.0, True)
]
ROWS += [
    (f"{field}-{type(v).__name__}", (lambda make=make, v=v: make(v)), field)
    for field, make in REALS
    for v in (np.float32(2.0), fractions.Fraction(3, 2), decimal.Decimal("2.5"))
]
ROWS += [  # a scenario field the compute engine would ignore (run_compute's check)
    (
        f"ignored-{name}",
        (lambda sc=sc, colocated=colocated, seed=seed: check_overridden(sc, colocated, seed)),
        field,
    )
    for name, sc, colocated, seed, field in (
        ("n_slots", Scenario(pipeline=PipelineConfig(n_slots=8)), True, None, "pipeline.n_slots"),
        (
            "train_time_s",
            Scenario(pipeline=PipelineConfig(train_time_s=1.0)),
            True,
            None,
            "pipeline.train_time_s",
        ),
        (
            "sync_time_s",
            Scenario(pipeline=PipelineConfig(sync_time_s=1.0)),
            True,
            None,
            "pipeline.sync_time_s",
        ),
        ("colocated", Scenario(pipeline=PipelineConfig(colocated=True)), False, None, "pipeline.colocated"),
        ("replicas", Scenario(replicas=Replicas(2)), True, None, "replicas"),
        ("durations", Scenario(durations=ExponentialDurations()), True, None, "durations"),
        ("seed", Scenario(seed=3), True, 4, "seed"),
    )
]
ROWS += [
    ("lognormal-sigma", lambda: LogNormalLengths(100, sigma=-1), "sigma"),
    ("engine-max-num-seqs", lambda: EngineConfig(model=QWEN, gpu=H100, max_num_seqs=10**9), "max_num_seqs"),
    (
        "run-slots-per-replica",
        lambda: run_compute(
            Scenario(pipeline=PipelineConfig(batch_size=4, steps=2)),
            _cluster(),
            TokenWorkload(prompt=16, max_response_tokens=64),
            slots_per_replica=10**9,
        ),
        "slots_per_replica",
    ),
]


@pytest.mark.parametrize(("call", "field"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_a_compute_config_names_the_field_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


# -- one table per config or validator: id, call, err.field (the type is FieldError throughout:
# every refusal here was a ValueError and stays one) --------------------------------------------

Rows = list[tuple[str, Callable[[], Any], str]]


def _ids(rows: Rows) -> dict[str, Any]:
    return {"argvalues": [r[1:] for r in rows], "ids": [r[0] for r in rows]}


Q8 = MODELS["qwen3-8b"]


def _engine(**kw: Any) -> EngineConfig:
    return EngineConfig(**{"model": QWEN, "gpu": H100, **kw})


ENGINE: Rows = [
    *[  # tests/test_compute_engine.py's test_bad_input_names_the_field, moved
        (f"moved-{field}-{i}", call, field)
        for i, (call, field) in enumerate(
            [
                (lambda: EngineConfig(model=MODELS["qwen3-32b"], gpu=GPUS["l40s"]), "tp"),
                (lambda: _engine(model=Q8, tp=3), "tp"),
                (
                    lambda: _engine(model=Q8, gpu_memory_utilization=0.2),
                    "gpu_memory_utilization",
                ),
                (lambda: _engine(model=Q8, max_model_len=10**6), "max_model_len"),
                (lambda: _engine(model=Q8, kv_policy="lru"), "kv_policy"),
                (lambda: _engine(model=Q8, max_num_seqs=0), "max_num_seqs"),
                (lambda: TokenSource(TokenWorkload(), np.random.default_rng(), 1.5e4), "context_tokens"),
                (lambda: TokenSource(TokenWorkload(), np.random.default_rng(), "16384"), "context_tokens"),
                (lambda: TokenWorkload(samples_per_prompt=0), "samples_per_prompt"),
                (lambda: TokenWorkload(difficulty_sigma=True), "difficulty_sigma"),
                (
                    lambda: TokenWorkload(difficulty_sigma=1e200),
                    "difficulty_sigma",
                ),  # overflowed the plan's fluid
                (  # each spread alone passes; together a draw 8 sigmas up overflows
                    lambda: TokenWorkload(LogNormalLengths(5000.0, 80.0), difficulty_sigma=40.0),
                    "difficulty_sigma",
                ),
                (
                    lambda: TokenWorkload(EmpiricalLengths((10, 20)), difficulty_sigma=100.0),
                    "difficulty_sigma",
                ),
                (
                    lambda: _engine(model=Q8, iteration_overhead_s=1e304),
                    "iteration_overhead_s",
                ),
                (lambda: _engine(model=Q8, allreduce_latency_s=1e306), "allreduce_latency_s"),
                (lambda: Efficiency(kernel_overhead_s=1e300), "kernel_overhead_s"),
                (lambda: TokenWorkload(drift_per_version=True), "drift_per_version"),
                (lambda: _engine(model=Q8, watermark=False), "watermark"),
                (lambda: LogNormalLengths(-1.0), "median_tokens"),
                (lambda: Cluster(engine=_engine(), n_gpus=4, trainer_gpus=4), "trainer_gpus"),
                (lambda: Cluster(engine=_engine(), n_gpus=0), "n_gpus"),
                (lambda: TrainerConfig(model=MODELS["qwen3-32b"], gpu=H100, n_gpus=1), "n_gpus"),
                (lambda: TrainerConfig(model=MODELS["qwen3-8b"], gpu=H100, n_gpus=8, mfu=1.5), "mfu"),
            ]
        )
    ],
    ("model-name", lambda: _engine(model="qwen3-0.6b"), "model"),
    ("gpu-name", lambda: _engine(gpu="h100-sxm"), "gpu"),
    ("efficiency-number", lambda: _engine(efficiency=0.5), "efficiency"),
    ("tp-not-dividing-heads", lambda: _engine(tp=3), "tp"),
    ("gpu_memory_utilization-zero", lambda: _engine(gpu_memory_utilization=0), "gpu_memory_utilization"),
    ("gpu_memory_utilization-bool", lambda: _engine(gpu_memory_utilization=True), "gpu_memory_utilization"),
    ("share_group_prefix-int", lambda: _engine(share_group_prefix=1), "share_group_prefix"),
    ("tool_kv-unknown", lambda: _engine(tool_kv="evict"), "tool_kv"),
    ("watermark-one", lambda: _engine(watermark=1.0), "watermark"),
    ("kv_policy-unknown", lambda: _engine(kv_policy="lru"), "kv_policy"),
    ("kv_dtype-unknown", lambda: _engine(kv_dtype="int3"), "kv_dtype"),
    ("iteration_overhead_s-hour-plus", lambda: _engine(iteration_overhead_s=1e4), "iteration_overhead_s"),
    ("enforce_eager-text", lambda: _engine(enforce_eager="yes"), "enforce_eager"),
    (
        "max_num_batched_tokens-below-seqs",
        lambda: _engine(max_num_seqs=64, max_num_batched_tokens=16),
        "max_num_batched_tokens",
    ),
    ("max_model_len-past-context", lambda: _engine(max_model_len=10**7), "max_model_len"),
    ("model-does-not-fit", lambda: _engine(model=MODELS["qwen3-32b"], gpu=GPUS["l40s"]), "tp"),
    ("kv-budget-below-a-sequence", lambda: _engine(gpu_memory_utilization=0.02), "gpu_memory_utilization"),
]


@pytest.mark.parametrize(("call", "field"), **_ids(ENGINE))
def test_an_engine_config_names_the_field_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


CLUSTER: Rows = [
    ("offload-text", lambda: _cluster(offload="sleep"), "offload"),
    ("sync-number", lambda: _cluster(sync=1.0), "sync"),
    ("engine-none", lambda: Cluster(engine=None, n_gpus=2), "engine"),  # type: ignore[arg-type]
    ("trainer_gpus-all", lambda: _cluster(trainer_gpus=2), "trainer_gpus"),
    (
        "rollout-not-a-multiple-of-tp",
        lambda: Cluster(engine=_engine(tp=2), n_gpus=4, trainer_gpus=1),
        "engine.tp",
    ),
    (
        "offload/host_bandwidth_bytes_per_s-zero",
        lambda: Offload(host_bandwidth_bytes_per_s=0.0),
        "host_bandwidth_bytes_per_s",
    ),
    ("offload/host_link_efficiency-1.5", lambda: Offload(host_link_efficiency=1.5), "host_link_efficiency"),
    ("offload/fixed_s-negative", lambda: Offload(fixed_s=-1.0), "fixed_s"),
    ("offload/trainer_offload-yes", lambda: Offload(trainer_offload="yes"), "trainer_offload"),
    ("offload/sleep_level-three", lambda: Offload(sleep_level=3), "sleep_level"),
    ("offload/sleep_level-float", lambda: Offload(sleep_level=1.0), "sleep_level"),
    ("offload/trainer_offload-int", lambda: Offload(trainer_offload=1), "trainer_offload"),
    ("offload/host_link_efficiency-two", lambda: Offload(host_link_efficiency=2.0), "host_link_efficiency"),
    (
        "offload/switch-overflows",
        lambda: Offload(host_bandwidth_bytes_per_s=1e-320).switch_time_s(_engine(), 1),
        "host_bandwidth_bytes_per_s",
    ),
]


@pytest.mark.parametrize(("call", "field"), **_ids(CLUSTER))
def test_a_cluster_names_the_field_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


def _run(cluster: Cluster | None = None, **kw: Any) -> Any:
    sc = kw.pop("scenario", Scenario(pipeline=PipelineConfig(batch_size=4, steps=2)))
    wl = kw.pop("workload", TokenWorkload(prompt=16, max_response_tokens=64))
    return run_compute(sc, _cluster() if cluster is None else cluster, wl, **kw)


def _trainer(**kw: Any) -> TrainerConfig:
    return TrainerConfig(**{"model": QWEN, "gpu": H100, "n_gpus": 1, **kw})


RUN: Rows = [
    ("scenario-config", lambda: run_compute(PipelineConfig(), _cluster(), TokenWorkload()), "scenario"),
    ("cluster-engine", lambda: run_compute(Scenario(), _engine(), TokenWorkload()), "cluster"),
    ("workload-lengths", lambda: run_compute(Scenario(), _cluster(), LogNormalLengths(100)), "workload"),
    ("record-int", lambda: _run(record=1), "record"),
    ("record-none", lambda: _run(record=None), "record"),
    ("record-yes", lambda: _run(record="yes"), "record"),
    ("seed-negative", lambda: _run(seed=-1), "seed"),
    ("workload-none-with-groups", lambda: _run(workload=None, groups=True), "workload"),
    (
        "scenario-failures-drop",
        lambda: _run(scenario=Scenario(failures=DropFailed(hazard_per_s=1e3))),
        "failures",
    ),
    (
        "scenario-failures-retry",
        lambda: _run(scenario=Scenario(failures=RetryFailed(hazard_per_s=1e3))),
        "failures",
    ),
    ("routing-text", lambda: _run(routing="random"), "routing"),
    ("groups-int", lambda: _run(groups=4), "groups"),
    (
        "groups-of-another-size",
        lambda: _run(groups=WholeGroups(3), workload=TokenWorkload(samples_per_prompt=4)),
        "samples_per_group",
    ),
    ("trainer-text", lambda: _run(trainer="fsdp"), "trainer"),
    ("trainer-n_gpus", lambda: _run(trainer=_trainer(n_gpus=2)), "trainer.n_gpus"),
    ("trainer-model", lambda: _run(trainer=_trainer(model=MODELS["qwen3-1.7b"])), "trainer.model"),
    ("trainer-gpu", lambda: _run(trainer=_trainer(gpu=GPUS["h200"])), "trainer.gpu"),
    (
        "trainer-sized-by-the-cluster",
        lambda: _run(Cluster(engine=_engine(model=MODELS["qwen3-32b"], tp=2), n_gpus=3, trainer_gpus=1)),
        "trainer_gpus",
    ),
    ("scenario-timeout", lambda: _run(scenario=Scenario(timeout=Timeout(5.0))), "timeout"),
]


@pytest.mark.parametrize(("call", "field"), **_ids(RUN))
def test_run_compute_names_the_argument_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


TRAINER: Rows = [
    ("model-name", lambda: _trainer(model="qwen3-0.6b"), "model"),
    ("gpu-name", lambda: _trainer(gpu="h100-sxm"), "gpu"),
    ("mfu-zero", lambda: _trainer(mfu=0.0), "mfu"),
    ("mfu-above-one", lambda: _trainer(mfu=1.5), "mfu"),
    ("mfu-bool", lambda: _trainer(mfu=True), "mfu"),
    ("recompute_old_logp-int", lambda: _trainer(recompute_old_logp=1), "recompute_old_logp"),
    ("reference_model-text", lambda: _trainer(reference_model="yes"), "reference_model"),
    (
        "micro-batch-in-tokens-and-samples",
        lambda: _trainer(micro_batch_tokens=4096, micro_batch_samples=4),
        "micro_batch_samples",
    ),
    ("n_gpus-not-a-multiple-of-tp", lambda: _trainer(n_gpus=3, profile="megatron-dense"), "n_gpus"),
    ("n_gpus-too-few-for-the-model", lambda: _trainer(model=MODELS["qwen3-32b"]), "n_gpus"),
    ("profile-number", lambda: _trainer(profile=3), "profile"),
    ("profile-unknown", lambda: _trainer(profile="fsdp3"), "profile"),
    ("batch_order-unknown", lambda: _trainer(batch_order="finish"), "batch_order"),
    ("shuffle_seed-negative", lambda: _trainer(shuffle_seed=-1), "shuffle_seed"),
    (
        "sample_tokens-one-short",
        lambda: _trainer(profile="fsdp2-dense").phase_times_s(8e3, 8, [1e3] * 7),
        "sample_tokens",
    ),
    ("trainer/config-text", lambda: ComputeTrainer("cfg", None), "config"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("call", "field"), **_ids(TRAINER))
def test_a_trainer_config_names_the_field_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


def _profile(**kw: Any) -> FrameworkProfile:
    return dataclasses.replace(profiles()["fsdp2-dense"], **kw)


PROFILE: Rows = [
    ("name-empty", lambda: _profile(name=""), "name"),
    ("backend-unknown", lambda: _profile(backend="deepspeed"), "backend"),
    ("fwd_efficiency-above-one", lambda: _profile(fwd_efficiency=1.5), "fwd_efficiency"),
    ("comm_overlap-above-one", lambda: _profile(comm_overlap=1.5), "comm_overlap"),
    ("pp-two-for-fsdp", lambda: _profile(pp=2), "pp"),
    ("balance-unknown", lambda: _profile(balance="greedy"), "balance"),
    ("balance-none", lambda: _profile(balance=None), "balance"),
    ("deal/exact-has-no-dealing", lambda: rank_samples([1.0] * 4, 2, 2, [4.0], "exact"), "balance"),
    ("deal/balance-unknown", lambda: rank_loads([1.0] * 4, 2, 2, [4.0], "lpt"), "balance"),
    ("lookup-unknown", lambda: profile("fsdp3", "trainer.profile"), "trainer.profile"),
    ("fit/profile-name", lambda: fit_profile("fsdp2-dense", []), "profile"),  # type: ignore[arg-type]
    ("fit/fix-unknown", lambda: fit_profile(_profile(), [_obs()], fix=("tp",)), "fix"),
    ("fit/confidence-one", lambda: fit_profile(_profile(), [_obs()], confidence=1.0), "confidence"),
    ("fit/observations-empty", lambda: fit_profile(_profile(), []), "observations"),
    ("fit/observations-one", lambda: fit_profile(_profile(), [_obs()]), "observations"),
    ("observation/config", lambda: PhaseObservation("cfg", "ref", 1e4, 8, 1.0), "config"),  # type: ignore[arg-type]
    ("observation/phase", lambda: _obs(phase="rollout"), "phase"),
    ("observation/sample_tokens-short", lambda: _obs(sample_tokens=(1e3,) * 7), "sample_tokens"),
]


def _obs(**kw: Any) -> PhaseObservation:
    args = {"config": _trainer(), "phase": "update_actor", "tokens": 1e4, "samples": 8, "seconds": 1.0, **kw}
    return PhaseObservation(**args)


@pytest.mark.parametrize(("call", "field"), **_ids(PROFILE))
def test_a_framework_profile_names_the_field_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


SYNC: Rows = [
    ("link_efficiency-above-one", lambda: SyncModel(link_efficiency=1.5), "link_efficiency"),
    ("overlap_load-int", lambda: SyncModel(overlap_load=1), "overlap_load"),
    ("per_shard-text", lambda: SyncModel(per_shard="no"), "per_shard"),
    (
        "a-link-of-a-few-bytes-a-second",
        lambda: SyncModel().sync_time_s(
            _engine(gpu=dataclasses.replace(H100, hbm_bandwidth_bytes_per_s=1e-320)),
            _profile(),
            1,
            False,
            2,
        ),
        "gpu.hbm_bandwidth_bytes_per_s",
    ),
]


@pytest.mark.parametrize(("call", "field"), **_ids(SYNC))
def test_a_sync_model_names_the_field_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


LLAMA, QWEN4B, MOE = MODELS["llama-2-7b"], HF_CONFIGS["qwen3-4b"], HF_CONFIGS["qwen3-30b-a3b"]


def _spec(**kw: Any) -> ModelSpec:
    return dataclasses.replace(LLAMA, **kw)


MODEL_SPEC: Rows = [
    ("n_layers-zero", lambda: _spec(n_layers=0), "n_layers"),
    ("name-none", lambda: _spec(name=None), "name"),
    ("hidden_size-negative", lambda: _spec(hidden_size=-4), "hidden_size"),
    ("n_kv_heads-not-dividing", lambda: _spec(n_kv_heads=3), "n_kv_heads"),
    ("head_dim-float", lambda: _spec(head_dim=1.5), "head_dim"),
    ("intermediate_size-zero", lambda: _spec(intermediate_size=0), "intermediate_size"),
    ("vocab_size-bool", lambda: _spec(vocab_size=True), "vocab_size"),
    ("vocab_size-huge", lambda: _spec(vocab_size=10**20), "vocab_size"),
    ("gated_mlp-int", lambda: _spec(gated_mlp=1), "gated_mlp"),
    ("n_active_experts-dense", lambda: _spec(n_active_experts=2), "n_active_experts"),
    (
        "n_active_experts-past-experts",
        lambda: _spec(n_experts=8, n_active_experts=9, expert_intermediate_size=64),
        "n_active_experts",
    ),
    (
        "expert_intermediate_size-zero",
        lambda: _spec(n_experts=8, n_active_experts=2),
        "expert_intermediate_size",
    ),
    ("dtype-unknown", lambda: LLAMA.kv_bytes_per_token("int3"), "dtype"),
    ("tp-not-dividing-heads", lambda: MODELS["qwen3-8b"].linear_time_s(H100, 64, 3), "tp"),
    ("tp-not-dividing-kv-heads", lambda: check_tp(MODELS["qwen2.5-7b"], 7), "tp"),
    ("ep-dense", lambda: check_ep(LLAMA, 2, 2), "ep"),
    ("ep-not-dividing-experts", lambda: check_ep(MODELS["qwen3-30b-a3b"], 3, 3), "ep"),
    ("ep-not-dividing-tp", lambda: check_ep(MODELS["qwen3-30b-a3b"], 2, 4), "ep"),
    ("kernel-flops-negative", lambda: kernel_time_s(H100, -1.0, 0.0), "flops"),
]


@pytest.mark.parametrize(("call", "field"), **_ids(MODEL_SPEC))
def test_a_model_spec_names_the_field_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


def _without(config: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != key}


HF_CONFIG: Rows = [
    ("not-a-dict", lambda: ModelSpec.from_hf_config([("model_type", "qwen3")]), "config"),  # type: ignore[arg-type]
    *[
        (f"missing-{key}", (lambda key=key: ModelSpec.from_hf_config(_without(QWEN4B, key))), key)
        for key in ("model_type", "num_hidden_layers", "hidden_size", "vocab_size", "max_position_embeddings")
    ],
    *[
        (f"missing-{key}", (lambda key=key: ModelSpec.from_hf_config(_without(MOE, key))), key)
        for key in ("num_experts", "num_experts_per_tok", "moe_intermediate_size")
    ],
    *[
        (f"{key}-{bad!r}", (lambda key=key, bad=bad: ModelSpec.from_hf_config({**QWEN4B, key: bad})), key)
        for key, bad in (
            ("num_attention_heads", 0),
            ("hidden_size", math.inf),
            ("num_hidden_layers", math.nan),
            ("intermediate_size", "abc"),
            ("vocab_size", []),
            ("head_dim", 1.5),
            ("num_key_value_heads", True),
            ("num_key_value_heads", 3),  # 32 heads: a ModelSpec refusal, named by config.json's key
            ("tie_word_embeddings", "false"),
            ("model_type", ["qwen3"]),
            ("model_type", "mamba"),
            ("vocab_size", None),
            ("hidden_size", None),
            ("vocab_size", 1e20),
            ("num_hidden_layers", 2**31),
            ("hidden_size", 2.0**40),
            ("max_position_embeddings", 10**12),
            ("num_key_value_heads", 2**31),
            ("head_dim", 2**31),
            ("intermediate_size", 10**20),
        )
    ],
    *[
        (f"moe-{key}-{bad!r}", (lambda key=key, bad=bad: ModelSpec.from_hf_config({**MOE, key: bad})), key)
        for key, bad in (
            ("num_experts", 1e20),
            ("num_experts_per_tok", 1e20),
            ("moe_intermediate_size", 1e20),
            ("decoder_sparse_step", None),
            ("decoder_sparse_step", 0),
            ("decoder_sparse_step", 1.5),
            ("decoder_sparse_step", 2),
            ("mlp_only_layers", [0]),
            ("mlp_only_layers", 3),
            ("mlp_only_layers", 0),
        )
    ],
]


@pytest.mark.parametrize(("call", "field"), **_ids(HF_CONFIG))
def test_a_config_json_names_the_key_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


GPU_SPEC: Rows = [
    ("name-empty", lambda: dataclasses.replace(H100, name=""), "name"),
    *[
        (f"{name}-{bad!r}", (lambda name=name, bad=bad: dataclasses.replace(H100, **{name: bad})), name)
        for name in (
            "bf16_flops_per_s",
            "hbm_bytes",
            "hbm_bandwidth_bytes_per_s",
            "network_bandwidth_bytes_per_s",
        )
        for bad in (0, -1.0, math.nan, "fast")
    ],
]


@pytest.mark.parametrize(("call", "field"), **_ids(GPU_SPEC))
def test_a_gpu_spec_names_the_field_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


EFFICIENCY: Rows = [
    (f"{name}-{bad!r}", (lambda name=name, bad=bad: Efficiency(**{name: bad})), name)
    for name, bad in (
        ("flop_fraction", 0),
        ("flop_fraction", math.nan),
        ("bandwidth_fraction", 1.2),
        ("attention_flop_fraction", 0.0),
        ("moe_gemm_fraction", "1"),
        ("kernel_overhead_s", -1e-6),
        ("attention_block_s", 1e4),
        ("combine_exponent", 0.5),
        ("combine_exponent", math.inf),
    )
]


@pytest.mark.parametrize(("call", "field"), **_ids(EFFICIENCY))
def test_an_efficiency_names_the_field_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


RUN_SPEC_DATA: dict[str, Any] = {  # a small valid run spec (tests/test_runspec.py's)
    "kind": "compute",
    "cluster": {"gpu": "h100-sxm", "n_gpus": 8},
    "model": {"name": "qwen3-0.6b", "max_model_len": 4096},
    "workload": {
        "prompts_per_step": 4,
        "samples_per_prompt": 4,
        "prompt_tokens": 128,
        "response": {"median_tokens": 200, "sigma": 0.5},
        "max_response_tokens": 1024,
    },
    "design": {"placement": 4, "tp": 1, "eta": 1, "update": "partial", "sync_every": 1, "oversample": 1.0},
    "run": {"steps": 3, "seed": 5},
}


def _runspec(*sets: str) -> Any:
    return runspec.from_dict(runspec.apply_sets(RUN_SPEC_DATA, sets))


RUN_SPEC: Rows = [
    ("kind-slots", lambda: runspec.from_dict({**RUN_SPEC_DATA, "kind": "slots"}), "kind"),
    (
        "kind-a-plan-spec",
        lambda: runspec.from_dict({k: v for k, v in RUN_SPEC_DATA.items() if k != "kind"} | {"space": {}}),
        "kind",
    ),
    ("unknown-table", lambda: runspec.from_dict({**RUN_SPEC_DATA, "space": {"tp": [1]}}), "space"),
    (
        "no-design",
        lambda: runspec.from_dict({k: v for k, v in RUN_SPEC_DATA.items() if k != "design"}),
        "design",
    ),
    ("run-not-a-table", lambda: runspec.from_dict({**RUN_SPEC_DATA, "run": 3}), "run"),
    (
        "placement-missing",
        lambda: runspec.from_dict({**RUN_SPEC_DATA, "design": {"tp": 1}}),
        "design.placement",
    ),
    ("tp-not-dividing-heads", lambda: _runspec("design.tp=3"), "design.tp"),
    ("tp-beyond-the-engine-gpus", lambda: _runspec("design.tp=8"), "design.placement"),
    ("placement-every-gpu", lambda: _runspec("design.placement=8"), "design.placement"),
    ("placement-typo", lambda: _runspec('design.placement="colocatd"'), "design.placement"),
    ("update-unknown", lambda: _runspec("design.update=parital"), "design.update"),
    ("oversample-huge", lambda: _runspec("design.oversample=1e9"), "design.oversample"),
    ("model-too-big", lambda: _runspec('model.name="qwen3-32b"', 'cluster.gpu="l40s"'), "design.tp"),
    (
        "trainer-too-small",
        lambda: _runspec('model.name="qwen3-32b"', "design.placement=1", "design.tp=1"),
        "design.placement",
    ),
    (
        "colocated-trainer-too-small",
        lambda: _runspec('model.name="qwen3-32b"', 'design.placement="colocated"', "cluster.n_gpus=1"),
        "cluster.n_gpus",
    ),
    (
        "response-too-long",
        lambda: _runspec("workload.max_response_tokens=100000"),
        "workload.max_response_tokens",
    ),
    ("calibrated-mfu-above-one", lambda: _runspec("calibration.values.mfu=2.0"), "calibration.values.mfu"),
    ("set-no-table", lambda: runspec.apply_sets(RUN_SPEC_DATA, ["eta=2"]), "eta"),
    ("set-unknown-table", lambda: runspec.apply_sets(RUN_SPEC_DATA, ["desgn.eta=2"]), "desgn.eta"),
    ("set-into-a-value", lambda: runspec.apply_sets(RUN_SPEC_DATA, ["design.tp.x=1"]), "design.tp.x"),
    ("export-design", lambda: runspec.design_to_runspec(RUN_SPEC_DATA, "best"), "design"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("call", "field"), **_ids(RUN_SPEC))
def test_a_run_spec_names_the_key_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, PlanError, field)


def test_a_run_spec_file_names_the_key_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(runspec.dumps(RUN_SPEC_DATA, "toml"))
    err = check_refusal(lambda: runspec.load(path, ["design.eta=-1"]), PlanError, "design.eta")
    assert err.file == str(path)


OVERRIDES: Rows = [
    *[
        (f"{pair}", (lambda pair=pair: apply_overrides(Scenario(), [pair])), field)
        for pair, field in (
            ("n_slots=abc", "n_slots"),
            ("n_slots=0", "pipeline.n_slots"),
            ("train_time_s=fast", "train_time_s"),
            ("colocated=maybe", "colocated"),
            ("n_slot=4", "n_slot"),
            ("admission=nonsense(1)", "admission"),
            ("durations.mean_s=2", "durations.mean_s"),
        )
    ],
]


@pytest.mark.parametrize(("call", "field"), **_ids(OVERRIDES))
def test_a_set_override_names_the_key_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


_HEADER = (
    "op,tp,n_tokens,batch_size,kv_len,hidden_size,n_heads,n_kv_heads,head_dim,intermediate_size,median_s"
)
_GOOD = "decode_attention,1,,8,128,,32,8,128,,1e-5"


def _csv(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "m.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


MEASURED: list[tuple[str, tuple[str, ...], str]] = [  # a measurement CSV's lines, the column refused
    ("no-median_s", ("op,tp",), "median_s"),
    ("op-unknown", (_HEADER, "matmul,1,,,,,,,,,1e-5"), "op"),
    ("kv_len-text", (_HEADER, _GOOD.replace(",128,,32", ",many,,32")), "kv_len"),
    ("batch_size-zero", (_HEADER, _GOOD.replace(",8,128", ",0,128")), "batch_size"),
    ("median_s-negative", (_HEADER, _GOOD.replace("1e-5", "-1")), "median_s"),
    ("median_s-inf", (_HEADER, _GOOD.replace("1e-5", "inf")), "median_s"),
    ("header-only", (_HEADER,), "csv"),  # printed an empty table and exited 0
]


@pytest.mark.parametrize(("lines", "field"), [m[1:] for m in MEASURED], ids=[m[0] for m in MEASURED])
def test_a_measurement_csv_names_the_column_and_the_file(
    tmp_path: Path, lines: tuple[str, ...], field: str
) -> None:
    assert read_measurements(_csv(tmp_path, _HEADER, _GOOD))  # the good row reads
    path = _csv(tmp_path, *lines)
    err = check_refusal(lambda: read_measurements(path), FieldError, field)
    assert err.file == str(path)


def test_a_measurement_csv_that_is_not_utf8_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_bytes(b"op,median_s\n\xda\xff,1\n")
    assert check_refusal(lambda: read_measurements(path), FieldError, "csv").file == str(path)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("qkv,1,16,,,64,4000000000000,2,16,128,1e-5", "n_heads"),  # past int32: no model
    ],
    ids=["n_heads-huge"],
)
def test_a_measurement_row_no_model_has_is_named_by_its_line(tmp_path: Path, row: str, field: str) -> None:
    """Rows that read but that the roofline cannot shape a model from: refused with the file and
    line (they were a bare message before)."""
    path = _csv(tmp_path, _HEADER, _GOOD, row)
    rows = read_measurements(path)
    err = check_refusal(lambda: score(rows, GPUS["h200"]), FieldError, field)
    assert err.file == str(path) and f"{path}:3" in str(err)


def test_a_measurement_row_at_a_tp_the_roofline_refuses_is_skipped_not_scored(tmp_path: Path) -> None:
    """A row at a tp vLLM would refuse (3 does not divide 32 heads) is left out of the score and
    listed with why; the file's other rows are scored (it refused the whole file before)."""
    bad = _GOOD.replace("decode_attention,1,", "decode_attention,3,")
    rows = read_measurements(_csv(tmp_path, _HEADER, _GOOD, bad))
    assert score(rows, GPUS["h200"]) == score(rows[:1], GPUS["h200"])
    (skipped, why), *more = refused_tp(rows, GPUS["h200"])
    assert not more and skipped is rows[1] and "tp" in why


def test_a_replica_series_names_its_bin_width() -> None:
    for bad in (0.0, -1.0, math.inf, "1"):
        check_refusal(lambda bad=bad: ReplicaSeries(width_s=bad), FieldError, "width_s")
