"""Kernel times from a roofline: how long a layer's projections take on a GPU.

One projection (a GEMM of ``n`` tokens through a ``k x m`` weight shard) does ``2*n*k*m`` FLOPs and
moves at least its weight shard plus its input and output activations through HBM, all in bf16::

    t_compute = flops / (flop_fraction * gpu.bf16_flops_per_s)
    t_memory  = bytes / (bandwidth_fraction * gpu.hbm_bandwidth_bytes_per_s)
    t         = kernel_overhead_s + (t_compute**p + t_memory**p) ** (1/p),   p = combine_exponent

The ``p``-norm is a smooth maximum: far from the ridge point it equals the larger term (decode is
memory bound, large prefills are compute bound); at the ridge it is ``2**(1/p)`` times either, where
a plain ``max`` is too optimistic because real kernels neither overlap loads and math perfectly nor
fill every streaming multiprocessor with a few tiles. ``p = 1`` would be the sum, ``p -> inf`` the max.

A layer's linear part is four kernels (the Megatron split, as vLLM and Vidur run it): the fused QKV
projection and the fused gate/up projection are column parallel (each GPU holds ``1/tp`` of the
heads and of the MLP width; KV heads are replicated when ``tp > n_kv_heads``), the attention output
and the down projection are row parallel. The all-reduce after the row-parallel ones is
communication, not a kernel of this roofline: :mod:`pipesim.compute.allreduce` times it.

Mixture of experts (simple on purpose): a router GEMM (``hidden x n_experts``) is a fifth kernel;
gate/up and down are grouped GEMMs over the ``n_tokens * n_active_experts`` token-expert pairs,
every expert sharded ``1/tp`` by default, and they read the weights of the experts the batch
touches -- under uniform routing ``n_experts * (1 - (1 - n_active/n_experts) ** n_tokens)`` of
them, so one token reads only its active experts and a large batch reads them all. A shared expert
is a dense MLP of its own width run as separate kernels. With an expert-parallel degree ``ep``
(vLLM's ``enable_expert_parallel``, which in ``FusedMoEParallelConfig.make`` of
``vllm/model_executor/layers/fused_moe/config.py`` turns the MoE layer's TP into EP: whole
experts split across the ranks, ``tp_size=1`` for them) the experts are split whole across ``ep``
groups and each GPU runs its own experts over its share of the pairs; see :func:`linear_times_s`.

The constants (:class:`Efficiency`, in :mod:`pipesim.compute.efficiency`) are global: one set for
every model and every GPU, the catalog's datasheet figures being all that differ between GPUs. They
were chosen, as round numbers inside the physically plausible ranges (sustained GEMM throughput
60-80% of peak, streaming bandwidth 70-90%, a few microseconds per launch as CUDA events time it),
by a grid search over those ranges against Vidur's H100 profile of Llama-2-7B
(``shared/reference/vidur/h100_llama-2-7b_mlp.csv``: the sum of the four projections' median times,
1,044 rows, 1 to 4,096 tokens, TP 1/2/4/8), then rounded. With the defaults the median absolute
relative error is 4.9% and 99.5% of the rows are within 25% (per TP, median / within 25%: TP1 4.3% /
100%, TP2 5.1% / 100%, TP4 5.2% / 99.2%, TP8 5.1% / 98.9%); ``tests/test_compute_specs.py`` checks
it and ``docs/compute.md`` says how to reproduce it. The remaining error is mostly GEMM tile
quantisation (the measured times jump at tile boundaries).

:func:`decode_attention_time_s` and :func:`prefill_attention_time_s` apply the same roofline to
attention (reading the cached keys and values; the causal query-key pairs of a prompt), with the
attention constants of :class:`Efficiency`, whose defaults ``docs/decode.md`` checks against
Vidur's A100 and A40 attention profiles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipesim.compute.allreduce import DEFAULT_ALLREDUCE_LATENCY_S as DEFAULT_ALLREDUCE_LATENCY_S
from pipesim.compute.allreduce import NCCL_ALLREDUCE_LATENCY_S as NCCL_ALLREDUCE_LATENCY_S
from pipesim.compute.allreduce import allreduce_time_s as allreduce_time_s  # re-exported: knobs, measured
from pipesim.compute.efficiency import DEFAULT_EFFICIENCY as DEFAULT_EFFICIENCY  # re-exported (efficiency.py)
from pipesim.compute.efficiency import GEMM_ONLY_EFFICIENCY as GEMM_ONLY_EFFICIENCY
from pipesim.compute.efficiency import MAX_FIXED_COST_S as MAX_FIXED_COST_S
from pipesim.compute.efficiency import MEASURED_EFFICIENCY as MEASURED_EFFICIENCY
from pipesim.compute.efficiency import Efficiency as Efficiency
from pipesim.compute.efficiency import decode_attention_efficiency as decode_attention_efficiency
from pipesim.compute.models import dtype_bytes
from pipesim.core.errors import FieldError, check_int, shown
from pipesim.core.validate import refuse

if TYPE_CHECKING:
    from pipesim.compute.gpus import GPUSpec
    from pipesim.compute.models import ModelSpec

ACTIVATION_BYTES = 2
"""Activations are bf16 in every kernel modelled here; weights are bf16 too unless a GEMM is given
another ``weight_dtype`` (weight-only quantization: :func:`gemm_time_s`)."""


MIN_FLOPS_PER_S = 1e9
"""The lowest ``bf16_flops_per_s`` a GPU may have for a run to time its kernels: a GFLOP/s, a
desktop CPU core of the 1990s and 10**5 times below any accelerator in the catalog. A rate is
refused below it, naming ``gpu.bf16_flops_per_s``: at 5e-324 the roofline divided by zero (a bare
``ZeroDivisionError``), and anywhere near it a kernel took 1e300 s, a number that is no time."""

MIN_BANDWIDTH_BYTES_PER_S = 1e6
"""The lowest bandwidth (``hbm_bandwidth_bytes_per_s``, ``nvlink_bandwidth_bytes_per_s``,
``network_bandwidth_bytes_per_s``) a GPU may have for a run to use it: a megabyte a second, below
any memory or link of the last forty years. Below it the roofline's or a weight sync's division
gave zero-division errors (5e-324) or seconds past any run's length; refused naming the field."""

