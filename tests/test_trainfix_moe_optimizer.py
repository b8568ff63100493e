"""Megatron's distributed optimizer with expert parallelism, against a slow rank-by-rank reference.

Megatron-Core reduces the gradients (and gathers the parameters) of the non-expert parameters over
the data-parallel group and those of the routed experts over the expert-data-parallel group of
``world / (tp x ep x pp)`` ranks (``megatron/core/distributed/distributed_data_parallel.py``,
``megatron/core/parallel_state.py``). The reference builds rank 0's two groups from Megatron's rank
orders (``tp-cp-dp-pp`` and ``tp-ep-dp-pp``), lists every parameter tensor of the model, and sums
what a ring moves for each through the link its group's ranks actually cross.
"""

from __future__ import annotations

import dataclasses

import pytest

from pipesim.compute import GPUS, MODELS
from pipesim.compute.cost import EngineConfig
from pipesim.compute.gpus import GPUSpec
from pipesim.compute.models import ModelSpec
from pipesim.compute.phases import GPUS_PER_NODE, _optimizer_comm_s, expert_params
from pipesim.compute.profiles import profile
from pipesim.compute.sync import SyncModel
from pipesim.compute.trainer import TrainerConfig

MOE, DENSE = MODELS["qwen3-30b-a3b"], MODELS["qwen3-8b"]
H100 = GPUS["h100-sxm"]


def tensors(m: ModelSpec) -> list[tuple[int, bool]]:
    """Every parameter tensor of ``m`` as ``(elements, is a routed expert's)``, layer by layer."""
    h, mats = m.hidden_size, 3 if m.gated_mlp else 2
    out = [(m.vocab_size * h, False), (h, False)]  # embedding, final norm
    if not m.tied_embeddings:
        out.append((m.vocab_size * h, False))
    for _ in range(m.n_layers):
        out += [(h * m.q_size, False), (h * m.kv_size, False), (h * m.kv_size, False), (m.q_size * h, False)]
        if m.attention_bias:
            out += [(m.q_size, False), (m.kv_size, False), (m.kv_size, False)]
        if m.qk_norm:
            out += [(m.head_dim, False), (m.head_dim, False)]
        out += [(h, False), (h, False)]  # the two layer norms
        if m.is_moe:
            out.append((h * m.n_experts, False))  # the router
            out += [(mats * h * m.expert_intermediate_size, True)] * m.n_experts
            if m.shared_expert_intermediate_size:
                out.append((mats * h * m.shared_expert_intermediate_size, False))
        else:
            out.append((mats * h * m.intermediate_size, False))
    return out


def link(gpu: GPUSpec, ranks: list[int]) -> float:
    """The link a group's ring crosses: NVLink when its ranks share a node."""
    same = len({r // GPUS_PER_NODE for r in ranks}) == 1
    return gpu.nvlink_bandwidth_per_direction_bytes_per_s if same else gpu.network_bandwidth_bytes_per_s


def reference_optimizer_s(config: TrainerConfig) -> float:
    """Rank 0's reduce-scatter and all-gather seconds per optimizer step (pp = 1, no Ulysses)."""
    prof, g = config.framework, config.n_gpus
    assert prof.pp == 1 and config.sequence_parallel == 1
    tp, ep = prof.tp, prof.ep if config.model.is_moe else 1
    dp, edp = g // tp, g // (tp * ep)
    dense_group = [tp * k for k in range(dp)]  # tp-cp-dp-pp: rank = t + tp (c + cp d)
    expert_group = [tp * ep * k for k in range(edp)]  # tp-ep-dp-pp: rank = t + tp (e + ep d)
    per = prof.grad_reduce_bytes + 2.0
    seconds = 0.0
    for elements, is_expert in tensors(config.model):
        group = expert_group if is_expert and ep > 1 else dense_group
        split = tp * ep if is_expert and ep > 1 else tp
        k = len(group)
        if k > 1:
            seconds += elements / split * per * (k - 1) / k / link(config.gpu, group)
    return seconds


def test_the_tensor_list_counts_every_parameter() -> None:
    for m in (MOE, DENSE, MODELS["qwen2.5-7b"]):
        assert sum(n for n, _ in tensors(m)) == m.n_params
        assert sum(n for n, e in tensors(m) if e) == expert_params(m)


LAYOUTS = [
    ("megatron-moe", MOE, 1, 8),
    ("megatron-moe", MOE, 2, 4),
    ("megatron-moe", MOE, 1, 4),
    ("megatron-moe", MOE, 4, 2),
    ("megatron-dense", DENSE, 4, 1),
    ("megatron-dense", DENSE, 1, 1),
    ("megatron-dense", MOE, 2, 1),  # no expert parallelism: every parameter over the dp ranks
]


@pytest.mark.parametrize("n_gpus", [8, 16, 32, 64])
@pytest.mark.parametrize(("name", "model", "tp", "ep"), LAYOUTS)
def test_optimizer_traffic_matches_the_rank_by_rank_reference(
    name: str, model: ModelSpec, tp: int, ep: int, n_gpus: int
) -> None:
    prof = dataclasses.replace(profile(name), tp=tp, ep=ep)
    cfg = TrainerConfig(model=model, gpu=H100, n_gpus=n_gpus, profile=prof)
    dp = n_gpus // tp
    assert _optimizer_comm_s(cfg, dp) == pytest.approx(reference_optimizer_s(cfg), rel=1e-12)


def test_experts_add_nothing_when_each_expert_group_is_one_rank() -> None:
    """``G = tp x ep``: every expert has one owner, so only the non-expert shard is reduced."""
    prof = profile("megatron-moe")
    cfg = TrainerConfig(model=MOE, gpu=H100, n_gpus=prof.tp * prof.ep * prof.pp, profile=prof)
    dense = (MOE.n_params - expert_params(MOE)) * (prof.grad_reduce_bytes + 2) * 7 / 8
    assert _optimizer_comm_s(cfg, 8) == pytest.approx(dense / H100.nvlink_bandwidth_per_direction_bytes_per_s)


def test_megatron_moe_update_does_not_slow_as_data_parallel_gpus_are_added() -> None:
    """The walkthrough's case: Qwen3-30B-A3B's update_actor grew from 6.15 to 10.69 s going from
    8 to 16 GPUs when every parameter was reduced over every data-parallel rank."""
    times = []
    for g in (8, 16, 32, 64):
        cfg = TrainerConfig(model=MOE, gpu=H100, n_gpus=g, profile="megatron-moe", ppo_mini_batch_samples=64)
        times.append(cfg.phase_times_s(256 * 2000, 256)["update_actor"])
    assert times == sorted(times, reverse=True), times


def test_the_megatron_gather_splits_experts_over_tp_x_ep_and_the_rest_over_tp() -> None:
    engine = EngineConfig(model=MOE, gpu=H100, tp=4, max_model_len=4096)
    sync = SyncModel(link_efficiency=1.0)
    w = MOE.weight_bytes("bf16")
    w_e = w * expert_params(MOE) / MOE.n_params
    nv = H100.nvlink_bandwidth_per_direction_bytes_per_s
    for tp, ep in ((1, 8), (2, 4), (4, 2), (2, 1)):
        prof = dataclasses.replace(profile("megatron-moe"), tp=tp, ep=ep)
        got = sync.parts_s(engine, prof, 16, False, 32)["gather"]
        experts = w_e if ep > 1 else 0.0  # without expert parallelism the experts split like the rest
        want = (w - experts) * (tp - 1) / tp / nv + experts * (tp * ep - 1) / (tp * ep) / nv
        assert got == pytest.approx(want, rel=1e-12), (tp, ep)
