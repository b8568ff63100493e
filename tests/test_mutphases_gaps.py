"""Mutants of the trainer's phases, sync, balance, offload and cost code that no test killed
(a mutation audit of pipesim/compute/{phases,trainer,sync,balance,offload,cost}.py): each test
holds a relation, or a value worked out by hand from the docstrings, that its mutant breaks."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import pipesim
from pipesim.compute import GPUS, MODELS, EngineConfig, ReplicaCost, SyncModel, TrainerConfig
from pipesim.compute.balance import rank_loads, rank_samples, verl_workload
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.models import dtype_bytes
from pipesim.compute.offload import Offload
from pipesim.compute.phaseref import ranked_reference_times_s
from pipesim.compute.phases import GPUS_PER_NODE, expert_params, phase_parts, reference_phase_times_s
from pipesim.compute.profiles import profiles
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.core.validate import FieldError
from tests.test_refusals_core import check_refusal

H20 = GPUS["h20"]
H100 = GPUS["h100-sxm"]
DENSE = MODELS["qwen2.5-math-7b"]
MOE = MODELS["qwen3-30b-a3b"]
STEP = dataclasses.replace(profiles()["fsdp2-dense"], balance="step")


def _ramp(n: int) -> list[float]:
    """``n`` samples of 1,000 + 37 i tokens."""
    return [1000.0 + 37 * i for i in range(n)]


# -- phases: the micro-batch counts of a dealt (balanced) step ------------------------------------


@pytest.mark.parametrize(
    ("samples", "mini", "upd_micro", "fwd_micro"),
    [
        # 8 ranks: 3 samples each per mini-batch of 24 -> ceil(3 / 2) = 2 micro-batches, two
        # mini-batches; the whole step 6 a rank -> 3 forward micro-batches
        (48, 24, 2 + 2, 3),
        # mini-batches of 24, 24 and 8: 3, 3 and 1 a rank -> 2 + 2 + 1; 7 a rank -> ceil(7 / 2) = 4
        (56, 24, 2 + 2 + 1, 4),
    ],
)
def test_a_dealt_step_rounds_its_per_sample_micro_batches_up(
    samples: int, mini: int, upd_micro: int, fwd_micro: int
) -> None:
    """By samples a rank's micro-batch count is ``ceil(its samples / micro_batch_samples)``
    (phases docstring): an odd count needs the extra, part-full micro-batch. The closed form
    also equals the rank-by-rank reference on this step."""
    cfg = TrainerConfig(
        model=DENSE, gpu=H20, n_gpus=8, profile=STEP, micro_batch_samples=2, ppo_mini_batch_samples=mini
    )
    per = _ramp(samples)
    parts = phase_parts(cfg, sum(per), samples, per)
    assert parts["update_actor"]["micro"] == upd_micro
    assert parts["old_log_prob"]["micro"] == fwd_micro
    got = cfg.phase_times_s(sum(per), samples, per)
    want = ranked_reference_times_s(cfg, sum(per), samples, per)
    assert got == pytest.approx(want, rel=1e-9)


def test_a_dealt_forward_pass_splits_by_the_log_prob_budget() -> None:
    """A forward-only phase's micro-batches hold ``log_prob_micro_batch_tokens`` each, not the
    training budget: at 2,048 against 16,384 the busiest rank's ~11K tokens take at least
    ceil(mean / 2,048) = 6 forward micro-batches where one training micro-batch holds them."""
    cfg = TrainerConfig(
        model=DENSE,
        gpu=H20,
        n_gpus=8,
        profile=STEP,
        micro_batch_tokens=16384,
        log_prob_micro_batch_tokens=2048,
        ppo_mini_batch_samples=24,
    )
    per = _ramp(48)
    mean_per_rank = sum(per) / 8  # 11,217 tokens
    parts = phase_parts(cfg, sum(per), 48, per)
    assert parts["old_log_prob"]["micro"] >= math.ceil(mean_per_rank / 2048) == 6
    assert parts["update_actor"]["micro"] == 2  # one per mini-batch: ~5.6K tokens a rank each
    got = cfg.phase_times_s(sum(per), 48, per)
    want = ranked_reference_times_s(cfg, sum(per), 48, per)
    assert got == pytest.approx(want, rel=1e-9)


def test_an_empty_step_on_a_dealt_profile_costs_nothing_but_its_remainder() -> None:
    """No samples: no micro-batch runs, so no phase is charged (the remainder is ``step_s``)."""
    cfg = TrainerConfig(model=DENSE, gpu=H20, n_gpus=8, profile=STEP, ppo_mini_batch_samples=24)
    got = cfg.phase_times_s(0, 0, [])
    assert got["old_log_prob"] == got["ref"] == got["update_actor"] == 0.0
    assert got["remainder"] == STEP.step_s
    assert got == reference_phase_times_s(cfg, 0.0, 0)


@pytest.mark.parametrize("gated", [True, False])
def test_expert_params_count_two_or_three_matrices_per_expert(gated: bool) -> None:
    """A routed expert is a gated (3 matrices) or plain (2) MLP of ``hidden x expert_intermediate``:
    Qwen3-30B-A3B's 48 layers x 128 experts x 2,048 x 768 x 3 = 28,991,029,248 gated, x 2 =
    19,327,352,832 plain; never more than the model's parameters."""
    m = dataclasses.replace(MOE, gated_mlp=gated)
    want = 48 * 128 * (3 if gated else 2) * 2048 * 768
    assert want == (28_991_029_248 if gated else 19_327_352_832)
    assert expert_params(m) == want
    assert expert_params(m) <= m.n_params


