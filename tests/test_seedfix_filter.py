"""The run's seed varies the random draws of group filtering and of a shuffled batch order.

``WholeGroups``' dynamic filter drew from ``default_rng(policy.seed)`` alone, so ``pipesim sweep
--seeds N`` rejected the same groups at every seed and its intervals left out the filter's
variance. The filter now draws from the run's seed and the policy's (``filter_stream``), and the
``g``-th completed group's decision still does not depend on timing (common random numbers across
designs at one seed). ``ComputeTrainer`` takes a ``run_seed`` into its shuffled batch order.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.source import TokenSource
from pipesim.compute.trainer import ComputeTrainer, TrainerConfig
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.core.episode import Episode
from pipesim.core.validate import FieldError
from pipesim.policies.groups import WholeGroups, filter_stream
from pipesim.testing import check_invariants
from tests.test_refusals_core import check_refusal

N = 4  # samples per group


def _chapter(seed: int, update: Any = None, n_slots: int = 16, policy_seed: int = 0) -> pipesim.RunResult:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=n_slots, batch_size=16, steps=6, max_staleness=1),
        batching=WholeGroups(N, filter_rate=0.3, seed=policy_seed),
        admission=pipesim.AReaLThrottle(),
        weight_update=pipesim.PartialRollout() if update is None else update,
        pool_size=1000,
        seed=seed,
    )
    return pipesim.run(sc)


def _groups(r: Any) -> tuple[set[int], set[int]]:
    """(completed groups, filtered groups) of a run without stale dropping or failures: every
    discarded episode was filtered, and a group completed when all its samples finished."""
    done = Counter(e.task_id // N for e in r.episodes if e.status in (pipesim.TRAINED, pipesim.DISCARDED))
    filtered = {e.task_id // N for e in r.episodes if e.status == pipesim.DISCARDED}
    return {g for g, k in done.items() if k == N}, filtered


# -- the policy's draws ------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32), st.integers(0, 2**32), st.integers(0, 2**16), st.sampled_from([0.1, 0.3, 0.7]))
def test_run_seeds_give_different_rejected_groups_and_one_seed_the_same(
    a: int, b: int, policy_seed: int, rate: float
) -> None:
    policy = WholeGroups(N, filter_rate=rate, seed=policy_seed)
    ra, rb = policy.rejected(300, run_seed=a), policy.rejected(300, run_seed=b)
    assert np.array_equal(ra, policy.rejected(300, run_seed=a))  # the same seed, the same groups
    if a != b:  # 300 equal decisions at rate 0.1 has chance 0.82**300, about 1e-26
        assert not np.array_equal(ra, rb)
    assert np.array_equal(ra, filter_stream(a, policy_seed).random(300) < rate)


def test_the_filter_draws_apart_from_the_runs_default_rng_stream() -> None:
    """``default_rng(seed)`` seeds the duration pool and a compute run's token lengths; the filter
    used it outright at policy seed 0 and run seed 0, and ``[s, 0]`` seeds as ``s`` does."""
    policy = WholeGroups(N, filter_rate=0.5)
    for s in (0, 1, 7):
        pool_stream = np.random.default_rng(s).random(200) < 0.5
        assert not np.array_equal(policy.rejected(200, run_seed=s), pool_stream)


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        (dict(n_groups=10, run_seed=-1), "run_seed"),
        (dict(n_groups=10, run_seed=True), "run_seed"),
        (dict(n_groups=10, run_seed=1.5), "run_seed"),
        (dict(n_groups=10, run_seed=2**64), "run_seed"),
        (dict(n_groups=-1), "n_groups"),
        (dict(n_groups=2.0), "n_groups"),
    ],
)
def test_bad_arguments_of_rejected_name_themselves(kw: dict[str, Any], name: str) -> None:
    check_refusal(lambda: WholeGroups(N, filter_rate=0.3).rejected(**kw), FieldError, name)


# -- on the chapter's engine -------------------------------------------------------------------
def test_the_runs_seed_varies_the_filtered_groups_and_they_are_the_listed_ones() -> None:
    """The walkthrough's reproducer: seeds 0, 1, 2 all rejected groups [1, 2, 3, 11, 13, ...]."""
    policy = WholeGroups(N, filter_rate=0.3)
    filtered_by_seed = []
    for seed in (0, 1, 2):
        r = _chapter(seed)
        check_invariants(r)
        completed, filtered = _groups(r)
        rejected = set(np.flatnonzero(policy.rejected(1000, run_seed=seed)))
        assert filtered == completed & rejected and filtered
        filtered_by_seed.append(frozenset(filtered))
    assert len(set(filtered_by_seed)) == 3


