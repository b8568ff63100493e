"""The compute-grounded engine (issue 17): agreement with a slow per-iteration reference, the
token ledger, the KV budget, speed against batch size, and bad input."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest
import simpy
from hypothesis import example, given, settings
from hypothesis import strategies as st

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute import driver as driver_module
from pipesim.compute.batch import BatchState
from pipesim.compute.closedloop import ClosedLoop
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig, ReplicaCost
from pipesim.compute.engine import ComputeReplica
from pipesim.compute.roofline import GEMM_ONLY_EFFICIENCY, Efficiency
from pipesim.compute.source import TokenSource
from pipesim.compute.trainer import TrainerConfig
from pipesim.compute.workload import (
    AgentTurns,
    EmpiricalLengths,
    LogNormalLengths,
    TokenWorkload,
)
from pipesim.core.clock import Clock
from pipesim.core.validate import FieldError
from tests.test_refusals_core import check_refusal

SMALL = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096, max_num_seqs=16)


AGENT_3_TURNS = TokenWorkload(
    response=LogNormalLengths(60.0, 0.7),
    prompt=100,
    samples_per_prompt=2,
    max_response_tokens=150,
    agent=AgentTurns(turns=3, tool_latency_s=2.0, tool_latency_sigma=0.5, observation_tokens=40),
)
"""Short 3-turn agent episodes in groups of 2 (the multi-turn ledger and KV tests)."""


def config_with_budget(tokens: int, **kw: Any) -> EngineConfig:
    """An engine config of qwen3-0.6b whose KV budget is about ``tokens`` tokens."""
    base = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=1024, **kw)
    need = base.weight_bytes_per_gpu + (tokens + 0.5) * base.kv_bytes_per_token_per_gpu
    return EngineConfig(
        model=base.model,
        gpu=base.gpu,
        max_model_len=1024,
        gpu_memory_utilization=need / base.gpu.hbm_bytes,
        **kw,
    )


# -- a stand-alone replica, driven by hand --------------------------------------------------------
@dataclass
class FixedTokens:
    prompt: list[int]
    response: list[int]
    generated: list[float] = field(default_factory=list)
    turns: dict[int, list[tuple[int, float, int]]] = field(default_factory=dict)
    truncated: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.generated = [0.0] * len(self.prompt)
        self.truncated = [False] * len(self.prompt)

    def tokens_of(self, i: int) -> tuple[int, int, int]:
        return self.prompt[i], self.response[i], max(self.response)


class StubPipeline:
    """What a replica needs of the kernel: a clock, the update log, a completion callback."""

    def __init__(self) -> None:
        self.env = Clock()  # the engines' SimPy environment (pipesim.core.clock)
        self.updates: list[Any] = []
        self.finished: list[pipesim.Episode] = []

    def on_finished(self, episodes: list[pipesim.Episode], now: float, in_pass: bool = False) -> None:
        self.finished.extend(episodes)


def run_replica(
    cfg: EngineConfig,
    seqs: list[tuple[float, int, int]],
    pause: tuple[float, float] | None = None,
    turns: dict[int, list[tuple[int, float, int]]] | None = None,
) -> tuple[list[float], ComputeReplica]:
    """Completion times of ``(arrival_s, prompt, response)`` sequences on one replica."""
    p = StubPipeline()
    src = FixedTokens([s[1] for s in seqs], [s[2] for s in seqs], turns=turns or {})
    rep = ComputeReplica(p, len(seqs), 0, ReplicaCost(cfg), src)  # type: ignore[arg-type]
    eps = [pipesim.Episode(i, i, 0.0, 0) for i in range(len(seqs))]

    def arrivals() -> Any:
        for ep, (at, _, _) in sorted(zip(eps, seqs, strict=True), key=lambda x: x[1][0]):
            if at > p.env.now:  # starts at one instant go together, as the kernel's pass does
                # at the absolute time, as the kernel wakes: timeout(at - now) can miss it by an
                # ulp (from now 0.5106..., 1.9999999999999998 - now lands 2e-16 early), and the
                # second of two starts at that time then came 2e-16 after the first's prefill
                yield p.env.wake_at(p.env.wake_up(), at)
            rep.start(ep, p.env.now)

    def pauser() -> Any:
        assert pause is not None
        yield p.env.timeout(pause[0])
        rep.pause()
        yield p.env.timeout(pause[1] - pause[0])
        rep.resume()

    p.env.process(arrivals())
    if pause is not None:
        p.env.process(pauser())
    p.env.run()
    assert len(p.finished) == len(seqs)
    return [float(ep.end_s) for ep in eps], rep  # type: ignore[arg-type]


def reference(cfg: EngineConfig, seqs: list[tuple[float, int, int]]) -> list[float]:
    """One engine step at a time (vLLM's prefill-first scheduler): at each step boundary the
    arrivals join the queue; while the next iteration's tokens would overflow the KV budget the
    newest sequence is preempted (to the head of the queue, to be recomputed); if some fit (FIFO,
    up to max_num_seqs, the watermark kept free) the step prefills them all (a recomputed one its
    prompt and what it generated), else it is one decode iteration of every running sequence,
    reading the whole KV cache."""
    cost = ReplicaCost(cfg)
    order = sorted(range(len(seqs)), key=lambda i: seqs[i][0])
    queue: list[int] = []
    running: dict[int, int] = {}  # the sequences on the GPU
    end = [math.nan] * len(seqs)
    t, nxt = 0.0, 0
    gen = [0] * len(seqs)
    admitted: list[int] = []  # admission order, for preemption
    budget, cap = cost.budget, cost.budget * (1 - cfg.watermark)

    def kv() -> int:
        return sum(seqs[i][1] + gen[i] for i in running)

    while nxt < len(order) or queue or running:
        while nxt < len(order) and seqs[order[nxt]][0] <= t:
            queue.append(order[nxt])
            nxt += 1
        while len(running) > 1 and kv() + len(running) > budget:  # the next step's tokens overflow
            i = admitted.pop()
            if i in running:
                del running[i]
                queue.insert(0, i)
        new = []
        while queue and (
            not running
            or (
                len(running) < cfg.max_num_seqs
                and kv() + seqs[queue[0]][1] + gen[queue[0]] + len(running) + 1 <= cap
            )
        ):
            i = queue.pop(0)
            running[i] = gen[i]
            admitted.append(i)
            new.append(seqs[i][1] + gen[i])
        if new:  # a prefill step; the scheduler looks at the queue again before decoding
            t += cost.prefill_s(sum(new), sum(0.5 * n * n for n in new), len(new))
            continue
        if not running:
            t = seqs[order[nxt]][0]
            continue
        t += cost.iteration_s(len(running), kv())
        for i in list(running):
            gen[i] += 1
            if gen[i] == seqs[i][2]:
                end[i] = t
                del running[i]
    return end


def max_rel_error(a: list[float], b: list[float]) -> float:
    return max(abs(x / y - 1) for x, y in zip(a, b, strict=True))


def test_reference_exact_when_all_start_together() -> None:
    seqs = [(0.0, 100 + 37 * i, 40 + 61 * i) for i in range(8)]
    fluid, _ = run_replica(SMALL, seqs)
    assert max_rel_error(fluid, reference(SMALL, seqs)) < 1e-9


def test_reference_queueing_beyond_max_num_seqs() -> None:
    cfg = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096, max_num_seqs=3)
    seqs = [(0.0, 200, 30 + 17 * i) for i in range(9)]
    fluid, _ = run_replica(cfg, seqs)
    assert max_rel_error(fluid, reference(cfg, seqs)) < 1e-9


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.0, 2.0), st.integers(1, 800), st.integers(20, 600)),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from([1, 2]),
)
@example([(1.9999999999999998, 1, 20), (1.9999999999999998, 1, 20), (0.510623317177025, 1, 20)], 1)
def test_reference_exact_with_staggered_arrivals(seqs: list[tuple[float, int, int]], tp: int) -> None:
    cfg = EngineConfig(model=MODELS["qwen3-1.7b"], gpu=GPUS["h100-sxm"], tp=tp, max_model_len=4096)
    fluid, _ = run_replica(cfg, seqs)
    assert max_rel_error(fluid, reference(cfg, seqs)) < 1e-9


def test_pause_delays_by_the_pause() -> None:
    seqs = [(0.0, 300, 100 * (i + 1)) for i in range(5)]
    plain, _ = run_replica(SMALL, seqs)
    paused, _ = run_replica(SMALL, seqs, pause=(0.2, 1.7))
    for a, b in zip(plain, paused, strict=True):
        assert b == pytest.approx(a + 1.5 if a > 0.2 else a, rel=1e-9)


# -- properties -------------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(st.integers(1, 400), st.integers(0, 20_000), st.integers(1, 400), st.integers(0, 20_000))
def test_per_sequence_speed_non_increasing_in_batch(b1: int, k1: int, db: int, dk: int) -> None:
    cost = ReplicaCost(EngineConfig(model=MODELS["qwen3-8b"], gpu=GPUS["h100-sxm"], tp=2, max_num_seqs=1024))
    assert cost.iteration_s(b1, k1) <= cost.iteration_s(b1 + db, k1 + dk)
    per_seq = [1 / cost.iteration_s(b, 1000 * b) for b in (1, 2, 8, 64, 256, 1024)]
    assert per_seq == sorted(per_seq, reverse=True)


def _own_tables(cost: ReplicaCost) -> ReplicaCost:
    """``cost`` with cold tables of its own (not the ones replicas of its configuration share)."""
    cost._a, cost._lin, cost._lm = [0.0], {}, []
    return cost


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([("qwen3-0.6b", "h100-sxm", 1), ("qwen3-8b", "h20", 2), ("qwen3-30b-a3b", "b200", 4)]),
    st.sampled_from([Efficiency(), Efficiency(kernel_overhead_s=0.0, combine_exponent=2)]),
    st.lists(
        st.tuples(st.integers(-1, 70_000), st.floats(0.0, 4e9), st.integers(1, 1024)), min_size=1, max_size=8
    ),
)
def test_admission_prefill_time_is_the_cost_models(
    where: tuple[str, str, int], eff: Efficiency, calls: list[tuple[int, float, int]]
) -> None:
    """The batch's own prefill time (``BatchState._prefill_time``, what admission pays) is
    ``ReplicaCost.prefill_s`` bit for bit, cold memos or warm, in both builds."""
    model, gpu, tp = where
    cfg = EngineConfig(model=MODELS[model], gpu=GPUS[gpu], tp=tp, max_model_len=4096, efficiency=eff)
    fast, reference = BatchState(_own_tables(ReplicaCost(cfg)), 0), _own_tables(ReplicaCost(cfg))
    for new_tokens, pairs, n_seqs in calls + calls:
        assert fast._prefill_time(new_tokens, pairs, n_seqs) == reference.prefill_s(new_tokens, pairs, n_seqs)


def test_preemption_keeps_kv_within_budget() -> None:
    # both attention constant sets: the fluid engine preempts at iteration boundaries only, as the
    # reference does, so they agree whatever the timing (tests/test_compute_fluid_exact.py draws it)
    for eff in (None, GEMM_ONLY_EFFICIENCY):
        kw = {} if eff is None else {"efficiency": eff}
        cfg = config_with_budget(3000, max_num_seqs=64, **kw)
        seqs = [(0.01 * i, 200, 400 + 20 * i) for i in range(24)]
        fluid, rep = run_replica(cfg, seqs)
        assert max_rel_error(fluid, reference(cfg, seqs)) < 1e-9, eff
    cfg = config_with_budget(3000, max_num_seqs=64)
    seqs = [(0.01 * i, 200, 400 + 20 * i) for i in range(24)]
    fluid, rep = run_replica(cfg, seqs)
    assert max_rel_error(fluid, reference(cfg, seqs)) < 1e-9  # preempted and recomputed alike
    assert rep.preemptions > 0 and rep.recompute_tokens > 0
    assert rep.peak_kv_tokens <= rep.cost.budget + 1e-6
    assert rep.tokens_generated == pytest.approx(sum(s[2] for s in seqs), rel=1e-9)


def test_reserve_policy_never_preempts() -> None:
    cfg = config_with_budget(3000, max_num_seqs=64, kv_policy="reserve")
    seqs = [(0.01 * i, 200, 400 + 20 * i) for i in range(24)]
    _, rep = run_replica(cfg, seqs)
    assert rep.preemptions == 0
    assert rep.peak_kv_tokens <= rep.cost.budget + 1e-6


@pytest.mark.parametrize("obs", [0, 300, 3000])
def test_reserve_holds_the_observations_of_an_agent(obs: int) -> None:
    # "reserve" admits a sequence only if its whole context can fit: for an agent that context
    # includes the observations of every turn, not only the prompt and the responses
    base = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=8192)
    need = base.weight_bytes_per_gpu + 9000.5 * base.kv_bytes_per_token_per_gpu
    cfg = EngineConfig(
        model=base.model,
        gpu=base.gpu,
        max_model_len=8192,
        gpu_memory_utilization=need / base.gpu.hbm_bytes,
        kv_policy="reserve",
    )
    wl = TokenWorkload(
        response=LogNormalLengths(60.0, 0.1),
        prompt=64,
        max_response_tokens=64,
        agent=AgentTurns(turns=3, tool_latency_s=0.0, observation_tokens=obs),
    )
    out = ClosedLoop(cfg, wl, 8).run(16)
    assert out["samples"] == 16 and out["preemptions"] == 0
    assert out["peak_kv_share"] <= 1.0 + 1e-9


DESIGNS: dict[str, dict[str, Any]] = {
    "sync": dict(max_staleness=0, weight_update=pipesim.Drain()),
    "async1": dict(max_staleness=1, weight_update=pipesim.PartialRollout()),
    "async2-restart": dict(max_staleness=2, weight_update=pipesim.AbortRestart()),
    "async1-reprefill": dict(max_staleness=1, weight_update=pipesim.AbortReprefill()),
    "stale-drop": dict(max_staleness=1, batching=pipesim.DropStale()),
}


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(sorted(DESIGNS)), st.integers(0, 2**16), st.sampled_from([0, 2]), st.booleans())
def test_ledger_closes_and_kv_within_budget(design: str, seed: int, trainer_gpus: int, tight: bool) -> None:
    eng = config_with_budget(6000, max_num_seqs=32) if tight else SMALL
    cluster = Cluster(engine=eng, n_gpus=4, trainer_gpus=trainer_gpus)
    wl = TokenWorkload(
        response=LogNormalLengths(300.0, 0.7),
        prompt=LogNormalLengths(100.0, 0.5),
        samples_per_prompt=4,
        max_response_tokens=800,
        max_prompt_tokens=200,
        difficulty_sigma=0.5,
    )
    kw: dict[str, Any] = dict(DESIGNS[design])
    eta = kw.pop("max_staleness")
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=32, steps=4, max_staleness=eta), **kw)
    run = run_compute(sc, cluster, wl, seed=seed, slots_per_replica=24)
    led = run.ledger
    assert led.closes(), led
    assert led.trained > 0
    s = run.summary()
    assert s["tokens_generated"] == pytest.approx(
        s["tokens_trained"] + s["tokens_discarded"] + s["tokens_buffered"] + s["tokens_in_flight"]
    )
    for e in run.engines:
        assert e["peak_kv_tokens"] <= e["kv_budget_tokens"] + 1e-6
    if design == "async2-restart":
        assert led.discarded_aborted > 0


def test_requeued_task_keeps_its_difficulty() -> None:
    wl = TokenWorkload(response=LogNormalLengths(1000.0, 0.05), samples_per_prompt=2, difficulty_sigma=1.5)
    src = TokenSource(wl, np.random.default_rng(1))
    for i in range(40):
        src.work_s(i, i, 0, -1)
    for t in range(40):  # each task requeued: a new episode of the same task
        src.work_s(40 + t, t, 0, t)
    first, again = src.response[:40], src.response[40:]
    ratio = np.array(again, dtype=float) / np.array(first, dtype=float)
    assert np.all(np.abs(np.log(ratio)) < 0.3)  # the spread is the sample's (0.05), not the task's (1.5)


def test_empirical_lengths_from_trace() -> None:
    path = "../shared/reference/vidur/splitwise_code.csv"
    try:
        lengths = EmpiricalLengths.from_csv(path)
    except FileNotFoundError:
        pytest.skip("the Vidur trace is not here")
    wl = TokenWorkload(response=lengths, max_response_tokens=4096)
    src = TokenSource(wl, np.random.default_rng(0))
    for i in range(2000):
        src.work_s(i, i, 0, -1)
    assert set(src.response) <= set(lengths.tokens) | {4096}
    assert np.mean(src.response) == pytest.approx(np.mean(np.minimum(lengths.tokens, 4096)), rel=0.2)


def test_trainer_time_from_tokens() -> None:
    m, g = MODELS["qwen3-8b"], GPUS["h100-sxm"]
    t = TrainerConfig(model=m, gpu=g, n_gpus=8, mfu=0.5, recompute_old_logp=False)
    assert t.step_time_s(1e6) == pytest.approx(6 * m.n_active_params * 1e6 / (8 * g.bf16_flops_per_s * 0.5))
    with_logp = TrainerConfig(model=m, gpu=g, n_gpus=8, mfu=0.5)
    assert with_logp.step_time_s(1e6) == pytest.approx(t.step_time_s(1e6) * 8 / 6)


# -- bad input: the refusals are rows of tests/test_refusals_compute.py and test_refusals_lengths.py
@pytest.mark.parametrize("kw", [dict(difficulty_sigma=80.0), dict(drift_per_version=1e300)])
def test_lengths_that_overflow_are_truncated_at_the_cap(kw: dict[str, float]) -> None:
    # an astronomically long (or short) sample is cut at max_response_tokens (or is one token),
    # never an OverflowError from inside a run. (difficulty_sigma 80 is about the largest taken with
    # a 200-token median: exp(8 x 80) x 200 is finite; 1000 is refused, test_refusals_compute.py)
    wl = TokenWorkload(response=LogNormalLengths(200.0, 0.5), max_response_tokens=512, **kw)
    src = TokenSource(wl, np.random.default_rng(0))
    for i in range(200):
        src.work_s(i, i, 3, -1)
    assert set(src.response) <= set(range(1, 513)) and any(src.truncated)
    assert all(r == 512 for t, r in zip(src.truncated, src.response) if t)
    agent = TokenWorkload(
        response=LogNormalLengths(200.0, 0.5),
        max_response_tokens=64,
        agent=AgentTurns(turns=3, tool_latency_s=1.0, observation_tokens=8),
        **kw,
    )
    src = TokenSource(agent, np.random.default_rng(0))
    for i in range(50):
        src.work_s(i, i, 3, -1)
    assert all(1 <= n <= 64 for turns in src.turns.values() for n, _, _ in turns)


def test_a_trainer_that_matches_the_cluster_runs() -> None:
    # (its mismatches are rows of tests/test_refusals_compute.py: trainer-n_gpus, -model, -gpu)
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=8, steps=2))
    split = Cluster(engine=SMALL, n_gpus=2, trainer_gpus=1)
    trainer = TrainerConfig(model=SMALL.model, gpu=SMALL.gpu, n_gpus=1, mfu=0.3)
    assert run_compute(sc, split, TokenWorkload(max_response_tokens=512), trainer=trainer).ledger.closes()


def test_a_sync_that_overflows_names_the_link() -> None:
    # the error named sync_time_s, a value the user never gave (computed from the GPU's NVLink)
    slow = EngineConfig(
        model=SMALL.model, gpu=replace(SMALL.gpu, nvlink_bandwidth_bytes_per_s=1e-300), max_model_len=4096
    )
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=8, steps=2))
    cluster, wl = Cluster(engine=slow, n_gpus=2, trainer_gpus=1), TokenWorkload(max_response_tokens=512)
    check_refusal(lambda: run_compute(sc, cluster, wl), FieldError, "gpu.nvlink_bandwidth_bytes_per_s")
    assert run_compute(sc, cluster, wl, sync_time_s=1.0).ledger.closes()  # the way out it names


def test_idle_ratios_of_a_never_idle_engine_are_zero_not_below() -> None:
    # a replica busy the whole run: its busy intervals summed came out a few ulps above the run's
    # length, and the idle ratio -6.4e-15
    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=16384, max_num_seqs=4)
    wl = TokenWorkload(
        response=LogNormalLengths(500, 0.8), prompt=128, samples_per_prompt=4, max_response_tokens=2048
    )
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=5000, steps=3, max_staleness=1),
        weight_update=pipesim.PartialRollout(),
    )
    s = run_compute(sc, Cluster(engine=eng, n_gpus=2, trainer_gpus=1), wl, seed=0).summary()
    assert s["slot_idle_ratio"] == 0.0  # the kernel's share of idle slots, clamped at 0
    # verl's rollouter/idle_ratio is the engines' idle time: a replica always decoding is idle for
    # the first prefill's instants only
    assert s["rollout_idle_ratio"] == s["rollouter/idle_ratio"] == pytest.approx(1 - s["engine_busy_share"])
    assert 0.0 <= s["rollouter/idle_ratio"] < 1e-4
    assert 0.0 <= s["trainer_idle_ratio"] <= 1.0


def test_a_compute_runs_rollouter_idle_ratio_is_the_engines_not_the_slots() -> None:
    """An engine with 256 places decoding a few dozen sequences is busy: ``rollouter/idle_ratio``
    is one minus the replicas' busy share (verl's ``1 - active_time / version_time``), while
    ``slot_idle_ratio`` keeps the kernel's share of idle slots, which is large here."""
    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096, max_num_seqs=256)
    wl = TokenWorkload(response=LogNormalLengths(300, 0.5), prompt=64, max_response_tokens=1024)
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=32, steps=3, max_staleness=1))
    s = run_compute(sc, Cluster(engine=eng, n_gpus=2, trainer_gpus=1), wl, seed=0).summary()
    assert s["rollouter/idle_ratio"] == pytest.approx(1 - s["engine_busy_share"])
    assert s["rollouter/idle_ratio"] == pytest.approx(s["fully_async/rollouter/idle_ratio"])
    # 64 sequences at most (eta 1, batch 32) in 256 places: most slots idle, the engine not
    assert s["slot_idle_ratio"] > 0.7 and s["rollouter/idle_ratio"] < 0.1


