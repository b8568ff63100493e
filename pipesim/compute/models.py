"""Transformer shapes as data: :class:`ModelSpec`, its parameter and byte counts, and a reader for
Hugging Face ``config.json`` dicts.

A spec holds only what sets a decoder-only transformer's cost: layer count, widths, attention heads
(grouped-query attention through ``n_kv_heads``), the MLP (gated SwiGLU or plain), the vocabulary,
and for a mixture of experts the expert count, the experts each token is routed to and their width.
Nothing here imports ``transformers`` or ``torch``: :meth:`ModelSpec.from_hf_config` reads the plain
dict that ``json.load`` gives for a checkpoint's ``config.json`` (:mod:`pipesim.compute.models_hf`).

Counting conventions (they reproduce the published sizes, see ``tests/test_compute_specs.py``):

* attention is ``q``/``k``/``v``/``o`` projections, ``q`` and ``o`` ``hidden x n_heads*head_dim``,
  ``k`` and ``v`` ``hidden x n_kv_heads*head_dim``; ``attention_bias`` adds the QKV biases (Qwen2),
  ``qk_norm`` the per-head RMSNorm weights on queries and keys (Qwen3);
* a gated MLP is gate, up and down (three ``hidden x intermediate`` matrices), a plain one two;
* a mixture-of-experts layer (every layer, as in Qwen3-MoE) is a ``hidden x n_experts`` router, then
  ``n_experts`` gated experts of width ``expert_intermediate_size``, plus an optional always-on
  shared expert of width ``shared_expert_intermediate_size``; ``intermediate_size`` is then unused;
* two RMSNorms per layer and one final one; the embedding, and an LM head unless tied.

Active parameters count the router, the ``n_active_experts`` routed experts and the shared expert
instead of all experts -- the weights one token touches, embedding and head included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipesim.core.errors import FieldError, check_int, shown
from pipesim.core.validate import refuse

if TYPE_CHECKING:
    from pipesim.compute.gpus import GPUSpec
    from pipesim.compute.roofline import Efficiency

DTYPE_BYTES: Mapping[str, float] = {
    "fp32": 4,
    "float32": 4,
    "bf16": 2,
    "bfloat16": 2,
    "fp16": 2,
    "float16": 2,
    "fp8": 1,
    "int8": 1,
    "int4": 0.5,
    "fp4": 0.5,
}
"""Bytes per element for each storage type the byte counts accept."""


def dtype_bytes(dtype: str, field: str = "dtype") -> float:
    """Bytes per element of ``dtype`` (``"bf16"``, ``"fp8"``, ...); ``ValueError`` naming
    ``field`` (the configuration field that holds it) for others."""
    try:
        return DTYPE_BYTES[dtype.lower()]
    except (KeyError, AttributeError):
        raise FieldError(
            f"{field}: unknown dtype {shown(dtype)}; valid: {', '.join(DTYPE_BYTES)}", field
        ) from None


MAX_MODEL_DIM = 2**31 - 1
"""The largest size, count or length a spec (and the ``config.json`` it reads) may hold: the
largest int32, the width GPU kernels commonly index dimensions, token ids and positions with.
Published checkpoints stay orders of magnitude below it (vocabularies of ~256K, contexts of ~10M),
so a value past it is a typo (``vocab_size: 1e20``), not a model. One bound for every field, not
one guessed per field."""
_DIM_WHY = "the largest int32; no published model comes near it"

_POSITIVE = ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "vocab_size", "max_context_len")
_NON_NEGATIVE = (
    "intermediate_size",
    "n_experts",
    "n_active_experts",
    "expert_intermediate_size",
    "shared_expert_intermediate_size",
)


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer's shape (see the module docstring for what each part counts)."""

    name: str = "custom"
    n_layers: int
    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_context_len: int
    gated_mlp: bool = True
    tied_embeddings: bool = False
    attention_bias: bool = False
    qk_norm: bool = False
    n_experts: int = 0
    n_active_experts: int = 0
    expert_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise refuse("name", f"must be a str, got {shown(self.name)}")
        for field_name in _POSITIVE:
            check_int(field_name, getattr(self, field_name), 1, MAX_MODEL_DIM, _DIM_WHY)
        for field_name in _NON_NEGATIVE:
            check_int(field_name, getattr(self, field_name), 0, MAX_MODEL_DIM, _DIM_WHY)
        for field_name in ("gated_mlp", "tied_embeddings", "attention_bias", "qk_norm"):
            if not isinstance(getattr(self, field_name), bool):
                raise refuse(field_name, f"must be a bool, got {shown(getattr(self, field_name))}")
        if self.n_heads % self.n_kv_heads:
            raise FieldError(
                f"n_heads ({self.n_heads}) must be divisible by n_kv_heads ({self.n_kv_heads})", "n_kv_heads"
            )
        if self.n_experts:
            if not 1 <= self.n_active_experts <= self.n_experts:
                raise FieldError(
                    f"n_active_experts must be in 1..n_experts ({self.n_experts}), "
                    f"got {self.n_active_experts}",
                    "n_active_experts",
                )
            if self.expert_intermediate_size < 1:
                raise FieldError(
                    "expert_intermediate_size must be at least 1 for a mixture of experts",
                    "expert_intermediate_size",
                )
        else:
            if self.intermediate_size < 1:
                raise refuse("intermediate_size", f"must be at least 1, got {self.intermediate_size}")
            for field_name in (
                "n_active_experts",
                "expert_intermediate_size",
                "shared_expert_intermediate_size",
            ):
                if getattr(self, field_name):
                    raise refuse(field_name, "must be 0 for a dense model (n_experts=0)")

    # -- shape ---------------------------------------------------------------------------------

    @property
    def is_moe(self) -> bool:
        """Whether the MLP is a mixture of experts."""
        return self.n_experts > 0

    @property
    def q_size(self) -> int:
        """Width of the query projection's output, ``n_heads * head_dim``."""
        return self.n_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        """Width of the key (and of the value) projection's output, ``n_kv_heads * head_dim``."""
        return self.n_kv_heads * self.head_dim

    @property
    def _mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    def _attention_params(self) -> int:
        h = self.hidden_size
        n = 2 * h * self.q_size + 2 * h * self.kv_size
        if self.attention_bias:
            n += self.q_size + 2 * self.kv_size
        if self.qk_norm:
            n += 2 * self.head_dim
        return n

    def _mlp_params(self, experts: int) -> int:
        h = self.hidden_size
        if not self.is_moe:
            return self._mlp_matrices * h * self.intermediate_size
        per_expert = self._mlp_matrices * h * self.expert_intermediate_size
        shared = self._mlp_matrices * h * self.shared_expert_intermediate_size
        return h * self.n_experts + experts * per_expert + shared

    def _count(self, experts: int) -> int:
        per_layer = self._attention_params() + self._mlp_params(experts) + 2 * self.hidden_size
        embedding = self.vocab_size * self.hidden_size
        head = 0 if self.tied_embeddings else embedding
        return self.n_layers * per_layer + self.hidden_size + embedding + head

    @property
    def n_params(self) -> int:
        """Total parameter count, every expert included."""
        return self._count(self.n_experts)

    @property
    def n_active_params(self) -> int:
        """Parameters one token uses: equals :attr:`n_params` for a dense model."""
        return self._count(self.n_active_experts)

    @property
    def n_non_embedding_params(self) -> int:
        """:attr:`n_params` less the embedding and the (untied) LM head."""
        embedding = self.vocab_size * self.hidden_size
        return self.n_params - embedding * (1 if self.tied_embeddings else 2)

    def weight_bytes(self, dtype: str = "bf16") -> float:
        """Bytes the weights take in ``dtype``: :attr:`n_params` times the element size."""
        return self.n_params * dtype_bytes(dtype)

    def kv_bytes_per_token(self, dtype: str = "bf16") -> float:
        """KV-cache bytes one token holds over all layers: ``2 * n_layers * n_kv_heads * head_dim``
        elements (keys and values)."""
        return 2 * self.n_layers * self.kv_size * dtype_bytes(dtype)

    # -- cost ----------------------------------------------------------------------------------

    def linear_times_s(
        self,
        gpu: GPUSpec,
        n_tokens: int,
        tp: int = 1,
        efficiency: Efficiency | None = None,
        ep: int = 1,
    ) -> dict[str, float]:
        """Seconds per projection kernel of one layer (see :mod:`pipesim.compute.roofline`)."""
        from pipesim.compute.roofline import linear_times_s

        return linear_times_s(self, gpu, n_tokens, tp, efficiency, ep)

    def linear_time_s(
        self,
        gpu: GPUSpec,
        n_tokens: int,
        tp: int = 1,
        efficiency: Efficiency | None = None,
        ep: int = 1,
    ) -> float:
        """Seconds for one layer's linear part (fused QKV, attention output, gate/up, down, and the
        router for a mixture of experts) on ``n_tokens`` tokens, each GPU holding a ``1/tp`` shard
        (for a mixture of experts with ``ep > 1``, ``n_experts / ep`` whole experts sharded over
        ``tp / ep`` GPUs).

        The roofline, its constants and its measured error are in :mod:`pipesim.compute.roofline`.
        """
        return sum(self.linear_times_s(gpu, n_tokens, tp, efficiency, ep).values())

    def decode_attention_time_s(
        self, gpu: GPUSpec, kv_tokens: int, tp: int = 1, efficiency: Efficiency | None = None
    ) -> float:
        """Seconds for one layer's attention in a decode step whose sequences hold ``kv_tokens``
        cached tokens in all (see :func:`pipesim.compute.roofline.decode_attention_time_s`)."""
        from pipesim.compute.roofline import decode_attention_time_s

        return decode_attention_time_s(self, gpu, kv_tokens, tp, efficiency)

    # -- Hugging Face --------------------------------------------------------------------------

    @classmethod
    def from_hf_config(cls, d: Mapping[str, Any], name: str | None = None) -> ModelSpec:
        """The spec of a Hugging Face ``config.json`` (as a dict) for ``model_type`` ``"llama"``,
        ``"qwen2"``, ``"qwen3"`` or ``"qwen3_moe"``.

        A missing optional key reads as that ``model_type``'s ``transformers`` config class
        reads it (``transformers`` 5.25.0: ``num_key_value_heads`` 32 for ``qwen2`` and ``qwen3``,
        4 for ``qwen3_moe``, the head count for ``llama``; ``head_dim`` 128 for ``qwen3``,
        ``hidden_size / num_attention_heads`` for the others; ``tie_word_embeddings`` and
        ``attention_bias`` false), with a one-line :class:`UserWarning` naming the key and the
        default where it changes the model's size (``num_key_value_heads``,
        ``tie_word_embeddings``, Qwen3's ``head_dim``): a real config gives those, so a missing one
        is likely a typo. Keys the class ignores are ignored with a warning naming them
        (``shared_expert_intermediate_size`` under ``qwen3_moe``, expert keys under a dense type,
        ``use_sliding_window``: every layer is simulated with full attention). Where the heads do
        not divide ``hidden_size`` and the config gives no ``head_dim``, ``transformers`` would
        floor it and a typo in either key would pass unseen, so the config is refused
        (:func:`~pipesim.compute.models_hf._default_head_dim`). ``max_context_len`` is
        ``max_position_embeddings`` scaled by ``rope_scaling`` as vLLM derives its maximum length
        (YaRN: ``original_max_position_embeddings * factor``;
        :func:`~pipesim.compute.models_hf._rope_max_len`). Qwen2 always has QKV biases, Qwen3
        always has q/k norms. An unknown ``model_type`` or a missing required key raises
        ``ValueError`` naming it; so does an integer key that is not an integer in ``[minimum,
        MAX_MODEL_DIM]`` and a Qwen3-MoE config with dense layers (``mlp_only_layers`` not empty or
        ``decoder_sparse_step`` other than 1), which this spec cannot hold. A null optional key reads
        as its default (a null ``num_key_value_heads`` as the head count, as ``transformers``'
        ``__post_init__`` does), except ``decoder_sparse_step``, which ``transformers`` divides by,
        and ``num_key_value_heads`` under ``qwen3_moe``, which ``transformers`` refuses.
        """
        from pipesim.compute.models_hf import spec_from_hf_config

        return spec_from_hf_config(cls, d, name)
