"""A config.json that ModelSpec refuses is refused in config.json's own keys, and a dtype field
names itself (issue 44: "n_heads (32) must be divisible by n_kv_heads (5)" named no key of the
user's file; EngineConfig(weight_dtype=None) said "unknown dtype None")."""

from __future__ import annotations

from typing import Any

import pytest

from pipesim.compute import GPUS, MODELS
from pipesim.compute.cost import EngineConfig
from pipesim.compute.models import ModelSpec

QWEN3 = dict(
    model_type="qwen3",
    num_attention_heads=32,
    hidden_size=4096,
    num_hidden_layers=36,
    num_key_value_heads=8,
    intermediate_size=12288,
    vocab_size=151936,
    max_position_embeddings=40960,
    head_dim=128,
)
MOE = dict(
    QWEN3,
    model_type="qwen3_moe",
    num_experts=128,
    num_experts_per_tok=8,
    moe_intermediate_size=768,
    decoder_sparse_step=1,
)

# (base config, change, the config.json key the refusal must name, a spec field it must not)
CASES: list[tuple[dict[str, Any], dict[str, Any], str, str]] = [
    (QWEN3, {"num_key_value_heads": 5}, "num_key_value_heads", "n_kv_heads"),
    (QWEN3, {"num_attention_heads": 30}, "num_attention_heads", "n_heads"),
    (MOE, {"num_experts_per_tok": 129}, "num_experts_per_tok", "n_active_experts"),
    # no head_dim and heads that do not divide hidden_size: a typo, not a 128.03-wide head
    (QWEN3, {"head_dim": None, "hidden_size": 4097}, "hidden_size", "q_size"),
]


@pytest.mark.parametrize(("base", "change", "key", "field"), CASES, ids=[c[2] for c in CASES])
def test_a_refused_config_names_its_own_key(
    base: dict[str, Any], change: dict[str, Any], key: str, field: str
) -> None:
    with pytest.raises(ValueError) as info:
        ModelSpec.from_hf_config({**base, **change})
    message = str(info.value)
    assert key in message and f"{field} " not in message and f"{field})" not in message


def test_a_good_config_still_loads() -> None:
    spec = ModelSpec.from_hf_config(QWEN3)
    assert (spec.n_heads, spec.n_kv_heads) == (32, 8)


def test_head_dim_given_explicitly_needs_no_division() -> None:
    """Where the config states head_dim, hidden_size need not be a multiple of the heads (the
    projections are heads x head_dim wide, as transformers builds them)."""
    spec = ModelSpec.from_hf_config({**QWEN3, "hidden_size": 4100, "head_dim": 128})
    assert spec.head_dim == 128 and spec.hidden_size == 4100
    assert ModelSpec.from_hf_config({**QWEN3, "head_dim": None}).head_dim == 4096 // 32


@pytest.mark.parametrize("field", ["weight_dtype", "kv_dtype"])
@pytest.mark.parametrize("bad", [None, "bf17", 16])
def test_a_bad_dtype_names_its_field(field: str, bad: object) -> None:
    with pytest.raises(ValueError) as info:
        EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], **{field: bad})
    assert str(info.value).startswith(f"{field}:")