GPU_RATE_FLOORS = {
    "bf16_flops_per_s": MIN_FLOPS_PER_S,
    "hbm_bandwidth_bytes_per_s": MIN_BANDWIDTH_BYTES_PER_S,
    "nvlink_bandwidth_bytes_per_s": MIN_BANDWIDTH_BYTES_PER_S,
    "network_bandwidth_bytes_per_s": MIN_BANDWIDTH_BYTES_PER_S,
}
"""Each rate of a :class:`~pipesim.compute.gpus.GPUSpec` and its floor (:func:`check_gpu_rates`)."""


def check_gpu_rates(
    gpu: GPUSpec, names: tuple[str, ...] = tuple(GPU_RATE_FLOORS), prefix: str = "gpu"
) -> None:
    """:class:`FieldError` naming ``prefix.NAME`` for the first of the GPU's rates ``names`` below
    its floor (:data:`GPU_RATE_FLOORS`). Asked where a rate is used (a run's kernel times, a weight
    sync, a trainer), so a GPU with a link a run never crosses is still accepted."""
    for name in names:
        value = getattr(gpu, name)
        floor = GPU_RATE_FLOORS[name]
        if not value >= floor:
            raise FieldError(
                f"{prefix}.{name} ({shown(value)}) is below {floor:g}, the lowest rate pipesim times "
                f"(GPUSpec {shown(gpu.name)}; pipesim.compute.roofline.GPU_RATE_FLOORS): a slip of units?",
                f"{prefix}.{name}",
            )


