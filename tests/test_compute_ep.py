"""Expert parallelism (issue 17): an ``ep`` degree per engine replica for mixture-of-experts models.

The routed experts of Qwen3-30B-A3B split whole across ``ep`` groups instead of each sharded
``1/tp``: the same FLOPs, weight bytes and KV budget per GPU, fewer activation bytes, and the MoE's
all-reduce replaced by an all-to-all dispatch and combine (``pipesim/compute/cost.py``)."""

from __future__ import annotations

import math

import pytest

from pipesim.compute import GPUS, MODELS
from pipesim.compute.cost import EngineConfig, ReplicaCost
from pipesim.compute.roofline import experts_touched, linear_times_s
from pipesim.core.validate import FieldError
from tests.test_refusals_core import check_refusal

MOE = MODELS["qwen3-30b-a3b"]
H100 = GPUS["h100-sxm"]


def cfg(tp: int, ep: int = 1, **kw: object) -> EngineConfig:
    return EngineConfig(model=MOE, gpu=H100, tp=tp, ep=ep, max_model_len=8192, **kw)  # type: ignore[arg-type]


def test_ep_one_is_the_tp_sharded_model() -> None:
    """``ep=1`` is the default and changes nothing."""
    a, b = ReplicaCost(cfg(4)), ReplicaCost(cfg(4, ep=1))
    for n in (1, 7, 64, 1000):
        assert a.linear_s(n) == b.linear_s(n)
        assert linear_times_s(MOE, H100, n, 4) == linear_times_s(MOE, H100, n, 4, ep=1)


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_ep_keeps_memory_and_splits_pairs(tp: int) -> None:
    """Weights per GPU and the KV budget are unchanged; a GPU runs ``1/ep`` of the pairs over its
    own experts, so the expert GEMMs read fewer activations and never take longer."""
    for ep in (2, tp):
        c0, c1 = cfg(tp), cfg(tp, ep=ep)
        assert c1.weight_bytes_per_gpu == c0.weight_bytes_per_gpu
        assert c1.kv_budget_tokens == c0.kv_budget_tokens
        for n in (1, 4, 32, 256, 2048):
            t0, t1 = linear_times_s(MOE, H100, n, tp), linear_times_s(MOE, H100, n, tp, ep=ep)
            assert t1["qkv"] == t0["qkv"] and t1["attn_out"] == t0["attn_out"]  # attention stays TP
            assert t1["router"] == t0["router"]
            for k in ("gate_up", "down"):
                assert t1[k] <= t0[k] * (1 + 1e-12)
        # a large batch touches every expert: the activation bytes saved show
        big0, big1 = linear_times_s(MOE, H100, 2048, tp), linear_times_s(MOE, H100, 2048, tp, ep=ep)
        assert big1["gate_up"] < 0.95 * big0["gate_up"]


def test_small_batch_reads_few_experts_on_each_gpu() -> None:
    """One token touches 8 of 128 experts: with ``ep = 8`` a GPU holds 16 experts and expects to
    read one of them, whole; sharded ``1/8`` it reads an eighth of all 8 -- the same bytes, so the
    memory-bound time is the same (within the activations), and far below a large batch's."""
    assert math.isclose(experts_touched(MOE, 1), 8.0)
    t0 = linear_times_s(MOE, H100, 1, 8)
    t1 = linear_times_s(MOE, H100, 1, 8, ep=8)
    assert t1["gate_up"] == pytest.approx(t0["gate_up"], rel=1e-2)
    assert t1["gate_up"] < 0.3 * linear_times_s(MOE, H100, 512, 8, ep=8)["gate_up"]


def test_alltoall_replaces_the_moe_allreduce() -> None:
    """Communication per layer: the attention's ring all-reduce, plus dispatch and combine of
    ``b * k * (ep - 1) / ep**2 * hidden * 2`` bytes each way; at ``ep = tp = 8`` with 8 active
    experts they move what the MoE's all-reduce moved, so only the latencies differ."""
    tp = 8
    c0, c1 = ReplicaCost(cfg(tp)), ReplicaCost(cfg(tp, ep=tp))
    lat = c0.config.allreduce_latency_s
    bw = H100.nvlink_bandwidth_per_direction_bytes_per_s
    for b in (1, 64, 512):
        per_dir = b * MOE.n_active_experts * (tp - 1) / tp**2 * MOE.hidden_size * 2
        ring = b * 2 * (tp - 1) / tp * MOE.hidden_size * 2 / bw
        assert c1._allreduce_s(b) == pytest.approx((lat + ring) + 2 * (lat + per_dir / bw), rel=1e-12)
        assert c1._allreduce_s(b) - c0._allreduce_s(b) == pytest.approx(lat, rel=1e-9)
    # ep = 2 of tp = 4: each GPU sends 8 * 1/4 of its tokens' hidden vectors per direction
    c2 = ReplicaCost(cfg(4, ep=2))
    ring4 = 64 * 2 * 3 / 4 * MOE.hidden_size * 2 / bw
    a2a = 64 * 8 * 1 / 4 * MOE.hidden_size * 2 / bw
    assert c2._allreduce_s(64) == pytest.approx(lat + ring4 + 2 * (lat + a2a), rel=1e-12)


def test_decode_iteration_with_ep_behaves() -> None:
    """A decode iteration: EP pays one latency more at one sequence and saves at a large batch
    (fewer activation bytes in the expert GEMMs), and tokens/s still grow with the batch."""
    c0, c1 = ReplicaCost(cfg(8)), ReplicaCost(cfg(8, ep=8))
    assert c1.iteration_s(1, 1000) > c0.iteration_s(1, 1000)
    assert c1.linear_s(2048) < c0.linear_s(2048)
    rates = [c1.tokens_per_s(b, b * 1000.0) for b in (1, 8, 64, 256)]
    assert rates == sorted(rates)


@pytest.mark.parametrize(
    "kw",
    [
        dict(model=MODELS["qwen3-8b"], tp=2, ep=2),
        dict(model=MOE, tp=4, ep=3),
        dict(model=MOE, tp=2, ep=4),
        dict(model=MOE, tp=4, ep=0),
        dict(model=MOE, tp=4, ep=True),
    ],
    ids=["dense", "not-dividing-experts", "not-dividing-tp", "zero", "bool"],
)
def test_bad_ep_names_the_field(kw: dict[str, object]) -> None:
    check_refusal(lambda: EngineConfig(gpu=H100, max_model_len=8192, **kw), FieldError, "ep")  # type: ignore[arg-type]


def test_dense_roofline_rejects_ep() -> None:
    check_refusal(lambda: linear_times_s(MODELS["qwen3-8b"], H100, 16, 2, ep=2), FieldError, "ep")
