"""What three of vLLM's engine settings cost: eager mode (``enforce_eager``), chunked prefill
(``max_num_batched_tokens``) and NCCL in place of the custom all-reduce
(``disable_custom_all_reduce``); :class:`~pipesim.compute.cost.EngineConfig` holds them,
:class:`~pipesim.compute.cost.ReplicaCost` charges them through these functions.

Eager mode: vLLM captures the decode step in CUDA graphs (``vllm/config/compilation.py``, the
capture sizes; ``enforce_eager=True`` turns them off), so a graph replays a step's kernels back to
back; without them the host dispatches every kernel, and a decode step's kernels are too short to
hide that. Chunked prefill: vLLM V1's scheduler (``vllm/v1/core/sched/scheduler.py``) first gives
each running request its decode token, then fills what is left of ``max_num_batched_tokens``
(``SchedulerConfig``, ``vllm/config/scheduler.py``, which also requires it to be at least
``max_num_seqs``) with prompt chunks, so a long prompt is prefilled over several iterations that
the decodes share (V1 always schedules so; unset, ``max_num_batched_tokens=None`` is vLLM V0's
prefill-first step with chunked prefill off). ``docs/decode.md`` says what checks these and what
does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipesim.compute.phases import GPUS_PER_NODE
from pipesim.compute.roofline import NCCL_ALLREDUCE_LATENCY_S, kernel_time_s
from pipesim.core.errors import check_int

if TYPE_CHECKING:
    from pipesim.compute.cost import EngineConfig, ReplicaCost

EAGER_KERNELS_PER_LAYER = 10
"""Kernels one decoder layer launches per forward in eager mode besides its all-reduces (vLLM's
Llama/Qwen layer: input RMSNorm, QKV GEMM, rotary, KV-cache write, attention, output GEMM, fused
residual add + RMSNorm, gate/up GEMM, SiLU-and-mul, down GEMM); ``tp > 1`` adds two all-reduces."""

EAGER_LAUNCH_S = 5e-6
"""Seconds the GPU idles per kernel in eager mode (``enforce_eager``): the host's dispatch of one
PyTorch op and its launch, which a decode step's short kernels cannot hide and a CUDA graph
replays without. A round figure for CUDA launch latency plus PyTorch's dispatch (a few
microseconds each); no public per-iteration measurement checks it (``docs/decode.md``)."""

MAX_BATCHED_TOKENS = 2**24
"""The largest ``max_num_batched_tokens``: 16M tokens in one iteration is far past any GPU's
activation memory; a larger figure is a typo."""


def eager_s(c: EngineConfig) -> float:
    """Seconds ``enforce_eager`` adds to a decode iteration: :data:`EAGER_LAUNCH_S` per kernel,
    :data:`EAGER_KERNELS_PER_LAYER` per layer (two more with ``tp > 1``, their all-reduces),
    plus the LM head; zero with CUDA graphs. Prefill iterations are not charged: their kernels
    run long enough for the host to launch ahead of the GPU."""
    if not c.enforce_eager:
        return 0.0
    per_layer = EAGER_KERNELS_PER_LAYER + (2 if c.tp > 1 else 0)
    return (c.model.n_layers * per_layer + 1) * EAGER_LAUNCH_S


def allreduce_latency_s(c: EngineConfig) -> float:
    """Fixed seconds of one tensor-parallel all-reduce: ``c.allreduce_latency_s`` (vLLM's custom
    all-reduce) or, with ``disable_custom_all_reduce``, the measured NCCL latency
    :data:`~pipesim.compute.roofline.NCCL_ALLREDUCE_LATENCY_S` (``CudaCommunicator.all_reduce``
    in ``vllm/distributed/device_communicators/cuda_communicator.py`` tries the custom all-reduce
    first and falls back to pynccl, which CUDA graphs capture). A tensor-parallel group wider than
    a node (``tp`` above :data:`~pipesim.compute.phases.GPUS_PER_NODE`) gets NCCL too: vLLM's
    custom all-reduce refuses a group that spans nodes ("Custom allreduce is disabled because this
    process group spans across nodes", ``custom_all_reduce.py``). NCCL's latency across nodes is
    higher than this intra-node measurement; no measurement of it is used, so it is a floor."""
    if c.disable_custom_all_reduce or c.tp > GPUS_PER_NODE:
        return NCCL_ALLREDUCE_LATENCY_S
    return c.allreduce_latency_s


def chunked_prefill_s(
    cost: ReplicaCost, new_tokens: int, attn_token_pairs: float, n_seqs: int, running: int
) -> float:
    """Seconds a chunked prefill (``max_num_batched_tokens`` set) delays ``running`` decoding
    sequences: the prefill of :meth:`ReplicaCost.prefill_s`'s arguments is split into chunks of
    at most ``max_num_batched_tokens - running`` tokens, each sharing one iteration with the decodes
    (vLLM's V1 scheduler schedules the running requests first, then fills the token budget with
    prefill chunks: ``vllm/v1/core/sched/scheduler.py``). Each chunk adds to its iteration what
    the decode step alone would not pay: the linear layers of ``running + chunk`` tokens less
    those of ``running``, its share of the attention (query-key pairs in proportion to its
    tokens), and, on the last chunk, the LM head rows of the ``n_seqs`` finished prompts.
    With nothing running each chunk is an iteration of its own and pays
    ``iteration_overhead_s``; a prefill that fits one chunk is then exactly
    :meth:`ReplicaCost.prefill_s`.
    The decodes advance one token per shared iteration, so a stall of these seconds followed by
    plain decode iterations takes the time the mixed iterations take."""
    if new_tokens <= 0:
        return 0.0
    c = cost.config
    budget = c.max_num_batched_tokens
    if budget is None:
        return cost.prefill_s(new_tokens, attn_token_pairs, n_seqs)
    check_int("running", running, 0)
    chunk = max(budget - running, 1)
    base = cost.linear_s(running) if running else 0.0
    total, left = 0.0, new_tokens
    while left > 0:
        n = min(chunk, left)
        left -= n
        share = attn_token_pairs * n / new_tokens
        attn = kernel_time_s(c.gpu, cost._attn_flops_tok * share, cost._attn_bytes_tok * 2 * n, c.efficiency)
        total += cost.n_layers * (cost.linear_s(running + n) - base + attn)
        if not running:
            total += c.iteration_overhead_s
    head = cost.lm_head_s(running + n_seqs) - (cost.lm_head_s(running) if running else 0.0)
    return total + head
