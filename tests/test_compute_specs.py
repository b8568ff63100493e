"""The hardware and model layer (``pipesim.compute``): catalog figures, parameter counts, the
Hugging Face reader, validation, and the roofline checked against Vidur's H100 measurements."""

from __future__ import annotations

import ast
import csv
import dataclasses
import statistics
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pipesim.compute import (
    GPUS,
    HF_CONFIGS,
    MODELS,
    Efficiency,
    ModelSpec,
    experts_touched,
    gpu,
    model,
)
from pipesim.compute.roofline import kernel_time_s
from pipesim.core.validate import FieldError
from tests.test_refusals_core import check_refusal

REPO = Path(__file__).resolve().parents[1]
VIDUR_CSV = REPO / ".." / "shared" / "reference" / "vidur" / "h100_llama-2-7b_mlp.csv"
VIDUR_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")

# -- the GPU catalog ----------------------------------------------------------------------------


def test_catalog_has_the_required_gpus_under_lowercase_names():
    for name in ("h100-sxm", "h800", "h200", "h20", "a100-80gb", "b200", "h100-pcie", "l40s"):
        assert GPUS[name].name == name
    assert all(name == name.lower() for name in GPUS)


def test_datasheet_figures():
    h100, h800, h20, h200 = gpu("h100-sxm"), gpu("h800"), gpu("h20"), gpu("h200")
    assert h100.bf16_flops_per_s == pytest.approx(989.4e12)
    assert h100.hbm_bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert h100.nvlink_bandwidth_bytes_per_s == pytest.approx(900e9)
    assert h100.nvlink_bandwidth_per_direction_bytes_per_s == pytest.approx(450e9)
    assert h800.bf16_flops_per_s == h100.bf16_flops_per_s
    assert h800.hbm_bytes == h100.hbm_bytes
    assert h800.nvlink_bandwidth_bytes_per_s == pytest.approx(400e9)
    assert h20.bf16_flops_per_s == pytest.approx(148e12)
    assert h20.hbm_bytes == 96 * 2**30
    assert h20.hbm_bandwidth_bytes_per_s == pytest.approx(4.0e12)
    assert h200.hbm_bytes > h100.hbm_bytes and h200.hbm_bandwidth_bytes_per_s == pytest.approx(4.8e12)
    # The H20 is the memory-rich, compute-poor one: its ridge point is far lower.
    assert h20.ridge_flops_per_byte < h100.ridge_flops_per_byte / 5


def test_gpu_lookup_is_case_insensitive_and_lists_valid_names():
    assert gpu("H100-SXM") is GPUS["h100-sxm"]
    err = check_refusal(lambda: gpu("h300"), FieldError, "gpu")
    assert "h100-sxm" in str(err)  # the names it takes are listed


def test_specs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        GPUS["h100-sxm"].hbm_bytes = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        MODELS["qwen3-8b"].n_layers = 1  # type: ignore[misc]


# -- model specs --------------------------------------------------------------------------------

PUBLISHED_SIZES = {  # total parameters (billions) from the model cards; Qwen3 also gives non-embedding
    "qwen3-0.6b": 0.6,
    "qwen3-1.7b": 1.7,
    "qwen3-4b": 4.0,
    "qwen3-8b": 8.2,
    "qwen3-14b": 14.8,
    "qwen3-32b": 32.8,
    "qwen3-30b-a3b": 30.5,
    "qwen2.5-7b": 7.61,
    "qwen2.5-math-7b": 7.62,
    "deepseek-r1-distill-qwen-1.5b": 1.78,
    "deepseek-r1-distill-qwen-7b": 7.62,
    "llama-2-7b": 6.74,
    "llama-3.1-8b": 8.03,
}
PUBLISHED_NON_EMBEDDING = {"qwen3-0.6b": 0.44, "qwen3-1.7b": 1.4, "qwen3-4b": 3.6, "qwen3-8b": 6.95}


@pytest.mark.parametrize("name", sorted(PUBLISHED_SIZES))
def test_parameter_counts_match_published_sizes(name):
    assert MODELS[name].n_params / 1e9 == pytest.approx(PUBLISHED_SIZES[name], rel=0.03)
    if name in PUBLISHED_NON_EMBEDDING:
        assert MODELS[name].n_non_embedding_params / 1e9 == pytest.approx(
            PUBLISHED_NON_EMBEDDING[name], rel=0.03
        )


def test_catalog_covers_every_shipped_model():
    assert set(MODELS) == set(PUBLISHED_SIZES) == set(HF_CONFIGS)
    assert model("Qwen3-8B") is MODELS["qwen3-8b"]
    err = check_refusal(lambda: model("gpt-5"), FieldError, "model")
    assert "qwen3-8b" in str(err)


