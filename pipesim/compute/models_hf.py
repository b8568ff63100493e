"""Reading a Hugging Face ``config.json`` (the plain dict ``json.load`` gives) into a
:class:`~pipesim.compute.models.ModelSpec`: :meth:`ModelSpec.from_hf_config
<pipesim.compute.models.ModelSpec.from_hf_config>`, whose docstring lists what is read.

Design: nothing here imports ``transformers``; a missing optional key reads as that
``model_type``'s ``transformers`` config class reads it (:data:`_HF_DEFAULTS`, copied from
``transformers`` 5.25.0: ``Qwen3Config`` defaults ``num_key_value_heads`` to 32 and ``head_dim`` to
128, ``Qwen3MoeConfig`` ``num_key_value_heads`` to 4, only ``LlamaConfig`` to the head count), and
one whose default changes the model's size (:data:`_WARN_MISSING`) also raises a one-line
:class:`UserWarning` naming the key and the default: a real config gives it, so a missing one is
likely a typo. A key the class ignores (a shared expert under ``qwen3_moe``, experts under a dense
type, ``use_sliding_window``) is ignored with a warning naming it. ``max_position_embeddings`` is
scaled by ``rope_scaling`` as vLLM derives its maximum length (:func:`_rope_max_len`). Where
``transformers`` would quietly floor or divide by a bad value (``hidden_size`` not a multiple of the
heads without ``head_dim``, a null ``decoder_sparse_step``) the config is refused instead. Every
refusal is a :class:`~pipesim.core.validate.FieldError` naming the key as ``config.json`` spells
it: the spec's own checks are reworded from its field names into the file's keys
(:data:`_HF_KEYS`), and an integer key is bounded by :data:`~pipesim.compute.models.MAX_MODEL_DIM`
as every spec field is. The model types read are :data:`_HF_MODEL_TYPES`; a Qwen3-MoE config with
dense layers is refused, since a spec holds one MLP kind for every layer.

Split from :mod:`pipesim.compute.models`, whose :meth:`ModelSpec.from_hf_config` calls
:func:`spec_from_hf_config`.
"""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pipesim.compute.models import _DIM_WHY, MAX_MODEL_DIM
from pipesim.core.errors import FieldError, check_int, shown
from pipesim.core.validate import refuse

if TYPE_CHECKING:
    from pipesim.compute.models import ModelSpec

__all__ = ["spec_from_hf_config"]


