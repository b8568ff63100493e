"""A trainer whose weights and optimizer state fit but leave no room for a micro-batch's
activations is warned of (a user's walkthrough: 6 H100s accepted for Qwen3-30B-A3B at 75.8 of
80 GiB, nothing allowed for activations)."""

from __future__ import annotations

import warnings

import pytest

import pipesim.plan as plan
from pipesim.compute import GPUS, MODELS, TrainerConfig
from pipesim.plan.build import TrainerMemoryWarning, placements
from tests.test_plan_slices import AGENT

MOE = MODELS["qwen3-30b-a3b"]


def test_activations_grow_with_the_micro_batch_and_come_on_top_of_the_state() -> None:
    small = TrainerConfig(model=MOE, gpu=GPUS["h100-sxm"], n_gpus=6, mfu=0.4, micro_batch_tokens=4096)
    big = TrainerConfig(model=MOE, gpu=GPUS["h100-sxm"], n_gpus=6, mfu=0.4, micro_batch_tokens=16384)
    assert big.activation_bytes_per_gpu == pytest.approx(4 * small.activation_bytes_per_gpu)
    assert big.state_bytes_per_gpu == small.state_bytes_per_gpu < big.gpu.hbm_bytes  # accepted
    assert big.memory_short_bytes == pytest.approx(
        big.state_bytes_per_gpu + big.activation_bytes_per_gpu - big.gpu.hbm_bytes
    )


def _spec(**changes: object) -> plan.PlanSpec:
    return plan.PlanSpec(
        gpu=GPUS["h100-sxm"],
        n_gpus=16,
        model=MOE,
        workload=AGENT,
        batch_size=64,
        constraints=plan.Constraints(min_trainer_gpus=6),
        space=plan.Space(placement=(6, 8)),
        max_model_len=8192,
    ).with_(**changes)


def test_the_plan_warns_of_a_trainer_with_no_room_for_activations() -> None:
    with pytest.warns(TrainerMemoryWarning, match=r"trainer of 6 x") as got:
        assert placements(_spec(), 1) == [6, 8]  # warned of, not refused
    assert not any("8" in str(w.message).split(" x ")[0] for w in got)  # 8 GPUs leave room
    with warnings.catch_warnings():  # a micro-batch small enough fits beside the state
        warnings.simplefilter("error", TrainerMemoryWarning)
        assert placements(_spec(micro_batch_tokens=7000), 1) == [6, 8]
