"""Property tests of the compute-grounded engine (``pipesim.compute``).

A closed loop never beats the roofline (its best decode iteration, batch for batch); its
throughput never falls when it may run more sequences at once (while nothing is preempted); a
cluster run keeps every kernel invariant under every policy family the compute engine runs, its
token ledger closes and agrees with the replicas' own counts, and the same seed gives the same run.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute.closedloop import ClosedLoop
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig, ReplicaCost
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.testing import admissions, batchings, check_invariants

ENGINES = st.builds(
    EngineConfig,
    model=st.sampled_from([MODELS["qwen3-0.6b"], MODELS["qwen3-1.7b"]]),
    gpu=st.sampled_from([GPUS["h100-sxm"], GPUS["a100-80gb"], GPUS["l40s"]]),
    max_model_len=st.just(2048),
    max_num_seqs=st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
)


@st.composite
def kv_tight_engines(draw: st.DrawFn) -> EngineConfig:
    """``ENGINES``, half of them with ``gpu_memory_utilization`` set so that the KV cache holds
    1-2 sequences of ``max_model_len`` (2,049-4,096 tokens): a closed loop of up to 80 sequences
    then fills it and preempts. At 0.9 these engines hold 0.4-2.8 M tokens and never did (a peak
    share of at most 3.6%, no preemption in 25 draws), so a bound on the peak share was never put
    to the test. (The examples given to the test preempt in every profile.)"""
    cfg = draw(ENGINES)
    if draw(st.booleans()):
        return cfg
    return kv_tight(cfg, draw(st.integers(cfg.context_len + 1, 2 * cfg.context_len)))


def kv_tight(cfg: EngineConfig, tokens: int) -> EngineConfig:
    """``cfg`` with ``gpu_memory_utilization`` leaving a KV budget of about ``tokens``."""
    need = cfg.weight_bytes_per_gpu + tokens * cfg.kv_bytes_per_token_per_gpu
    return dataclasses.replace(cfg, gpu_memory_utilization=need / cfg.gpu.hbm_bytes)


TIGHT = kv_tight(
    EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=2048, max_num_seqs=32), 2500
)
MANY = st.integers(24, 60)
"""Concurrency and samples enough to fill a tight cache (drawn half the time)."""
LONG = TokenWorkload(response=LogNormalLengths(300.0, 0.5), prompt=200, max_response_tokens=1000)


WORKLOADS = st.builds(
    TokenWorkload,
    response=st.builds(LogNormalLengths, st.floats(20.0, 400.0), st.floats(0.0, 1.0)),
    prompt=st.integers(1, 400),
    max_response_tokens=st.integers(50, 1000),
)


def best_tokens_per_s(cost: ReplicaCost, max_batch: int) -> float:
    """The roofline's best decode rate with at most ``max_batch`` sequences: b tokens per
    iteration of at least ``fixed_s(b)`` seconds (reading no KV cache at all)."""
    return max(b / cost.fixed_s(b) for b in range(1, max_batch + 1))


@settings(max_examples=25)
@given(
    kv_tight_engines(), WORKLOADS, MANY | st.integers(1, 80), MANY | st.integers(1, 60), st.integers(0, 2**16)
)
@example(TIGHT, LONG, 64, 40, 0)  # 32 sequences of ~500 tokens in a 2,500-token cache: preempts
@example(kv_tight(TIGHT, 4000), LONG, 12, 30, 1)
def test_a_closed_loop_never_beats_the_roofline(
    cfg: EngineConfig, wl: TokenWorkload, concurrency: int, samples: int, seed: int
) -> None:
    """Every generated token comes from an iteration of at most min(concurrency, max_num_seqs)
    sequences that takes at least the roofline's fixed time: the run is never shorter than the
    tokens at the best such rate, and all samples finish within the KV budget."""
    out = ClosedLoop(cfg, wl, concurrency, seed=seed).run(samples)
    assert out["samples"] == samples
    best = best_tokens_per_s(ReplicaCost(cfg), min(concurrency, cfg.max_num_seqs))
    assert out["tokens_per_s"] <= best * (1 + 1e-9)
    assert out["peak_kv_share"] <= 1.0 + 1e-9
    assert 0.0 < out["mean_running"] <= min(concurrency, cfg.max_num_seqs) + 1e-9


@settings(max_examples=15)
@given(
    ENGINES.filter(lambda c: 2 <= c.max_num_seqs <= 16),
    st.builds(
        TokenWorkload,
        response=st.builds(LogNormalLengths, st.floats(20.0, 400.0), st.just(0.0)),
        prompt=st.integers(1, 400),
        max_response_tokens=st.integers(50, 1000),
    ),
    st.data(),
)
def test_closed_loop_throughput_never_falls_with_more_concurrency(
    cfg: EngineConfig, wl: TokenWorkload, data: st.DataObject
) -> None:
    """Up to ``max_num_seqs``, with equal-length samples (so each concurrency runs in whole
    rounds: the sample count is a multiple of both) and nothing preempted, keeping more sequences
    in flight never lowers tokens/s: an iteration's time grows with the batch, but never faster
    than the batch.

    Two limits found while checking it: with samples of different lengths, a finite run's last,
    partly empty round can make c + 1 slower than c (a tail effect, gone in long runs); and above
    ``max_num_seqs`` it does not hold today (reported to the lead: max_num_seqs=4 and equal
    20-token samples, concurrency 5 or 6 keeps 3.87 sequences running on average and is ~4.5%
    slower than both 4 and 8, however long the run)."""
    c = data.draw(st.integers(1, cfg.max_num_seqs - 1), label="concurrency")
    more = data.draw(st.integers(1, cfg.max_num_seqs - c), label="more")
    samples = c * (c + more)
    a = ClosedLoop(cfg, wl, c).run(samples)
    z = ClosedLoop(cfg, wl, c + more).run(samples)
    assume(a["preemptions"] == 0 and z["preemptions"] == 0)
    assert z["tokens_per_s"] >= a["tokens_per_s"] * (1 - 1e-9)


@settings(max_examples=15)
@given(ENGINES, WORKLOADS, st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([2, 4]), st.integers(0, 2**16))
def test_throughput_never_falls_with_a_larger_max_num_seqs(
    cfg: EngineConfig, wl: TokenWorkload, m: int, factor: int, seed: int
) -> None:
    """vLLM's ``max_num_seqs`` caps the running batch: raising it, with 64 sequences waiting,
    never lowers the replica's tokens/s while nothing is preempted."""
    small = EngineConfig(model=cfg.model, gpu=cfg.gpu, max_model_len=cfg.max_model_len, max_num_seqs=m)
    big = EngineConfig(model=cfg.model, gpu=cfg.gpu, max_model_len=cfg.max_model_len, max_num_seqs=m * factor)
    a = ClosedLoop(small, wl, 64, seed=seed).run(120)
    z = ClosedLoop(big, wl, 64, seed=seed).run(120)
    assume(a["preemptions"] == 0 and z["preemptions"] == 0)
    assert a["mean_running"] <= m + 1e-9
    assert z["tokens_per_s"] >= a["tokens_per_s"] * (1 - 1e-9)