def kernel_time_s(
    gpu: GPUSpec, flops: float, bytes_moved: float, efficiency: Efficiency | None = None
) -> float:
    """Seconds for one kernel doing ``flops`` FLOPs and moving ``bytes_moved`` HBM bytes."""
    if not flops >= 0 or not bytes_moved >= 0:  # NaN fails too
        raise refuse("flops", f"and bytes_moved must be >= 0, got {shown(flops)} and {shown(bytes_moved)}")
    if not (
        gpu.bf16_flops_per_s >= MIN_FLOPS_PER_S and gpu.hbm_bandwidth_bytes_per_s >= MIN_BANDWIDTH_BYTES_PER_S
    ):
        check_gpu_rates(gpu, ("bf16_flops_per_s", "hbm_bandwidth_bytes_per_s"))
    eff = efficiency or DEFAULT_EFFICIENCY
    t_compute = flops / (eff.flop_fraction * gpu.bf16_flops_per_s)
    t_memory = bytes_moved / (eff.bandwidth_fraction * gpu.hbm_bandwidth_bytes_per_s)
    p = eff.combine_exponent
    # (t_c**p + t_m**p)**(1/p), written as hi * (1 + (lo/hi)**p)**(1/p) so that a large p cannot
    # underflow both powers to zero (it tends to the max, as it should)
    hi, lo = (t_compute, t_memory) if t_compute >= t_memory else (t_memory, t_compute)
    if hi == 0.0:
        return eff.kernel_overhead_s
    return eff.kernel_overhead_s + hi * (1.0 + (lo / hi) ** p) ** (1 / p)


def gemm_time_s(
    gpu: GPUSpec,
    n_rows: float,
    k: int,
    m: int,
    weight_elements: float | None = None,
    efficiency: Efficiency | None = None,
    weight_bytes: float = ACTIVATION_BYTES,
) -> float:
    """Seconds for ``n_rows`` rows through a ``k x m`` weight (reading ``weight_elements`` of it,
    all ``k*m`` by default) stored at ``weight_bytes`` bytes per element (bf16's 2 by default).

    Weight-only quantization (W8A16, W4A16; what ``EngineConfig.weight_dtype`` means): the weights
    are read at their stored width and dequantized in the kernel, the activations stay bf16 and
    the math runs at the bf16 peak, so only the weight bytes change. (An fp8 GEMM at twice the
    bf16 peak needs fp8 activations too, W8A8, which is not modelled.) With the default the bytes
    are ``2 * (weights + activations)`` to the bit, as before the argument existed."""
    weights = k * m if weight_elements is None else weight_elements
    if weight_bytes != ACTIVATION_BYTES:  # weights in activation-sized units
        weights = weights * (weight_bytes / ACTIVATION_BYTES)
    flops = 2.0 * n_rows * k * m
    bytes_moved = ACTIVATION_BYTES * (weights + n_rows * (k + m))
    return kernel_time_s(gpu, flops, bytes_moved, efficiency)


def _check(model: ModelSpec, n_tokens: int, tp: int, name: str = "n_tokens") -> None:
    check_int(name, n_tokens, 0)
    check_tp(model, tp)


def check_tp(model: ModelSpec, tp: int) -> None:
    """Validate a tensor-parallel degree ``tp`` for ``model`` (``ValueError`` naming ``tp``): a
    positive int dividing ``n_heads``, and dividing ``n_kv_heads`` or a multiple of it (the KV
    heads are then replicated), as vLLM requires."""
    check_int("tp", tp, 1)
    if model.n_heads % tp:
        raise refuse("tp", f"({tp}) must divide the model's n_heads ({model.n_heads})")
    if model.n_kv_heads % tp and tp % model.n_kv_heads:
        raise refuse("tp", f"({tp}) must divide n_kv_heads ({model.n_kv_heads}) or be a multiple of it")


def check_ep(model: ModelSpec, tp: int, ep: int) -> None:
    """Validate an expert-parallel degree ``ep`` for ``model`` on ``tp`` GPUs (``ValueError`` naming
    ``ep``): a positive int, 1 for a dense model, dividing ``n_experts`` and the ``tp`` GPUs."""
    check_int("ep", ep, 1)
    if ep == 1:
        return
    if not model.is_moe:
        raise refuse("ep", f"({ep}) > 1 needs a mixture-of-experts model; {model.name} is dense")
    if model.n_experts % ep:
        raise refuse("ep", f"({ep}) must divide the model's n_experts ({model.n_experts})")
    if tp % ep:
        raise refuse("ep", f"({ep}) must divide (or equal) the replica's GPUs, tp={tp}")