# -- trainer: refusals and sums -------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, *range(9, 16)])
def test_a_trainer_refuses_a_link_it_crosses_at_a_subnormal_rate(n: int) -> None:
    """More than one GPU crosses NVLink; more than a node's :data:`GPUS_PER_NODE` the network."""
    small = MODELS["qwen3-0.6b"]
    nvlink = dataclasses.replace(H20, nvlink_bandwidth_bytes_per_s=1e-320)
    check_refusal(
        lambda: TrainerConfig(model=small, gpu=nvlink, n_gpus=n),
        FieldError,
        "gpu.nvlink_bandwidth_bytes_per_s",
    )
    net = dataclasses.replace(H20, network_bandwidth_bytes_per_s=1e-320)
    if n > GPUS_PER_NODE:
        check_refusal(
            lambda: TrainerConfig(model=small, gpu=net, n_gpus=n),
            FieldError,
            "gpu.network_bandwidth_bytes_per_s",
        )
    else:  # within a node the network is never crossed
        assert TrainerConfig(model=small, gpu=net, n_gpus=n).n_gpus == n


def test_a_trainer_of_one_gpu_or_one_node_accepts_links_it_never_crosses() -> None:
    small = MODELS["qwen3-0.6b"]
    slow = dataclasses.replace(H20, nvlink_bandwidth_bytes_per_s=1e-320, network_bandwidth_bytes_per_s=1e-320)
    assert TrainerConfig(model=small, gpu=slow, n_gpus=1).n_gpus == 1
    node = dataclasses.replace(H20, network_bandwidth_bytes_per_s=1e-320)
    assert TrainerConfig(model=small, gpu=node, n_gpus=GPUS_PER_NODE).n_gpus == GPUS_PER_NODE


