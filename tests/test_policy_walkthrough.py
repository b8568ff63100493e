"""What a user's walkthrough of docs/policies.md and the testing kit found, each a policy written
the way a user would write it, checked for the error (its type, and the policy and method it
names) or the kit's verdict (the invariant's name):

* a sync that calls ``end_sync`` without ``begin_sync`` ran, with every sync logged from t = 0;
* a routing rule that keeps the replicas of an earlier run started episodes in a run that was over,
  and the stall that followed blamed the other policies;
* ``check_promises`` passed a scenario whose run fails (both ways failing alike), and blamed an
  unseeded source for a policy that keeps per-run state on itself;
* a pool exhausted at or above the default size advised a smaller pool than the one given;
* a sync that never ends (it waits for a drain while it keeps the engines paused) was reported as
  its ``blocks_admission`` saying True for good.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import pytest

import pipesim
from pipesim import PartialRollout, PipelineError, Replicas
from pipesim.testing import InvariantError, check_promises

CFG = pipesim.PipelineConfig(n_slots=8, batch_size=4, train_time_s=5, sync_time_s=1, steps=4, max_staleness=1)


def small(**changes: Any) -> pipesim.Scenario:
    return pipesim.Scenario(pipeline=CFG, durations=pipesim.ExponentialDurations(10.0)).with_(**changes)


class SwapWithoutBegin(PartialRollout):
    def sync(self, p: Any) -> Generator[Any, Any, None]:
        yield p.timeout(1.0)
        p.end_sync()


class WaitsForADrainWhilePaused(PartialRollout):
    def sync(self, p: Any) -> Generator[Any, Any, None]:
        p.begin_sync(pause=True)
        yield p.drained()  # never: the engines it paused cannot drain
        p.end_sync()


KEPT: dict[str, Any] = {}


@dataclass(frozen=True)
class KeepsTheFirstRunsReplicas:
    def choose(self, engines: Any) -> Any:
        kept = KEPT.setdefault("engines", engines)
        return next((e for e in kept if e.accepting), None)


@dataclass
class CountsItsBatches:
    """Takes the oldest B, and counts its batches on itself (per-run state kept on the policy)."""

    taken: list[int] = field(default_factory=list)

    def select(self, buffer: list[Any], p: Any) -> tuple[list[Any] | None, list[Any]]:
        if len(buffer) < p.batch_size:
            return None, []
        self.taken.append(len(buffer))
        batch = buffer[: p.batch_size]
        del buffer[: p.batch_size]
        return batch, []


@dataclass(frozen=True)
class NeverAdmits:
    def admits(self, p: Any) -> bool:
        return False


@pytest.mark.parametrize(
    ("scenario", "needle"),
    [
        (small(weight_update=SwapWithoutBegin()), "SwapWithoutBegin.sync called end_sync with no sync begun"),
        (small(weight_update=WaitsForADrainWhilePaused()), "WaitsForADrainWhilePaused.sync began a sync"),
    ],
    ids=["end-without-begin", "sync-never-ends"],
)
def test_a_sync_misused_is_named(scenario: pipesim.Scenario, needle: str) -> None:
    with pytest.raises(PipelineError, match=needle):
        pipesim.run(scenario)


def test_a_routing_rule_that_keeps_an_earlier_runs_replicas_is_named() -> None:
    KEPT.clear()
    sc = small(replicas=Replicas(2, KeepsTheFirstRunsReplicas()))
    pipesim.run(sc)
    with pytest.raises(PipelineError, match=r"KeepsTheFirstRunsReplicas\.choose .* a replica of another run"):
        pipesim.run(sc)


def test_check_promises_fails_a_scenario_whose_run_fails() -> None:
    with pytest.raises(InvariantError) as info:
        check_promises(small(admission=NeverAdmits()))
    assert info.value.invariant == "the run completes" and "NeverAdmits" in str(info.value)


def test_check_promises_names_state_a_policy_keeps_on_itself() -> None:
    with pytest.raises(InvariantError) as info:
        check_promises(small(batching=CountsItsBatches()))
    assert info.value.invariant == "policies keep no state between runs"
    assert "CountsItsBatches.taken" in str(info.value)


def test_a_pool_at_the_default_size_that_runs_out_names_where_the_surplus_went() -> None:
    sc = small(admission=pipesim.QueueAhead(1.5), batching=pipesim.DropStale(), max_staleness=0)
    assert sc.pool_size is None or sc.pool_size >= sc.default_pool_size
    with pytest.raises(PipelineError) as info:
        pipesim.run(sc)
    msg = str(info.value)
    assert f"launched all {sc.default_pool_size} tasks" in msg
    assert "DropStale" in msg and "QueueAhead" in msg and "at least" not in msg
