"""Property tests of the planner's front and of sweeps: what a user comparing designs relies on.

The Pareto front is exactly the designs no other one dominates (checked against a pairwise
reference), whatever order they were evaluated in; the planner's seed aggregate does not depend
on the order of its runs; a design evaluated twice with one seed gives the same numbers; and a
sweep's cell is the run of its scenario, whatever the order or the company of the other cells.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.io.sweeps import sweep
from pipesim.plan import Constraints, Design, Evaluated, PlanSpec, Space, nondominated, run_design
from pipesim.plan.evaluate import FRONT_TOLERANCE, aggregate, dominates, objectives
from pipesim.testing import policy_scenarios

DESIGNS = st.builds(
    Design,
    trainer_gpus=st.integers(0, 6),
    tp=st.sampled_from([1, 2]),
    eta=st.integers(0, 3),
    update=st.sampled_from(["partial", "drain", "abort_reprefill"]),
)

# a few values each, so that ties (equal objectives, neither dominating) are common
METRICS = st.fixed_dictionaries(
    {
        "throughput_per_hour": st.sampled_from([0.0, 100.0, 250.0, 400.0]) | st.floats(0.0, 1e4),
        "staleness_mean": st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0.0, 4.0),
        "discarded_share": st.sampled_from([0.0, 0.1]) | st.floats(0.0, 1.0),
    }
)


@st.composite
def evaluations(draw: st.DrawFn) -> list[Evaluated]:
    designs = draw(st.lists(DESIGNS, min_size=0, max_size=14, unique=True))
    return [Evaluated(d, 2, [], metrics=draw(METRICS), feasible=True) for d in designs]


@settings(max_examples=60)
@given(evaluations(), st.randoms(use_true_random=False))
def test_the_front_is_what_nothing_dominates_in_any_order(evals: list[Evaluated], rnd: Any) -> None:
    """With no tolerance, ``nondominated`` keeps exactly the evaluations a pairwise loop finds no
    dominator for, sorted by throughput descending; every one it leaves out is dominated by one it
    keeps; and shuffling the input changes nothing."""
    front = nondominated(evals, tol=(0.0, 0.0, 0.0))
    slow = [
        e for e in evals if not any(dominates(objectives(o.metrics), objectives(e.metrics)) for o in evals)
    ]
    assert sorted(e.design for e in front) == sorted(e.design for e in slow)  # type: ignore[type-var]
    assert [e.throughput for e in front] == sorted((e.throughput for e in front), reverse=True)
    kept = {id(e) for e in front}
    for e in evals:
        if id(e) not in kept:
            assert any(dominates(objectives(f.metrics), objectives(e.metrics)) for f in front)
    shuffled = list(evals)
    rnd.shuffle(shuffled)
    assert [e.design for e in nondominated(shuffled, tol=(0.0, 0.0, 0.0))] == [e.design for e in front]


@settings(max_examples=60)
@given(evaluations(), st.randoms(use_true_random=False))
def test_the_front_within_its_tolerance(evals: list[Evaluated], rnd: Any) -> None:
    """With the front's tolerance (``FRONT_TOLERANCE``): no design on the front dominates another
    within it, every design left out is dominated within it by a design on the front at least as
    fast, the fastest design is always on it, and the order of the input changes nothing."""
    front = nondominated(evals)
    obj = {id(e): objectives(e.metrics) for e in evals}
    for f in front:
        assert not any(dominates(obj[id(g)], obj[id(f)], FRONT_TOLERANCE) for g in front if g is not f)
    kept = {id(e) for e in front}
    for e in evals:
        if id(e) not in kept:
            assert any(
                dominates(obj[id(f)], obj[id(e)], FRONT_TOLERANCE) and f.throughput >= e.throughput
                for f in front
            )
    if evals:
        assert front and front[0].throughput == max(e.throughput for e in evals)
    shuffled = list(evals)
    rnd.shuffle(shuffled)
    assert [e.design for e in nondominated(shuffled)] == [e.design for e in front]


VECTORS = st.tuples(*[st.sampled_from([0.0, 1.0, 2.0]) | st.floats(-5, 5) for _ in range(3)])


@settings(max_examples=60)
@given(VECTORS, VECTORS, VECTORS)
def test_dominance_is_a_strict_partial_order(
    a: tuple[float, ...], b: tuple[float, ...], c: tuple[float, ...]
) -> None:
    """Irreflexive, asymmetric and transitive: what makes "the front" well defined."""
    assert not dominates(a, a)
    assert not (dominates(a, b) and dominates(b, a))
    if dominates(a, b) and dominates(b, c):
        assert dominates(a, c)


RUN = st.fixed_dictionaries(
    {
        "throughput_per_hour": st.floats(0.0, 1e5),
        "staleness_mean": st.floats(0.0, 5.0),
        "staleness_max": st.integers(0, 9).map(float),
        "discarded_share": st.floats(0.0, 1.0),
    }
)


@settings(max_examples=60)
@given(st.lists(RUN, min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_the_seed_aggregate_ignores_the_order_of_the_seeds(runs: list[dict[str, float]], rnd: Any) -> None:
    """Means over seeds lie between the seeds' extremes, the maximum staleness is the largest,
    and the aggregate (confidence interval included) is the same number for any order of the runs;
    one seed has no interval (NaN), never a half-width of 0."""
    agg = aggregate(runs)
    for k in ("throughput_per_hour", "staleness_mean", "discarded_share"):
        lo, hi = min(r[k] for r in runs), max(r[k] for r in runs)
        assert lo - 1e-9 * abs(lo) <= agg[k] <= hi + 1e-9 * abs(hi)
    assert agg["staleness_max"] == max(r["staleness_max"] for r in runs)
    assert agg["seeds"] == len(runs)
    assert math.isnan(agg["throughput_ci"]) if len(runs) == 1 else agg["throughput_ci"] >= 0
    shuffled = list(runs)
    rnd.shuffle(shuffled)
    again = aggregate(shuffled)
    assert again.keys() == agg.keys()
    for k, v in agg.items():  # NaN == NaN is False: compare as equal-or-both-NaN
        assert again[k] == v or (math.isnan(again[k]) and math.isnan(v)), k


SPEC = PlanSpec(
    gpu=GPUS["h100-sxm"],
    n_gpus=4,
    model=MODELS["qwen3-0.6b"],
    workload=TokenWorkload(
        response=LogNormalLengths(120.0, 0.6), prompt=64, samples_per_prompt=2, max_response_tokens=400
    ),
    batch_size=16,
    constraints=Constraints(),
    space=Space(placement=(0, 1, 2), eta=(0, 1), update=("drain", "partial")),
    steps=2,
    screen_steps=2,
    seeds=1,
    max_model_len=2048,
    max_num_seqs=16,
)


@settings(max_examples=4)
@given(
    st.builds(
        Design,
        trainer_gpus=st.integers(0, 2),
        eta=st.integers(0, 1),
        update=st.sampled_from(["drain", "partial"]),
    ),
    st.integers(0, 2**16),
)
def test_a_design_evaluated_twice_with_one_seed_gives_the_same_numbers(d: Design, seed: int) -> None:
    """The planner compares designs run by run: each run must be a function of (design, steps, seed)."""
    a, z = run_design(SPEC, d, 2, seed), run_design(SPEC, d, 2, seed)
    assert a.keys() == z.keys()
    for k, v in a.items():
        assert v == z[k] or (isinstance(v, float) and math.isnan(v) and math.isnan(z[k])), k


@settings(max_examples=5)
@given(st.lists(policy_scenarios(), min_size=2, max_size=3), st.randoms(use_true_random=False))
def test_a_sweep_cell_is_its_scenario_run_alone_in_any_order(scs: list[pipesim.Scenario], rnd: Any) -> None:
    """Each row of a sweep is ``run(scenario).summary()`` of its cell, whatever the order of the
    designs and whatever else the sweep holds."""
    designs = {f"d{i}": sc for i, sc in enumerate(scs)}
    names = list(designs)
    rnd.shuffle(names)
    with ThreadPoolExecutor(2) as ex:
        res = sweep({n: designs[n] for n in names}, executor=ex, progress=False, timeout_s=None)
    rows = res.runs.set_index("design")
    assert sorted(rows.index) == sorted(designs)
    for name, sc in designs.items():
        direct = pipesim.run(sc).summary()
        row = rows.loc[name]
        assert row["status"] == "ok"
        for k in ("sim_time_s", "throughput_per_hour", "staleness_mean", "episodes_launched", "lost_work_s"):
            assert row[k] == direct[k], (name, k)
