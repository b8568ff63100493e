"""One inference-engine replica's settings, validated: :class:`EngineConfig`.

A replica is a model on ``tp`` GPUs of one type run vLLM-style (``max_num_seqs``, the KV policy,
``gpu_memory_utilization``, the engine's knobs). This module owns the description and its checks,
and the figures that follow from the settings alone: the weights and the KV cache each GPU holds,
and so the KV budget in tokens. A configuration that cannot serve (weights that do not fit, a
budget short of one ``max_model_len`` sequence, an unknown policy, a knob out of range) is refused
here, when it is made, with the field to change.

What a replica costs in time (a decode iteration, a prefill) is :mod:`pipesim.compute.cost`'s
:class:`~pipesim.compute.cost.ReplicaCost`, which reads a configuration and never changes it; the
two are separate so that the settings and their validation read apart from the cost model's
arithmetic. ``pipesim.compute.cost`` re-exports :class:`EngineConfig`, :data:`KV_POLICIES` and
:data:`TOOL_KV`, where they were first defined.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipesim.compute.gpus import GPUSpec
from pipesim.compute.knobs import MAX_BATCHED_TOKENS
from pipesim.compute.models import MAX_MODEL_DIM, ModelSpec, dtype_bytes
from pipesim.compute.roofline import DEFAULT_EFFICIENCY, MAX_FIXED_COST_S, Efficiency, check_ep, check_tp
from pipesim.core.errors import MAX_SLOTS, FieldError, check_int, check_number, shown
from pipesim.core.validate import refuse

KV_POLICIES = ("preempt", "reserve")
"""``preempt``: vLLM's on-demand KV with preemption by recompute; ``reserve``: a sequence is
admitted only if its prompt plus its ``max_tokens`` fit, so no sequence is ever preempted."""


TOOL_KV = ("keep", "drop")
"""A multi-turn sequence's KV during a tool call (:attr:`EngineConfig.tool_kv`): ``keep`` (a prefix
cache, ``kv_policy="preempt"`` only) or ``drop`` (recomputed on return)."""

DEFAULT_ITERATION_OVERHEAD_S = 1e-3
"""The default :attr:`EngineConfig.iteration_overhead_s`: what an uncalibrated run spec runs at
(a spec has no key for it; ``pipesim calibrate`` fits another)."""


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    """One inference-engine replica: ``model`` on ``tp`` GPUs of type ``gpu``, run vLLM-style."""

    model: ModelSpec
    gpu: GPUSpec
    tp: int = 1
    ep: int = 1
    """Expert-parallel degree (mixture of experts only; divides ``tp`` and ``n_experts``): the routed
    experts are split whole across ``ep`` groups of ``tp / ep`` GPUs instead of each sharded over
    all ``tp`` (vLLM's ``enable_expert_parallel`` within one replica is ``ep = tp``)."""
    gpu_memory_utilization: float = 0.9
    """Fraction of each GPU's HBM the engine may use for weights and KV cache (vLLM's name)."""
    max_num_seqs: int = 256
    """Most sequences decoded together (vLLM's ``max_num_seqs``). vLLM's own default is 256 on
    most GPUs but 1,024 on GPUs of 70 GiB or more other than the A100 (H100, H200:
    ``engine/arg_utils.py`` 1605-1623 at vllm 0.11.0, 3010-3042 at 0.34.0); RL frameworks usually
    set it. It binds only where more than 256 sequences could be resident: a closed loop at 1,024
    concurrent, Qwen2.5-7B (a small KV per token), gained 12-14% tokens/s at 1,024; Qwen3-8B, KV
    bound near 180 resident, nothing (``docs/compute.md``, "Where the engine departs from vLLM")."""
    max_model_len: int | None = None
    """Longest sequence (prompt + response) served; default the model's context."""
    kv_policy: str = "preempt"
    """What gives way when the KV cache is full (see :data:`KV_POLICIES`)."""
    tool_kv: str | None = None
    """Multi-turn: a sequence's KV during a tool call is ``"keep"`` (a prefix cache, counted
    against the budget and evicted oldest first when room is needed) or ``"drop"`` (recomputed on
    return). ``None`` (the default): ``keep`` under ``kv_policy="preempt"``, ``drop`` under
    ``"reserve"``, whose admission reserves a sequence's whole context and has no cache to evict
    from; ``"keep"`` with ``"reserve"`` is refused (it used to run as ``drop``, silently).
    :attr:`keeps_tool_kv` is the one in effect."""
    share_group_prefix: bool = False
    """Samples of one prompt group on one replica share their prompt's KV (vLLM's automatic prefix
    caching, SGLang's RadixAttention): a sample whose group's prompt is resident there prefills
    only its own tokens, and the prompt's KV counts once per (replica, group) while a member holds
    it (``docs/compute.md``, "Shared prompt prefix"). Off: every sample prefills and holds its own.
    Off by default although vLLM V1 turns prefix caching on by default: what it saves depends on
    the routing of a group's samples and on the prompt's share of the context, so a design says
    it (with 2,048-token prompts x 16 samples it took 8-15% off a step, ``docs/compute.md``)."""
    watermark: float = 0.01
    """Share of the KV budget kept free when admitting under ``preempt``: vLLM V0's block-manager
    watermark (0.01). vLLM V1 keeps none (0.11.0 admits on free blocks alone,
    ``v1/core/kv_cache_manager.py`` 271; 0.34.0 has a setting defaulting to 0.0); at 0 the
    ``docs/compute.md`` Qwen3-8B step ran 4.8% longer with 5.5x the preemptions, since admission
    then fills the cache to the last block (``docs/compute.md``, "Where the engine departs from
    vLLM")."""
    iteration_overhead_s: float = DEFAULT_ITERATION_OVERHEAD_S
    """Fixed seconds per decode or prefill iteration (scheduler, sampling, launches)."""
    allreduce_latency_s: float = 8e-6
    """Fixed seconds per tensor-parallel all-reduce through vLLM's custom all-reduce (the default
    path; :data:`~pipesim.compute.roofline.DEFAULT_ALLREDUCE_LATENCY_S`)."""
    weight_dtype: str = "bf16"
    """How the weights are stored (``"bf16"``, ``"fp8"``, ``"int4"``, ``"fp32"``, ...:
    :data:`~pipesim.compute.models.DTYPE_BYTES`): what each GPU holds (so the KV budget) and what
    every GEMM reads, LM head included, at that many bytes per element. Weight-only quantization
    (W8A16, W4A16): activations stay bf16 and the math runs at the bf16 peak
    (:func:`~pipesim.compute.roofline.gemm_time_s`), so a memory-bound decode step speeds up as the
    weights shrink and a compute-bound prefill does not; W8A8's doubled fp8 peak is not modelled."""
    kv_dtype: str = "bf16"
    """How the KV cache is stored (vLLM's ``kv_cache_dtype``): the bytes per cached token, so the
    KV budget and the decode attention's reads."""
    efficiency: Efficiency = field(default=DEFAULT_EFFICIENCY)
    enforce_eager: bool = False
    """vLLM's ``enforce_eager``: run the model without CUDA graphs, so every decode iteration pays
    a launch gap per kernel (:func:`~pipesim.compute.knobs.eager_s`). Off (the default): decode
    steps replay CUDA graphs, as vLLM does for batches up to its largest capture size."""
    max_num_batched_tokens: int | None = None
    """vLLM's chunked prefill (``SchedulerConfig.max_num_batched_tokens``): the most tokens one
    iteration processes; running decodes take one each and a prefill takes the rest, so a long
    prompt is split into chunks that share iterations with the decodes
    (:func:`~pipesim.compute.knobs.chunked_prefill_s`). At least ``max_num_seqs``, as vLLM requires. ``None``
    (the default): a prefill is one iteration that stalls the batch (prefill first, no chunking:
    vLLM V0 with chunked prefill off). vLLM V1 always chunks; set this to model a V1 engine."""
    disable_custom_all_reduce: bool = False
    """vLLM's ``disable_custom_all_reduce``: tensor-parallel all-reduces go through NCCL, whose
    fixed cost is the measured :data:`~pipesim.compute.roofline.NCCL_ALLREDUCE_LATENCY_S` in place
    of ``allreduce_latency_s`` (:func:`~pipesim.compute.knobs.allreduce_latency_s`). verl sets it
    for every rollout (``docs/decode.md``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, ModelSpec):
            raise refuse("model", f"must be a pipesim.ModelSpec, got {shown(self.model)}")
        if not isinstance(self.gpu, GPUSpec):
            raise refuse(
                "gpu", f"must be a pipesim.GPUSpec (e.g. pipesim.GPUS['h100-sxm']), got {shown(self.gpu)}"
            )
        if not isinstance(self.efficiency, Efficiency):
            raise refuse("efficiency", f"must be a pipesim.Efficiency, got {shown(self.efficiency)}")
        check_int("max_num_seqs", self.max_num_seqs, 1, MAX_SLOTS, "each sequence is a Python object")
        m = self.model
        check_tp(m, self.tp)
        check_ep(m, self.tp, self.ep)
        u = self.gpu_memory_utilization
        if isinstance(u, bool) or not isinstance(u, int | float) or not 0 < u <= 1:
            raise refuse("gpu_memory_utilization", f"must be in (0, 1], got {shown(u)}")
        if not isinstance(self.share_group_prefix, bool):
            raise refuse("share_group_prefix", f"must be a bool, got {shown(self.share_group_prefix)}")
        if self.tool_kv is not None and self.tool_kv not in TOOL_KV:
            raise refuse("tool_kv", f"must be one of {TOOL_KV} or None, got {shown(self.tool_kv)}")
        if (
            isinstance(self.watermark, bool)
            or not isinstance(self.watermark, int | float)
            or not 0 <= self.watermark < 1
        ):
            raise refuse("watermark", f"must be in [0, 1), got {shown(self.watermark)}")
        if self.kv_policy not in KV_POLICIES:
            raise refuse("kv_policy", f"must be one of {KV_POLICIES}, got {shown(self.kv_policy)}")
        if self.tool_kv == "keep" and self.kv_policy == "reserve":
            raise FieldError(
                "tool_kv='keep' needs kv_policy='preempt': under kv_policy='reserve' the engine does "
                "not keep a sequence's KV through a tool call (it would run as 'drop'); set "
                "tool_kv='drop' (or leave it None), or kv_policy='preempt'",
                "tool_kv",
            )
        for name in ("iteration_overhead_s", "allreduce_latency_s"):
            check_number(name, getattr(self, name), 0)
            if getattr(self, name) > MAX_FIXED_COST_S:
                raise FieldError(
                    f"{name} must be at most {MAX_FIXED_COST_S:g} s (a fixed cost per iteration or "
                    f"collective), got {shown(getattr(self, name))}",
                    name,
                )
        dtype_bytes(self.weight_dtype, "weight_dtype")
        dtype_bytes(self.kv_dtype, "kv_dtype")
        for name in ("enforce_eager", "disable_custom_all_reduce"):
            if not isinstance(getattr(self, name), bool):
                raise refuse(name, f"must be a bool, got {shown(getattr(self, name))}")
        if self.max_num_batched_tokens is not None:
            check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1, MAX_BATCHED_TOKENS)
            if self.max_num_batched_tokens < self.max_num_seqs:
                raise FieldError(
                    f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be at least max_num_seqs "
                    f"({self.max_num_seqs}): each running sequence takes a token per iteration (vLLM's rule)",
                    "max_num_batched_tokens",
                )
        if self.max_model_len is not None:
            check_int("max_model_len", self.max_model_len, 1, MAX_MODEL_DIM, "the largest int32")
            if self.max_model_len > m.max_context_len:
                raise FieldError(
                    f"max_model_len ({self.max_model_len}) exceeds the model's context "
                    f"({m.max_context_len} tokens)",
                    "max_model_len",
                )
        usable = u * self.gpu.hbm_bytes
        shard = self.weight_bytes_per_gpu
        if shard >= usable:
            raise FieldError(
                f"model {m.name} does not fit: {shard / 2**30:.1f} GiB of weights per GPU at tp={self.tp} "
                f"exceed gpu_memory_utilization * HBM = {usable / 2**30:.1f} GiB of a {self.gpu.name}; "
                "raise tp or gpu_memory_utilization",
                "tp",
            )
        if self.kv_budget_tokens < self.context_len:
            raise FieldError(
                f"gpu_memory_utilization: the KV budget ({self.kv_budget_tokens} tokens) cannot hold one "
                f"sequence of max_model_len={self.context_len} tokens; raise tp or "
                "gpu_memory_utilization, or lower max_model_len",
                "gpu_memory_utilization",
            )

    @property
    def context_len(self) -> int:
        """The longest sequence served (``max_model_len`` or the model's context)."""
        return self.max_model_len if self.max_model_len is not None else self.model.max_context_len

    @property
    def keeps_tool_kv(self) -> bool:
        """Whether a sequence keeps its KV through a tool call: :attr:`tool_kv` in effect."""
        return self.kv_policy == "preempt" and self.tool_kv != "drop"

    @property
    def weight_bytes_per_gpu(self) -> float:
        return self.model.weight_bytes(self.weight_dtype) / self.tp

    @property
    def kv_heads_per_gpu(self) -> int:
        return -(-self.model.n_kv_heads // self.tp)

    @property
    def kv_bytes_per_token_per_gpu(self) -> float:
        m = self.model
        return 2 * m.n_layers * self.kv_heads_per_gpu * m.head_dim * dtype_bytes(self.kv_dtype)

    @property
    def kv_budget_tokens(self) -> int:
        """Tokens the KV cache holds (on each GPU of the replica: they hold the same tokens)."""
        free = self.gpu_memory_utilization * self.gpu.hbm_bytes - self.weight_bytes_per_gpu
        return max(int(free // self.kv_bytes_per_token_per_gpu), 0)