def test_numpy_times_run_as_python_floats_do() -> None:
    """A sync time or overlap given as a numpy float makes SimPy's clock a numpy float: the run is
    the same, value for value (the compiled build compared its queue's times as bools and failed)."""
    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=1024, max_num_seqs=16)
    cfg = pipesim.PipelineConfig(batch_size=16, steps=3, max_staleness=1)
    work = TokenWorkload(response=LogNormalLengths(96.0, 0.7), prompt=64, max_response_tokens=256)
    cluster = Cluster(engine=eng, n_gpus=2, trainer_gpus=1)

    def ends(wu: Any, sync_time_s: Any) -> list[tuple[Any, ...]]:
        sc = pipesim.Scenario(pipeline=cfg, weight_update=wu)
        run = run_compute(sc, cluster, work, seed=1, sync_time_s=sync_time_s)
        return [(e.id, e.start_s, e.end_s, e.duration_s) for e in run.result.episodes]

    for numpy_case, plain_case in [
        ((pipesim.PartialRollout(), np.float64(2.0)), (pipesim.PartialRollout(), 2.0)),
        ((pipesim.InFlightUpdate(np.float64(0.5)), None), (pipesim.InFlightUpdate(0.5), None)),
    ]:
        a, b = ends(*numpy_case), ends(*plain_case)
        assert a == b and len(a) >= 48