def test_moe_active_parameters():
    moe = MODELS["qwen3-30b-a3b"]
    assert moe.is_moe and not MODELS["qwen3-8b"].is_moe
    assert moe.n_active_params / 1e9 == pytest.approx(3.3, rel=0.03)
    dense = MODELS["qwen3-8b"]
    assert dense.n_active_params == dense.n_params


def test_byte_counts():
    llama = MODELS["llama-2-7b"]
    assert llama.weight_bytes() == 2 * llama.n_params
    assert llama.weight_bytes("fp8") == llama.n_params
    # Llama-2-7B: 32 layers x 32 KV heads x 128 x (K and V) x 2 bytes = 512 KiB a token.
    assert llama.kv_bytes_per_token() == 512 * 1024
    assert MODELS["qwen3-8b"].kv_bytes_per_token("fp8") == 36 * 8 * 128 * 2
    check_refusal(lambda: llama.weight_bytes("bf17"), FieldError, "dtype")


QWEN3_4B_CONFIG = {  # a handwritten Qwen3 config.json: head_dim 128 differs from 2560 / 32 = 80
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 2560,
    "head_dim": 128,
    "intermediate_size": 9728,
    "max_position_embeddings": 40960,
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "rope_theta": 1000000,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "vocab_size": 151936,
}
QWEN3_MOE_CONFIG = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "decoder_sparse_step": 1,
    "head_dim": 128,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "max_position_embeddings": 40960,
    "mlp_only_layers": [],
    "moe_intermediate_size": 768,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "tie_word_embeddings": False,
    "vocab_size": 151936,
}


def test_from_hf_config_qwen3():
    spec = ModelSpec.from_hf_config(QWEN3_4B_CONFIG, name="qwen3-4b")
    assert spec == MODELS["qwen3-4b"]
    assert spec.head_dim == 128 and spec.q_size == 4096 and spec.tied_embeddings and spec.qk_norm
    assert dataclasses.replace(spec) == spec


def test_from_hf_config_qwen3_moe():
    spec = ModelSpec.from_hf_config(QWEN3_MOE_CONFIG, name="qwen3-30b-a3b")
    assert spec == MODELS["qwen3-30b-a3b"]
    assert (spec.n_experts, spec.n_active_experts, spec.expert_intermediate_size) == (128, 8, 768)


def test_from_hf_config_llama_defaults():
    cfg = {k: v for k, v in HF_CONFIGS["llama-2-7b"].items() if k != "num_key_value_heads"}
    spec = ModelSpec.from_hf_config(cfg)
    assert spec.n_kv_heads == 32 and spec.head_dim == 128 and not spec.attention_bias
    assert spec.name == "llama"
    assert ModelSpec.from_hf_config(HF_CONFIGS["qwen2.5-7b"]).attention_bias


def test_from_hf_config_accepts_integral_floats():
    cfg = {k: float(v) if type(v) is int else v for k, v in QWEN3_4B_CONFIG.items()}
    assert ModelSpec.from_hf_config(cfg, name="qwen3-4b") == MODELS["qwen3-4b"]


def test_from_hf_config_reads_null_mlp_only_layers_as_none():
    # transformers' Qwen3MoeConfig reads null as [] (every layer a mixture of experts)
    assert ModelSpec.from_hf_config(
        {**QWEN3_MOE_CONFIG, "mlp_only_layers": None}
    ) == ModelSpec.from_hf_config(QWEN3_MOE_CONFIG)


def test_compute_package_never_imports_torch_or_transformers():
    # profile.py measures the user's GPU with torch (inside its functions; test_profile.py checks
    # that nothing else imports it with torch loaded)
    for path in (REPO / "pipesim" / "compute").glob("*.py"):
        if path.name == "profile.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = {(node.module or "").split(".")[0]}
            else:
                continue
            assert not roots & {"torch", "transformers"}, path.name


# -- the roofline -------------------------------------------------------------------------------


def _vidur_rows() -> list[dict[str, str]]:
    if not VIDUR_CSV.exists():
        pytest.skip(f"Vidur's measurements are not at {VIDUR_CSV} (shared/reference is not checked out)")
    with VIDUR_CSV.open(newline="") as f:
        return list(csv.DictReader(f))


def test_linear_time_matches_vidur_h100_llama2_7b():
    """Median |relative error| <= 10% and >= 95% of rows within 25%, overall and per TP degree."""
    spec, h100 = MODELS["llama-2-7b"], gpu("h100-sxm")
    errors: dict[int, list[float]] = {}
    for row in _vidur_rows():
        assert (
            int(row["n_embd"]) == spec.hidden_size and int(row["n_expanded_embd"]) == spec.intermediate_size
        )
        measured_s = sum(float(row[f"time_stats.{op}.median"]) for op in VIDUR_OPS) * 1e-3
        tp = int(row["num_tensor_parallel_workers"])
        predicted_s = spec.linear_time_s(h100, int(row["num_tokens"]), tp)
        errors.setdefault(tp, []).append(abs(predicted_s / measured_s - 1))
    assert sorted(errors) == [1, 2, 4, 8]
    every = [e for errs in errors.values() for e in errs]
    assert len(every) > 1000
    for errs in [every, *errors.values()]:
        assert statistics.median(errs) <= 0.10
        assert sum(e <= 0.25 for e in errs) / len(errs) >= 0.95


