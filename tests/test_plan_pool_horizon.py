"""A plan is refused before its first run when verifying its pick would draw a pool a run refuses.

Verification runs the pick ``HORIZON x search.steps`` steps (``pipesim.plan.verify``); a run whose
task pool passes ``MAX_DURATION_POOL`` is refused by ``plan.build.check_pool``. Before, only the
spec's pool at ``search.steps`` was checked, against the larger ``MAX_POOL_TASKS``, so a plan of
600 steps at a batch of 512 (``examples/agent_plan.toml``) ran its whole search and stopped with a
PlanError at verification. ``plan.build.check_plan_pool`` (called by ``plan.search`` before any
run) is checked here against the run's own bound: the longest accepted plan's every design passes
``check_pool`` at ``HORIZON x steps``, and one more step is refused, naming ``search.steps``. A run
spec is no plan: it still loads on any cluster (``test_bad_input_fuzz``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import pipesim.plan as plan
from pipesim.plan.build import candidates, check_plan_pool, check_pool, design_cluster
from pipesim.plan.checks import HORIZON

AGENT = Path(__file__).resolve().parents[1] / "examples" / "agent_plan.toml"


def _accepted(spec: plan.PlanSpec, steps: int) -> bool:
    at = spec.with_(steps=steps)
    try:
        check_plan_pool(at, candidates(at), HORIZON)
    except plan.PlanError as e:
        assert e.field == "search.steps"
        return False
    return True


def _longest(spec: plan.PlanSpec) -> int:
    lo, hi = spec.steps, 1 << 16
    assert _accepted(spec, lo) and not _accepted(spec, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _accepted(spec, mid) else (lo, mid)
    return lo


def _refused_designs(spec: plan.PlanSpec, steps: int) -> int:
    bad = 0
    for d in candidates(spec):
        eng, cluster = design_cluster(spec, d)
        try:
            check_pool(spec, d, steps, cluster.n_replicas * eng.max_num_seqs)
        except plan.PlanError:
            bad += 1
    return bad


@pytest.mark.parametrize(
    "space",
    [
        {},  # the example's space: tp 1 and 2, oversampling and abort_reprefill
        {"tp": (2,), "oversample": (1.0,)},  # no oversampling: the count throttle's pool
        {"tp": (2, 4), "update": ("abort",), "eta": (3,)},  # abort draws the larger pool
    ],
)
def test_longest_accepted_plan_verifies_within_the_pool(space: dict[str, object]) -> None:
    base = plan.load(AGENT)
    spec = base.with_(space=replace(base.space, **space))
    longest = _longest(spec)
    at = spec.with_(steps=longest)
    assert _refused_designs(at, HORIZON * longest) == 0
    # the bound is tight: a run one plan step longer is refused for some design (within HORIZON)
    assert _refused_designs(at, HORIZON * (longest + 1)) > 0


def test_the_search_refuses_before_its_first_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """``plan.search`` names ``search.steps`` and the most steps allowed, having run nothing."""
    spec = plan.load(AGENT)
    longest = _longest(spec)

    def no_run(*args: object) -> None:
        raise AssertionError("a design was run before the pool was checked")

    monkeypatch.setattr(plan.evaluate, "run_design", no_run)
    with pytest.raises(plan.PlanError) as info:
        plan.search(spec.with_(steps=longest + 1))
    assert info.value.field == "search.steps"
    assert f"at most {longest:,} steps" in str(info.value)