@dataclass(frozen=True)
class Lengths:
    """A user's length model: ``value`` tokens in the probe of 16, ``late`` in the run's blocks."""

    value: float = 100.0
    late: float = 100.0

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.value if n == 16 else self.late)

    @property
    def mean_tokens(self) -> float:
        return self.value


def test_a_length_model_that_draws_infinity_mid_run_stops_it() -> None:
    wl = TokenWorkload(response=Lengths(late=math.inf), max_response_tokens=512)
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=8, steps=2))
    with pytest.raises(pipesim.PipelineError, match="length model.*inf"):
        run_compute(sc, Cluster(engine=SMALL, n_gpus=1), wl)


def test_empirical_lengths_from_csv_read_whole_floats_and_a_byte_order_mark(tmp_path: Any) -> None:
    """``7.0`` is 7 tokens, and a BOM before the header does not hide the column's name (a fraction,
    a bad cell and a directory are rows of tests/test_refusals_lengths.py)."""
    good = tmp_path / "good.csv"
    good.write_text("num_decode_tokens,x\n120,a\n7.0,b\n")
    assert EmpiricalLengths.from_csv(good).tokens == (120, 7)
    bom = tmp_path / "bom.csv"
    bom.write_bytes("\ufeffnum_decode_tokens,x\n120,a\n".encode())
    assert EmpiricalLengths.from_csv(bom).tokens == (120,)