SMALL = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=2048, max_num_seqs=16)
GROUPED = TokenWorkload(
    response=LogNormalLengths(150.0, 0.7),
    prompt=LogNormalLengths(80.0, 0.5),
    samples_per_prompt=2,
    max_response_tokens=400,
    max_prompt_tokens=200,
)


@st.composite
def compute_cases(draw: st.DrawFn) -> tuple[pipesim.Scenario, Cluster, int]:
    """A small cluster run with policies drawn from the admission and batching families and the
    weight updates the compute engine runs (no failures or timeouts: it refuses them)."""
    from pipesim.policies.updates import AbortReprefill, AbortRestart, InFlightUpdate, OverlappedSwap

    update = draw(
        st.sampled_from(
            [
                pipesim.PartialRollout(),
                pipesim.Drain(),
                OverlappedSwap(),
                AbortRestart(),
                AbortReprefill(),
                InFlightUpdate(),
            ]
        )
    )
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(
            batch_size=2 * draw(st.integers(2, 5)),  # whole groups of GROUPED's 2 samples
            steps=draw(st.integers(1, 3)),
            max_staleness=draw(st.integers(0, 2)),
        ),
        admission=draw(
            admissions().filter(lambda a: type(a).__name__ not in ("CountThrottle", "StaleFraction"))
        ),
        batching=draw(batchings(min_capacity=16, group_sizes=(2,))),  # WholeGroups: one group per prompt
        weight_update=update,
        pool_size=4000,
    )
    cluster = Cluster(engine=SMALL, n_gpus=draw(st.integers(2, 4)), trainer_gpus=1)
    return sc, cluster, draw(st.integers(0, 2**16))


@settings(max_examples=12)
@given(compute_cases())
def test_a_compute_run_keeps_the_kernel_invariants_and_its_token_books_close(
    case: tuple[pipesim.Scenario, Cluster, int],
) -> None:
    """On the compute engine as on the chapter's slots: every kernel invariant holds; tokens
    generated = trained + discarded + buffered + in flight; and the ledger's generated tokens
    (summed over episodes) equal the replicas' own counters."""
    sc, cluster, seed = case
    out = run_compute(sc, cluster, GROUPED, seed=seed, slots_per_replica=16)
    check_invariants(out.result)
    led = out.ledger
    assert led.closes(), led
    engines = math.fsum(e["tokens_generated"] for e in out.engines)
    assert math.isclose(led.generated, engines, rel_tol=1e-9, abs_tol=1e-6)
    assert led.trained > 0 and min(led.trained, led.buffered, led.in_flight, led.discarded) >= 0


@settings(max_examples=8)
@given(compute_cases())
def test_a_compute_run_is_reproducible_from_its_seed(case: tuple[pipesim.Scenario, Cluster, int]) -> None:
    """The token lengths come from the seed alone: two runs give the same summary, number for number."""
    sc, cluster, seed = case

    def summary() -> dict[str, Any]:
        return run_compute(sc, cluster, GROUPED, seed=seed, slots_per_replica=16).summary()

    a, z = summary(), summary()
    assert a.keys() == z.keys()
    for k in a:
        assert a[k] == z[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(z[k])), k
