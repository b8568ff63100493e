"""The slice search (``pipesim.plan.slices``, issue 43): the order in which it spends its screens and
full-length probes, and its budget.

The spec: 16 H100s, Qwen3-8B as a 3-turn agent (2 s median tool calls), 64 samples per step, mean
staleness at most 1 and maximum at most 3. With eta 1 and partial rollouts the measured maximum
grows with the trainer's share (3 at split 2:14, 4 from 3:13 on, one seed of 8 steps), so the
bisection has a boundary to find."""

from __future__ import annotations

import math

import pytest

import pipesim.plan as plan
from pipesim.compute import GPUS, MODELS, LogNormalLengths, TokenWorkload
from pipesim.compute.workload import AgentTurns
from pipesim.plan.evaluate import Evaluator
from pipesim.plan.fluid import ceiling
from pipesim.plan.slices import SliceTrace, balance, meets, slice_search, slices

AGENT = TokenWorkload(
    response=LogNormalLengths(300.0, 1.0),
    prompt=256,
    samples_per_prompt=4,
    max_response_tokens=2048,
    difficulty_sigma=0.5,
    agent=AgentTurns(turns=3, tool_latency_s=2.0, tool_latency_sigma=1.0, observation_tokens=128),
)


def ridge_spec(**changes: object) -> plan.PlanSpec:
    base = plan.PlanSpec(
        gpu=GPUS["h100-sxm"],
        n_gpus=16,
        model=MODELS["qwen3-8b"],
        workload=AGENT,
        batch_size=64,
        constraints=plan.Constraints(mean_staleness=1.0, max_staleness=3),
        space=plan.Space(placement=(0, 2, 3, 4, 8, 14), eta=(0, 1), update=("drain", "partial")),
        steps=8,
        screen_steps=2,
        seeds=3,
        max_model_len=8192,
        max_num_seqs=64,
        min_full=4,
        batch=8,
        trials=12,
        method="slices",
    )
    return base.with_(**changes)


Searched = tuple[SliceTrace, list[plan.Evaluated], list[plan.Evaluated], Evaluator]


def _run(spec: plan.PlanSpec) -> Searched:
    ev = Evaluator(spec)
    pool = plan.candidates(spec)
    ceilings = {d: ceiling(spec, d) for d in pool}
    trace = SliceTrace()
    screens, probes = slice_search(spec, ev, pool, ceilings, trace=trace)
    return trace, screens, probes, ev


@pytest.fixture(scope="module")
def searched40() -> Searched:
    """The slice search of the ridge spec at 40 trials, run once for the two tests that read it
    (neither changes what it returns)."""
    return _run(ridge_spec(trials=40))


@pytest.fixture(scope="module")
def planned() -> plan.PlanResult:
    """``plan.plan`` of the ridge spec at 5 trials on one worker (the default), for the probe
    budget's check and as the one-worker side of the two-worker comparison (read only)."""
    return plan.plan(ridge_spec(trials=5), seed=0, with_sensitivity=False)


@pytest.mark.parametrize("trials", [3, 12, 40])
def test_screens_go_to_each_slices_balance_in_ceiling_order_within_the_budget(
    trials: int, searched40: Searched
) -> None:
    spec = ridge_spec(trials=trials)
    pool = plan.candidates(spec)
    ceilings = {d: ceiling(spec, d) for d in pool}
    trace, screens, probes, ev = searched40 if trials == 40 else _run(spec)
    groups = list(slices(pool).values()) + [[d] for d in pool if d.colocated]
    groups.sort(key=lambda g: -max(ceilings[d] for d in g))  # stable: as the search sorts them
    expected = list(dict.fromkeys(g[balance(g, ceilings)] for g in groups))[:trials]
    assert trace.screened == expected
    assert len(screens) <= trials and len(probes) <= trials
    assert all(e.steps == spec.screen_steps and len(e.runs) == 1 for e in screens)
    assert all(e.steps == spec.steps and len(e.runs) == 1 for e in probes)
    assert ev.runs == len(screens) + len(probes)  # nothing run twice


def test_a_slice_is_probed_from_its_least_stale_split_then_its_balance_then_around_its_fastest(
    searched40: Searched,
) -> None:
    """Within a slice the first probe is its lowest split and the second its balance; no split
    is probed twice or at or above a split known to break the limits; a later probe lies above
    the fastest probe that meets them (a step up, or the gap to the next probe above), or below
    it only when a slower probe above brackets the peak."""
    spec = ridge_spec(trials=40)
    pool = plan.candidates(spec)
    ceilings = {d: ceiling(spec, d) for d in pool}
    trace, _, probes, _ = searched40
    got = {e.design: e for e in probes}
    groups = slices(pool)
    seen: dict[object, list[int]] = {}
    for rnd in trace.probed:
        for d in rnd:
            k = (d.tp, d.eta, d.update, d.sync_every, d.oversample)
            g = groups[k] if not d.colocated else [d]
            i = g.index(d)
            prior = seen.setdefault((d.colocated, k), [])
            ok = {j: got[g[j]].throughput for j in prior if meets(spec, got[g[j]])}
            bad = [j for j in prior if not meets(spec, got[g[j]])]
            assert i not in prior
            assert i < min(bad, default=len(g))
            if not prior:
                assert i == 0
            elif len(prior) == 1 and balance(g, ceilings) > 0:
                assert i == balance(g, ceilings) and ok
            elif i != balance(g, ceilings):
                fastest = max(ok, key=lambda j: (ok[j], -j))
                slower_above = [j for j in ok if j > fastest]
                if i < fastest:
                    assert slower_above
            prior.append(i)
    assert any(len(v) > 2 for v in seen.values())  # some slice was searched past its balance


def test_the_probe_budget_is_a_cap(planned: plan.PlanResult) -> None:
    for trials in (1, 5):
        spec = ridge_spec(trials=trials)
        _, _, probes, _ = _run(spec)
        assert len(probes) <= trials
    result = planned  # plan.plan(ridge_spec(trials=5), seed=0, with_sensitivity=False)
    probe_rung = result.rungs[1]
    assert probe_rung[0] == 8 and probe_rung[1] <= 5
    assert result.n_full <= max(math.ceil(probe_rung[1] / 3), 4)


def test_two_workers_give_the_same_search_as_one(planned: plan.PlanResult) -> None:
    """Probes go in rounds of ``batch`` and results come back in submission order, so the worker
    count changes nothing the search decides. (At 5 trials, the probe budget's plan: each rung
    still sends several runs to the pool at once, 5 screens, 5 probes and 4 full designs of 3
    seeds, so results that came back out of order would reach the search.)"""
    one = planned
    two = plan.plan(ridge_spec(trials=5), seed=0, workers=2, with_sensitivity=False)
    assert len(one.screened) > 1 and len(one.full) > 1
    assert one.rungs == two.rungs
    assert [e.design for e in one.screened] == [e.design for e in two.screened]
    assert [(e.design, e.metrics) for e in one.full] == [(e.design, e.metrics) for e in two.full]
