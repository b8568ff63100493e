"""Reading a Hugging Face ``config.json`` (the plain dict ``json.load`` gives) into a
:class:`~pipesim.compute.models.ModelSpec`: :meth:`ModelSpec.from_hf_config
<pipesim.compute.models.ModelSpec.from_hf_config>`, whose docstring lists what is read.

Design: nothing here imports ``transformers``; where a key is missing or null it reads as
``transformers`` reads it (``head_dim`` from the heads, ``num_key_value_heads`` the head count,
``tie_word_embeddings`` false), and where ``transformers`` would quietly floor or divide by a bad
value (``hidden_size`` not a multiple of the heads without ``head_dim``, a null
``decoder_sparse_step``) the config is refused instead. Every refusal is a
:class:`~pipesim.core.validate.FieldError` naming the key as ``config.json`` spells it: the spec's
own checks are reworded from its field names into the file's keys (:data:`_HF_KEYS`), and an
integer key is bounded by :data:`~pipesim.compute.models.MAX_MODEL_DIM` as every spec field is.
The model types read are :data:`_HF_MODEL_TYPES`; a Qwen3-MoE config with dense layers is refused,
since a spec holds one MLP kind for every layer.

Split from :mod:`pipesim.compute.models`, whose :meth:`ModelSpec.from_hf_config` calls
:func:`spec_from_hf_config`.
"""

from __future__ import annotations

import re
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
        value = d.get(key, False)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise FieldError(f"config key {shown(key)} must be true or false, got {shown(value)}", key)
        return value

    model_type = need("model_type")
    if not isinstance(model_type, str) or model_type not in _HF_MODEL_TYPES:
        raise FieldError(
            f"unsupported model_type {shown(model_type)}; supported: {', '.join(sorted(_HF_MODEL_TYPES))}",
            "model_type",
        )
    heads = integer("num_attention_heads")
    hidden = integer("hidden_size")
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
            "shared_expert_intermediate_size": integer("shared_expert_intermediate_size", 0, 0),
        }
    spec_name = name if name is not None else str(d.get("_name_or_path") or model_type)
    try:
        return cls(
            name=spec_name,
            n_layers=integer("num_hidden_layers"),
            hidden_size=hidden,
            n_heads=heads,
            n_kv_heads=integer("num_key_value_heads", heads),
            head_dim=integer("head_dim", _default_head_dim(hidden, heads, d)),
            intermediate_size=integer("intermediate_size"),
            vocab_size=integer("vocab_size"),
            max_context_len=integer("max_position_embeddings"),
            gated_mlp=True,
            tied_embeddings=flag("tie_word_embeddings"),
            attention_bias=model_type == "qwen2" or flag("attention_bias"),
            qk_norm=model_type in ("qwen3", "qwen3_moe"),
            **moe,
        )
    except ValueError as exc:  # the spec's own checks, worded in config.json's keys
        field = getattr(exc, "field", "")
        raise FieldError(_in_hf_keys(str(exc)), _HF_KEYS.get(field, field)) from None


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


_HF_MODEL_TYPES = frozenset({"llama", "qwen2", "qwen3", "qwen3_moe"})


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
