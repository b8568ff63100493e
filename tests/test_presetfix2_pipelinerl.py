"""PipelineRL with ``attempts`` > 1: one pipesim episode is one rollout (``systems:pipelinerl``).

PipelineRL (HEAD 58d3934) ``actor.py`` ``schedule_rollouts`` gives each attempt its own slot
(``llm_max_rollouts``) and its own version tag, and publishes a group once its last attempt
finishes. The preset made one episode a whole group with one duration draw: at 64 rollout slots
and 64 samples per step it ran 758 samples/h at ``max_lag`` 0 where per-rollout episodes with
whole groups run 459/h (+65%), 1,895 against 1,030 at 64 and 2,143 against 1,618 at 128.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest

import pipesim
from pipesim.core.validate import FieldError
from pipesim.policies.groups import WholeGroups
from pipesim.policies.systems import PipelineRLLag
from pipesim.testing import check_invariants
from scenarios import systems

GROUPED: dict[str, Any] = dict(n_slots=16, batch_size=16, train_time_s=20.0, sync_time_s=5.0, steps=5)


def test_an_episode_is_one_rollout_and_the_trainer_takes_whole_groups() -> None:
    sc = systems.pipelinerl(attempts=4, **GROUPED)
    assert sc.batching == WholeGroups(4) and sc.pipeline.batch_size == 16
    r = pipesim.run(sc)
    check_invariants(r, sc)
    tr = r.trained.merge(r.episode_table[["episode_id", "task_id"]], on="episode_id")
    assert len(tr) == 5 * 16  # batch_size counts samples
    groups = tr.assign(group=tr["task_id"] // 4).groupby("group")
    assert (groups.size() == 4).all() and (groups["step"].nunique() == 1).all()


@pytest.mark.parametrize(("max_lag", "attempts"), [(0, 4), (8, 4), (5, 2), (16, 8)])
def test_groups_start_under_the_lag_bound(max_lag: int, attempts: int) -> None:
    """A group's first attempt starts while groups started < ceil(max_lag / attempts) + (v + 1) G,
    G = batch_size / attempts; its other attempts follow whatever the bound, and the bound is reached."""
    sc = systems.pipelinerl(max_lag=max_lag, attempts=attempts, **GROUPED)
    r = pipesim.run(sc)
    check_invariants(r, sc)
    g_per_update, lag = 16 // attempts, math.ceil(max_lag / attempts)
    eps = r.episode_table
    firsts = eps[eps["task_id"] % attempts == 0]
    assert (firsts["task_id"] // attempts < lag + (firsts["version"] + 1) * g_per_update).all()
    assert (firsts["version"] == 0).sum() == lag + g_per_update  # the bound is reached
    if max_lag == 0:
        assert r.trained["staleness"].max() == 0


def test_the_chapter_sized_run_counts_rollouts_not_groups() -> None:
    """64 rollout slots, 64 samples a step, attempts 8: a group's latency is its slowest attempt's,
    so it runs slower than one draw per group did (758 samples/h at max_lag 0 before)."""
    sc = systems.pipelinerl(max_lag=0, attempts=8, steps=5)
    assert sc.pipeline.n_slots == 64 and sc.batching == WholeGroups(8)
    r = pipesim.run(sc)
    assert len(r.trained) == 5 * 64 and r.trained["staleness"].max() == 0
    assert r.summary()["throughput_per_hour"] < 600  # samples/h


@pytest.mark.parametrize(("batch_size", "attempts"), [(60, 8), (10, 4), (7, 2)])
def test_a_batch_that_is_not_whole_groups_is_refused_naming_attempts(batch_size: int, attempts: int) -> None:
    with pytest.raises(FieldError) as info:
        systems.pipelinerl(attempts=attempts, batch_size=batch_size)
    assert info.value.field == "attempts"


def test_the_lag_policy_itself_refuses_a_batch_of_part_groups() -> None:
    with pytest.raises(FieldError) as info:
        pipesim.Scenario(admission=PipelineRLLag(0, 3))  # the default batch is 64 samples
    assert "attempts" in (info.value.field or "")


@pytest.mark.parametrize("bad", [0, -1, 1.5, "8"])
def test_bad_attempts_are_refused_by_name(bad: Any) -> None:
    with pytest.raises(FieldError) as info:
        systems.pipelinerl(attempts=bad)
    assert info.value.field == "attempts"


def test_the_default_max_lag_is_two_batches_of_samples() -> None:
    assert systems.pipelinerl(attempts=8).admission.max_lag == 128
    assert systems.pipelinerl(attempts=8, batch_size=32).admission.max_lag == 64


@dataclass(frozen=True)
class FormerLag:
    """The lag rule as it was at attempts 1 (``started < ceil(max_lag) + (v + 1) B``)."""

    max_lag: int

    def admits(self, p: Any) -> bool:
        return p.started < self.max_lag + (p.version + 1) * p.batch_size

    def staleness_knob(self) -> str:
        return "max_lag"


@pytest.mark.parametrize("knobs", [{}, {"max_lag": 0}, {"max_lag": 8, "n_slots": 8, "batch_size": 8}])
def test_attempts_one_runs_the_trace_it_ran(knobs: dict[str, Any]) -> None:
    sc = systems.pipelinerl(steps=6, **knobs)
    assert sc.batching == pipesim.Scenario().batching  # no group policy at attempts 1
    ref = sc.with_(admission=FormerLag(sc.admission.max_lag))
    a, b = pipesim.run(sc).episode_table, pipesim.run(ref).episode_table
    cols = ["task_id", "start_s", "end_s", "version", "status"]
    assert a[cols].equals(b[cols])
