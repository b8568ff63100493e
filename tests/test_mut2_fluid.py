"""The fluid ceiling of :mod:`pipesim.plan.fluid` against its docstring's formula, recomputed here
from the engine's and trainer's own cost models: ``3600 B / step`` with ``step = g + t + switch``
colocated and ``max(g, t)`` disaggregated (asynchronous designs), ``g`` at ``b = min(max_num_seqs,
KV budget / held)`` sequences; the longest-sample quantile and an agent's tool seconds."""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import pytest

import pipesim.compute as pc
from pipesim import plan
from pipesim.compute import AgentTurns, LogNormalLengths, TokenWorkload
from pipesim.plan.build import engine_config, trainer_config
from pipesim.plan.design import Design
from pipesim.plan.fluid import _longest, _tool_s, ceiling
from tests.test_plan import small_spec


def _hand_ceiling(spec: plan.PlanSpec, d: Design) -> tuple[float, int]:
    """(the ceiling, b) of an asynchronous design, from the module docstring's formula."""
    w = spec.workload
    assert isinstance(w.prompt, int)
    prompt = float(w.prompt)
    resp = min(float(w.response.mean_tokens), float(w.max_response_tokens))
    trained = prompt + resp
    eng = engine_config(spec, d.tp)
    held = prompt + resp / 2
    kv_limit = int(eng.kv_budget_tokens // held)
    b = min(eng.max_num_seqs, kv_limit)
    make: Any = pc.Cluster
    cluster = make(engine=eng, n_gpus=spec.n_gpus, trainer_gpus=d.trainer_gpus)
    g = spec.batch_size * resp / (cluster.n_replicas * pc.ReplicaCost(eng).tokens_per_s(b, b * held))
    t = trainer_config(spec, d).step_time_s(spec.batch_size * trained)
    step = g + t + cluster.switch_time_s() if d.colocated else max(g, t)
    return 3600.0 * spec.batch_size / step, b


@pytest.mark.parametrize("design", [Design(trainer_gpus=0, eta=1), Design(trainer_gpus=4, eta=1)])
def test_async_ceiling_is_the_hand_formula(design: Design) -> None:
    spec = small_spec()
    want, b = _hand_ceiling(spec, design)
    # the two limits apart (max_num_seqs well under what the KV budget holds), so b's min matters
    assert b == spec.max_num_seqs < engine_config(spec, design.tp).kv_budget_tokens // (128 + 150)
    assert ceiling(spec, design) == pytest.approx(want, rel=1e-9)


def test_longest_is_the_low_quantile_of_the_longest_of_b_draws() -> None:
    w = TokenWorkload(
        response=LogNormalLengths(300.0, 0.8),
        prompt=128,
        samples_per_prompt=4,
        max_response_tokens=1_000_000,
        difficulty_sigma=0.3,
    )
    for batch in (4, 8):
        spec = small_spec(workload=w, batch_size=batch, max_model_len=2_000_000)
        sigma = math.hypot(0.8, 0.3)
        z = NormalDist().inv_cdf(0.05 ** (1 / batch))
        assert _longest(spec) == pytest.approx(300.0 * math.exp(sigma * z), rel=1e-9)
        # P(max of B draws < that) = 5%: the longest exceeds it 95% of the time
        p_below = NormalDist().cdf(math.log(_longest(spec) / 300.0) / sigma) ** batch
        assert p_below == pytest.approx(0.05, rel=1e-6)


def test_tool_seconds_are_one_fewer_than_the_turns() -> None:
    agent = AgentTurns(turns=3, tool_latency_s=5.0, observation_tokens=64)
    w = TokenWorkload(response=LogNormalLengths(200.0, 0.5), prompt=128, samples_per_prompt=4, agent=agent)
    spec = small_spec(workload=w)
    assert _tool_s(spec) == pytest.approx((3 - 1) * 5.0)
    assert _tool_s(small_spec()) == 0.0
