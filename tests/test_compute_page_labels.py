"""A compute run's page labels the slot metric and eta for what they are on that engine.

A walkthrough read "slot utilisation 0.03581" as the headline of a busy engine and "max_staleness
1" beside a measured "staleness max 5": on the compute engine a replica's slots are its
``max_num_seqs`` places (docs/compute.md), and ``max_staleness`` is the design's eta, a bound on
how far generation runs ahead rather than on a trained sample's staleness."""

from __future__ import annotations

import html

import pytest

import pipesim
from pipesim.compute import GPUS, MODELS, Cluster, EngineConfig, LogNormalLengths, TokenWorkload, run_compute
from pipesim.io.html import COMPUTE_GEN_UTIL_LABEL, run_html


@pytest.fixture(scope="module")
def compute_run():  # type: ignore[no-untyped-def]
    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096)
    work = TokenWorkload(response=LogNormalLengths(300.0, 1.2), prompt=64, max_response_tokens=3000)
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=16, steps=2, max_staleness=1))
    return run_compute(sc, Cluster(engine=eng, n_gpus=8, trainer_gpus=4), work, seed=1)


def test_the_compute_page_says_whose_slots_and_that_max_staleness_is_eta(compute_run) -> None:  # type: ignore[no-untyped-def]
    page = run_html(compute_run)
    assert html.escape(COMPUTE_GEN_UTIL_LABEL) in page
    assert "max_num_seqs" in COMPUTE_GEN_UTIL_LABEL and "engine busy share" in COMPUTE_GEN_UTIL_LABEL
    assert "max_staleness (eta" in page
    assert ">slot utilisation<" not in page


def test_a_slot_runs_page_keeps_the_chapters_labels() -> None:
    run = pipesim.run(pipesim.Scenario(pipeline=pipesim.PipelineConfig(n_slots=8, batch_size=8, steps=2)))
    page = run_html(run)
    assert ">slot utilisation<" in page and ">max_staleness<" in page
    assert html.escape(COMPUTE_GEN_UTIL_LABEL) not in page