def _completion_order(r: Any) -> list[int]:
    last: dict[int, float] = {}
    for e in r.episodes:
        if e.status in (pipesim.TRAINED, pipesim.DISCARDED):
            last[e.task_id // N] = max(last.get(e.task_id // N, 0.0), e.end_s)
    return sorted(last, key=lambda g: (last[g], g))


def test_two_designs_at_one_seed_share_the_filters_decisions() -> None:
    """Common random numbers: the timing differs, the decision of each group both completed does not."""
    for seed in (0, 5):
        a = _chapter(seed, pipesim.Drain(), n_slots=16)
        b = _chapter(seed, pipesim.PartialRollout(), n_slots=40)
        (a_done, a_filt), (b_done, b_filt) = _groups(a), _groups(b)
        both = a_done & b_done
        assert len(both) >= 20
        assert a_filt & both == b_filt & both
        assert _completion_order(a) != _completion_order(b)  # not a test of one run twice


def test_the_policys_seed_still_picks_another_stream_at_one_run_seed() -> None:
    _, f0 = _groups(_chapter(3, policy_seed=0))
    _, f1 = _groups(_chapter(3, policy_seed=1))
    assert f0 != f1


# -- on the compute engine ---------------------------------------------------------------------
SMALL = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096, max_num_seqs=16)
WL = TokenWorkload(
    response=LogNormalLengths(300.0, 0.7),
    prompt=LogNormalLengths(100.0, 0.5),
    samples_per_prompt=N,
    max_response_tokens=800,
    max_prompt_tokens=200,
)


def _compute(scenario_seed: int, seed: int | None) -> tuple[set[int], set[int], int]:
    policy = WholeGroups(N, filter_rate=0.3)
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=32, steps=3, max_staleness=1),
        admission=pipesim.AReaLThrottle(),
        weight_update=pipesim.PartialRollout(),
        seed=scenario_seed,
    )
    run = run_compute(sc, Cluster(engine=SMALL, n_gpus=4, trainer_gpus=2), WL, seed=seed, groups=policy)
    assert run.ledger.closes()
    eps = run.result.episodes
    ids = run.groups.filtered_ids  # type: ignore[union-attr]
    filtered = {e.task_id // N for e in eps if e.id in ids}
    trained = {e.task_id // N for e in eps if e.status == pipesim.TRAINED}
    run_seed = seed if seed is not None else scenario_seed
    rejected = set(np.flatnonzero(policy.rejected(5000, run_seed=run_seed)))
    assert filtered <= rejected and not trained & rejected
    assert run.summary()["groups_filtered"] == len(filtered)
    return filtered, trained, len(rejected)


def test_a_compute_runs_filter_follows_the_scenarios_seed() -> None:
    runs = [_compute(s, None)[0] for s in (0, 1, 2)]
    assert all(runs) and len({frozenset(f) for f in runs}) == 3


def test_a_compute_runs_filter_follows_run_computes_seed_argument() -> None:
    """run_compute(seed=S) on a Scenario of seed 0 is the run of seed S: its scenario says so, and
    the filter reads it (it kept seed 0)."""
    _compute(0, 5)


# -- the shuffled batch order ------------------------------------------------------------------
def _dealt(run_seed: int, shuffle_seed: int = 0, steps: int = 3) -> list[tuple[int, ...]]:
    source = TokenSource(WL, np.random.default_rng(11))
    batch = []
    for i in range(64):
        source.work_s(i, i, 0, -1)
        batch.append(Episode(i, i, 0.0, 0))
    config = TrainerConfig(
        model=SMALL.model,
        gpu=SMALL.gpu,
        n_gpus=8,
        ppo_mini_batch_samples=16,
        batch_order="shuffled",
        shuffle_seed=shuffle_seed,
    )
    trainer = ComputeTrainer(config, source, run_seed=run_seed)
    for step in range(steps):
        trainer.train_time_s(step, batch)
    return [per for _, per in trainer.dealt_log]


def test_the_shuffled_order_follows_the_run_seed() -> None:
    once, again, other = _dealt(0), _dealt(0), _dealt(1)
    assert once == again and once != other
    assert [sorted(a) for a in once] == [sorted(b) for b in other]  # the same samples, reordered


def test_run_seed_zero_deals_the_order_of_before() -> None:
    """``(shuffle_seed, step, 0)`` seeds as ``(shuffle_seed, step)``: no result moves at run seed 0."""
    tokens = _dealt(0, shuffle_seed=2, steps=1)[0]
    source = TokenSource(WL, np.random.default_rng(11))
    for i in range(64):
        source.work_s(i, i, 0, -1)
    base = source.sample_tokens([Episode(i, i, 0.0, 0) for i in range(64)])
    perm = np.random.default_rng((2, 0)).permutation(64)
    assert list(tokens) == [base[i] for i in perm]


@pytest.mark.parametrize("bad", [-1, True, 1.0, "0"])
def test_a_bad_run_seed_names_itself(bad: object) -> None:
    config = TrainerConfig(model=SMALL.model, gpu=SMALL.gpu, n_gpus=8)
    source = TokenSource(WL, np.random.default_rng(0))
    check_refusal(lambda: ComputeTrainer(config, source, run_seed=bad), FieldError, "run_seed")  # type: ignore[arg-type]


def test_run_compute_takes_a_seed_past_the_chapters_draws() -> None:
    """The scenario's placeholder durations (the chapter's draws, seeds below 2**32) never draw in
    a compute run, so run_compute(seed=2**32 + 5) runs as seed 2**32 + 5, not refused."""
    _compute(0, 2**32 + 5)