@pytest.mark.parametrize("samples", [2, 64, 512])
def test_a_step_is_the_sum_of_its_phases_at_any_sample_count(samples: int) -> None:
    """``step_time_s(T, S)`` is the sum of ``phase_times_s(T, S)`` (its docstring); the remainder
    charges ``sample_s`` per sample, so more samples of the same tokens take longer."""
    cfg = TrainerConfig(model=DENSE, gpu=H20, n_gpus=8)
    phases = cfg.phase_times_s(1e6, samples)
    assert cfg.step_time_s(1e6, samples) == pytest.approx(sum(phases.values()), rel=1e-12)
    one = cfg.step_time_s(1e6, 1)
    assert cfg.step_time_s(1e6, samples) - one >= (samples - 1) * cfg.framework.sample_s * (1 - 1e-9)


@pytest.mark.parametrize(("budget", "sp", "longest", "least"), [(1000, 2, 2001, 1001), (1000, 4, 4001, 1001)])
def test_the_budget_hint_times_sequence_parallel_holds_the_longest_sample(
    budget: int, sp: int, longest: int, least: int
) -> None:
    """The refusal suggests the smallest budget ``b`` with ``b x sp >= longest``: ceil(longest / sp)."""
    assert least * sp >= longest > (least - 1) * sp
    cfg = TrainerConfig(
        model=DENSE, gpu=H20, n_gpus=4, micro_batch_tokens=budget, sequence_parallel=sp, profile="fsdp2-dense"
    )
    err = check_refusal(lambda: cfg.check_longest_sample(longest), FieldError, "micro_batch_tokens")
    assert f"at least {least:,}" in str(err)
    raised = dataclasses.replace(cfg, micro_batch_tokens=least)
    raised.check_longest_sample(longest)  # the suggested value is accepted


def test_the_trainer_log_holds_compute_alone_and_a_step_adds_the_switch() -> None:
    """``ComputeRun.trainer_log`` is the training compute: each step's seconds are its phases'
    sum; the kernel's training span is that plus the colocated offload/reload ``switch_time_s``."""
    engine = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=H100, max_model_len=4096, max_num_seqs=16)
    wl = TokenWorkload(
        response=LogNormalLengths(300.0, 0.7),
        prompt=LogNormalLengths(100.0, 0.5),
        samples_per_prompt=4,
        max_response_tokens=800,
        max_prompt_tokens=200,
    )
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=32, steps=3), weight_update=pipesim.Drain()
    )
    run = run_compute(sc, Cluster(engine=engine, n_gpus=2, offload=Offload(fixed_s=0.25)), wl, seed=5)
    assert run.switch_time_s > 0.25
    assert len(run.trainer_log) == len(run.phase_log) == len(run.result.train_log) == 3
    for (step, tokens, seconds), (step2, tokens2, phases), (_, a, b, _) in zip(
        run.trainer_log, run.phase_log, run.result.train_log, strict=True
    ):
        assert (step, tokens) == (step2, tokens2)
        assert seconds == pytest.approx(sum(phases.values()), rel=1e-12)
        assert b - a == pytest.approx(seconds + run.switch_time_s, rel=1e-9)


def test_expert_groups_count_the_pipeline_stages() -> None:
    """Megatron tiles ``n_gpus`` by ``tp x pp x ep``: megatron-moe (tp 1, ep 8) at pp 2 needs 16."""
    prof = dataclasses.replace(profiles()["megatron-moe"], pp=2)
    err = check_refusal(
        lambda: TrainerConfig(model=MOE, gpu=H20, n_gpus=8, profile=prof), FieldError, "n_gpus"
    )
    assert "n_gpus (8) must be a multiple of tp x pp x ep (16)" in str(err)
    assert TrainerConfig(model=MOE, gpu=H20, n_gpus=16, profile=prof).n_gpus == 16


def test_the_memory_check_counts_every_expert_not_the_active_ones() -> None:
    """Training holds every parameter's state (16 bytes each): Qwen3-30B-A3B's 30.5e9 parameters
    are 455.0 GiB on one GPU, though only 3.4e9 are active per token; refused on a 96 GiB H20."""
    need = MOE.n_params * 16 / 2**30
    assert round(need, 1) == 455.0
    err = check_refusal(lambda: TrainerConfig(model=MOE, gpu=H20, n_gpus=1), FieldError, "n_gpus")
    assert "needs 455.0 GiB per GPU" in str(err)
    assert MOE.n_active_params * 16 < H20.hbm_bytes  # the active share alone would fit