# -- multi-turn ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("tool_kv", ["keep", "drop"])
def test_tool_call_leaves_the_gpu_and_prefills_its_observation(tool_kv: str) -> None:
    cfg = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096, tool_kv=tool_kv)
    P, r1, tool, obs, r2 = 300, 120, 2.5, 200, 80
    turns = {0: [(r1, tool, obs), (r2, 0.0, 0)]}
    (end,), rep = run_replica(cfg, [(0.0, P, r1 + r2)], turns=turns)
    cost = ReplicaCost(cfg)
    t = cost.prefill_s(P, 0.5 * P * P, 1) + sum(cost.iteration_s(1, P + k) for k in range(r1)) + tool
    ctx = P + r1
    t += (
        cost.prefill_s(obs, obs * (ctx + 0.5 * obs), 1)
        if tool_kv == "keep"
        else cost.prefill_s(ctx + obs, 0.5 * (ctx + obs) ** 2, 1)
    )
    t += sum(cost.iteration_s(1, ctx + obs + k) for k in range(r2))
    assert end == pytest.approx(t, rel=1e-9)
    assert rep.tool_calls == 1
    assert rep.recompute_tokens == (0 if tool_kv == "keep" else ctx)


def test_others_decode_while_one_is_in_a_tool_call() -> None:
    P = 100
    seqs = [(0.0, P, 50 + 400), (0.0, P, 400)]
    turns = {0: [(50, 30.0, 10), (400, 0.0, 0)], 1: [(400, 0.0, 0)]}
    ends, _ = run_replica(SMALL, seqs, turns=turns)
    alone, _ = run_replica(SMALL, [(0.0, P, 400)])
    # sequence 1 runs beside 0 for 50 tokens, then alone (0 is in its 30 s tool call): nearly as
    # fast as alone, and long before 0 returns
    assert alone[0] < ends[1] < alone[0] * 1.2 < 30.0 < ends[0]


