"""Ranks wait for the busiest: the dealing of samples to data-parallel ranks (pipesim.compute.balance)
and the phases timed at each mini-batch's busiest rank, against the rank-by-rank reference."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pipesim.compute import GPUS, MODELS, TrainerConfig
from pipesim.compute.balance import busiest, equal_size_partitions, mean_factor, rank_loads, rank_samples
from pipesim.compute.phaseref import ranked_reference_times_s
from pipesim.compute.phases import phase_parts
from pipesim.compute.profiles import calibration_workload, drawn_sample_tokens, profiles

H20 = GPUS["h20"]
DENSE = MODELS["qwen2.5-math-7b"]
MODES = ("step", "sorted", "mini_batch")


def _heavy(n: int, seed: int) -> list[float]:
    """``n`` samples of a long-tailed length draw (log-normal, spread 1.2, capped at 28K)."""
    rng = np.random.default_rng(seed)
    return np.minimum(rng.lognormal(7.0, 1.2, n), 28_672.0).round().tolist()


@given(
    k=st.integers(1, 8),
    per=st.integers(1, 10),
    spread=st.floats(0.0, 2.0),
    seed=st.integers(0, 2**16),
)
def test_the_partitions_hold_every_sample_once_in_equal_sizes(
    k: int, per: int, spread: float, seed: int
) -> None:
    """Largest differencing with equal sizes: a partition of the indices, ``per`` each, each in
    index order, and no two partitions' sums apart by more than the largest weight."""
    rng = np.random.default_rng(seed)
    w = (rng.lognormal(0.0, spread, k * per) * 1000).tolist()
    parts = equal_size_partitions(w, k)
    assert sorted(i for p in parts for i in p) == list(range(k * per))
    assert all(len(p) == per and p == sorted(p) for p in parts)
    sums = [sum(w[i] for i in p) for p in parts]
    assert max(sums) - min(sums) <= max(w) * (1 + 1e-12)


