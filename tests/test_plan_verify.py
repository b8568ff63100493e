"""Verify before recommending (issue 43, :mod:`pipesim.plan.verify`): a design whose staleness
verdict rests on the judge's estimate is run ``HORIZON`` times as long on the plan's seeds before it
is recommended; one that breaks a limit there is not recommended, and the outputs say why."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim.plan as plan
from pipesim.compute import LogNormalLengths
from pipesim.plan import report
from pipesim.plan.cache import DiskCache
from pipesim.plan.evaluate import Evaluator, run_design
from pipesim.plan.judge import HORIZON, bound
from pipesim.plan.verify import needs_verification, untested_share, verify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plan import WORK, small_spec  # noqa: E402


def ridge_spec(**changes: object) -> plan.PlanSpec:
    """8 GPUs, a long response tail, eta 0 over-sampled 1.25x: leftover samples carry over, so the
    colocated designs (the fastest) reach a maximum staleness of 2 -- the limit -- on every one of
    5 seeds of 6 steps, often enough for the tail estimate to accept it, and 3 on one seed of 24."""
    spec = small_spec(
        method="grid",
        workload=dataclasses.replace(WORK, response=LogNormalLengths(300.0, 1.2)),
        seeds=5,
        constraints=plan.Constraints(max_staleness=2),
        space=plan.Space(
            placement=(0, 2), eta=(0,), update=("partial", "abort_reprefill"), oversample=(1.25,)
        ),
    )
    return spec.with_(**changes)


@pytest.fixture(scope="module")
def ridge_planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[plan.PlanResult, Path]:
    """``plan.plan(ridge_spec())`` on an empty disk cache, and the cache's folder: the plan the two
    tests below read (neither changes it; the second re-plans on the cache, which adds nothing)."""
    folder = tmp_path_factory.mktemp("ridge_cache")
    return plan.plan(ridge_spec(), with_sensitivity=False, cache=DiskCache(folder)), folder


def test_a_fastest_design_that_breaks_its_limit_at_four_times_the_steps_is_not_recommended(
    ridge_planned: tuple[plan.PlanResult, Path],
) -> None:
    """The colocated designs pass the 6-step judgement (every constraint ``met``) and are the
    fastest, but a run 4x as long breaks the maximum on a seed (checked here independently with
    ``run_design``): they are not recommended, and the text, JSON and DataFrame say why."""
    spec = ridge_spec()
    result, _ = ridge_planned
    assert result.best is not None
    longer = HORIZON * spec.steps
    broke = [e for e in result.full if e.verified.startswith("verified: broke")]
    assert broke, [(e.design, e.verified) for e in result.full]
    for e in broke:
        assert all(state == "met" for state, _ in e.status.values())  # the short judgement passed it
        assert e.throughput > result.best.throughput and not e.feasible
        assert f"broke max_staleness at {longer} steps" in e.verified
        seed = int(e.verified.rsplit("seed ", 1)[1])
        assert run_design(spec, e.design, longer, seed)["staleness_max"] > 2  # the reason is true
    # the recommendation held on every seed 4x as long
    assert result.best.verified == f"held at {longer} steps on seeds 0-4"
    for s in result.sim_seeds():
        assert run_design(spec, result.best.design, longer, s)["staleness_max"] <= 2
    page = report.text(result)
    assert all(e.verified in page for e in broke)
    # the residual risk of a pick held on 5 seeds: (1 - 0.451) ** 5 = 0.05
    assert "the pick held on 5 runs; a run as long may still break it on up to 45% of seeds" in page
    entries = {json.dumps(x["design"]): x for x in report.as_json(result)["full"]}
    for e in broke:
        got = entries[json.dumps(e.design.as_dict())]
        assert got["verified"] == e.verified and got["feasible"] is False
    df = result.frame()
    assert set(df.loc[~df["feasible"] & (df["stage"] == "full"), "verified"]) == {e.verified for e in broke}


def test_a_design_proved_by_a_bound_is_never_rerun_and_the_budget_falls_back_to_one() -> None:
    """With a budget of one verification, the fastest (estimated) design is run 4x as long and
    breaks, the next estimated ones are refused unverified, and the recommendation falls back to
    the fastest design proved by its declared bound (drain), which is never run 4x as long."""
    spec = ridge_spec(
        space=plan.Space(placement=(0, 2), eta=(0,), update=("partial", "drain"), oversample=(1.0, 1.25))
    )
    ev = Evaluator(spec)
    full = ev.evaluate(plan.candidates(spec), spec.steps, spec.seeds)
    proved = [e.design for e in full if not needs_verification(spec, e.design)]
    assert proved and all(bound(spec, d) == 0 for d in proved)
    checked = verify(spec, ev, full, budget=1)
    longer = HORIZON * spec.steps
    rerun = {d for d, steps, _ in ev.cache if steps == longer}
    assert len(rerun) == 1 and not rerun & set(proved)
    feasible = sorted((e for e in checked if e.feasible), key=lambda e: -e.throughput)
    assert feasible and feasible[0].design in proved
    assert feasible[0].verified == "proved by its declared bound"
    above = [e for e in checked if e.throughput > feasible[0].throughput]
    assert above and all(not e.feasible for e in above)
    assert {e.verified.split(":")[0] for e in above} == {"verified", "not verified"}


def test_a_rerun_with_the_cache_does_no_new_long_runs(ridge_planned: tuple[plan.PlanResult, Path]) -> None:
    """The verification runs are counted in the plan's runs and kept in the disk cache: a re-run
    (here with a changed constraint that keeps the same designs) simulates nothing and reaches the
    same verdicts."""
    spec = ridge_spec()
    first, folder = ridge_planned  # plan.plan(spec, with_sensitivity=False, cache=DiskCache(folder))
    n_plain = sum(n * (spec.seeds if st == spec.steps else 1) for st, n in first.rungs)
    verified = [e for e in first.full if e.verified.startswith(("verified:", "held"))]  # those run
    assert first.runs == n_plain + spec.seeds * len(verified) > n_plain
    again = plan.plan(spec.with_(min_full=5), with_sensitivity=False, cache=DiskCache(folder))
    assert again.runs == 0
    assert [(e.design, e.verified) for e in again.full] == [(e.design, e.verified) for e in first.full]


def test_with_no_bound_proved_design_in_full_the_fallback_runs_the_fastest_proved_one() -> None:
    """A full rung of estimated designs only, and no budget: nothing of it is recommended, so the
    fastest fallback design (proved by its bound) is run in full and appended, feasible; the one
    after it is not run."""
    spec = ridge_spec(
        space=plan.Space(placement=(0, 2), eta=(0,), update=("partial", "drain"), oversample=(1.0, 1.25))
    )
    ev = Evaluator(spec)
    estimated = [d for d in plan.candidates(spec) if needs_verification(spec, d)]
    proved = [d for d in plan.candidates(spec) if not needs_verification(spec, d)]
    assert len(proved) == 2
    full = ev.evaluate(estimated, spec.steps, spec.seeds)
    checked = verify(spec, ev, full, budget=0, fallback=proved)
    assert [e.design for e in checked[: len(full)]] == estimated and not any(
        e.feasible for e in checked[: len(full)]
    )
    assert [e.design for e in checked[len(full) :]] == proved[:1]
    assert checked[-1].feasible and checked[-1].verified == "fallback: proved by its declared bound"
    assert not any(d == proved[1] for d, _, _ in ev.cache)  # the next fallback was not needed


def test_when_every_estimated_design_breaks_and_none_is_proved_the_plan_is_infeasible_and_says_why() -> None:
    """Only the two colocated designs, both breaking at 24 steps, and no bound-proved design to
    fall back on: the plan has no recommendation, and its message names the verification."""
    spec = ridge_spec(
        space=plan.Space(placement=(0,), eta=(0,), update=("partial", "abort_reprefill"), oversample=(1.25,))
    )
    try:
        result = plan.plan(spec, with_sensitivity=False)
    except plan.PlanInfeasible as e:
        assert "Verified 4x as long" in str(e) and "broke max_staleness at 24 steps" in str(e)
        assert e.result.best is None and all(x.verified for x in e.result.full)
    else:
        raise AssertionError(f"recommended {result.best.design if result.best else None}")


class _Longer:
    """An evaluator stand-in for verification: design i's long runs break the maximum when i is
    below ``first_holding`` (the faster designs break); it counts the designs it ran."""

    def __init__(self, spec: plan.PlanSpec, first_holding: int) -> None:
        self.spec, self.first_holding, self.ran = spec, first_holding, []

    def seeds(self, n: int) -> list[int]:
        return list(range(n))

    def evaluate(self, designs, steps, n_seeds, desc=""):  # type: ignore[no-untyped-def]
        from pipesim.plan.evaluate import Evaluated

        (d,) = designs
        self.ran.append(d)
        top = 5.0 if d.trainer_gpus < self.first_holding else 1.0
        run = {"staleness_mean": 0.1, "staleness_max": top, "discarded_share": 0.0}
        return [Evaluated(d, steps, [run] * n_seeds)]


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 40), first=st.integers(0, 41), budget=st.integers(0, 8))
def test_verification_bisects_for_the_fastest_design_that_holds(n: int, first: int, budget: int) -> None:
    """Designs 0..n-1, fastest first, the first ``first`` breaking 4x as long: verification runs at
    most ``budget`` designs, recommends only a design that held, refuses every faster one, and with
    ``1 + ceil(log2(n))`` verifications finds exactly the fastest design that holds."""
    from unittest import mock

    from pipesim.plan.evaluate import Evaluated
    from pipesim.plan.verify import _check

    spec = small_spec(constraints=plan.Constraints(max_staleness=2))
    full = [
        Evaluated(plan.Design(i), spec.steps, [], {"throughput_per_hour": 1000.0 - i}, True) for i in range(n)
    ]
    ev = _Longer(spec, first)
    out = {e.design: e for e in full}  # as verify() hands it over
    with mock.patch("pipesim.plan.verify.needs_verification", return_value=True):
        found = _check(spec, ev, full, budget, out)  # type: ignore[arg-type]
    assert len(ev.ran) <= budget and len(set(ev.ran)) == len(ev.ran)
    feasible = [e for e in full if out[e.design].feasible]
    best = min(feasible, key=lambda e: e.design.trainer_gpus) if feasible else None
    assert found == (best is not None)
    if best is not None:
        assert best.design in ev.ran and best.design.trainer_gpus >= first  # it was run, and held
        assert all(not out[e.design].feasible for e in full[: best.design.trainer_gpus])
    if budget >= 1 + math.ceil(math.log2(n)):  # enough to bisect all the way
        assert (best.design.trainer_gpus if best else n) == min(first, n)


class _Slice:
    """A stand-in evaluator for one slice of splits 1..n-1: a full run is feasible with throughput
    rising with the split; a run ``HORIZON`` x as long breaks the maximum from split ``first_broken``
    up (staleness rises with the trainer's share)."""

    def __init__(self, spec: plan.PlanSpec, first_broken: int) -> None:
        self.spec, self.first_broken, self.full, self.long = spec, first_broken, [], []

    def seeds(self, n: int) -> list[int]:
        return list(range(n))

    def evaluate(self, designs, steps, n_seeds, desc=""):  # type: ignore[no-untyped-def]
        from pipesim.plan.evaluate import Evaluated

        (d,) = designs
        if steps == self.spec.steps:
            self.full.append(d)
            return [Evaluated(d, steps, [], {"throughput_per_hour": 1000.0 + d.trainer_gpus}, True)]
        self.long.append(d)
        top = 5.0 if d.trainer_gpus >= self.first_broken else 1.0
        run = {"staleness_mean": 0.1, "staleness_max": top, "discarded_share": 0.0}
        return [Evaluated(d, steps, [run] * n_seeds)]


@settings(max_examples=100, deadline=None)
@given(n=st.integers(3, 40), first=st.integers(1, 40), budget=st.integers(0, 7))
def test_a_broken_slice_is_bisected_for_its_largest_split_that_holds(n: int, first: int, budget: int) -> None:
    """The slice's top split n-1 broke 4x as long (splits from ``first`` up break): ``along_slices``
    runs at most ``budget`` new designs, all below the broken one, marks each as it verified, and
    with ``ceil(log2(n))`` designs finds the largest split that holds (split ``first - 1``)."""
    from pipesim.plan.evaluate import Evaluated
    from pipesim.plan.verify import along_slices

    first = min(first, n - 1)
    spec = small_spec(constraints=plan.Constraints(max_staleness=2))
    pool = [plan.Design(k, 1, 0, "partial") for k in range(1, n)]
    top = Evaluated(
        pool[-1], spec.steps, [], {"throughput_per_hour": 1e6}, False, verified="verified: broke it"
    )
    ev = _Slice(spec, first)
    out = along_slices(spec, ev, [top], pool, budget=budget)  # type: ignore[arg-type]
    added = out[1:]
    assert len(added) == len(ev.full) <= budget and len({e.design for e in added}) == len(added)
    assert all(e.design.trainer_gpus < n - 1 for e in added)
    for e in added:
        assert e.feasible == (e.design.trainer_gpus < first)
        assert e.verified.startswith("held" if e.feasible else "verified: broke")
    if budget >= math.ceil(math.log2(n)):
        held = [e.design.trainer_gpus for e in added if e.feasible]
        assert max(held, default=0) == first - 1


def test_a_maximum_only_the_tail_doubts_is_open_and_verified_on_twice_the_seeds() -> None:
    """A full run whose maximum sits at the limit with many samples there met the limit but was
    refused on the tail alone (the README's plan spec under max_staleness = 3 passed over a design
    holding exactly 3 for 384 steps). It is now open, and verification runs it HORIZON x as long on
    twice the seeds; it is recommended if every one of them holds."""
    from pipesim.plan.evaluate import Evaluated
    from pipesim.plan.judge import judge
    from pipesim.plan.verify import _check, tail_open

    spec = small_spec(steps=12, seeds=3, constraints=plan.Constraints(max_staleness=3))
    d = plan.Design(4, 1, 0, "partial", oversample=1.25)
    m = {
        "staleness_mean": 0.2,
        "staleness_max": 3.0,
        "at_max": 93.0,
        "below_max": 175.0,
        "episodes_trained_run": 6144.0,
        "seeds": 3.0,
        "discarded_share": 0.0,
    }
    status = judge(spec, d, 12, m)
    assert status["max_staleness"][0] == "open"  # met by the runs, doubted by the tail
    assert judge(spec, d, 12, {**m, "staleness_max": 11.0})["max_staleness"][0] == "violated"  # growing
    e = Evaluated(d, 12, [], {**m, "throughput_per_hour": 1000.0}, False, status)
    assert tail_open(spec, e)
    ev = _Longer(spec, first_holding=0)  # every run 4x as long holds
    out = {d: e}
    assert _check(spec, ev, [e], 3, out)  # type: ignore[arg-type]
    assert out[d].feasible and out[d].verified == "held at 48 steps on seeds 0-5"
    broken = _Longer(spec, first_holding=99)  # ... or breaks: refused with the reason
    out = {d: e}
    assert not _check(spec, broken, [e], 3, out)  # type: ignore[arg-type]
    assert not out[d].feasible and out[d].verified.startswith("verified: broke max_staleness")


@given(st.integers(1, 10_000))
def test_the_untested_share_is_the_exact_bound_for_no_failures(runs: int) -> None:
    """At the share :func:`untested_share` gives, ``runs`` runs all hold with probability 5%
    exactly, and more runs narrow it."""
    p = untested_share(runs)
    assert 0 < p < 1
    assert math.isclose((1 - p) ** runs, 0.05, rel_tol=1e-9)
    assert untested_share(runs + 1) < p
