"""What a user extending pipesim relies on at the policy port (found by writing policies from the
docs alone): a stateful routing rule routes the same way every run; a written counter is blamed on
the run's policies, not on an innocent batch policy; the property kit names the hint a lying
promise came through, the fields an episode differs in, and the routing rule it suspects; and
its strategies can pin a routing rule."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings

import pipesim
from pipesim import PipelineConfig, Scenario
from pipesim.core.errors import PipelineError
from pipesim.core.port import ReplicaView
from pipesim.policies.replicas import Replicas
from pipesim.testing import InvariantError, check_invariants, check_promises, policy_scenarios, run_trace
from pipesim.testing.promises import policy_names

CFG = PipelineConfig(n_slots=6, batch_size=4, train_time_s=1.0, sync_time_s=1.0, steps=4, max_staleness=1)


class TurnTaker:
    """Round robin with its turn in a plain attribute and no fresh(): state a run leaves behind."""

    def __init__(self) -> None:
        self.turn = 0

    def choose(self, engines: Sequence[ReplicaView]) -> ReplicaView | None:
        for k in range(len(engines)):
            e = engines[(self.turn + k) % len(engines)]
            if e.accepting:
                self.turn += k + 1
                return e
        return None


class LockedTurnTaker(TurnTaker):
    """Cannot be deep-copied (a lock): used as it is."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()


def test_a_routing_rule_with_state_routes_each_run_afresh() -> None:
    sc = Scenario(pipeline=CFG, replicas=Replicas(3, TurnTaker()), seed=5)
    first = run_trace(sc)
    assert first[0] != "error"
    assert run_trace(sc) == first and run_trace(sc) == first  # the turn does not carry over
    assert sc.replicas is not None and sc.replicas.routing.turn == 0  # the user's object untouched
    check_promises(sc)


def test_a_routing_rule_that_cannot_be_copied_still_runs() -> None:
    sc = Scenario(pipeline=CFG, replicas=Replicas(2, LockedTurnTaker()), seed=5)
    check_invariants(pipesim.run(sc), sc)


class WritesStarted(pipesim.CountThrottle):
    def admits(self, p: Any) -> bool:
        if p.version == 2:
            p.started = 0
        return super().admits(p)


def test_a_written_counter_names_the_runs_policies_not_the_batch_policy() -> None:
    with pytest.raises(PipelineError) as info:
        pipesim.run(Scenario(pipeline=CFG, admission=WritesStarted()))
    said = str(info.value)
    assert "WritesStarted" in said and "OldestFinishedFirst" in said and "read-only" in said
    assert "must return every episode" not in said  # the batch policy did nothing wrong


@dataclass(frozen=True)
class ClosedWhileCapped:
    """Caps running episodes, and says closed when at the cap: a lie, since a completion lowers
    ``n_running`` and reopens it."""

    cap: int = 3

    def admits(self, p: Any) -> bool:
        return bool(p.n_running < self.cap and p.started - p.n_dropped < (p.version + 2) * p.batch_size)

    def closed(self, p: Any) -> bool:
        return not self.admits(p)


def test_a_lying_promise_is_named_by_its_hint() -> None:
    sc = Scenario(pipeline=CFG, admission=ClosedWhileCapped(), seed=1)
    with pytest.raises(InvariantError) as info:
        check_promises(sc)
    said = str(info.value)
    assert info.value.invariant == "promises hold"
    assert "ClosedWhileCapped.closed" in said
    if "the episodes" in said:  # the first difference is an episode's: its fields are named
        assert "end_s" in said or "start_s" in said, said


def test_the_suspects_include_the_routing_rule() -> None:
    sc = Scenario(pipeline=CFG, replicas=Replicas(2, TurnTaker()))
    assert "Replicas(routing=TurnTaker)" in policy_names(sc)


@settings(max_examples=10, deadline=None)
@given(policy_scenarios(routings=[TurnTaker()]))
def test_the_strategies_pin_a_routing_rule(scenario: Scenario) -> None:
    assert scenario.replicas is not None and isinstance(scenario.replicas.routing, TurnTaker)
    check_invariants(pipesim.run(scenario), scenario)
