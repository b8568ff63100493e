"""Shipped model specs: :data:`MODELS`, built from the published ``config.json`` of each checkpoint.

Each entry below copies the cost-relevant keys of the model's Hugging Face ``config.json`` verbatim
(the Qwen/Qwen3-*, Qwen/Qwen2.5-*, deepseek-ai/DeepSeek-R1-Distill-Qwen-*, meta-llama/Llama-2-7b-hf
and meta-llama/Llama-3.1-8B repositories) and goes through :meth:`ModelSpec.from_hf_config`, so the
catalog exercises the same reader a user's config does. The DeepSeek distills are Qwen2 models
(from Qwen2.5-Math-1.5B and -7B) with untied embeddings and a 128K position table.
Published sizes these reproduce within 1-2% are checked in ``tests/test_compute_specs.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pipesim.compute.models import ModelSpec
from pipesim.core.errors import shown
from pipesim.core.validate import FieldError

_QWEN3_VOCAB = 151936


def _qwen3(layers: int, hidden: int, heads: int, inter: int, tied: bool) -> dict[str, Any]:
    return {
        "model_type": "qwen3",
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": inter,
        "vocab_size": _QWEN3_VOCAB,
        "tie_word_embeddings": tied,
        "max_position_embeddings": 40960,
    }


def _qwen2(
    layers: int, hidden: int, heads: int, kv: int, inter: int, vocab: int, ctx: int, tied: bool
) -> dict[str, Any]:
    return {
        "model_type": "qwen2",
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "intermediate_size": inter,
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        "max_position_embeddings": ctx,
    }


def _llama(kv: int, inter: int, vocab: int, ctx: int) -> dict[str, Any]:
    return {
        "model_type": "llama",
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": kv,
        "intermediate_size": inter,
        "vocab_size": vocab,
        "tie_word_embeddings": False,
        "max_position_embeddings": ctx,
    }


HF_CONFIGS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "qwen3-0.6b": _qwen3(28, 1024, 16, 3072, tied=True),
        "qwen3-1.7b": _qwen3(28, 2048, 16, 6144, tied=True),
        "qwen3-4b": _qwen3(36, 2560, 32, 9728, tied=True),
        "qwen3-8b": _qwen3(36, 4096, 32, 12288, tied=False),
        "qwen3-14b": _qwen3(40, 5120, 40, 17408, tied=False),
        "qwen3-32b": _qwen3(64, 5120, 64, 25600, tied=False),
        "qwen3-30b-a3b": {
            **_qwen3(48, 2048, 32, 6144, tied=False),
            "model_type": "qwen3_moe",
            "num_key_value_heads": 4,
            "moe_intermediate_size": 768,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
        },
        "qwen2.5-7b": _qwen2(28, 3584, 28, 4, 18944, 152064, 131072, tied=False),
        "qwen2.5-math-7b": _qwen2(28, 3584, 28, 4, 18944, 152064, 4096, tied=False),
        "deepseek-r1-distill-qwen-1.5b": _qwen2(28, 1536, 12, 2, 8960, 151936, 131072, tied=False),
        "deepseek-r1-distill-qwen-7b": _qwen2(28, 3584, 28, 4, 18944, 152064, 131072, tied=False),
        "llama-2-7b": _llama(32, 11008, 32000, 4096),
        "llama-3.1-8b": _llama(8, 14336, 128256, 131072),
    }
)
"""The cost-relevant ``config.json`` keys of every shipped model, by lowercase name."""

MODELS: Mapping[str, ModelSpec] = MappingProxyType(
    {name: ModelSpec.from_hf_config(cfg, name=name) for name, cfg in HF_CONFIGS.items()}
)
"""Every shipped :class:`ModelSpec` by lowercase name; read-only."""


HF_IDS: Mapping[str, str] = MappingProxyType(
    {
        **{f"qwen/{k}": k for k in HF_CONFIGS if k.startswith(("qwen3-", "qwen2.5-"))},
        **{f"deepseek-ai/{k}": k for k in HF_CONFIGS if k.startswith("deepseek-")},
        "meta-llama/llama-2-7b-hf": "llama-2-7b",
        "meta-llama/llama-2-7b": "llama-2-7b",
        "meta-llama/llama-3.1-8b": "llama-3.1-8b",
        "meta-llama/meta-llama-3.1-8b": "llama-3.1-8b",
    }
)
"""Hugging Face repository ids (lowercase) of the shipped models -> their catalog names."""


def model_key(name: str) -> str:
    """The catalog name of ``name``: itself lowercased, or the model a Hugging Face id names
    (``Qwen/Qwen3-8B`` -> ``qwen3-8b``; :data:`HF_IDS`)."""
    key = name.strip().lower()
    return HF_IDS.get(key, key)


def model(name: str) -> ModelSpec:
    """The shipped :class:`ModelSpec` called ``name`` (case-insensitive, or its Hugging Face id);
    ``ValueError`` listing the valid names for an unknown one."""
    key = model_key(name) if isinstance(name, str) else name
    try:
        return MODELS[key]
    except (KeyError, TypeError):
        raise FieldError(
            f"unknown model {shown(name)}; valid names: {', '.join(sorted(MODELS))}", "model"
        ) from None
