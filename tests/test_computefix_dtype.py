"""The engine's GEMMs read their weights at ``EngineConfig.weight_dtype`` (weight-only quantization).

Before, ``roofline.gemm_time_s`` read every weight at 2 bytes whatever the dtype, so the KV budget
moved with ``weight_dtype`` and the times did not: an int4 Qwen3-32B on one L40S (16.4 GB held)
was charged 95 ms per token, the time to read 65 GB. The physical bound: a decode step at batch 1
reads at least the weights the token passes through, so it takes at least those bytes over the HBM
bandwidth; and fewer bytes per weight make a memory-bound step faster.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim.compute import GPUS, MODELS
from pipesim.compute.cost import EngineConfig, ReplicaCost
from pipesim.compute.models import dtype_bytes
from pipesim.compute.roofline import gemm_time_s, linear_times_s

# widest to narrowest weights: the batch-1 step must get strictly faster down this list
DTYPES = ("fp32", "bf16", "fp8", "int4")
DENSE = ("qwen3-0.6b", "qwen3-8b", "qwen3-32b", "llama-3.1-8b", "deepseek-r1-distill-qwen-1.5b")
GPU_NAMES = ("h100-sxm", "a100-80gb", "h20", "l40s", "b200")


def _engine(model: str, gpu: str, tp: int, dtype: str) -> EngineConfig | None:
    try:
        return EngineConfig(model=MODELS[model], gpu=GPUS[gpu], tp=tp, max_model_len=2048, weight_dtype=dtype)
    except ValueError:  # does not fit, or a tp the model refuses
        return None


def _read_bytes_per_gpu(e: EngineConfig) -> float:
    """The weight bytes one token at batch 1 must read per GPU: every weight it passes through
    (a mixture of experts: its active experts only), the embedding lookup excepted."""
    m = e.model
    params = m.n_active_params if m.is_moe else m.n_params
    embed = 0 if m.tied_embeddings else m.vocab_size * m.hidden_size  # looked up, not streamed
    return (params - embed) * dtype_bytes(e.weight_dtype) / e.tp


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(DENSE + ("qwen3-30b-a3b",)),
    st.sampled_from(GPU_NAMES),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from(DTYPES),
    st.integers(0, 4096),
)
def test_a_batch_of_one_takes_at_least_its_weight_reads(
    model: str, gpu: str, tp: int, dtype: str, kv: int
) -> None:
    e = _engine(model, gpu, tp, dtype)
    if e is None:
        return
    floor = _read_bytes_per_gpu(e) / e.gpu.hbm_bandwidth_bytes_per_s
    assert ReplicaCost(e).iteration_s(1, kv) >= floor
    if not e.model.is_moe:  # a dense model reads nearly everything it holds (not the embedding)
        embed = 0 if e.model.tied_embeddings else e.model.vocab_size * e.model.hidden_size
        assert e.weight_bytes_per_gpu - _read_bytes_per_gpu(e) == pytest.approx(
            embed * dtype_bytes(dtype) / tp
        )


@pytest.mark.parametrize("model", DENSE)
@pytest.mark.parametrize("gpu", GPU_NAMES)
def test_a_dense_batch_of_one_takes_at_least_the_weights_held(model: str, gpu: str) -> None:
    """The brief's bound: weight bytes held per GPU / HBM bandwidth, for every dtype that fits."""
    for tp in (1, 2, 4):
        for dtype in DTYPES:
            e = _engine(model, gpu, tp, dtype)
            if e is not None:
                t = ReplicaCost(e).iteration_s(1, 1)
                assert t >= e.weight_bytes_per_gpu / e.gpu.hbm_bandwidth_bytes_per_s, (tp, dtype)


@pytest.mark.parametrize("model", DENSE + ("qwen3-30b-a3b",))
@pytest.mark.parametrize("gpu", GPU_NAMES)
def test_narrower_weights_decode_a_batch_of_one_faster(model: str, gpu: str) -> None:
    for tp in (1, 2, 4, 8):
        engines = [_engine(model, gpu, tp, d) for d in DTYPES]
        times = [ReplicaCost(e).iteration_s(1, 1000) for e in engines if e is not None]
        assert all(a > b for a, b in zip(times, times[1:], strict=False)), (tp, times)


def test_the_l40s_case_of_the_review() -> None:
    """Qwen3-32B at tp 1 on an L40S: bf16 does not fit; fp8 and int4 do, and are charged about
    what reading what they hold takes (95.2 ms each before, reading 65 GB)."""
    assert _engine("qwen3-32b", "l40s", 1, "bf16") is None
    times = {}
    for dtype in ("fp8", "int4"):
        e = _engine("qwen3-32b", "l40s", 1, dtype)
        assert e is not None
        times[dtype] = t = ReplicaCost(e).iteration_s(1, 1)
        held_s = e.weight_bytes_per_gpu / e.gpu.hbm_bandwidth_bytes_per_s
        assert held_s <= t < 1.5 * held_s, dtype
    assert times["int4"] < 0.6 * times["fp8"]


def test_a_large_prefill_barely_moves_with_the_weights() -> None:
    """Weight-only: the math stays at the bf16 peak, so a compute-bound prefill keeps nearly its
    time (within 5%) while a batch-1 decode step drops by a third or more in fp8."""
    t = {}
    for d in ("bf16", "fp8"):
        c = ReplicaCost(EngineConfig(model=MODELS["qwen3-8b"], gpu=GPUS["h100-sxm"], weight_dtype=d))
        t[d] = (c.prefill_s(8192, 8192 * 4096, 1), c.iteration_s(1, 1))
    assert t["fp8"][0] == pytest.approx(t["bf16"][0], rel=0.05) and t["fp8"][0] < t["bf16"][0]
    assert t["fp8"][1] < 0.7 * t["bf16"][1]


@settings(max_examples=50, deadline=None)
@given(st.floats(1, 8192), st.integers(1, 16384), st.integers(1, 16384), st.sampled_from(GPU_NAMES))
def test_bf16_weights_read_as_before(n: float, k: int, m: int, gpu: str) -> None:
    """The default is the formula before weights had a dtype, to the bit (the measured checks)."""
    g = GPUS[gpu]
    assert gemm_time_s(g, n, k, m) == gemm_time_s(g, n, k, m, weight_bytes=2)
    assert gemm_time_s(g, n, k, m, weight_bytes=2) == gemm_time_s(g, n, k, m, weight_bytes=2.0)
    # fewer weight bytes never cost more; the activations are the same
    assert gemm_time_s(g, n, k, m, weight_bytes=0.5) <= gemm_time_s(g, n, k, m, weight_bytes=1)
    assert gemm_time_s(g, n, k, m, weight_bytes=1) <= gemm_time_s(g, n, k, m)


def test_linear_times_default_to_bf16_and_refuse_an_unknown_dtype() -> None:
    m, g = MODELS["qwen3-30b-a3b"], GPUS["h100-sxm"]
    assert linear_times_s(m, g, 7, 2) == linear_times_s(m, g, 7, 2, weight_dtype="bf16")
    with pytest.raises(ValueError) as e:
        linear_times_s(m, g, 7, 2, weight_dtype="int3")
    assert getattr(e.value, "field", None) == "weight_dtype"


def test_compute_bound_agrees_with_the_weights_read() -> None:
    """``compute_bound`` already weighed the dtype's bytes; the step it classifies as memory
    bound must be the one whose time fell with the bytes."""
    for d in DTYPES:
        c = ReplicaCost(EngineConfig(model=MODELS["qwen3-8b"], gpu=GPUS["h100-sxm"], weight_dtype=d))
        assert not c.compute_bound(1, 1000)
