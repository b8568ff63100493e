"""Trainer layouts, mini-batches, switch times and buckets that the frameworks refuse are refused
here, naming the field (or the run-spec key), rather than timed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.profiles import profile
from pipesim.compute.sync import SyncModel
from pipesim.compute.trainer import TrainerConfig
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.core.validate import FieldError
from pipesim.plan import runspec
from pipesim.plan.checks import PlanError
from tests.test_refusals_core import check_refusal

H100 = GPUS["h100-sxm"]
Q8, SMALL_KV = MODELS["qwen3-8b"], MODELS["deepseek-r1-distill-qwen-1.5b"]  # 32/8 and 12/2 heads
ENGINE = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=H100, max_model_len=4096, max_num_seqs=16)
WL = TokenWorkload(
    response=LogNormalLengths(200, 0.5), prompt=64, samples_per_prompt=4, max_response_tokens=512
)


def megatron(**layout: int) -> Any:
    return dataclasses.replace(profile("megatron-dense"), name="custom", **layout)


def trainer(model: Any = Q8, n_gpus: int = 8, **kw: Any) -> TrainerConfig:
    return TrainerConfig(model=model, gpu=H100, n_gpus=n_gpus, **kw)


ROWS: list[tuple[str, Callable[[], Any], str, str]] = [
    # (id, call, field, a word the message must hold)
    ("tp4-two-kv-heads", lambda: trainer(SMALL_KV, profile="megatron-dense"), "profile", "tp"),
    ("tp3", lambda: trainer(n_gpus=6, profile=megatron(tp=3)), "profile", "tp"),
    ("tp16", lambda: trainer(n_gpus=16, profile=megatron(tp=16)), "profile", "tp"),
    ("tp64", lambda: trainer(n_gpus=64, profile=megatron(tp=64)), "profile", "tp"),
    ("pp5", lambda: trainer(n_gpus=5, profile=megatron(tp=1, pp=5)), "profile", "pp"),
    ("pp72", lambda: trainer(n_gpus=72, profile=megatron(tp=1, pp=72)), "profile", "pp"),
    ("sp3", lambda: trainer(n_gpus=6, sequence_parallel=3), "sequence_parallel", "n_heads"),
    ("sp6", lambda: trainer(n_gpus=6, sequence_parallel=6), "sequence_parallel", "n_heads"),
    (
        "sp-kv",
        lambda: trainer(MODELS["qwen2.5-7b"], n_gpus=14, sequence_parallel=14),
        "sequence_parallel",
        "n_heads",
    ),
    ("bucket-tiny", lambda: SyncModel(bucket_bytes=1e-300), "bucket_bytes", "1"),
    ("bucket-half", lambda: SyncModel(bucket_bytes=0.5), "bucket_bytes", "1"),
    (
        "bucket-latency-overflow",
        lambda: Cluster(
            engine=ENGINE, n_gpus=2, trainer_gpus=1, sync=SyncModel(bucket_bytes=1, bucket_latency_s=1e300)
        ).sync_time_s(),
        "bucket_latency_s",
        "buckets",
    ),
]


@pytest.mark.parametrize(("call", "field", "word"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_a_refused_layout_or_sync_names_its_field(call: Callable[[], Any], field: str, word: str) -> None:
    err = check_refusal(call, FieldError, field)
    assert word in str(err)


def test_layouts_the_frameworks_accept_are_accepted() -> None:
    trainer(profile="megatron-dense")  # tp 4: 32 heads, 8 KV heads
    trainer(n_gpus=4, profile=megatron(tp=1, pp=4))  # 36 layers over 4 stages
    trainer(n_gpus=16, sequence_parallel=16)  # 32 heads; 8 KV heads divide 16 (verl repeats them)
    trainer(SMALL_KV, n_gpus=4, sequence_parallel=4)  # 12 heads; 2 KV heads divide 4


def _scenario(batch: int = 16) -> pipesim.Scenario:
    return pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=batch, steps=1))


def test_run_compute_refuses_a_mini_batch_past_the_batch() -> None:
    cl = Cluster(engine=ENGINE, n_gpus=2, trainer_gpus=1)
    tr = TrainerConfig(model=ENGINE.model, gpu=H100, n_gpus=1, ppo_mini_batch_samples=32)
    check_refusal(
        lambda: run_compute(_scenario(16), cl, WL, seed=0, trainer=tr), FieldError, "ppo_mini_batch_samples"
    )
    ok = TrainerConfig(model=ENGINE.model, gpu=H100, n_gpus=1, ppo_mini_batch_samples=16)
    assert run_compute(_scenario(16), cl, WL, seed=0, trainer=ok).result.train_log


def test_run_compute_refuses_a_switch_time_on_a_disaggregated_cluster() -> None:
    split = Cluster(engine=ENGINE, n_gpus=2, trainer_gpus=1)
    check_refusal(
        lambda: run_compute(_scenario(), split, WL, seed=0, switch_time_s=30.0), FieldError, "switch_time_s"
    )
    colocated = Cluster(engine=ENGINE, n_gpus=2)
    assert run_compute(_scenario(), colocated, WL, seed=0, switch_time_s=30.0).switch_time_s == 30.0


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "run_qwen3_8b.toml"


Q8_NAME = 'name = "qwen3-8b"'


@pytest.mark.parametrize(
    ("edits", "key"),
    [
        # 24 trainer GPUs: 3 divides them (so is not refused for that) but not the 32 heads
        (
            [(Q8_NAME, f"{Q8_NAME}\nsequence_parallel = 3"), ("placement = 16", "placement = 24")],
            "model.sequence_parallel",
        ),
        (
            [(Q8_NAME, 'name = "deepseek-r1-distill-qwen-1.5b"\nframework = "megatron-dense"')],
            "model.framework",
        ),
        ([(Q8_NAME, f"{Q8_NAME}\nppo_mini_batch_samples = 1024")], "model.ppo_mini_batch_samples"),
    ],
    ids=["sp3", "tp4-two-kv-heads", "mini-past-batch"],
)
def test_a_run_spec_names_its_key(tmp_path: Path, edits: list[tuple[str, str]], key: str) -> None:
    text = EXAMPLE.read_text().replace("mfu = 0.4", "")
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    path = tmp_path / "run.toml"
    path.write_text(text)
    check_refusal(lambda: runspec.load(path), PlanError, key)