@given(
    dp=st.sampled_from([1, 2, 4, 8]),
    sp=st.sampled_from([1, 2]),
    n_mini=st.integers(1, 4),
    per=st.integers(1, 6),
    extra=st.integers(0, 7),
    mode=st.sampled_from(MODES),
    seed=st.integers(0, 2**16),
)
def test_dealing_conserves_the_tokens_and_the_busiest_rank_bounds_the_mean(
    dp: int, sp: int, n_mini: int, per: int, extra: int, mode: str, seed: int
) -> None:
    """Every token lands on one rank of one mini-batch (a batch that does not split evenly is
    padded with empty samples, not cut); the busiest rank holds at least the mean."""
    n = dp * sp * n_mini * per + extra
    tokens = _heavy(n, seed)
    sizes = [float(n // n_mini)] * n_mini
    sizes[-1] += n - sum(sizes)
    loads = rank_loads(tokens, dp * sp, dp, sizes, mode)
    assert loads.shape == (n_mini, dp)
    assert loads.sum() == pytest.approx(sum(tokens), rel=1e-12)
    top, total = busiest(loads)
    assert np.all(top >= loads.mean(axis=1) * (1 - 1e-12))
    assert total >= loads.sum() / dp * (1 - 1e-12)
    assert mean_factor(loads) >= 1 - 1e-12
    ranks = rank_samples(tokens, dp * sp, dp, sizes, mode)
    assert sorted(t for r in ranks for mb in r for t in mb if t > 0) == sorted(t for t in tokens if t > 0)


@pytest.mark.parametrize("mode", MODES)
def test_equal_samples_cost_exactly_the_closed_form_of_the_mean(mode: str) -> None:
    """Samples of one length leave no rank busier than the mean: the phases equal the exact form."""
    prof = dataclasses.replace(profiles()["fsdp2-dense"], balance=mode)
    cfg = TrainerConfig(model=DENSE, gpu=H20, n_gpus=64, profile=prof, ppo_mini_batch_samples=512)
    per = [2_000.0] * 4096
    assert cfg.phase_times_s(sum(per), 4096, per) == pytest.approx(cfg.phase_times_s(sum(per), 4096))


@given(
    dp=st.sampled_from([2, 4, 8, 16]),
    sp=st.sampled_from([1, 2, 4]),
    mini_per_rank=st.sampled_from([1, 2, 4, 8]),
    n_mini=st.integers(1, 4),
    budget=st.sampled_from([4_096, 16_384, 65_536, None]),
    mode=st.sampled_from(MODES),
    epochs=st.integers(1, 2),
    seed=st.integers(0, 2**16),
)
@example(dp=4, sp=4, mini_per_rank=8, n_mini=2, budget=4_096, mode="sorted", epochs=1, seed=0)  # see below
def test_the_closed_form_is_the_rank_by_rank_reference(
    dp: int, sp: int, mini_per_rank: int, n_mini: int, budget: int | None, mode: str, epochs: int, seed: int
) -> None:
    """Each mini-batch at its busiest rank, in closed form, equals walking every rank's micro-batches
    (pipesim.compute.phaseref); and its compute is never below the exactly balanced form's. Its
    seconds can be: the balanced form gives every mini-batch the mean's micro-batch count, rounded
    up, and a mini-batch lighter than the mean may need one fewer (dp 4, sp 4, 4,096-token budget,
    seed 0: 3 micro-batches where the balanced form has 4, so less of the FSDP gathers)."""
    prof = dataclasses.replace(profiles()["fsdp2-dense"], balance=mode)
    samples = dp * mini_per_rank * n_mini
    kw = {"micro_batch_tokens": budget} if budget else {"micro_batch_samples": 2}
    cfg = TrainerConfig(
        model=DENSE,
        gpu=H20,
        n_gpus=dp * sp,
        profile=prof,
        ppo_mini_batch_samples=dp * mini_per_rank,
        sequence_parallel=sp,
        ppo_epochs=epochs,
        recompute_old_logp=True,
        **kw,
    )
    per = _heavy(samples, seed)
    got = cfg.phase_times_s(sum(per), samples, per)
    want = ranked_reference_times_s(cfg, sum(per), samples, per)
    assert got == pytest.approx(want, rel=1e-9)
    dealt, exact = phase_parts(cfg, sum(per), samples, per), phase_parts(cfg, sum(per), samples)
    for phase in ("old_log_prob", "update_actor"):
        assert dealt[phase]["compute_flop_s"] >= exact[phase]["compute_flop_s"] * (1 - 1e-9)


def test_an_exactly_balanced_profile_ignores_the_samples() -> None:
    cfg = TrainerConfig(model=DENSE, gpu=H20, n_gpus=16, profile="ideal", ppo_mini_batch_samples=64)
    per = _heavy(256, 3)
    assert cfg.phase_times_s(sum(per), 256, per) == cfg.phase_times_s(sum(per), 256)


def test_more_ranks_wait_longer_for_their_busiest_under_step_balancing() -> None:
    """verl's dealing before its PR #3605: fewer samples per rank and mini-batch leave the busiest
    rank further above the mean, so doubling the GPUs less than halves the update (the calibration
    row's workload, 512 prompts x 16, mini-batches of 512 samples, Ulysses 4)."""
    per = drawn_sample_tokens(calibration_workload(), 8192, 0)
    sizes = [512.0] * 16
    factors = [mean_factor(rank_loads(per, g, g // 4, sizes, "step")) for g in (32, 64, 128)]
    assert factors[0] < factors[1] < factors[2]
    # both remedies of verl's PR #3605 (each mini-batch balanced on its own; or each rank's share
    # ordered by workload so the ranks' j-th mini-batches hold alike samples) wait less at every count
    for g, f in zip((32, 64, 128), factors, strict=True):
        assert mean_factor(rank_loads(per, g, g // 4, sizes, "mini_batch")) < f
        assert mean_factor(rank_loads(per, g, g // 4, sizes, "sorted")) < f


def test_sorting_a_batch_by_length_first_leaves_the_ranks_less_apart() -> None:
    """Under ``"step"`` a rank's mini-batches are slices of its partition in batch order: a batch
    in prompt order mixes long and short samples in every slice (the busiest rank waits), one
    already sorted by length puts alike samples in each slice (verl's later fix does this)."""
    cfg = TrainerConfig(model=DENSE, gpu=H20, n_gpus=8, ppo_mini_batch_samples=64, micro_batch_tokens=8_192)
    assert cfg.framework.balance == "step"
    per = drawn_sample_tokens(calibration_workload(), 256, 1)
    by_prompt = cfg.phase_times_s(sum(per), 256, per)["update_actor"]
    by_length = cfg.phase_times_s(sum(per), 256, sorted(per))["update_actor"]
    exact = cfg.phase_times_s(sum(per), 256)["update_actor"]
    assert by_prompt > by_length >= exact * (1 - 1e-12)


def test_a_fully_async_step_deals_whole_partitions_and_updates_faster() -> None:
    """verl's README on 64 trainer GPUs: fully async 113.16 s and 98.77 s of update_actor against
    133.41 s colocated. With 2,048 samples a trainer step, 64 partitions of 32 are exactly one
    Ulysses group's share of each 512-sample mini-batch, so the fully-async update waits less for its
    busiest rank than the colocated one over the same samples (pipesim.compute.phasescore)."""
    from pipesim.compute.phasescore import row_seconds

    colocated = row_seconds(64, "update_actor", fully_async=False)
    fully_async = row_seconds(64, "update_actor", fully_async=True)
    assert fully_async < 0.95 * colocated
    # and more GPUs help the colocated update less than 1/GPUs
    assert row_seconds(128, "update_actor", fully_async=False) > 0.55 * colocated


def test_a_run_reports_the_share_of_its_update_spent_waiting_for_the_busiest_rank() -> None:
    """``trainer/rank_wait_share``: 0 for an exactly balanced trainer, in (0, 1) for verl's dealing of
    a long-tailed workload; and the phase log's update is the balanced one plus that wait."""
    import pipesim
    from pipesim.compute import Cluster, EngineConfig, LogNormalLengths, TokenWorkload, run_compute

    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096)
    work = TokenWorkload(response=LogNormalLengths(300.0, 1.2), prompt=64, max_response_tokens=3000)
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=64, steps=3, max_staleness=0))
    shares = {}
    for name in ("fsdp2-dense", "ideal"):
        trainer = TrainerConfig(
            model=eng.model,
            gpu=eng.gpu,
            n_gpus=8,
            profile=name,
            ppo_mini_batch_samples=16,
            micro_batch_tokens=3064,  # the longest sample (64 + 3,000): verl refuses less
        )
        run = run_compute(sc, Cluster(engine=eng, n_gpus=8, trainer_gpus=0), work, seed=1, trainer=trainer)
        shares[name] = run.summary()["trainer/rank_wait_share"]
        if name == "ideal":
            assert not run.dealt_log and not run.balanced_update_s
        else:
            assert len(run.balanced_update_s) == len(run.phase_log)
            for (_, _, p), balanced in zip(run.phase_log, run.balanced_update_s, strict=True):
                assert p["update_actor"] >= balanced * (1 - 1e-12)
    assert shares["ideal"] == 0.0 and 0.0 < shares["fsdp2-dense"] < 1.0


def test_a_shuffled_batch_is_dealt_in_a_seeded_order_per_step() -> None:
    """``batch_order="shuffled"`` (realhf's): the same samples, in an order the seed and the step
    fix: a rerun deals them alike, another seed otherwise."""
    import pipesim
    from pipesim.compute import Cluster, EngineConfig, LogNormalLengths, TokenWorkload, run_compute

    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096)
    work = TokenWorkload(response=LogNormalLengths(300.0, 1.2), prompt=64, max_response_tokens=3000)
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=64, steps=2, max_staleness=0))

    def dealt(order: str, seed: int) -> list[tuple[int, ...]]:
        knobs = {"ppo_mini_batch_samples": 16, "batch_order": order, "shuffle_seed": seed}
        trainer = TrainerConfig(model=eng.model, gpu=eng.gpu, n_gpus=8, **knobs)
        run = run_compute(sc, Cluster(engine=eng, n_gpus=8, trainer_gpus=0), work, seed=1, trainer=trainer)
        return [per for _, per in run.dealt_log]

    once, again, other = dealt("shuffled", 0), dealt("shuffled", 0), dealt("shuffled", 5)
    by_prompt = dealt("submission", 0)
    assert once == again and once != other and once != by_prompt
    assert [sorted(a) for a in once] == [sorted(b) for b in other] == [sorted(c) for c in by_prompt]
