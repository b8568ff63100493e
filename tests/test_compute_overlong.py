"""Over-length samples: the compute engine marks samples cut at the response cap as truncated, and
DropOverlong discards them; the token ledger counts them apart and still closes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster, ComputeRun, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.policies.base import BatchPolicy

ENGINE = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096, max_num_seqs=64)
# a heavy tail under a low cap: a good share of the samples are cut
WORK = TokenWorkload(
    response=LogNormalLengths(median_tokens=400, sigma=1.0),
    prompt=64,
    samples_per_prompt=4,
    max_response_tokens=800,
)


def _run(batching: BatchPolicy, eta: int = 0) -> ComputeRun:
    cfg = pipesim.PipelineConfig(batch_size=32, steps=4, max_staleness=eta)
    sc = pipesim.Scenario(
        pipeline=cfg,
        batching=batching,
        admission=pipesim.AReaLThrottle(),  # subtracts drops, so dropped samples are replaced
        weight_update=pipesim.PartialRollout(),
    )
    return run_compute(sc, Cluster(engine=ENGINE, n_gpus=2, trainer_gpus=1), WORK, seed=5)


@pytest.mark.parametrize("eta", [0, 2])
def test_over_length_samples_are_dropped_and_counted_apart(eta: int) -> None:
    kept = _run(pipesim.OldestFinishedFirst(), eta)
    dropped = _run(pipesim.DropOverlong(), eta)
    eps = kept.result.episode_table
    assert eps["truncated"].any()  # the engine marks samples cut at the cap
    assert kept.result.trained["truncated"].any()  # FIFO trains them
    assert kept.ledger.truncated_trained > 0 and kept.ledger.discarded_over_length == 0
    tr = dropped.result.trained
    assert len(tr) == 4 * 32 and not tr["truncated"].any()  # never trained, batches still full
    led = dropped.ledger
    assert led.closes() and led.truncated_trained == 0
    assert led.discarded_over_length > 0 and led.discarded_stale == 0
    table = dropped.result.episode_table
    gone = table[table["status"] == "discarded"]
    assert gone["truncated"].all()
    # every token of a dropped sample is its capped response (cut at max_response_tokens)
    assert led.discarded_over_length == pytest.approx(len(gone) * WORK.max_response_tokens)
    s = dropped.summary()
    assert s["tokens_discarded_over_length"] == led.discarded_over_length
    assert s["tokens_discarded"] == pytest.approx(led.discarded)


def test_drop_overlong_on_the_chapter_slots_drops_timed_out_episodes() -> None:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=8, batch_size=8, steps=3),
        batching=pipesim.DropOverlong(),
        admission=pipesim.AReaLThrottle(),
        timeout=pipesim.Timeout(cap_s=60.0),
        pool_size=400,
        seed=2,
    )
    r = pipesim.run(sc)
    t = r.episode_table
    assert (t[t["status"] == "discarded"]["truncated"]).all() and (t["status"] == "discarded").any()
    assert not r.trained["truncated"].any()
    from pipesim.testing import check_invariants

    check_invariants(r)


@settings(max_examples=15)
@given(
    seed=st.integers(0, 10_000),
    eta=st.integers(0, 2),
    update=st.sampled_from([pipesim.PartialRollout(), pipesim.Drain(), pipesim.AbortReprefill()]),
)
def test_the_ledger_closes_whenever_over_length_samples_are_dropped(
    seed: int, eta: int, update: object
) -> None:
    cfg = pipesim.PipelineConfig(batch_size=16, steps=3, max_staleness=eta)
    sc = pipesim.Scenario(
        pipeline=cfg,
        batching=pipesim.DropOverlong(),
        admission=pipesim.AReaLThrottle(),
        weight_update=update,  # type: ignore[arg-type]
    )
    run = run_compute(sc, Cluster(engine=ENGINE, n_gpus=2, trainer_gpus=1), WORK, seed=seed)
    led = run.ledger
    assert led.closes()
    assert led.truncated_trained == 0 and not run.result.trained["truncated"].any()
    table = run.result.episode_table
    dropped = table[table["status"] == "discarded"]
    assert dropped["truncated"].all()
    assert led.discarded_over_length == pytest.approx(len(dropped) * WORK.max_response_tokens)


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    eta=st.integers(0, 2),
    update=st.sampled_from([pipesim.PartialRollout(), pipesim.AbortRestart(restart=False), pipesim.Drain()]),
)
def test_truncated_counts_the_samples_that_reached_the_cap_and_no_others(
    seed: int, eta: int, update: object
) -> None:
    """A sample is truncated where it finishes at the cap: an aborted one, or one still in flight
    at the end, was never cut, though its drawn length passes the cap (the engine once marked it
    at launch, and the summary counted in-flight and aborted samples as truncated)."""
    cfg = pipesim.PipelineConfig(batch_size=16, steps=3, max_staleness=eta)
    sc = pipesim.Scenario(
        pipeline=cfg,
        admission=pipesim.AReaLThrottle(),
        weight_update=update,  # type: ignore[arg-type]
        pool_size=4096,
    )
    run = run_compute(sc, Cluster(engine=ENGINE, n_gpus=2, trainer_gpus=1), WORK, seed=seed)
    table = run.result.episode_table
    finished = table["status"].isin(["trained", "buffered", "discarded"])
    assert not table[~finished]["truncated"].any()  # aborted or in flight: never cut
    assert run.summary()["episodes_truncated"] == int(table["truncated"].sum())
    cut_trained = int(run.result.trained["truncated"].sum())  # each trained at the cap, no more
    assert run.ledger.truncated_trained == pytest.approx(cut_trained * WORK.max_response_tokens)