@settings(max_examples=10, deadline=None)
@given(
    st.integers(0, 2**16),
    st.sampled_from([None, 1, 64]),
    st.sampled_from(["keep", "drop"]),
    st.booleans(),
    st.sampled_from(sorted(DESIGNS)),
    st.sampled_from([0, 2]),
)
def test_multi_turn_ledger_closes(
    seed: int, workers: int | None, tool_kv: str, tight: bool, design: str, trainer_gpus: int
) -> None:
    eng = config_with_budget(8000, max_num_seqs=32, tool_kv=tool_kv) if tight else SMALL
    wl = AGENT_3_TURNS
    kw: dict[str, Any] = dict(DESIGNS[design])
    eta = kw.pop("max_staleness")
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=16, steps=3, max_staleness=eta), **kw)
    cluster = Cluster(engine=eng, n_gpus=4, trainer_gpus=trainer_gpus, env_workers=workers)
    run = run_compute(sc, cluster, wl, seed=seed, slots_per_replica=12)
    assert run.ledger.closes(), run.ledger
    s = run.summary()
    assert s["tool_calls"] > 0
    for e in run.engines:
        assert e["peak_kv_tokens"] <= e["kv_budget_tokens"] + 1e-6


def test_a_joining_sequence_evicts_other_cached_prefixes_not_only_the_oldest() -> None:
    """Regression: with nothing running and the joiner's own cached prefix the oldest, the engine
    used to admit it without evicting the younger cached prefixes, overflowing the KV budget for
    an iteration (38 tokens over a 2,000-token budget in this colocated multi-turn run)."""
    eng = config_with_budget(2000, max_num_seqs=32, tool_kv="keep")
    wl = AGENT_3_TURNS
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=16, steps=3, max_staleness=0))
    run = run_compute(sc, Cluster(engine=eng, n_gpus=2, trainer_gpus=0), wl, seed=0, slots_per_replica=24)
    assert run.ledger.closes(), run.ledger
    for e in run.engines:
        assert e["peak_kv_tokens"] <= e["kv_budget_tokens"] + 1e-6