def spec_from_hf_config(cls: type[ModelSpec], d: Mapping[str, Any], name: str | None = None) -> ModelSpec:
    """``cls`` (:class:`~pipesim.compute.models.ModelSpec` or a subclass) read from the
    ``config.json`` dict ``d`` (see :meth:`ModelSpec.from_hf_config
    <pipesim.compute.models.ModelSpec.from_hf_config>`)."""
    if not isinstance(d, Mapping):
        raise refuse("config", f"must be a dict, got {type(d).__name__}")

    def need(key: str) -> Any:
        if key not in d:
            raise FieldError(f"config is missing required key {shown(key)}", key)
        if d[key] is None:
            raise FieldError(f"config key {shown(key)} is null: it is required", key)
        return d[key]

    def integer(key: str, default: int | None = None, minimum: int = 1, nullable: bool = True) -> int:
        """Key ``key`` as an int in ``[minimum, MAX_MODEL_DIM]`` (an integral float, as some
        tools write, is accepted); a missing key, or a null one where ``nullable``, is
        ``default``."""
        if not nullable and d.get(key, 0) is None:
            raise FieldError(f"config key {shown(key)} is null: it must be an integer >= {minimum}", key)
        value = need(key) if default is None else d.get(key)
        if value is None:
            assert default is not None
            return default
        integral = isinstance(value, float) and value.is_integer()
        whole = integral or (isinstance(value, int) and not isinstance(value, bool))
        big = whole and value > MAX_MODEL_DIM  # type: ignore[operator]
        if big or integral:
            if big:  # named as written (1e+20), a 300-digit int cut short (check_int writes it whole)
                raise FieldError(
                    f"config key {shown(key)} must be at most {MAX_MODEL_DIM:,} ({_DIM_WHY}), got "
                    f"{shown(value)}",
                    key,
                )
            value = int(value)
        try:
            check_int(key, value, minimum, MAX_MODEL_DIM, _DIM_WHY)
        except FieldError as exc:  # the same sentence, the key named as config.json writes it
            raise FieldError(f"config key {shown(key)}{str(exc)[len(key) :]}", key) from None
        return int(value)

    def flag(key: str) -> bool:
        value = d.get(key)
        if value is None:
            return bool(default(key))
        if not isinstance(value, bool):
            raise FieldError(f"config key {shown(key)} must be true or false, got {shown(value)}", key)
        return value

    model_type = need("model_type")
    if not isinstance(model_type, str) or model_type not in _HF_MODEL_TYPES:
        raise FieldError(
            f"unsupported model_type {shown(model_type)}; supported: {', '.join(sorted(_HF_MODEL_TYPES))}",
            "model_type",
        )
    defaults = _HF_DEFAULTS[model_type]

    def default(key: str) -> Any:
        """``key``'s default under ``model_type`` (:data:`_HF_DEFAULTS`), warned of where it is
        missing (not null) and changes the model's size (:data:`_WARN_MISSING`)."""
        value = defaults[key]
        if key not in d and key in _WARN_MISSING.get(model_type, ()):
            said = f"num_attention_heads ({heads})" if value is _HEADS else value
            _warn(
                f"config key {shown(key)} missing: read as transformers' "
                f"{_HF_CLASS[model_type]} default {said}"
            )
        return heads if value is _HEADS else hidden // heads if value is _RATIO else value

    heads = integer("num_attention_heads")
    hidden = integer("hidden_size")
    _warn_ignored(model_type, d)
    kv_heads = default("num_key_value_heads")
    if d.get("num_key_value_heads", 0) is None:  # null: the head count, as the classes' __post_init__
        if model_type == "qwen3_moe":  # Qwen3MoeConfig has no such step: transformers refuses null
            raise FieldError(
                "config key 'num_key_value_heads' is null: it must be an integer >= 1", "num_key_value_heads"
            )
        kv_heads = heads
    if "head_dim" in d or defaults["head_dim"] is _RATIO:  # null reads as hidden_size / heads
        head_dim = _default_head_dim(hidden, heads, d)
    else:  # Qwen3Config's constant
        head_dim = default("head_dim")
    moe: dict[str, int] = {}
    if model_type == "qwen3_moe":
        step = integer("decoder_sparse_step", 1, nullable=False)
        dense = d.get("mlp_only_layers")  # null: none, as transformers reads it
        if dense is None:
            dense = []
        if not isinstance(dense, list | tuple):
            raise FieldError(
                f"config key 'mlp_only_layers' must be a list of layer indices, got {shown(dense)}",
                "mlp_only_layers",
            )
        if dense or step != 1:
            raise FieldError(
                f"mlp_only_layers ({shown(dense)}) and decoder_sparse_step ({step}): dense layers in a "
                "MoE "
                "are not supported (every layer must be a mixture of experts: mlp_only_layers [] "
                "and decoder_sparse_step 1)",
                "mlp_only_layers" if dense else "decoder_sparse_step",
            )
        moe = {
            "n_experts": integer("num_experts"),
            "n_active_experts": integer("num_experts_per_tok"),
            "expert_intermediate_size": integer("moe_intermediate_size"),
        }
    spec_name = name if name is not None else str(d.get("_name_or_path") or model_type)
    try:
        return cls(
            name=spec_name,
            n_layers=integer("num_hidden_layers"),
            hidden_size=hidden,
            n_heads=heads,
            n_kv_heads=integer("num_key_value_heads", kv_heads),
            head_dim=integer("head_dim", head_dim),
            intermediate_size=integer("intermediate_size"),
            vocab_size=integer("vocab_size"),
            max_context_len=_rope_max_len(d, integer("max_position_embeddings")),
            gated_mlp=True,
            tied_embeddings=flag("tie_word_embeddings"),
            attention_bias=model_type == "qwen2" or flag("attention_bias"),
            qk_norm=model_type in ("qwen3", "qwen3_moe"),
            **moe,
        )
    except ValueError as exc:  # the spec's own checks, worded in config.json's keys
        field = getattr(exc, "field", "")
        message = _in_hf_keys(str(exc))
        if "num_key_value_heads" not in d and "num_key_value_heads" in message:
            message += f" (a missing num_key_value_heads reads as {_HF_CLASS[model_type]}'s default)"
        raise FieldError(message, _HF_KEYS.get(field, field)) from None


