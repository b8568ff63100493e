"""A run spec's task pool is bounded by MAX_DURATION_POOL with the engines' sequences counted: a
run past it is a PlanError naming the steps key and the most steps the design may run (the
engines' 12,288 sequences, not the pipeline's default 64), before any run; the most it names
builds and takes the engines' slots."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipesim.compute.cluster import Cluster
from pipesim.core.errors import MAX_DURATION_POOL
from pipesim.plan.build import engine_config, max_steps, pool_tasks, scenario
from pipesim.plan.checks import PlanError
from pipesim.plan.runspec import load, run

SPEC = Path(__file__).resolve().parent.parent / "examples" / "run_qwen3_8b.toml"


def _slots(rs: object) -> int:
    spec, d = rs.plan, rs.design  # type: ignore[attr-defined]
    eng = engine_config(spec, d.tp)
    c = Cluster(engine=eng, n_gpus=spec.n_gpus, trainer_gpus=d.trainer_gpus, env_workers=spec.env_workers)
    return int(c.n_replicas * eng.max_num_seqs)


def test_one_step_past_the_pool_is_refused_naming_steps_and_the_bound() -> None:
    rs = load(SPEC)
    slots = _slots(rs)
    top = max_steps(rs.plan, rs.design, slots)
    assert pool_tasks(rs.plan, rs.design, top, slots) <= MAX_DURATION_POOL
    assert pool_tasks(rs.plan, rs.design, top + 1, slots) > MAX_DURATION_POOL
    with pytest.raises(PlanError) as info:  # at load now (check_run_pool), at the run before
        run(load(SPEC, [f"run.steps={top + 1}"]))
    assert info.value.field == "run.steps"  # the run spec's key, not the plan's search.steps
    assert f"at most {top:,} steps" in str(info.value) and f"{slots:,}" in str(info.value)
    assert "n_slots" not in str(info.value) and "pool_size" not in str(info.value)
    with pytest.raises(PlanError) as named:
        scenario(rs.plan, rs.design, top + 1, 0, n_slots=slots, steps_key="run.steps")
    assert named.value.field == "run.steps" and str(named.value).startswith("run.steps")


def test_the_most_steps_builds_with_the_engines_slots() -> None:
    rs = load(SPEC)
    slots = _slots(rs)
    top = max_steps(rs.plan, rs.design, slots)
    sc = scenario(rs.plan, rs.design, top, 0, n_slots=slots)
    assert sc.with_(n_slots=slots).default_pool_size <= MAX_DURATION_POOL  # what run_compute builds


@pytest.mark.parametrize("sets", [["design.oversample=1.5"], ["design.update=abort"]])
def test_a_pool_beyond_the_count_throttles_is_bounded_too(sets: list[str]) -> None:
    rs = load(SPEC, sets)
    slots = _slots(rs)
    top = max_steps(rs.plan, rs.design, slots)
    sc = scenario(rs.plan, rs.design, top, 0, n_slots=slots)
    assert sc.pool_size == pool_tasks(rs.plan, rs.design, top, slots) <= MAX_DURATION_POOL
    with pytest.raises(PlanError, match=f"at most {top:,} steps"):
        scenario(rs.plan, rs.design, top + 1, 0, n_slots=slots)