def test_environment_workers_run_any_callers_calls_in_turn() -> None:
    """``EnvWorkers.call(seconds, then)`` serves callers other than a replica too, FIFO on its
    workers: one worker runs a 1 s and a 2 s call one after the other."""
    from pipesim.compute.engine import EnvWorkers

    env = simpy.Environment()
    pool, log = EnvWorkers(env, 1), []
    pool.call(1.0, lambda: log.append(env.now))
    pool.call(2.0, lambda: log.append(env.now))
    env.run()
    assert log == [1.0, 3.0] and pool.busy == 0 and pool.calls == 2 and pool.busy_s == 3.0


def test_closed_loop_counts_its_samples() -> None:
    work = TokenWorkload(response=LogNormalLengths(40.0, 0.5), prompt=16, max_response_tokens=256)
    loop = ClosedLoop(SMALL, work, 8, seed=1)
    out = loop.run(50)
    assert loop.finished == out["samples"] == 50 and loop.started == 50 and loop.updates == []


def test_one_environment_worker_is_the_bottleneck() -> None:
    wl = TokenWorkload(
        response=LogNormalLengths(60.0, 0.3),
        prompt=100,
        max_response_tokens=150,
        agent=AgentTurns(turns=3, tool_latency_s=2.0, tool_latency_sigma=0.0, observation_tokens=40),
    )
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=16, steps=2))
    free = run_compute(sc, Cluster(engine=SMALL, n_gpus=2, trainer_gpus=1), wl)
    one = run_compute(sc, Cluster(engine=SMALL, n_gpus=2, trainer_gpus=1, env_workers=1), wl)
    # 16 episodes x 2 tool calls of 2 s on one worker: at least 64 s per step
    assert one.result.sim_time_s > 2 * 64.0 > free.result.sim_time_s


