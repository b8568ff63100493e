"""A compute run's seed varies its shuffled batch order (``batch_order="shuffled"``).

``ComputeTrainer`` draws a shuffled step's permutation from ``default_rng((shuffle_seed, step,
run_seed))``, but ``run_compute`` built it without the run's seed, so ``run_compute(seed=S)`` (and
``--seeds``) dealt every seed's batches in seed 0's order. It now passes the seed the run records
(``run.result.scenario.seed``). At seed 0 the order is the one of before: ``(shuffle_seed, step,
0)`` seeds as ``(shuffle_seed, step)`` did.

The runs are synchronous and colocated (``max_staleness=0``, ``trainer_gpus=0``), so a step's
batch does not depend on the order the step before was dealt in: the ``"submission"`` run's
batches (sorted by episode id) are the ``"shuffled"`` run's, unpermuted.
"""

from __future__ import annotations

import numpy as np
import pytest

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.compute_run import ComputeRun
from pipesim.compute.cost import EngineConfig
from pipesim.compute.trainer import TrainerConfig
from pipesim.compute.workload import LogNormalLengths, TokenWorkload

ENGINE = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096)
WORK = TokenWorkload(response=LogNormalLengths(300.0, 1.2), prompt=64, max_response_tokens=3000)
SHUFFLE_SEED = 2
BATCH = 64


def _run(order: str, seed: int | None, scenario_seed: int = 0) -> ComputeRun:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=BATCH, steps=3, max_staleness=0), seed=scenario_seed
    )
    trainer = TrainerConfig(
        model=ENGINE.model,
        gpu=ENGINE.gpu,
        n_gpus=8,
        ppo_mini_batch_samples=16,
        batch_order=order,
        shuffle_seed=SHUFFLE_SEED,
    )
    cluster = Cluster(engine=ENGINE, n_gpus=8, trainer_gpus=0)
    return run_compute(sc, cluster, WORK, seed=seed, trainer=trainer)


def _permuted(by_id: ComputeRun, entropy: tuple[int, ...]) -> list[tuple[int, tuple[int, ...]]]:
    """The submission run's batches dealt by ``default_rng((shuffle_seed, step, *entropy))``."""
    out = []
    for step, per in by_id.dealt_log:
        perm = np.random.default_rng((SHUFFLE_SEED, step, *entropy)).permutation(len(per))
        out.append((step, tuple(per[i] for i in perm)))
    return out


@pytest.mark.parametrize(("seed", "scenario_seed"), [(3, 0), (None, 5), (2**40 + 1, 0)])
def test_the_shuffled_order_is_drawn_from_the_runs_seed(seed: int | None, scenario_seed: int) -> None:
    shuffled, by_id = _run("shuffled", seed, scenario_seed), _run("submission", seed, scenario_seed)
    run_seed = shuffled.result.scenario.seed  # the seed the run records
    assert run_seed == (scenario_seed if seed is None else seed) != 0
    assert len(shuffled.dealt_log) == 3 and all(len(per) == BATCH for _, per in shuffled.dealt_log)
    assert shuffled.dealt_log == _permuted(by_id, (run_seed,))
    assert shuffled.dealt_log != _permuted(by_id, ())  # not seed 0's order (the bug)


def test_seed_zero_deals_the_order_of_before() -> None:
    """At seed 0 the permutation is ``default_rng((shuffle_seed, step))``'s: no row at seed 0 moves."""
    shuffled, by_id = _run("shuffled", 0), _run("submission", 0)
    assert shuffled.dealt_log == _permuted(by_id, ()) == _permuted(by_id, (0,))


def test_two_seeds_deal_different_orders_and_one_seed_the_same_trace() -> None:
    a, again, b = _run("shuffled", 1), _run("shuffled", 1), _run("shuffled", 2)
    assert a.dealt_log == again.dealt_log and a.phase_log == again.phase_log
    assert a.result.train_log == again.result.train_log
    # seeds 1 and 2 draw different lengths too; the orders differ beyond that: each seed's
    # batches, relabelled to positions in its submission order, are different permutations
    positions = []
    for seed, run in ((1, a), (2, b)):
        by_id = _run("submission", seed)
        assert run.dealt_log == _permuted(by_id, (seed,))
        positions.append(
            [
                tuple(np.random.default_rng((SHUFFLE_SEED, step, seed)).permutation(len(per)))
                for step, per in by_id.dealt_log
            ]
        )
    assert positions[0] != positions[1]
