"""What one engine replica costs: its KV-cache budget, a decode iteration, a prefill.

:class:`EngineConfig` describes one replica (a model on ``tp`` GPUs of one type, vLLM-like
settings) and validates it; :class:`ReplicaCost` turns it into the numbers the fluid engine
(:mod:`pipesim.compute.engine`) needs, computed once and cached.

Decode iteration (every running sequence produces one token) with ``b`` sequences whose KV caches
hold ``K`` tokens in all::

    t_iter(b, K) = A(b) + B * K
    A(b) = n_layers * (linear_time_s(b) + attention_kernel_overhead + 2 * allreduce(b))
           + lm_head(b) + iteration_overhead_s
    B    = n_layers * (roofline seconds to read one cached token's keys and values)

``linear_time_s`` is the roofline of :mod:`pipesim.compute.roofline` (checked against Vidur).
Decode attention is :func:`~pipesim.compute.roofline.decode_attention_time_s`, which is exactly
linear in ``K`` past its fixed kernel cost (both its FLOPs and its bytes are), hence ``B``. The
all-reduce after the two row-parallel projections of each layer (``tp > 1``) is a ring:
``allreduce_latency_s + 2 (tp-1)/tp * b * hidden * 2 bytes / NVLink one-way``. The LM head is a
``hidden x vocab/tp`` GEMM of ``b`` rows. ``iteration_overhead_s`` is the engine's per-step
CPU and launch cost (scheduling, sampling); its default is a round guess, not a measurement.

Expert parallelism (``ep > 1``, a mixture of experts): the routed experts are split whole across
``ep`` groups of ``tp / ep`` GPUs (:func:`~pipesim.compute.roofline.linear_times_s`), and the
MoE's all-reduce becomes an all-to-all **dispatch** and **combine** over NVLink: the batch's tokens
are spread evenly over the GPUs, and each GPU sends every one of its tokens' hidden vectors to each
of the token's ``n_active_experts`` experts that lives in another group, to every GPU of that group
(each holds a ``1/(tp/ep)`` shard), and receives as much back, so per GPU and direction
``b * n_active_experts * (ep - 1) / ep**2 * hidden * 2`` bytes, plus ``allreduce_latency_s``
each. (At ``ep = tp = 8`` and 8 active experts dispatch and combine together move what one ring
all-reduce does; at smaller ``ep`` more.) The attention's all-reduce stays. Routing is taken as
balanced: the step does not wait for the busiest group, which a real engine does. Weights per GPU
(so the KV budget) are unchanged: ``n_experts / ep`` experts at ``1/(tp/ep)`` each is the same
``1/tp`` of the experts.

Prefill of ``N`` new tokens (prompts, recomputed contexts) for sequences that already hold
``P_i`` tokens: the linear part of ``N`` tokens per layer, causal attention of
``4 * head_dim * q_heads * sum(n_i * (P_i + n_i / 2))`` FLOPs, the all-reduces, one iteration
overhead.

Attention kernels have their own constants (:class:`~pipesim.compute.roofline.Efficiency`,
``docs/decode.md``): decode attention streams the KV cache at ``attention_bandwidth_fraction``
(so ``B``) and pays ``attention_block_s`` per (sequence, KV head) (in ``A(b)``); prefill attention
runs at ``attention_flop_fraction`` of peak. vLLM's ``enforce_eager`` (no CUDA graphs) and chunked
prefill (``max_num_batched_tokens``) are charged by :mod:`pipesim.compute.knobs`: eager mode adds
a launch gap per kernel to each decode iteration, chunked prefill splits a prefill into chunks that
share iterations with the running decodes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from pipesim.compute.gpus import GPUSpec
from pipesim.compute.knobs import MAX_BATCHED_TOKENS, allreduce_latency_s, chunked_prefill_s, eager_s
from pipesim.compute.models import ModelSpec, dtype_bytes
from pipesim.compute.roofline import (
    DEFAULT_EFFICIENCY,
    MAX_FIXED_COST_S,
    Efficiency,
    check_ep,
    check_tp,
    decode_attention_efficiency,
    gemm_time_s,
    kernel_time_s,
    linear_time_s,
)
from pipesim.core.errors import MAX_SLOTS, FieldError, check_int, check_number, shown
from pipesim.core.validate import refuse

KV_POLICIES = ("preempt", "reserve")
"""``preempt``: vLLM's on-demand KV with preemption by recompute; ``reserve``: a sequence is
admitted only if its prompt plus its ``max_tokens`` fit, so no sequence is ever preempted."""


TOOL_KV = ("keep", "drop")


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
    """Most sequences decoded together (vLLM's ``max_num_seqs``)."""
    max_model_len: int | None = None
    """Longest sequence (prompt + response) served; default the model's context."""
    kv_policy: str = "preempt"
    """What gives way when the KV cache is full (see :data:`KV_POLICIES`)."""
    tool_kv: str = "keep"
    """Multi-turn: a sequence's KV during a tool call is ``"keep"`` (a prefix cache, counted
    against the budget and evicted oldest first when room is needed) or ``"drop"`` (recomputed on
    return). Only ``kv_policy="preempt"`` keeps it."""
    share_group_prefix: bool = False
    """Samples of one prompt group on one replica share their prompt's KV (vLLM's automatic prefix
    caching, SGLang's RadixAttention): a sample whose group's prompt is resident there prefills
    only its own tokens, and the prompt's KV counts once per (replica, group) while a member holds
    it (``docs/compute.md``, "Shared prompt prefix"). Off: every sample prefills and holds its own."""
    watermark: float = 0.01
    """Share of the KV budget kept free when admitting under ``preempt`` (vLLM's watermark)."""
    iteration_overhead_s: float = 1e-3
    """Fixed seconds per decode or prefill iteration (scheduler, sampling, launches)."""
    allreduce_latency_s: float = 8e-6
    """Fixed seconds per tensor-parallel all-reduce through vLLM's custom all-reduce (the default
    path; :data:`~pipesim.compute.roofline.DEFAULT_ALLREDUCE_LATENCY_S`)."""
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
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
    (the default): a prefill is one iteration that stalls the batch (prefill first, no chunking)."""
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
        if self.tool_kv not in TOOL_KV:
            raise refuse("tool_kv", f"must be one of {TOOL_KV}, got {shown(self.tool_kv)}")
        if (
            isinstance(self.watermark, bool)
            or not isinstance(self.watermark, int | float)
            or not 0 <= self.watermark < 1
        ):
            raise refuse("watermark", f"must be in [0, 1), got {shown(self.watermark)}")
        if self.kv_policy not in KV_POLICIES:
            raise refuse("kv_policy", f"must be one of {KV_POLICIES}, got {shown(self.kv_policy)}")
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
            check_int("max_model_len", self.max_model_len, 1)
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


SHARED_TABLE_CONFIGS = 8
"""Engine configurations whose per-batch-size tables (``A(b)``, the linear layers by token count,
the LM head by sequences) the process keeps for the next :class:`ReplicaCost` of an equal
configuration: the replicas of a cluster, and the runs of a sweep or a plan, compute each entry
once (a table of 1,024 batch sizes is about 5 ms; 8 replicas built eight). Least recently used
first out; each holds at most ``max_num_seqs`` + 1 entries per list and one per prefill size."""

_TABLES: OrderedDict[tuple[object, ...], tuple[list[float], dict[int, float], list[float]]] = OrderedDict()
_TABLES_LOCK = threading.Lock()  # a table grows in place: one writer at a time


def _shared_tables(config: EngineConfig) -> tuple[list[float], dict[int, float], list[float]]:
    """The tables of ``config``'s replicas. Keyed by ``repr``, not ``==``: a configuration equal
    to another but with ``1`` for ``1.0`` or a numpy float for a float computes its own (the
    tables hold what its arithmetic gives, to the type), and every field shows in the repr; and
    by the classes of the specs, whose repr names a subclass but not which one of two that share
    a name (a subclass may override a derived figure, the NVLink bandwidth say)."""
    key = (repr(config), type(config), type(config.model), type(config.gpu), type(config.efficiency))
    with _TABLES_LOCK:
        tables = _TABLES.get(key)
        if tables is None:
            tables = _TABLES[key] = ([0.0], {}, [])
            if len(_TABLES) > SHARED_TABLE_CONFIGS:
                _TABLES.popitem(last=False)
        else:
            _TABLES.move_to_end(key)
    return tables


class ReplicaCost:
    """The cost model of one replica (see the module docstring), with per-batch-size caches
    shared with every other replica of an equal configuration (:data:`SHARED_TABLE_CONFIGS`)."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = c = config
        m, g, eff = c.model, c.gpu, c.efficiency
        self.n_layers = m.n_layers
        self.q_heads = m.n_heads // c.tp
        self.kv_heads = c.kv_heads_per_gpu
        self.budget = c.kv_budget_tokens
        kv_elem = dtype_bytes(c.kv_dtype)
        # decode attention per cached token per layer: 4*head_dim FLOPs per query head, K and V read
        attn_flops_tok = 4.0 * self.q_heads * m.head_dim
        self._attn_bytes_tok = 2.0 * kv_elem * self.kv_heads * m.head_dim
        slope = (
            kernel_time_s(g, attn_flops_tok, self._attn_bytes_tok, decode_attention_efficiency(eff))
            - eff.kernel_overhead_s
        )
        self.kv_slope_s = self.n_layers * slope
        # prefill attention FLOPs per query-key pair, scaled so that the GEMM roofline's peak
        # (``_peak``, which prefill_s and BatchState._prefill_time divide by) gives the attention
        # kernel's: flops / (flop_fraction * peak) = true flops / (attention_flop_fraction * peak)
        self._attn_flops_tok = attn_flops_tok * (eff.flop_fraction / eff.attention_flops)
        self._block_s = self.kv_heads * eff.attention_block_s  # per sequence per layer
        self._eager_s = eager_s(c)
        self._allreduce_lat = allreduce_latency_s(c)  # custom all-reduce or NCCL
        """``B``: seconds a decode iteration spends per cached token it reads."""
        # A(b) by batch size, linear_s by tokens, lm_head_s by sequences: filled on demand
        self._a, self._lin, self._lm = _shared_tables(c)
        self._ring = (
            2.0 * (c.tp - 1) / c.tp * 2 * m.hidden_size / g.nvlink_bandwidth_per_direction_bytes_per_s
        )
        ep = c.ep  # all-to-all: seconds per token of one direction (dispatch or combine) per GPU
        self._a2a = (
            m.n_active_experts
            * (ep - 1)
            / ep**2
            * 2
            * m.hidden_size
            / g.nvlink_bandwidth_per_direction_bytes_per_s
        )
        self._vocab = -(-m.vocab_size // c.tp)
        flops_w = 2.0 * (m.n_active_params - m.vocab_size * m.hidden_size) / c.tp
        self._flops_per_seq = flops_w  # linear FLOPs per decoded token (embedding lookup excluded)
        self._weight_bytes = c.weight_bytes_per_gpu
        self._attn_flops_all = self.n_layers * attn_flops_tok
        self._attn_bytes_all = self.n_layers * self._attn_bytes_tok
        self._peak = eff.flop_fraction * g.bf16_flops_per_s
        self._bw = eff.bandwidth_fraction * g.hbm_bandwidth_bytes_per_s

    def _allreduce_s(self, n_tokens: int) -> float:
        """One layer's communication: two ring all-reduces (``ep = 1``), or, with expert
        parallelism, the attention's all-reduce plus the MoE's all-to-all dispatch and combine."""
        c = self.config
        if c.ep > 1:
            return self._alltoall_s(n_tokens)
        if c.tp == 1:
            return 0.0
        return 2 * (self._allreduce_lat + n_tokens * self._ring)

    def _alltoall_s(self, n_tokens: int) -> float:
        c = self.config
        lat = c.allreduce_latency_s
        attention = self._allreduce_lat + n_tokens * self._ring if c.tp > 1 else 0.0
        return attention + 2 * (lat + n_tokens * self._a2a)

    def linear_s(self, n_tokens: int) -> float:
        """Seconds of one layer's projections and communication for ``n_tokens`` tokens (cached)."""
        t = self._lin.get(n_tokens)
        if t is None:
            c = self.config
            t = linear_time_s(c.model, c.gpu, n_tokens, c.tp, c.efficiency, c.ep) + self._allreduce_s(
                n_tokens
            )
            self._lin[n_tokens] = t
        return t

    def fixed_s(self, b: int) -> float:
        """``A(b)``: seconds of a decode iteration of ``b`` sequences that do not depend on the KV."""
        a = self._a
        if len(a) <= b:
            with _TABLES_LOCK:  # shared: two threads must not append the same entry twice
                while len(a) <= b:
                    n = len(a)
                    c = self.config
                    lm_head = gemm_time_s(c.gpu, n, c.model.hidden_size, self._vocab, efficiency=c.efficiency)
                    attn_fixed = c.efficiency.kernel_overhead_s + n * self._block_s
                    a.append(
                        self.n_layers * (self.linear_s(n) + attn_fixed)
                        + lm_head
                        + c.iteration_overhead_s
                        + self._eager_s
                    )
        return a[b]

    def iteration_s(self, b: int, kv_tokens: float) -> float:
        """Seconds of one decode iteration of ``b`` sequences reading ``kv_tokens`` cached tokens."""
        return 0.0 if b == 0 else self.fixed_s(b) + self.kv_slope_s * kv_tokens

    def prefill_s(self, new_tokens: int, attn_token_pairs: float, n_seqs: int) -> float:
        """Seconds to prefill ``new_tokens`` tokens of ``n_seqs`` sequences in one iteration;
        ``attn_token_pairs`` is ``sum(n_i * (P_i + n_i / 2))`` (query-key pairs of causal attention).

        The reference definition: a replica computes the same number in its batch
        (``BatchState._prefill_time``, on this model's memos of the linear layers and LM head)."""
        if new_tokens <= 0:
            return 0.0
        c = self.config
        attn = kernel_time_s(
            c.gpu,
            self._attn_flops_tok * attn_token_pairs,
            self._attn_bytes_tok * 2 * new_tokens,
            c.efficiency,
        )
        return (
            self.n_layers * (self.linear_s(new_tokens) + attn)
            + self.lm_head_s(n_seqs)
            + c.iteration_overhead_s
        )

    def chunked_prefill_s(self, new_tokens: int, attn_token_pairs: float, n_seqs: int, running: int) -> float:
        """:meth:`prefill_s` split into chunks beside ``running`` decodes
        (:func:`pipesim.compute.knobs.chunked_prefill_s`)."""
        return chunked_prefill_s(self, new_tokens, attn_token_pairs, n_seqs, running)

    def lm_head_s(self, n_seqs: int) -> float:
        """Seconds of the LM head for ``n_seqs`` sequences (the last token of each; cached)."""
        memo = self._lm
        if len(memo) <= n_seqs:
            with _TABLES_LOCK:  # shared, as in fixed_s
                while len(memo) <= n_seqs:
                    c = self.config
                    memo.append(
                        gemm_time_s(
                            c.gpu, len(memo), c.model.hidden_size, self._vocab, efficiency=c.efficiency
                        )
                    )
        return memo[n_seqs]

    def compute_bound(self, b: int, kv_tokens: float) -> bool:
        """Whether a decode iteration is compute bound (FLOP time above HBM time, roofline terms)."""
        flops = b * self._flops_per_seq + self._attn_flops_all * kv_tokens
        mem = self._weight_bytes + self._attn_bytes_all * kv_tokens
        return flops * self._bw > mem * self._peak

    def tokens_per_s(self, b: int, kv_tokens: float) -> float:
        """Decode tokens per second of the whole batch (``b`` per iteration)."""
        return b / self.iteration_s(b, kv_tokens) if b else 0.0