def experts_touched(model: ModelSpec, n_tokens: int) -> float:
    """Expected number of distinct routed experts ``n_tokens`` tokens use, under uniform routing."""
    check_int("n_tokens", n_tokens, 0)
    if not model.is_moe or n_tokens == 0:
        return 0.0
    e, k = model.n_experts, model.n_active_experts
    return e * (1.0 - (1.0 - k / e) ** n_tokens)


def linear_times_s(
    model: ModelSpec,
    gpu: GPUSpec,
    n_tokens: int,
    tp: int = 1,
    efficiency: Efficiency | None = None,
    ep: int = 1,
    weight_dtype: str = "bf16",
) -> dict[str, float]:
    """Seconds of each projection kernel of one layer on one GPU, by name (``qkv``, ``attn_out``,
    ``gate_up``, ``down``; for a mixture of experts also ``router`` and, with a shared expert,
    ``shared_gate_up`` and ``shared_down``). All zero for ``n_tokens == 0``.

    ``ep``: the expert-parallel degree (a mixture of experts only; it divides ``tp`` and
    ``n_experts``): the routed experts are split whole across ``ep`` groups of ``tp / ep`` GPUs,
    each expert sharded ``1 / (tp / ep)`` within its group, instead of every expert sharded
    ``1 / tp`` (``ep=1``, the default). A GPU then runs the grouped GEMMs of its group's
    ``n_experts / ep`` experts over its share of the token-expert pairs, ``n_tokens *
    n_active_experts / ep`` (routing balanced across groups), reading the weights of the local
    experts the batch touches, ``experts_touched / ep`` of them (uniform routing). Its FLOPs and its
    expected weight bytes are those of ``ep=1`` -- both designs split every touched expert's bytes
    evenly over the GPUs in expectation -- but it reads the activations of its own pairs only. The
    all-to-all that moves the pairs is communication, in :class:`pipesim.compute.cost.ReplicaCost`.

    ``weight_dtype``: how the weights are stored (``"bf16"`` by default; ``"fp8"``, ``"int4"``,
    ... weight-only, :func:`gemm_time_s`): each kernel reads its weights at that width, the
    activations and the math stay bf16.
    """
    _check(model, n_tokens, tp)
    check_ep(model, tp, ep)
    wb = dtype_bytes(weight_dtype, "weight_dtype")
    eff = efficiency or DEFAULT_EFFICIENCY
    names = ["qkv", "attn_out", "gate_up", "down"]
    if model.is_moe:
        names.append("router")
        if model.shared_expert_intermediate_size:
            names += ["shared_gate_up", "shared_down"]
    if n_tokens == 0:
        return dict.fromkeys(names, 0.0)
    h, n = model.hidden_size, n_tokens
    q_heads = -(-model.n_heads // tp)
    kv_heads = -(-model.n_kv_heads // tp)
    up = 2 if model.gated_mlp else 1
    out = {
        "qkv": gemm_time_s(
            gpu, n, h, (q_heads + 2 * kv_heads) * model.head_dim, efficiency=eff, weight_bytes=wb
        ),
        "attn_out": gemm_time_s(gpu, n, q_heads * model.head_dim, h, efficiency=eff, weight_bytes=wb),
    }
    if not model.is_moe:
        width = -(-model.intermediate_size // tp)
        out["gate_up"] = gemm_time_s(gpu, n, h, up * width, efficiency=eff, weight_bytes=wb)
        out["down"] = gemm_time_s(gpu, n, width, h, efficiency=eff, weight_bytes=wb)
        return out
    etp = tp // ep  # the GPUs one expert is sharded over
    width = -(-model.expert_intermediate_size // etp)
    pairs: float = n * model.n_active_experts
    touched = experts_touched(model, n)
    if ep > 1:
        pairs /= ep  # this GPU's share of the pairs and of the touched experts
        touched /= ep
    moe = eff.moe_gemm_fraction  # the fused-MoE kernel against the dense roofline
    out["gate_up"] = gemm_time_s(gpu, pairs, h, up * width, touched * h * up * width, eff, wb) / moe
    out["down"] = gemm_time_s(gpu, pairs, width, h, touched * width * h, eff, wb) / moe
    out["router"] = gemm_time_s(gpu, n, h, model.n_experts, efficiency=eff, weight_bytes=wb)
    if model.shared_expert_intermediate_size:
        shared = -(-model.shared_expert_intermediate_size // tp)
        out["shared_gate_up"] = gemm_time_s(gpu, n, h, up * shared, efficiency=eff, weight_bytes=wb)
        out["shared_down"] = gemm_time_s(gpu, n, shared, h, efficiency=eff, weight_bytes=wb)
    return out


def linear_time_s(
    model: ModelSpec,
    gpu: GPUSpec,
    n_tokens: int,
    tp: int = 1,
    efficiency: Efficiency | None = None,
    ep: int = 1,
    weight_dtype: str = "bf16",
) -> float:
    """Seconds for one layer's linear part: the sum of :func:`linear_times_s`."""
    return sum(linear_times_s(model, gpu, n_tokens, tp, efficiency, ep, weight_dtype).values())


def decode_attention_time_s(
    model: ModelSpec,
    gpu: GPUSpec,
    kv_tokens: int,
    tp: int = 1,
    efficiency: Efficiency | None = None,
    n_seqs: int = 0,
) -> float:
    """Seconds for one layer's attention in a decode step (one new token per sequence) whose
    ``n_seqs`` sequences hold ``kv_tokens`` cached tokens in all, on each of ``tp`` GPUs.

    Each cached token is read once (keys and values of this GPU's KV heads) and costs
    ``4 * head_dim`` FLOPs per query head (scores and the weighted sum); one kernel. Zero for
    ``kv_tokens == 0``. Checked against Vidur's A100 profile (``docs/decode.md``).
    """
    _check(model, kv_tokens, tp, "kv_tokens")
    check_int("n_seqs", n_seqs, 0)
    if kv_tokens == 0:
        return 0.0
    q_heads = -(-model.n_heads // tp)
    kv_heads = -(-model.n_kv_heads // tp)
    flops = 4.0 * kv_tokens * q_heads * model.head_dim
    bytes_moved = ACTIVATION_BYTES * 2 * kv_tokens * kv_heads * model.head_dim
    eff = efficiency or DEFAULT_EFFICIENCY
    blocks = n_seqs * kv_heads * eff.attention_block_s
    return kernel_time_s(gpu, flops, bytes_moved, decode_attention_efficiency(eff)) + blocks


def prefill_attention_time_s(
    model: ModelSpec,
    gpu: GPUSpec,
    new_tokens: int,
    attn_token_pairs: float,
    tp: int = 1,
    efficiency: Efficiency | None = None,
) -> float:
    """Seconds for one layer's attention over ``new_tokens`` prompt tokens with
    ``attn_token_pairs`` query-key pairs (``sum n_i (P_i + n_i / 2)`` for sequences of ``n_i`` new
    tokens after ``P_i`` cached ones), on each of ``tp`` GPUs: ``4 * head_dim`` FLOPs per pair and
    query head, and the new tokens' keys and values written and read once; one kernel. What
    :meth:`pipesim.compute.cost.ReplicaCost.prefill_s` charges per layer."""
    _check(model, new_tokens, tp, "new_tokens")
    if new_tokens == 0:
        return 0.0
    q_heads = -(-model.n_heads // tp)
    kv_heads = -(-model.n_kv_heads // tp)
    flops = 4.0 * q_heads * model.head_dim * attn_token_pairs
    bytes_moved = ACTIVATION_BYTES * 2 * kv_heads * model.head_dim * 2 * new_tokens
    eff = efficiency or DEFAULT_EFFICIENCY
    # the FLOPs scaled to the GEMM fraction, as ReplicaCost.prefill_s computes them, so that both
    # give the same float
    scaled = flops * (eff.flop_fraction / eff.attention_flops)
    return kernel_time_s(gpu, scaled, bytes_moved, eff)
