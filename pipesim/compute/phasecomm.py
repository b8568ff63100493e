"""The trainer's own communication: the collectives of each phase, and the link each one crosses.

A phase of :mod:`pipesim.compute.phases` is its FLOPs, its fixed costs and its collectives; the
collectives are here, priced by bytes over a link rather than by FLOPs, so the formulas that
:mod:`pipesim.compute.sync` and :mod:`pipesim.compute.cost` share with the phases (the link of a
collective over ``span`` GPUs, :data:`GPUS_PER_NODE`, :func:`expert_params`) sit apart from the
batch split. The phases charge ``1 - comm_overlap`` of these seconds (the rest hides behind
compute); the pipeline bubble, which idles compute rather than moving bytes, stays with the phases.

``fsdp`` (FSDP2 / ZeRO-3, parameters sharded over all ``G``): each micro-batch all-gathers the bf16
parameters in the forward and again in the backward and reduce-scatters the gradients
(``grad_reduce_bytes`` per parameter: verl's FSDP mixed precision reduces in fp32), each moving
``(G - 1) / G`` of its bytes through one GPU's link (NVLink within a node of
:data:`GPUS_PER_NODE`, the per-GPU network beyond: past one node a phase can slow as GPUs are
added). ``megatron`` (distributed optimizer): once per optimizer step the gradients are
reduce-scattered and the parameters all-gathered, each over its own group
(:func:`optimizer_bytes_per_rank`): the non-expert ``P_d / (tp pp)`` shard over the ``dp`` ranks,
the routed experts' ``P_e / (tp ep pp)`` over the ``G / (tp ep pp)`` expert-data-parallel ranks
(nothing when that is 1). Per layer and micro-batch, tensor parallelism all-reduces the activations
twice in the forward and twice in the backward (ring: ``2 (tp - 1) / tp`` of ``tokens x hidden x
2`` bytes over NVLink), and expert parallelism all-to-alls the routed tokens twice each way
(``tokens x k x hidden x 2 x (ep - 1) / ep`` bytes).

The names are still importable from :mod:`pipesim.compute.phases`, whose functions call them by
its own names (so a patch of ``phases._comm_per_micro_s`` reaches ``phase_parts``; one of
``phases.link_bytes_per_s`` does not reach the functions here, which call this module's);
:func:`~pipesim.compute.phases.reference_phase_times_s` recounts them in a slow loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipesim.compute.gpus import GPUSpec
    from pipesim.compute.models import ModelSpec
    from pipesim.compute.trainer import TrainerConfig

GPUS_PER_NODE = 8
"""GPUs behind one NVLink domain (an HGX/DGX node): collectives within it use NVLink."""


def link_bytes_per_s(gpu: GPUSpec, span: int) -> float:
    """One direction of the link a collective over ``span`` GPUs crosses: NVLink within a node."""
    if span <= GPUS_PER_NODE:
        return gpu.nvlink_bandwidth_per_direction_bytes_per_s
    return gpu.network_bandwidth_bytes_per_s


def _comm_per_micro_s(config: TrainerConfig, tokens_per_micro: float, backward: bool) -> float:
    """Seconds of one rank's collectives for one micro-batch (forward, and backward if asked)."""
    prof, gpu, model = config.framework, config.gpu, config.model
    if prof.backend == "fsdp":
        g = config.n_gpus
        if g == 1:
            return 0.0
        per_param = 2.0 * (2.0 if backward else 1.0) + (prof.grad_reduce_bytes if backward else 0.0)
        return model.n_params * per_param * (g - 1) / g / link_bytes_per_s(gpu, g)
    passes = 2.0 if backward else 1.0
    layers = model.n_layers / prof.pp
    act = tokens_per_micro * model.hidden_size * 2.0
    seconds = 0.0
    if prof.tp > 1:
        tp_s = 2.0 * (prof.tp - 1) / prof.tp * act / link_bytes_per_s(gpu, prof.tp)
        seconds += passes * 2.0 * layers * tp_s
    if prof.ep > 1 and model.is_moe:
        routed = act * model.n_active_experts * (prof.ep - 1) / prof.ep
        seconds += passes * 2.0 * layers * routed / link_bytes_per_s(gpu, prof.tp * prof.ep)
    return seconds


def expert_params(model: ModelSpec) -> int:
    """Parameters of the routed experts (0 if dense): what ``ep`` splits; the router and a shared
    expert are replicated like attention (Megatron-Core's ``allreduce`` flag)."""
    per_expert = (3 if model.gated_mlp else 2) * model.hidden_size * model.expert_intermediate_size
    return model.n_layers * model.n_experts * per_expert


def optimizer_bytes_per_rank(config: TrainerConfig, dp: int) -> tuple[float, float]:
    """Bytes one rank moves per optimizer step, ``(non-expert, expert)``: Megatron-Core's
    ``DistributedDataParallel`` (``megatron/core/distributed/distributed_data_parallel.py``) reduces
    the ``allreduce`` parameters' buffers over the data-parallel group and the experts' over the
    expert-data-parallel group of ``world / (expert tp x ep x pp)`` ranks (``parallel_state.py``;
    expert tp defaults to tp). A rank holds ``1 / (tp pp)`` of the one and ``1 / (tp ep pp)`` of the
    other, and a ring moves ``(k - 1) / k`` of it, ``grad_reduce_bytes + 2`` bytes a parameter."""
    prof, model = config.framework, config.model
    per = prof.grad_reduce_bytes + 2.0
    experts = float(expert_params(model)) if prof.ep > 1 else 0.0
    edp = config.n_gpus // (prof.tp * prof.ep * prof.pp)
    dense = (model.n_params - experts) / (prof.tp * prof.pp) * per * (dp - 1) / dp
    return dense, experts / (prof.tp * prof.ep * prof.pp) * per * (edp - 1) / edp


def _optimizer_comm_s(config: TrainerConfig, dp: int) -> float:
    """Megatron's distributed optimizer: a reduce-scatter and an all-gather per optimizer step
    (:func:`optimizer_bytes_per_rank`), both groups within a pipeline stage's ``G / pp`` GPUs."""
    if config.framework.backend != "megatron":
        return 0.0
    span = config.n_gpus // config.framework.pp  # pp is Megatron's outermost rank order
    return sum(optimizer_bytes_per_rank(config, dp)) / link_bytes_per_s(config.gpu, span)