# -- sync: the default sources are the pipeline stages ---------------------------------------------


def test_a_pipelined_trainer_sends_the_weights_from_each_stage() -> None:
    """``sources`` None is the pipeline stages: at pp 2 each stage sends ``W / 2`` over the
    network (a 32-GPU cluster spans nodes), more than the ``W / 4`` each tp-4 engine rank takes."""
    engine = EngineConfig(model=DENSE, gpu=H20, tp=4, max_model_len=4096)
    prof = dataclasses.replace(profiles()["megatron-dense"], pp=2)
    w = DENSE.weight_bytes("bf16")
    model = SyncModel(link_efficiency=1.0, per_shard=True)
    got = model.parts_s(engine, prof, 16, colocated=False, n_gpus=32)["transfer"]
    assert got == pytest.approx(w / 2 / H20.network_bandwidth_bytes_per_s, rel=1e-12)
    explicit = dataclasses.replace(model, sources=2).parts_s(engine, prof, 16, colocated=False, n_gpus=32)
    assert got == pytest.approx(explicit["transfer"], rel=1e-12)


# -- balance ---------------------------------------------------------------------------------------

SORTED_TOKENS = [
    8000,
    3000,
    3000,
    28000,
    500,
    20000,
    8000,
    200,
    1000,
    28000,
    3000,
    200,
    20000,
    20000,
    20000,
    500,
]


def test_verl_workload_is_linear_plus_quadratic() -> None:
    t = np.array([0.0, 1.0, 1000.0, 28000.0])
    assert verl_workload(t).tolist() == [0.0, 24577.0, 24576e3 + 1e6, 24576 * 28000 + 28000**2]


def test_sorted_dealing_puts_alike_samples_in_each_ranks_mini_batches() -> None:
    """``"sorted"``: each rank's samples ordered by workload, even places rising then odd ones
    falling, then cut in order; with four samples ``a <= b <= c <= d`` a rank's mini-batches are
    ``(a, c)`` and ``(d, b)``."""
    ranks = rank_samples(SORTED_TOKENS, 4, 4, [8.0, 8.0], "sorted")
    assert sorted(t for r in ranks for mb in r for t in mb) == sorted(SORTED_TOKENS)
    for first, second in ranks:
        a, b, c, d = sorted([*first, *second])
        assert first.tolist() == [a, c] and second.tolist() == [d, b]
    loads = rank_loads(SORTED_TOKENS, 4, 4, [8.0, 8.0], "sorted")
    assert loads.max(axis=1).tolist() == [20500.0, 31000.0]


def test_exact_rank_loads_give_each_rank_its_share_of_each_mini_batch() -> None:
    """Rows are mini-batches, columns the ``dp`` ranks: ``"exact"`` gives each rank the batch's
    mean tokens of each mini-batch, ``total x size / sum(sizes) / dp``."""
    tokens = [100.0, 300.0, 500.0, 700.0, 900.0, 1100.0]  # 3,600 in all
    loads = rank_loads(tokens, 3, 3, [4.0, 2.0], "exact")
    assert loads.shape == (2, 3)
    assert loads.tolist() == [[800.0] * 3, [400.0] * 3]  # 3,600 x 4/6 / 3 and 3,600 x 2/6 / 3
    assert loads.sum(axis=1).tolist() == [2400.0, 1200.0]


# -- offload: the host link ------------------------------------------------------------------------