@pytest.mark.parametrize("p", [1.0, 1.5, 4.0, 30.0, 100.0, 1e6])
def test_kernel_time_is_a_p_norm_between_max_and_sum(p):
    # a large combine_exponent tends to the max (it must not underflow to the fixed cost alone)
    eff = Efficiency(combine_exponent=p, kernel_overhead_s=0.0)
    h100 = gpu("h100-sxm")
    for flops, moved in [(1e12, 1e9), (1e9, 1e9), (0.0, 1e9), (1e12, 0.0)]:
        t_c = flops / (eff.flop_fraction * h100.bf16_flops_per_s)
        t_m = moved / (eff.bandwidth_fraction * h100.hbm_bandwidth_bytes_per_s)
        t = kernel_time_s(h100, flops, moved, eff)
        assert max(t_c, t_m) * (1 - 1e-12) <= t <= (t_c + t_m) * (1 + 1e-12)
        assert t == pytest.approx((t_c**p + t_m**p) ** (1 / p) if p < 30 else max(t_c, t_m), rel=1e-9)
    assert kernel_time_s(h100, 0.0, 0.0) == Efficiency().kernel_overhead_s
    for bad in (-1.0, float("nan")):
        check_refusal(lambda bad=bad: kernel_time_s(h100, bad, 1e9), FieldError, "flops")


def test_roofline_helpers_name_a_bad_count():
    h100 = gpu("h100-sxm")
    check_refusal(lambda: MODELS["qwen3-8b"].decode_attention_time_s(h100, -3), FieldError, "kv_tokens")
    for bad in (-1, 1.5):
        check_refusal(lambda bad=bad: experts_touched(MODELS["qwen3-30b-a3b"], bad), FieldError, "n_tokens")


def test_decode_is_memory_bound_and_prefill_compute_bound():
    spec, h100 = MODELS["llama-2-7b"], gpu("h100-sxm")
    layer_weights = (spec.n_params - 2 * spec.vocab_size * spec.hidden_size) / spec.n_layers
    read_s = 2 * layer_weights / h100.hbm_bandwidth_bytes_per_s
    assert read_s < spec.linear_time_s(h100, 1) < 1.5 * read_s
    flop_s = 2 * 4096 * layer_weights / h100.bf16_flops_per_s
    assert flop_s < spec.linear_time_s(h100, 4096) < 1.6 * flop_s
    # The H20 has more bandwidth but a sixth of the FLOPs: faster decode, much slower prefill.
    h20 = gpu("h20")
    assert spec.linear_time_s(h20, 1) < spec.linear_time_s(h100, 1)
    assert spec.linear_time_s(h20, 4096) > 5 * spec.linear_time_s(h100, 4096)


def test_linear_time_edge_cases():
    spec, h100 = MODELS["qwen3-8b"], gpu("h100-sxm")
    assert spec.linear_time_s(h100, 0) == 0.0
    assert set(spec.linear_times_s(h100, 3)) == {"qkv", "attn_out", "gate_up", "down"}
    assert "router" in MODELS["qwen3-30b-a3b"].linear_times_s(h100, 3)
    for bad, field in (
        ({"n_tokens": -1}, "n_tokens"),
        ({"n_tokens": 2.5}, "n_tokens"),
        ({"n_tokens": 4, "tp": 0}, "tp"),
    ):
        check_refusal(lambda bad=bad: spec.linear_time_s(h100, **bad), FieldError, field)  # type: ignore[arg-type]
    slow = Efficiency(flop_fraction=0.5, bandwidth_fraction=0.5, kernel_overhead_s=1e-5)
    assert spec.linear_time_s(h100, 512, efficiency=slow) > spec.linear_time_s(h100, 512)


def test_moe_reads_only_touched_experts():
    moe, h100 = MODELS["qwen3-30b-a3b"], gpu("h100-sxm")
    assert experts_touched(moe, 1) == pytest.approx(8)
    assert experts_touched(moe, 4096) == pytest.approx(128)
    assert experts_touched(MODELS["qwen3-8b"], 10) == 0
    # One token reads 8 of 128 experts: decode is far cheaper than a dense model of the same total.
    assert moe.linear_time_s(h100, 1) < MODELS["qwen3-32b"].linear_time_s(h100, 1) / 5


