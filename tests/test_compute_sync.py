"""The weight-sync model (issue 41 item 3): its calibration row, a bucket-by-bucket reference,
its relations (bytes, links, placement, overlap, shards), the default in a run and the override,
and bad input. Before this change ``pipesim.compute.sync`` did not exist and a sync was the bf16
weights over one link."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim.compute import GPUS, MODELS, EngineConfig, LogNormalLengths, TokenWorkload
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.phases import GPUS_PER_NODE, link_bytes_per_s
from pipesim.compute.profiles import profile
from pipesim.compute.sync import CALIBRATION_SECONDS, SyncModel, calibrated_link_efficiency
from pipesim.compute.trainer import TrainerConfig
from pipesim.core.validate import FieldError
from tests.test_refusals_core import check_refusal

H20, H100 = GPUS["h20"], GPUS["h100-sxm"]


def test_the_calibration_row_is_reproduced() -> None:
    engine = EngineConfig(model=MODELS["qwen3-30b-a3b"], gpu=H20, tp=4, max_model_len=4096)
    got = SyncModel().sync_time_s(engine, profile("megatron-moe"), 16, colocated=False, n_gpus=32)
    assert got == pytest.approx(CALIBRATION_SECONDS, rel=1e-12)
    assert 0 < calibrated_link_efficiency() <= 1


def _reference_s(
    model: SyncModel, engine: EngineConfig, trainer_gpus: int, colocated: bool, n_gpus: int
) -> float:
    """An FSDP trainer's sync bucket by bucket: each bucket's all-gather, its broadcast, its load."""
    gpu, eff = engine.gpu, model.efficiency
    left, total = engine.model.weight_bytes("bf16"), model.fixed_s
    g = trainer_gpus
    while left > 0:
        b = min(model.bucket_bytes, left)
        left -= b
        total += model.bucket_latency_s
        if g > 1:
            total += b * (g - 1) / g / (link_bytes_per_s(gpu, g) * eff)
        if not colocated:
            total += b / (link_bytes_per_s(gpu, n_gpus) * eff)
        total += b / engine.tp / (gpu.hbm_bandwidth_bytes_per_s * model.load_efficiency)
    return total


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["qwen3-0.6b", "qwen3-8b", "qwen2.5-math-7b"]),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([8, 16, 32, 64]),
    st.integers(0, 3),
    st.floats(2.0**20, 2.0**34),
    st.floats(0.0, 0.1),
    st.floats(0.05, 1.0),
)
def test_closed_form_matches_a_bucket_loop(
    name: str, tp: int, n_gpus: int, split: int, bucket: float, latency: float, eff: float
) -> None:
    engine = EngineConfig(model=MODELS[name], gpu=H100, tp=tp, max_model_len=4096)
    trainer_gpus = n_gpus * split // 4  # 0: colocated
    colocated = trainer_gpus == 0
    g = n_gpus if colocated else trainer_gpus
    model = SyncModel(bucket_bytes=bucket, bucket_latency_s=latency, link_efficiency=eff, fixed_s=0.5)
    got = model.sync_time_s(engine, profile("fsdp2-dense"), g, colocated, n_gpus)
    assert got == pytest.approx(_reference_s(model, engine, g, colocated, n_gpus), rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([8, 16, 64]), st.integers(1, 3), st.floats(0.05, 0.5))
def test_relations(n_gpus: int, split: int, eff: float) -> None:
    small = EngineConfig(model=MODELS["qwen3-1.7b"], gpu=H100, tp=1, max_model_len=4096)
    big = dataclasses.replace(small, model=MODELS["qwen3-8b"])
    g, prof = n_gpus * split // 4, profile("fsdp2-dense")
    base = SyncModel(link_efficiency=eff)
    t = base.sync_time_s(big, prof, g, False, n_gpus)
    assert t > base.sync_time_s(small, prof, g, False, n_gpus)  # more bytes, more seconds
    assert base.parts_s(big, prof, n_gpus, True, n_gpus)["transfer"] == 0.0
    assert SyncModel(link_efficiency=eff, overlap_load=True).sync_time_s(big, prof, g, False, n_gpus) <= t
    assert SyncModel(link_efficiency=eff, per_shard=True).sync_time_s(big, prof, g, False, n_gpus) <= t
    assert SyncModel(link_efficiency=eff, sources=4).sync_time_s(big, prof, g, False, n_gpus) <= t
    fast = SyncModel(link_efficiency=min(1.0, 2 * eff)).parts_s(big, prof, g, False, n_gpus)
    slow = base.parts_s(big, prof, g, False, n_gpus)
    for part in ("gather", "transfer"):  # the links' parts scale as 1 / efficiency
        assert fast[part] == pytest.approx(slow[part] * eff / min(1.0, 2 * eff), rel=1e-12)
    if n_gpus > GPUS_PER_NODE:  # across nodes the network, not NVLink, carries the broadcast
        link = H100.network_bandwidth_bytes_per_s
        assert slow["transfer"] == pytest.approx(big.model.weight_bytes("bf16") / (link * eff))


def test_megatron_reshards_within_its_tp_and_ep_groups() -> None:
    engine = EngineConfig(model=MODELS["qwen3-30b-a3b"], gpu=H100, tp=4, max_model_len=4096)
    moe = profile("megatron-moe")
    none = dataclasses.replace(moe, ep=1, tp=1)
    sync = SyncModel(link_efficiency=0.5)
    assert sync.parts_s(engine, none, 16, False, 32)["gather"] == 0.0  # whole layers: nothing to gather
    one = sync.parts_s(engine, moe, 16, False, 32)["gather"]
    staged = sync.parts_s(engine, dataclasses.replace(moe, pp=2), 16, False, 32)["gather"]
    assert staged == pytest.approx(one / 2)  # stages gather their own layers in parallel


def _run(**kw: Any) -> Any:
    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=H100, max_model_len=2048)
    work = TokenWorkload(response=LogNormalLengths(200.0, 0.5), prompt=64, max_response_tokens=512)
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=16, steps=3, max_staleness=0),
        weight_update=pipesim.Drain(),
    )
    cluster = Cluster(engine=eng, n_gpus=16, trainer_gpus=8)
    return cluster, run_compute(sc, cluster, work, seed=3, **kw)


def test_a_run_syncs_by_the_model_unless_told() -> None:
    trainer = TrainerConfig(model=MODELS["qwen3-0.6b"], gpu=H100, n_gpus=8, profile="megatron-dense")
    cluster, run = _run(trainer=trainer)
    want = cluster.sync_time_s(trainer)
    assert want != cluster.sync_time_s()  # the trainer's profile changes the gather
    durations = [b - a for a, b, _ in run.result.sync_log]
    assert durations and all(d == pytest.approx(want, rel=1e-9) for d in durations)
    _, told = _run(trainer=trainer, sync_time_s=2.5)
    assert all(b - a == pytest.approx(2.5) for a, b, _ in told.result.sync_log)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: SyncModel(bucket_bytes=0), "bucket_bytes"),
        (lambda: SyncModel(bucket_latency_s=-1.0), "bucket_latency_s"),
        (lambda: SyncModel(link_efficiency=1.5), "link_efficiency"),
        (lambda: SyncModel(link_efficiency=0.0), "link_efficiency"),
        (lambda: SyncModel(load_efficiency=math.nan), "load_efficiency"),
        (lambda: SyncModel(overlap_load=1), "overlap_load"),  # type: ignore[arg-type]
        (lambda: SyncModel(per_shard="yes"), "per_shard"),  # type: ignore[arg-type]
        (lambda: SyncModel(sources=0), "sources"),
        (lambda: SyncModel(fixed_s=math.inf), "fixed_s"),
        (
            lambda: Cluster(
                engine=EngineConfig(model=MODELS["qwen3-0.6b"], gpu=H100, max_model_len=2048),
                n_gpus=2,
                sync=3,  # type: ignore[arg-type]
            ),
            "sync",
        ),
    ],
)
def test_bad_input_names_the_field(build: Any, field: str) -> None:
    check_refusal(build, FieldError, field)
