"""A config.json missing an optional key reads as transformers' config class of its model_type
reads it (checked against transformers' own AutoConfig, the independent reference), with a
warning naming a missing key that changes the model's size; keys transformers ignores are ignored
with a warning; rope_scaling scales the context as vLLM derives it; a config file is named by its
stem (config.json by its folder); a run spec's unknown [model] key lists each valid key once."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from pipesim.compute.catalog import HF_CONFIGS
from pipesim.compute.models import ModelSpec
from pipesim.core.validate import FieldError

BASES = {  # one published config per supported model_type
    "llama": HF_CONFIGS["llama-3.1-8b"],
    "qwen2": HF_CONFIGS["qwen2.5-7b"],
    "qwen3": HF_CONFIGS["qwen3-14b"],
    "qwen3_moe": HF_CONFIGS["qwen3-30b-a3b"],
}
OPTIONAL = ("num_key_value_heads", "head_dim", "tie_word_embeddings", "attention_bias")


def _reference(config: dict[str, Any]) -> dict[str, Any]:
    """The spec fields transformers' AutoConfig (and its modeling code's head_dim fallback) gives."""
    transformers = pytest.importorskip("transformers")
    kw = {k: v for k, v in config.items() if k not in ("model_type", "architectures", "_name_or_path")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = transformers.AutoConfig.for_model(config["model_type"], **kw)
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return {
        "n_kv_heads": c.num_key_value_heads,
        "head_dim": head_dim,
        "tied_embeddings": c.tie_word_embeddings,
        # Qwen2Config has no attention_bias: modeling_qwen2.py always biases q/k/v
        "attention_bias": True if c.model_type == "qwen2" else c.attention_bias,
    }


def _ours(config: dict[str, Any]) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = ModelSpec.from_hf_config(config, name="x")
    return {k: getattr(spec, k) for k in ("n_kv_heads", "head_dim", "tied_embeddings", "attention_bias")}


@pytest.mark.parametrize("key", OPTIONAL)
@pytest.mark.parametrize("model_type", sorted(BASES))
def test_a_missing_optional_key_reads_as_transformers_reads_it(model_type: str, key: str) -> None:
    base = dict(BASES[model_type])
    if model_type in ("qwen2", "qwen3"):  # 28 and 40 heads: a default of 32 KV heads divides neither
        base["num_attention_heads"] = 64
    config = {k: v for k, v in base.items() if k != key}
    assert _ours(config) == _reference(config)


@pytest.mark.parametrize(
    ("model_type", "key", "default"),
    [
        ("qwen3", "num_key_value_heads", "32"),
        ("qwen3", "head_dim", "128"),
        ("qwen3", "tie_word_embeddings", "False"),
        ("qwen3_moe", "num_key_value_heads", "4"),
        ("qwen2", "num_key_value_heads", "32"),
        ("llama", "num_key_value_heads", "num_attention_heads (32)"),
    ],
)
def test_a_missing_key_that_sizes_the_model_is_warned_of(model_type: str, key: str, default: str) -> None:
    base = dict(BASES[model_type], num_attention_heads=64 if model_type in ("qwen2", "qwen3") else 32)
    config = {k: v for k, v in base.items() if k != key}
    with pytest.warns(
        UserWarning, match=rf"config key '{key}' missing: .* default {re.escape(default)}"
    ) as got:
        ModelSpec.from_hf_config(config, name="x")
    assert len(got) == 1 and "\n" not in str(got[0].message)


def test_a_published_config_reads_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for config in BASES.values():
            ModelSpec.from_hf_config(config)


def test_a_qwen3_config_without_kv_heads_is_not_multi_head() -> None:
    """The walkthrough's Qwen3-14B shape with num_key_value_heads dropped: transformers reads 32
    KV heads, which do not divide 40 heads, so the config is refused naming the key, not read as
    40 KV heads (5x the KV per token)."""
    config = {k: v for k, v in BASES["qwen3"].items() if k != "num_key_value_heads"}
    with pytest.warns(UserWarning, match="num_key_value_heads"), pytest.raises(FieldError) as err:
        ModelSpec.from_hf_config(config)
    assert err.value.field in ("num_key_value_heads", "num_attention_heads")
    assert "num_key_value_heads" in str(err.value)


@pytest.mark.parametrize(
    ("model_type", "extra", "key"),
    [
        ("qwen3_moe", {"shared_expert_intermediate_size": 4096}, "shared_expert_intermediate_size"),
        (
            "qwen3",
            {"num_experts": 64, "num_experts_per_tok": 8, "moe_intermediate_size": 1024},
            "num_experts",
        ),
        ("qwen3", {"use_sliding_window": True}, "use_sliding_window"),
    ],
)
def test_a_key_transformers_ignores_is_ignored_with_a_warning(
    model_type: str, extra: dict[str, Any], key: str
) -> None:
    config = {**BASES[model_type], **extra}
    with pytest.warns(UserWarning, match=rf"'{key}'.*ignored"):
        spec = ModelSpec.from_hf_config(config)
    assert spec == ModelSpec.from_hf_config(BASES[model_type])
    assert _ours(config) == _reference(config)


def test_yarn_rope_scaling_scales_the_context_as_vllm_does() -> None:
    rope = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    spec = ModelSpec.from_hf_config({**BASES["qwen3"], "rope_scaling": rope})
    assert spec.max_context_len == 131072
    linear = ModelSpec.from_hf_config({**BASES["qwen3"], "rope_scaling": {"type": "linear", "factor": 2}})
    assert linear.max_context_len == 2 * BASES["qwen3"]["max_position_embeddings"]
    llama3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}
    assert (
        ModelSpec.from_hf_config({**BASES["llama"], "rope_scaling": llama3}).max_context_len
        == (BASES["llama"]["max_position_embeddings"])
    )
    with pytest.raises(FieldError) as err:
        ModelSpec.from_hf_config({**BASES["qwen3"], "rope_scaling": {"rope_type": "yarn", "factor": "4"}})
    assert err.value.field == "rope_scaling"


@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "yarn", "factor": 4.0},  # no original_max_position_embeddings: read as 163,840
        {"rope_type": "yarn", "factr": 4.0, "original_max_position_embeddings": 32768},  # read as 32,768
        {"type": "linear", "scaling_factor": 2.0},  # a factor under another name: read as 1
    ],
    ids=["yarn-no-original", "factor-misspelt", "linear-no-factor"],
)
def test_a_rope_scaling_vllm_refuses_is_refused_not_read_silently(rope: dict[str, object]) -> None:
    """vLLM's _get_and_verify_max_len asserts a scaling type's ``factor`` and reads YaRN's
    ``original_max_position_embeddings``: a config without them fails there. They were read here
    as a factor of 1 or as max_position_embeddings, a context vLLM would not serve."""
    with pytest.raises(FieldError) as err:
        ModelSpec.from_hf_config({**BASES["qwen3"], "rope_scaling": rope})
    assert err.value.field == "rope_scaling"


def test_a_rope_without_scaling_needs_no_factor() -> None:
    """transformers 5's ``rope_parameters`` of type ``default`` (an unscaled model) has no factor."""
    plain = {**BASES["qwen3"], "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}
    assert ModelSpec.from_hf_config(plain).max_context_len == BASES["qwen3"]["max_position_embeddings"]


def test_a_config_file_is_named_by_its_stem_and_config_json_by_its_folder(tmp_path: Path) -> None:
    import json

    from pipesim.plan.checks import Table
    from pipesim.plan.specfile import read_model

    (tmp_path / "models").mkdir()
    for stem in ("dense", "moe"):
        (tmp_path / "models" / f"{stem}.json").write_text(json.dumps(BASES["qwen3"]))
    (tmp_path / "Qwen3-14B").mkdir()
    (tmp_path / "Qwen3-14B" / "config.json").write_text(json.dumps(BASES["qwen3"]))
    names = [
        read_model(Table("model", {"name": name}, ("name",)), tmp_path).name
        for name in ("models/dense.json", "models/moe.json", "Qwen3-14B", "Qwen3-14B/config.json")
    ]
    assert names == ["dense", "moe", "Qwen3-14B", "Qwen3-14B"]


def test_a_run_specs_unknown_model_key_lists_each_valid_key_once() -> None:
    from pipesim.plan.runspec_checks import check_tables

    with pytest.raises(ValueError) as err:
        check_tables({"kind": "compute", "model": {"name": "qwen3-8b", "bogus": 1}})
    listed = str(err.value).split("valid keys of model: ")[1].rstrip(")").split(", ")
    assert "episodes_per_replica" in listed and len(listed) == len(set(listed))