def test_decode_attention_grows_with_context():
    spec, h100 = MODELS["qwen3-8b"], gpu("h100-sxm")
    assert spec.decode_attention_time_s(h100, 0) == 0.0
    short, long = spec.decode_attention_time_s(h100, 1024), spec.decode_attention_time_s(h100, 65536)
    assert long > 10 * short
    assert spec.decode_attention_time_s(h100, 65536, tp=4) < long


_names = st.sampled_from(sorted(MODELS))
_gpus = st.sampled_from(sorted(GPUS))
_tokens = st.integers(0, 65536)
_tps = st.sampled_from([1, 2, 4, 8, 16])


def _fits(spec: ModelSpec, *tps: int) -> bool:
    """Whether each ``tp`` is a valid tensor-parallel degree for ``spec`` (the helpers refuse others)."""
    return all(
        spec.n_heads % tp == 0 and (spec.n_kv_heads % tp == 0 or tp % spec.n_kv_heads == 0) for tp in tps
    )


@given(_names, _gpus, _tokens, _tokens, _tps)
def test_linear_time_is_non_decreasing_in_tokens(name, gpu_name, a, b, tp):
    spec, g = MODELS[name], GPUS[gpu_name]
    assume(_fits(spec, tp))
    lo, hi = sorted((a, b))
    assert spec.linear_time_s(g, lo, tp) <= spec.linear_time_s(g, hi, tp)


@given(_names, _gpus, st.integers(1, 65536), _tps, _tps)
def test_linear_time_is_non_increasing_in_tp(name, gpu_name, n, a, b):
    spec, g = MODELS[name], GPUS[gpu_name]
    assume(_fits(spec, a, b))
    lo, hi = sorted((a, b))
    assert spec.linear_time_s(g, n, hi) <= spec.linear_time_s(g, n, lo)


@given(_names, st.integers(1, 65536), _tps)
def test_a_gpu_better_on_every_axis_is_never_slower(name, n, tp):
    spec, h100 = MODELS[name], GPUS["h100-sxm"]
    assume(_fits(spec, tp))
    better = dataclasses.replace(h100, name="h100-plus", bf16_flops_per_s=2 * h100.bf16_flops_per_s)
    assert spec.linear_time_s(better, n, tp) <= spec.linear_time_s(h100, n, tp)
    assert spec.linear_time_s(GPUS["b200"], n, tp) <= spec.linear_time_s(h100, n, tp)


@pytest.mark.parametrize(
    ("name", "tp", "says"), [("qwen2.5-7b", 8, "n_heads"), ("qwen3-14b", 20, "n_kv_heads")]
)
def test_the_roofline_helpers_refuse_a_tp_that_does_not_split_the_heads(
    name: str, tp: int, says: str
) -> None:
    """They rounded the heads per GPU up, for a split vLLM refuses (28 heads on 8 GPUs)."""
    spec, g = MODELS[name], GPUS["h100-sxm"]
    err = check_refusal(lambda: spec.linear_time_s(g, 64, tp), FieldError, "tp")
    assert says in str(err)  # which count it does not split (n_heads or n_kv_heads)
    check_refusal(lambda: spec.decode_attention_time_s(g, 1024, tp), FieldError, "tp")


@given(
    st.integers(1, 8).map(lambda k: 2**k),
    st.integers(0, 3).map(lambda k: 2**k),
    st.integers(1, 64),
    st.integers(1, 4096),
)
def test_from_hf_config_round_trips_generated_llama_configs(heads, group, layers, inter):
    kv = max(1, heads // group)
    cfg = {
        "model_type": "llama",
        "num_hidden_layers": layers,
        "hidden_size": 64 * heads,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": inter,
        "vocab_size": 1000,
        "max_position_embeddings": 2048,
    }
    spec = ModelSpec.from_hf_config(cfg, name="x")
    assert (spec.n_layers, spec.n_heads, spec.n_kv_heads, spec.head_dim) == (layers, heads, kv, 64)
    per_layer = 2 * 64 * heads * (64 * heads + 64 * kv) + 3 * 64 * heads * inter + 2 * 64 * heads
    assert spec.n_params == layers * per_layer + 64 * heads * (1 + 2 * 1000)


@pytest.mark.parametrize("key", ["vocab_size", "hidden_size"])
def test_from_hf_config_names_a_null_required_key_as_null(key: str) -> None:
    """From a probe: a required key present as null read 'config is missing required key'; the
    two refusals name the same key, and only the null one says null."""
    null = check_refusal(
        lambda: ModelSpec.from_hf_config({**HF_CONFIGS["qwen3-4b"], key: None}), FieldError, key
    )
    bad = {k: v for k, v in HF_CONFIGS["qwen3-4b"].items() if k != key}
    missing = check_refusal(lambda: ModelSpec.from_hf_config(bad), FieldError, key)
    assert "null" in str(null) and "null" not in str(missing)
