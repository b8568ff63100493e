"""The chapter's torch generator keeps 32 bits of a seed, so a scenario of seed 2**32 ran the run
of seed 0 (a user's walkthrough: ``--seed 4294967296`` printed seed 0's 456.6/h). Such seeds are
refused where they would alias; numpy-drawn models take any seed, and do not alias."""

from __future__ import annotations

import pytest

import pipesim
from pipesim import AgentDurations, LogNormalDurations, PipelineConfig, Scenario
from pipesim.core.validate import FieldError
from pipesim.workload.durations import CHAPTER_SEEDS, chapter_generator

CFG = PipelineConfig(n_slots=4, batch_size=4, steps=2)


@pytest.mark.parametrize("seed", [CHAPTER_SEEDS, CHAPTER_SEEDS + 1, 2**64 - 1])
def test_a_seed_the_chapters_generator_would_alias_is_refused(seed: int) -> None:
    with pytest.raises(FieldError) as info:
        Scenario(pipeline=CFG, durations=AgentDurations(), seed=seed)
    assert info.value.field == "seed" and f"{seed % CHAPTER_SEEDS:,}" in str(info.value)
    with pytest.raises(FieldError) as info:
        chapter_generator(seed)
    assert info.value.field == "seed"


def test_the_largest_chapter_seed_runs_and_differs_from_seed_0() -> None:
    top = pipesim.run(Scenario(pipeline=CFG, durations=AgentDurations(), seed=CHAPTER_SEEDS - 1))
    zero = pipesim.run(Scenario(pipeline=CFG, durations=AgentDurations(), seed=0))
    assert top.summary() != zero.summary()


def test_numpy_drawn_models_take_seeds_past_32_bits_without_aliasing() -> None:
    sc = Scenario(pipeline=CFG, durations=LogNormalDurations(50.0, 0.8), seed=CHAPTER_SEEDS)
    assert pipesim.run(sc).summary() != pipesim.run(sc.with_(seed=0)).summary()
    numpy_agent = Scenario(pipeline=CFG, durations=AgentDurations(draws="numpy"), seed=CHAPTER_SEEDS)
    assert pipesim.run(numpy_agent).summary() != pipesim.run(numpy_agent.with_(seed=0)).summary()
