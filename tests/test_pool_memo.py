"""``check_plan_pool`` memoised (``pipesim.plan.pools.worst_pool``) decides as the loop it replaced.

The loop built every design's engine and cluster for its slot count: 12 s of 767,200 designs
(``examples/plan_qwen3_8b.toml`` at ``cluster.n_gpus = 6400``) before the plan printed more than its
count. A design's slots depend on ``(tp, trainer_gpus)`` alone, its pool verdict on
``pool_key`` alone; here, over sampled spaces, every design's slots and verdict equal those of the
first design sharing its key (the memo's answer), ``check_plan_pool`` raises the same PlanError
(message and key) or none as the unmemoised loop, and ``design_cluster`` is built once per
placement, not once per design.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

import pipesim.plan as plan
import pipesim.plan.build as build
from pipesim.core.errors import MAX_DURATION_POOL
from pipesim.plan.build import candidates, check_plan_pool, design_cluster
from pipesim.plan.checks import HORIZON
from pipesim.plan.pools import max_steps, pool_key, pool_tasks
from pipesim.plan.space import Design, PlanSpec

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plan_qwen3_8b.toml"
BASE = plan.load(EXAMPLE)


def _old_check_plan_pool(spec: PlanSpec, designs: list[Design], horizon: int) -> None:
    """The loop before the memo (HEAD f62a615), verbatim but for the names."""
    steps, worst, fewest = horizon * spec.steps, None, (MAX_DURATION_POOL, 0)
    for d in designs:
        n_slots = design_cluster(spec, d)[1].n_slots
        if pool_tasks(spec, d, steps, n_slots) > MAX_DURATION_POOL:
            top = max_steps(spec, d, n_slots)
            if worst is None or top < fewest[0]:
                worst, fewest = d, (top, n_slots)
    if worst is None:
        return
    if fewest[0] < horizon:
        build.check_pool(spec, worst, steps, fewest[1], "search.steps")
    raise plan.PlanError(
        f"search.steps ({spec.steps:,}): verifying a pick runs it {horizon}x as long ({steps:,} steps), "
        f"and design {worst.label(spec.n_gpus)} would then draw more than the {MAX_DURATION_POOL:,} "
        f"tasks a run may; at most {fewest[0] // horizon:,} steps, or a smaller batch "
        "(workload.prompts_per_step x workload.samples_per_prompt)",
        "search.steps",
    )


def _outcome(check: Any, spec: PlanSpec, designs: list[Design]) -> tuple[str, str] | None:
    try:
        check(spec, designs, HORIZON)
    except plan.PlanError as e:
        return str(e), e.field
    return None


def _verdict(spec: PlanSpec, d: Design, steps: int, n_slots: int) -> int | None:
    """The design's own answer: None where its run fits, else the most steps that do."""
    return max_steps(spec, d, n_slots) if pool_tasks(spec, d, steps, n_slots) > MAX_DURATION_POOL else None


@st.composite
def _specs(draw: st.DrawFn) -> PlanSpec:
    space = replace(
        BASE.space,
        tp=tuple(draw(st.sets(st.sampled_from([1, 2, 4, 8]), min_size=1))),
        eta=tuple(draw(st.sets(st.integers(0, 6), min_size=1, max_size=3))),
        update=tuple(draw(st.sets(st.sampled_from(["drain", "partial", "abort", "inflight"]), min_size=1))),
        sync_every=tuple(draw(st.sets(st.integers(1, 3), min_size=1, max_size=2))),
        oversample=tuple(draw(st.sets(st.sampled_from([1.0, 1.25, 2.0]), min_size=1))),
    )
    # steps and slots around the bound: some plans fit, some are refused by steps, some by slots
    per = draw(st.one_of(st.none(), st.integers(1, 2**12), st.integers(2**16, 2**21)))
    steps = draw(st.integers(1, 2**11))
    try:
        return BASE.with_(
            n_gpus=draw(st.integers(8, 96)),
            space=space,
            steps=steps,
            screen_steps=1,
            episodes_per_replica=per,
            constraints=replace(BASE.constraints, min_trainer_gpus=draw(st.integers(0, 8))),
        )
    except plan.PlanError:  # a spec refused up front (its least pool): no plan to check
        assume(False)
        raise


@settings(max_examples=60, deadline=None)
@given(_specs())
def test_every_designs_verdict_is_its_keys(spec: PlanSpec) -> None:
    """Each design's slots equal the first same-placement design's, its verdict the first same-key one's."""
    designs = candidates(spec)
    steps = HORIZON * spec.steps
    slots: dict[tuple[int, int], int] = {}
    verdicts: dict[tuple[int, int, bool, float], int | None] = {}
    for d in designs:
        try:
            own = design_cluster(spec, d)[1].n_slots
        except plan.PlanError:
            continue  # refused whatever the memo holds (the loop's first such design raises)
        assert slots.setdefault((d.tp, d.trainer_gpus), own) == own
        mine = _verdict(spec, d, steps, own)
        assert verdicts.setdefault(pool_key(d, own), mine) == mine


@settings(max_examples=60, deadline=None)
@given(_specs())
def test_the_memo_decides_as_the_loop(spec: PlanSpec) -> None:
    designs = candidates(spec)
    designs = [*designs, *reversed(designs)]  # order matters for the first worst: both orders
    new = _outcome(check_plan_pool, spec, designs)
    event(f"refused: {None if new is None else new[1]}")
    assert new == _outcome(_old_check_plan_pool, spec, designs)


@pytest.mark.parametrize(
    ("sets", "field"),
    [
        ((), None),  # fits
        (("search.steps=4000",), "search.steps"),  # refused by its steps: the most steps named
        (("model.episodes_per_replica=100000",), "model.episodes_per_replica"),  # slots past MAX_SLOTS
        (("model.max_num_seqs=8192",), "model.max_num_seqs"),  # no step fits
    ],
)
def test_the_example_refuses_as_before(sets: tuple[str, ...], field: str | None) -> None:
    # 256 GPUs: 29,920 designs over 374 placements, each outcome above still reached (640 GPUs, 76,000
    # designs, gave the same four outcomes at 2.5x the cost: the old loop builds every design's cluster)
    spec = plan.load(EXAMPLE, ["cluster.n_gpus=256", *sets])
    designs = candidates(spec)
    new, old = _outcome(check_plan_pool, spec, designs), _outcome(_old_check_plan_pool, spec, designs)
    assert new == old
    assert (None if new is None else new[1]) == field


def test_one_cluster_per_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    """``design_cluster`` is built once per ``(tp, trainer_gpus)``, not once per design."""
    spec = plan.load(EXAMPLE, ["cluster.n_gpus=256"])
    designs = candidates(spec)
    calls: list[Design] = []

    def counted(spec: PlanSpec, d: Design, options: Any = ()) -> Any:
        calls.append(d)
        return design_cluster(spec, d, options)

    monkeypatch.setattr(build, "design_cluster", counted)
    check_plan_pool(spec, designs, HORIZON)
    places = {(d.tp, d.trainer_gpus) for d in designs}
    assert len(designs) > 10 * len(places)
    assert len(calls) == len(places)
    assert {(d.tp, d.trainer_gpus) for d in calls} == places