def test_the_host_link_is_a_pcie_x16_after_its_encoding() -> None:
    """Gen4: 16 GT/s x 16 lanes x 128/130 / 8 bits = 31.5 GB/s one way, Gen5 twice that; at 0.8."""
    gen4 = 16e9 * 16 * 128 / 130 / 8
    assert gen4 == pytest.approx(31.5e9, rel=1e-3)
    assert Offload().host_bandwidth(GPUS["a100-80gb"]) == pytest.approx(0.8 * gen4, rel=1e-12)
    assert Offload().host_bandwidth(H100) == pytest.approx(0.8 * 2 * gen4, rel=1e-12)


def test_the_host_link_reads_the_gpu_name_in_any_case() -> None:
    upper = dataclasses.replace(H100, name="H100-SXM")
    assert Offload().host_bandwidth(upper) == Offload().host_bandwidth(H100)
    assert Offload().host_bandwidth(upper) > Offload().host_bandwidth(GPUS["a100-80gb"])  # Gen5, not Gen4


# -- cost: the compute_bound flag ------------------------------------------------------------------


def _first_compute_bound(cost: ReplicaCost, kv: float) -> int:
    return next(b for b in range(1, 100_000) if cost.compute_bound(b, kv))


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_a_dense_bf16_model_turns_compute_bound_at_the_ridge_at_any_tp(tp: int) -> None:
    """At no KV a decoded token costs 2 FLOPs per weight it reads at 2 bytes (the untied embedding
    neither: a lookup), both split over ``tp``: compute bound past ``peak / bandwidth`` sequences
    (277 on an H100 at the default efficiencies), whatever ``tp``."""
    cost = ReplicaCost(EngineConfig(model=MODELS["llama-3.1-8b"], gpu=H100, tp=tp, max_model_len=4096))
    eff = cost.config.efficiency
    ridge = (
        eff.flop_fraction * H100.bf16_flops_per_s / (eff.bandwidth_fraction * H100.hbm_bandwidth_bytes_per_s)
    )
    assert _first_compute_bound(cost, 0.0) == math.floor(ridge) + 1 == 277


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen3-0.6b"])
@pytest.mark.parametrize("tp", [1, 2])
def test_compute_bound_with_a_kv_cache_counts_the_untied_embedding_as_a_lookup(name: str, tp: int) -> None:
    """With ``K`` cached tokens the flag compares ``b F + K a_F`` FLOPs against ``W + K a_B`` bytes
    (each over its peak): ``F = 2 (N - vocab x hidden) / tp`` for an untied model (its input
    embedding is a lookup; the LM head counts), ``2 N / tp`` for a tied one, ``W`` the same
    weights at 2 bytes; per cached token and layer ``4 q_heads head_dim`` FLOPs and
    ``2 x 2 x kv_heads x head_dim`` bytes."""
    m = MODELS[name]
    cost = ReplicaCost(EngineConfig(model=m, gpu=H100, tp=tp, max_model_len=4096))
    eff = cost.config.efficiency
    peak = eff.flop_fraction * H100.bf16_flops_per_s
    bw = eff.bandwidth_fraction * H100.hbm_bandwidth_bytes_per_s
    counted = m.n_params - (0 if m.tied_embeddings else m.vocab_size * m.hidden_size)
    flops_seq = 2.0 * counted / tp
    weight_bytes = 2.0 * counted / tp
    kv_heads = -(-m.n_kv_heads // tp)
    a_f = m.n_layers * 4.0 * (m.n_heads // tp) * m.head_dim
    a_b = m.n_layers * 2.0 * dtype_bytes("bf16") * kv_heads * m.head_dim
    kv = 50_000.0
    # b F bw + K a_F bw > (W + K a_B) peak
    want = math.floor(((weight_bytes + kv * a_b) * peak - kv * a_f * bw) / (flops_seq * bw)) + 1
    assert _first_compute_bound(cost, kv) == want
    if not m.tied_embeddings:  # the lookup moves the flip: counting it would flip earlier
        whole = 2.0 * m.n_params / tp
        assert want > math.floor(((whole + kv * a_b) * peak - kv * a_f * bw) / (whole * bw)) + 1