_HF_KEYS = {
    "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "n_kv_heads": "num_key_value_heads",
    "max_context_len": "max_position_embeddings",
    "n_experts": "num_experts",
    "n_active_experts": "num_experts_per_tok",
    "expert_intermediate_size": "moe_intermediate_size",
    "tied_embeddings": "tie_word_embeddings",
}
"""ModelSpec's field names that config.json spells otherwise."""


def _in_hf_keys(message: str) -> str:
    """A ModelSpec error about a config.json, with each field named by its config.json key."""
    for field_name, key in _HF_KEYS.items():
        message = re.sub(rf"\b{field_name}\b", f"config key '{key}'", message)
    return message


_HEADS, _RATIO = object(), object()  # num_attention_heads; hidden_size // num_attention_heads

_HF_DEFAULTS: dict[str, dict[str, Any]] = {
    # transformers 5.25.0, models/<type>/configuration_<type>.py: each class's field default
    # (LlamaConfig.__post_init__ fills num_key_value_heads and head_dim from the heads); a key the
    # class lacks (head_dim of Qwen2Config and Qwen3MoeConfig) is modeling_<type>.py's
    # getattr(config, "head_dim", hidden_size // num_attention_heads). Qwen2's attention_bias is no
    # field: modeling_qwen2.py always biases q/k/v.
    "llama": {
        "num_key_value_heads": _HEADS,
        "head_dim": _RATIO,
        "tie_word_embeddings": False,
        "attention_bias": False,
    },
    "qwen2": {
        "num_key_value_heads": 32,
        "head_dim": _RATIO,
        "tie_word_embeddings": False,
        "attention_bias": True,
    },
    "qwen3": {
        "num_key_value_heads": 32,
        "head_dim": 128,
        "tie_word_embeddings": False,
        "attention_bias": False,
    },
    "qwen3_moe": {
        "num_key_value_heads": 4,
        "head_dim": _RATIO,
        "tie_word_embeddings": False,
        "attention_bias": False,
    },
}
"""Each model type's default of each optional key read, as its ``transformers`` class has it."""

_HF_CLASS = {
    "llama": "LlamaConfig",
    "qwen2": "Qwen2Config",
    "qwen3": "Qwen3Config",
    "qwen3_moe": "Qwen3MoeConfig",
}

_WARN_MISSING = {
    # keys whose default changes the model's size (KV per token, parameters), warned of where
    # missing; head_dim only where the default is a constant, not hidden_size / heads
    "llama": ("num_key_value_heads", "tie_word_embeddings"),
    "qwen2": ("num_key_value_heads", "tie_word_embeddings"),
    "qwen3": ("num_key_value_heads", "head_dim", "tie_word_embeddings"),
    "qwen3_moe": ("num_key_value_heads", "tie_word_embeddings"),
}

_HF_MODEL_TYPES = frozenset(_HF_DEFAULTS)

_MOE_KEYS = ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size")


def _warn(message: str) -> None:
    """A UserWarning pointing at the first caller outside these two modules."""
    level, frame = 2, sys._getframe(1)  # level 2: _warn's caller
    while frame is not None and frame.f_code.co_filename in _HERE:
        level, frame = level + 1, frame.f_back  # type: ignore[assignment]
    warnings.warn(message, UserWarning, stacklevel=level)


_HERE = {__file__, __file__.replace("models_hf.py", "models.py")}