# -- handling batch changes in place is exact ---------------------------------------------------------
def _fingerprint(run: Any) -> tuple[Any, ...]:
    summary = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in run.summary().items()}
    ends = [(e.id, e.end_s, e.duration_s, e.status) for e in run.result.episodes]
    return summary, ends, run.engines


@pytest.mark.parametrize(
    ("trainer_gpus", "agent", "workers", "tight", "policy"),
    [
        (0, None, None, False, "drain"),  # colocated: pauses for training
        (2, None, None, False, "partial"),  # two replicas interleave
        (1, None, None, True, "partial"),  # preemptions
        (
            1,
            AgentTurns(turns=3, tool_latency_s=1.0, tool_latency_sigma=0.0, observation_tokens=32),
            None,
            False,
            "partial",
        ),
        (
            1,
            AgentTurns(turns=3, tool_latency_s=0.0, tool_latency_sigma=0.0, observation_tokens=8),
            None,
            True,
            "reprefill",
        ),
        (
            2,
            AgentTurns(turns=3, tool_latency_s=0.5, tool_latency_sigma=1.0, observation_tokens=32),
            16,
            False,
            "partial",
        ),
    ],
)
def test_in_place_handling_is_bit_identical(
    monkeypatch: pytest.MonkeyPatch,
    trainer_gpus: int,
    agent: AgentTurns | None,
    workers: int | None,
    tight: bool,
    policy: str,
) -> None:
    """The replica handles a batch change (or its own tool return) that comes first in SimPy's
    queue in place instead of through a timeout: the run is the same to the last bit."""
    engine = config_with_budget(6000, max_num_seqs=64) if tight else SMALL
    work = TokenWorkload(
        response=LogNormalLengths(96.0, 0.7), prompt=64, max_response_tokens=256, agent=agent
    )
    wu = {
        "drain": pipesim.Drain(),
        "partial": pipesim.PartialRollout(),
        "reprefill": pipesim.AbortReprefill(),
    }[policy]
    cfg = pipesim.PipelineConfig(batch_size=64, steps=3, max_staleness=0 if policy == "drain" else 1)
    sc = pipesim.Scenario(pipeline=cfg, weight_update=wu)
    cluster = Cluster(engine=engine, n_gpus=trainer_gpus + 2, trainer_gpus=trainer_gpus, env_workers=workers)
    steps = [0]
    real_step = Clock.step

    def counted(env: Clock) -> None:
        steps[0] += 1
        real_step(env)

    monkeypatch.setattr(Clock, "step", counted)
    fast = _fingerprint(run_compute(sc, cluster, work, seed=7))
    n_fast, steps[0] = steps[0], 0
    monkeypatch.setattr(driver_module, "HANDLE_IN_PLACE", False)
    slow = _fingerprint(run_compute(sc, cluster, work, seed=7))
    assert fast == slow
    assert steps[0] > n_fast  # the switch acts, in the compiled build too: more events without it


