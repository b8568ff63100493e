"""A policy author's walkthrough of the testing kit (walk3): ``check_promises`` names the speed
hint that lies, not every hint the engine acted on.

* a ``ConcurrencyCap.closed`` returning ``not admits(p)`` (a finishing episode lowers
  ``n_running`` and can reopen the rule) was reported as "the hints the engine acted on:
  ConcurrencyCap.closed, OldestFinishedFirst.min_items, PartialRollout.pauses_only";
* a batch policy whose ``min_items`` answers one more than it needs was listed beside
  ``CountThrottle.closed`` and ``PartialRollout.pauses_only``.

Each run is repeated with one hint hidden from the engine (:mod:`pipesim.testing.hint_blame`):
the hint without which the runs agree is the one named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

import pipesim
from pipesim import OldestFinishedFirst
from pipesim.core.port import ClosedHint, MinItemsHint
from pipesim.testing import InvariantError, check_promises

CFG = pipesim.PipelineConfig(
    n_slots=16, batch_size=8, train_time_s=20, sync_time_s=5, max_staleness=2, steps=10
)


@dataclass(frozen=True)
class ConcurrencyCap:
    """At most ``cap`` in flight, within two batches ahead; ``closed`` ignores that a completion
    lowers ``n_running`` (the lie)."""

    cap: int = 3

    def admits(self, p: Any) -> bool:
        return bool(p.started - p.n_dropped < (p.version + 2) * p.batch_size and p.n_running < self.cap)

    def closed(self, p: Any) -> bool:
        return not self.admits(p)


@dataclass(frozen=True)
class TooKeen:
    """Oldest finished first, with a ``min_items`` one higher than it needs (the lie)."""

    def min_items(self, p: Any) -> int:
        return int(p.batch_size) + 1

    def select(self, buffer: Any, p: Any) -> Any:
        return OldestFinishedFirst().select(buffer, p)


@dataclass(frozen=True)
class SelfClosed:
    """An honest rule whose ``admits`` calls its own ``closed``: hiding ``closed`` from the engine
    must leave the policy's own call working."""

    def admits(self, p: Any) -> bool:
        return not self.closed(p)

    def closed(self, p: Any) -> bool:
        return bool(p.started - p.n_dropped >= (p.version + 2) * p.batch_size)


def scenario(**changes: Any) -> pipesim.Scenario:
    sc = pipesim.Scenario(CFG, pipesim.AgentDurations(tool_median_s=2.0), seed=0)
    return sc.with_(**changes)


def failure(sc: pipesim.Scenario) -> str:
    with pytest.raises(InvariantError) as info:
        check_promises(sc)
    assert info.value.invariant == "promises hold"
    return str(info.value)


def test_a_lying_closed_is_named_alone() -> None:
    msg = failure(scenario(admission=ConcurrencyCap(3)))
    assert "ConcurrencyCap.closed" in msg
    assert "OldestFinishedFirst.min_items" not in msg  # kept: not named
    assert "PartialRollout.pauses_only" not in msg  # a built-in's pauses_only only enables the shortcut


def test_a_lying_min_items_is_named_alone() -> None:
    msg = failure(scenario(batching=TooKeen()))
    assert "TooKeen.min_items" in msg
    assert "CountThrottle.closed" not in msg
    assert "PartialRollout.pauses_only" not in msg


def test_two_lying_hints_are_both_named() -> None:
    msg = failure(scenario(admission=ConcurrencyCap(3), batching=TooKeen()))
    assert "ConcurrencyCap.closed" in msg and "TooKeen.min_items" in msg


def test_honest_hints_pass() -> None:
    check_promises(scenario(admission=SelfClosed()))


def test_hiding_a_hint_hides_only_it_from_the_engine() -> None:
    from pipesim.testing.hint_blame import hiding, with_shown

    policy = SelfClosed()
    hidden = hiding(policy, "closed")
    assert not isinstance(hidden, ClosedHint)  # the engine does not see the hint
    assert isinstance(policy, ClosedHint)  # the policy itself is untouched
    assert type(hidden).__name__ == "SelfClosed"  # errors name the class as the user wrote it
    sc = scenario(admission=SelfClosed())
    assert pipesim.run(with_shown(sc, set())).summary() == pipesim.run(sc).summary()
    batching = hiding(TooKeen(), "min_items")
    assert not isinstance(batching, MinItemsHint) and callable(batching.select)