def _warn_ignored(model_type: str, d: Mapping[str, Any]) -> None:
    """A warning naming each key given that ``model_type``'s ``transformers`` class ignores and
    this reader ignores with it."""
    if model_type == "qwen3_moe":
        if d.get("shared_expert_intermediate_size"):
            _warn(
                "config key 'shared_expert_intermediate_size' ignored: transformers' Qwen3MoeConfig has "
                "no shared expert (that key is qwen2_moe's)"
            )
    elif given := [k for k in _MOE_KEYS if d.get(k) is not None]:
        keys = ", ".join(shown(k) for k in given)
        _warn(
            f"config key{'s' * (len(given) > 1)} {keys} ignored: model_type {shown(model_type)} is dense "
            f"in transformers ({_HF_CLASS[model_type]} has no experts); a mixture of experts is "
            "model_type 'qwen3_moe'"
        )
    if d.get("use_sliding_window") is True:
        _warn(
            "config key 'use_sliding_window' ignored: every layer is simulated with full attention "
            "(its KV cache holds the whole context)"
        )


_ROPE_UNSCALED = ("su", "longrope", "llama3")
"""rope types whose factor vLLM does not apply to the maximum length."""
_ROPE_NO_FACTOR = ("default", "mrope")
"""rope types with no ``factor``: transformers 5 writes ``rope_parameters`` of type ``default``
for an unscaled model; vLLM takes ``mrope``'s factor as 1. Any other type needs one (vLLM
asserts it), so a misspelt ``factor`` is refused rather than read as 1."""


def _rope_max_len(d: Mapping[str, Any], max_positions: int) -> int:
    """``max_position_embeddings`` scaled by ``rope_scaling`` (or transformers 5's
    ``rope_parameters``) as vLLM's ``_get_and_verify_max_len`` (vllm/config.py) derives the
    longest context: for a rope type other than ``su``, ``longrope`` and ``llama3``, times its
    ``factor`` (1 if none), from ``original_max_position_embeddings`` for ``yarn``. A Qwen3 config
    with YaRN factor 4 over 32,768 original positions thus serves 131,072 tokens."""
    key = "rope_scaling" if d.get("rope_scaling") is not None else "rope_parameters"
    rope = d.get(key)
    if rope is None:
        return max_positions
    if not isinstance(rope, Mapping):
        raise FieldError(f"config key {shown(key)} must be an object, got {shown(rope)}", key)
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind in _ROPE_UNSCALED:
        return max_positions
    if kind not in _ROPE_NO_FACTOR and "factor" not in rope:  # vLLM asserts it is there
        raise FieldError(
            f"config key {shown(key)}: rope type {shown(kind)} scales the context by its 'factor', "
            f"which is missing (keys: {', '.join(map(str, rope))})",
            key,
        )
    if kind == "yarn" and rope.get("original_max_position_embeddings") is None:  # vLLM reads it
        raise FieldError(
            f"config key {shown(key)}: rope type 'yarn' scales its original_max_position_embeddings, "
            "which is missing: vLLM derives the context from it (a Qwen3 YaRN config gives 32768)",
            key,
        )
    factor = rope.get("factor", 1.0)
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not 1 <= factor <= MAX_MODEL_DIM:
        raise FieldError(f"config key {shown(key)}: factor must be a number >= 1, got {shown(factor)}", key)
    base = max_positions
    if kind == "yarn":
        base = rope["original_max_position_embeddings"]
        if isinstance(base, bool) or not isinstance(base, int) or not 1 <= base <= MAX_MODEL_DIM:
            raise FieldError(
                f"config key {shown(key)}: original_max_position_embeddings must be an integer >= 1, "
                f"got {shown(base)}",
                key,
            )
    return min(int(base * factor), MAX_MODEL_DIM)


def _default_head_dim(hidden: int, heads: int, d: Mapping[str, Any]) -> int:
    """``hidden_size / num_attention_heads`` for a config without ``head_dim`` (a null one counts
    as missing, as in ``transformers``); refused, naming both keys, where the heads do not divide
    ``hidden_size``, unless ``head_dim`` is given (then this default is not used)."""
    if d.get("head_dim") is None and hidden % heads:
        raise FieldError(
            f"config key 'hidden_size' ({hidden}) is not a multiple of 'num_attention_heads' ({heads}) "
            "and the config gives no 'head_dim': give head_dim if the model's heads really are "
            f"{hidden // heads} wide, else correct one of the two",
            "hidden_size",
        )
    return hidden // heads