@pytest.mark.parametrize("tool_latency_s", [1e2, 1e7])
def test_the_ledger_closes_exactly_however_long_the_run(tool_latency_s: float) -> None:
    """The token clock read back from a planned time missed its target by about eps * t / a, and
    the misses were counted: the ledger drifted with simulated time (5.8e-10 relative at 3e7 s,
    past closes()'s 1e-9 beyond that). Each timer now lands the clock on its target exactly."""
    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"])
    wl = TokenWorkload(
        response=LogNormalLengths(200.0, 0.6),
        prompt=64,
        max_response_tokens=1024,
        agent=AgentTurns(
            turns=3, tool_latency_s=tool_latency_s, tool_latency_sigma=0.5, observation_tokens=32
        ),
    )
    cfg = pipesim.PipelineConfig(batch_size=32, steps=20, max_staleness=1)
    sc = pipesim.Scenario(pipeline=cfg, weight_update=pipesim.PartialRollout())
    run = run_compute(sc, Cluster(engine=eng, n_gpus=2, trainer_gpus=1), wl, slots_per_replica=64)
    led = run.ledger
    assert run.summary()["sim_time_s"] > 20 * tool_latency_s  # tool calls in each of 20 steps
    assert led.closes()
    assert led.generated == pytest.approx(led.accounted, rel=1e-13, abs=0.0)
