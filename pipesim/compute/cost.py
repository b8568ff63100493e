"""What one engine replica costs: its KV-cache budget, a decode iteration, a prefill.

:class:`EngineConfig` describes one replica (a model on ``tp`` GPUs of one type, vLLM-like
settings) and validates it (:mod:`pipesim.compute.engine_config`; re-exported here);
:class:`ReplicaCost` turns it into the numbers the fluid engine (:mod:`pipesim.compute.engine`)
needs, computed once and cached.

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
``allreduce_latency_s + 2 (tp-1)/tp * b * hidden * 2 bytes / link one-way``, the link NVLink
within a node and the per-GPU network for a ``tp`` wider than a node (which also loses vLLM's
custom all-reduce: :func:`~pipesim.compute.knobs.allreduce_latency_s`). The LM head is a
``hidden x vocab/tp`` GEMM of ``b`` rows. Every GEMM reads its weights at ``weight_dtype``'s
bytes per element (weight-only quantization: activations and math stay bf16), the same bytes
``EngineConfig.weight_bytes_per_gpu`` holds, so a memory-bound step is never charged less than
reading them. ``iteration_overhead_s`` is the engine's per-step
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
from typing import TYPE_CHECKING

from pipesim.compute.engine_config import KV_POLICIES as KV_POLICIES  # re-exported
from pipesim.compute.engine_config import TOOL_KV as TOOL_KV  # re-exported
from pipesim.compute.engine_config import EngineConfig
from pipesim.compute.knobs import allreduce_latency_s, chunked_prefill_s, eager_s
from pipesim.compute.models import dtype_bytes
from pipesim.compute.phases import GPUS_PER_NODE, link_bytes_per_s
from pipesim.compute.roofline import (
    check_gpu_rates,
    decode_attention_efficiency,
    gemm_time_s,
    kernel_time_s,
    linear_time_s,
)

if TYPE_CHECKING:
    from pipesim.compute.gpus import GPUSpec

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


def _link(gpu: GPUSpec, span: int) -> float:
    """:func:`~pipesim.compute.phases.link_bytes_per_s` for a collective over ``span`` > 1 GPUs, its
    link's rate first checked (:func:`~pipesim.compute.roofline.check_gpu_rates`, naming
    ``gpu.nvlink_bandwidth_bytes_per_s``, or the network's past a node): at 5e-324 the all-reduce
    divided by zero, a bare ``ZeroDivisionError``."""
    which = "nvlink_bandwidth_bytes_per_s" if span <= GPUS_PER_NODE else "network_bandwidth_bytes_per_s"
    check_gpu_rates(gpu, (which,))
    return link_bytes_per_s(gpu, span)


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
        # the link a collective crosses: NVLink within a node, the per-GPU network past one
        # (a tp or ep group wider than GPUS_PER_NODE spans nodes; phases.link_bytes_per_s)
        # (a single GPU crosses none: its rate is never read, as at a trainer of one GPU)
        self._ring = 2.0 * (c.tp - 1) / c.tp * 2 * m.hidden_size / _link(g, c.tp) if c.tp > 1 else 0.0
        ep = c.ep  # all-to-all: seconds per token of one direction (dispatch or combine) per GPU
        self._a2a = (
            m.n_active_experts * (ep - 1) / ep**2 * 2 * m.hidden_size / _link(g, ep) if ep > 1 else 0.0
        )
        self._vocab = -(-m.vocab_size // c.tp)
        self._wb = wb = dtype_bytes(c.weight_dtype, "weight_dtype")  # bytes per weight element read
        # the compute_bound flag's roofline terms (not the iteration time, which sums the layers'
        # GEMMs and the LM head's): the LM head's FLOPs always count (a tied model's table is its
        # head); an untied input embedding is a lookup, no FLOPs, and of its table only the rows
        # decoded tokens read are memory traffic: one row per sequence, ``b * hidden`` elements
        # against the ``vocab * hidden`` table dropped, left out (BatchState._rate inlines this
        # flag on these two terms)
        table = m.vocab_size * m.hidden_size
        lookup = 0 if m.tied_embeddings else table
        self._flops_per_seq = 2.0 * (m.n_active_params - lookup) / c.tp  # per decoded token
        self._weight_bytes = c.weight_bytes_per_gpu - lookup * wb / c.tp  # weights every step reads
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
            t = linear_time_s(
                c.model, c.gpu, n_tokens, c.tp, c.efficiency, c.ep, c.weight_dtype
            ) + self._allreduce_s(n_tokens)
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
                    lm_head = self._lm_head_gemm_s(n)
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
                    memo.append(self._lm_head_gemm_s(len(memo)))
        return memo[n_seqs]

    def _lm_head_gemm_s(self, n_rows: int) -> float:
        """The LM head's GEMM (``hidden x vocab / tp``) of ``n_rows`` rows, its weights read at
        ``weight_dtype`` like every other weight (as :attr:`EngineConfig.weight_bytes_per_gpu`
        counts them)."""
        c = self.config
        return gemm_time_s(
            c.gpu, n_rows, c.model.hidden_size, self._vocab, efficiency=c.efficiency, weight_bytes=self._wb
        )

    def compute_bound(self, b: int, kv_tokens: float) -> bool:
        """Whether a decode iteration is compute bound (FLOP time above HBM time, roofline terms)."""
        flops = b * self._flops_per_seq + self._attn_flops_all * kv_tokens
        mem = self._weight_bytes + self._attn_bytes_all * kv_tokens
        return flops * self._bw > mem * self._peak

    def tokens_per_s(self, b: int, kv_tokens: float) -> float:
        """Decode tokens per second of the whole batch (``b`` per iteration)."""
        return b / self.iteration_s(b, kv_tokens) if b else 0.0
