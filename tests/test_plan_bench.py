"""``benchmarks/bench_plan.py --reference --sample TOP DRAW``: the designs of the reduced check.

The check is reported as a sample, so what it runs must be exactly what it says: the pick first,
then the plan's best full-run designs by throughput, then distinct designs drawn from the space by
the seeded generator (the same seed, the same designs)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim.plan as plan
from benchmarks.bench_plan import sampled
from tests.test_plan import small_spec


@settings(max_examples=30, deadline=None)
@given(data=st.data(), top=st.integers(0, 6), draw=st.integers(0, 40), seed=st.integers(0, 2**16))
def test_the_sample_is_the_pick_the_plans_best_and_distinct_draws(
    data: st.DataObject, top: int, draw: int, seed: int
) -> None:
    spec = small_spec()
    space = plan.candidates(spec)
    full_designs = data.draw(st.lists(st.sampled_from(space), min_size=1, max_size=8, unique=True))
    speeds = data.draw(st.lists(st.floats(1.0, 1e6), min_size=len(full_designs), max_size=len(full_designs)))
    full = [SimpleNamespace(design=d, throughput=v) for d, v in zip(full_designs, speeds, strict=True)]
    best = data.draw(st.sampled_from(full))
    result = SimpleNamespace(best=best, full=full)

    chosen = sampled(spec, result, top, draw, seed)  # type: ignore[arg-type]

    assert len(chosen) == len(set(chosen))  # no design twice
    assert set(chosen) <= set(space)
    assert chosen[0] == best.design  # the pick is always in the check
    head = max(1, min(top, len(full)))
    others = [e.design for e in sorted(full, key=lambda e: -e.throughput) if e.design != best.design]
    assert chosen[1:head] == others[: head - 1]  # then the plan's best, fastest first
    assert len(chosen) == head + min(draw, len(space) - head)
    again = sampled(spec, result, top, draw, seed)  # type: ignore[arg-type]
    assert again == chosen  # seeded: reproducible


@settings(max_examples=20, deadline=None)
@given(data=st.data(), top=st.integers(0, 4), draw=st.integers(0, 12), fluid=st.integers(1, 12))
def test_the_fluid_addition_is_the_best_ceilings_left_and_keeps_the_draw(
    data: st.DataObject, top: int, draw: int, fluid: int
) -> None:
    """``--sample-fluid N`` appends the N designs with the highest fluid ceiling not already in the
    sample, and leaves the pick, the plan's best and the seeded draw as they were."""
    from pipesim.plan.fluid import ceiling

    spec = small_spec()
    space = plan.candidates(spec)
    designs = data.draw(st.lists(st.sampled_from(space), min_size=1, max_size=4, unique=True))
    full = [SimpleNamespace(design=d, throughput=float(i + 1)) for i, d in enumerate(designs)]
    result = SimpleNamespace(best=full[0], full=full)

    base = sampled(spec, result, top, draw, 43)  # type: ignore[arg-type]
    more = sampled(spec, result, top, draw, 43, fluid=fluid)  # type: ignore[arg-type]

    assert more[: len(base)] == base
    added = more[len(base) :]
    assert len(added) == min(fluid, len(space) - len(base)) and not set(added) & set(base)
    ceilings = {d: ceiling(spec, d) for d in space}
    left = [d for d in space if d not in more]
    assert all(ceilings[a] >= ceilings[d] for a in added for d in left)  # the best ceilings left


def test_the_staged_reference_finds_what_the_exhaustive_grid_finds() -> None:
    """``benchmarks/plan_reference.py`` skips runs: exactly where a run already broke the maximum,
    and below a first-seed floor. With a margin that leaves the floor at zero, its feasible designs
    must be the exhaustive grid's (every design on every seed), and its ``HORIZON`` x check must
    agree with a run of every seed at that length.

    The grid's runs are its own evaluator's, and the longer runs' check is computed apart, with
    :func:`run_design`; the second reference (no margin) reuses the first one's evaluator: a run
    is a pure function of design, steps and seed, keyed by all three, and what that reference
    checks is which designs its floor keeps, not the runs a second time (the first, on an empty
    evaluator, needs every run its stages ask for)."""
    from benchmarks.plan_reference import staged_reference
    from pipesim.plan.evaluate import Evaluator, run_design
    from pipesim.plan.judge import HORIZON
    from pipesim.plan.verify import broken

    # 24 designs (abort-reprefill left out of small_spec's 36): as many kinds of each stage's
    # outcome as the 36 give -- designs leaving on the first seed's maximum (8), designs judged
    # infeasible on all seeds (8) and feasible ones (8), every one of these ahead of the pick and
    # run HORIZON x as long, and a floor keeping half of them -- at two thirds of the runs
    space = plan.Space(placement=(0, 2, 4, 6), eta=(0, 1, 2), update=("drain", "partial"), oversample=(1.0,))
    spec = small_spec(constraints=plan.Constraints(mean_staleness=0.9, max_staleness=2), seeds=3, space=space)
    naive = Evaluator(spec).evaluate(plan.candidates(spec), spec.steps, 3)
    feasible = sorted((e for e in naive if e.feasible), key=lambda e: -e.throughput)
    assert 0 < len(feasible) < len(naive)  # the limits bind: some designs leave exactly
    pick = min(naive, key=lambda e: e.throughput).design  # the slowest: others beat it, C runs

    ev = Evaluator(spec)
    ref = staged_reference(spec, ev, pick, 3, margin=1e9)

    assert [e.design for e in ref.feasible] == [e.design for e in feasible]
    assert [e.throughput for e in ref.feasible] == [e.throughput for e in feasible]
    assert ref.ahead, "the check of the longer runs was not exercised"
    longer = spec.steps * HORIZON
    for e in ref.ahead:
        runs = [run_design(spec, e.design, longer, s) for s in range(spec.sim_seed, spec.sim_seed + 3)]
        holds = broken(spec, runs, longer, list(range(3))) is None
        assert holds == (e in ref.holding), e.design
        assert holds == (e.design not in ref.broke)
    assert ref.reading2 == (not ref.holding)

    # with no margin, the designs left are the feasible ones whose first seed reaches 1.05 x pick
    tight = staged_reference(spec, ev, pick, 3, margin=0.0)
    floor = 1.05 * ref.pick.throughput
    kept = [e.design for e in feasible if e.runs[0]["throughput_per_hour"] >= floor]
    assert [e.design for e in tight.feasible] == kept
    assert 0 < len(kept) < len(feasible)  # the floor binds: it keeps some feasible designs, not all


@pytest.mark.parametrize("text", ["", "1,2", "a,1,0,drain", "1,1,0,drain,x", "1,1,0,drain,1,2"])
def test_a_bad_pick_is_refused_naming_the_option(text: str) -> None:
    import argparse

    from benchmarks.plan_reference import parse_pick

    with pytest.raises(argparse.ArgumentTypeError) as err:
        parse_pick(text)
    assert str(err.value).startswith("--pick ")


def test_a_pick_reads_back_as_the_design_it_names() -> None:
    from benchmarks.plan_reference import parse_pick

    assert parse_pick("30, 2, 0, drain, 1.25") == plan.Design(30, 2, 0, "drain", oversample=1.25)
    assert parse_pick("0,1,1,partial") == plan.Design(0, 1, 1, "partial")
