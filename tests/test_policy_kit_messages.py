"""A policy author's walkthrough of the testing kit (kit63): each failure names the policy and the
method at fault.

* ``check_promises`` on a scenario whose shortcut run stalls (a ``min_items`` of 10**9) named
  neither the batch policy nor its hint: both sides were cut at 200 characters, one of them a raw
  tuple, and the list of hints the engine acted on was left out;
* the stall itself said the batch policy "formed no batch" without the ``min_items`` it answered;
* an exception from a policy's promise (``staleness_bound``, ``max_pause_s``, ``single_version``)
  read by ``check_invariants`` carried no note naming the policy, as one raised during the run does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

import pipesim
from pipesim import OldestFinishedFirst, PartialRollout, PipelineError
from pipesim.testing import InvariantError, check_invariants, check_promises

CFG = pipesim.PipelineConfig(
    n_slots=16, batch_size=8, train_time_s=20, sync_time_s=5, max_staleness=2, steps=10
)
HUGE = 10**9


@dataclass(frozen=True)
class HugeMinItems:
    def select(self, buffer: Any, p: Any) -> Any:
        return OldestFinishedFirst().select(buffer, p)

    def min_items(self, p: Any) -> int:
        return HUGE


@dataclass(frozen=True)
class NoneSelect:
    """Never forms a batch, with an honest-looking min_items."""

    def select(self, buffer: Any, p: Any) -> Any:
        return None, []

    def min_items(self, p: Any) -> int:
        return p.batch_size


def scenario(**changes: Any) -> pipesim.Scenario:
    sc = pipesim.Scenario(CFG, pipesim.AgentDurations(tool_median_s=2.0), seed=0)
    return sc.with_(**changes)


def test_check_promises_names_the_hint_when_one_side_errors() -> None:
    with pytest.raises(InvariantError) as info:
        check_promises(scenario(batching=HugeMinItems()))
    msg = str(info.value)
    assert info.value.invariant == "promises hold"
    assert "HugeMinItems.min_items" in msg  # the hints the engine acted on
    assert "formed no batch" in msg  # the error is whole, not cut before its culprit
    assert "(0, 0, " not in msg  # the run that completed is summarised, not a raw tuple
    assert "trained 80" in msg  # steps * batch_size, the run without the shortcuts


def test_check_promises_quotes_a_long_error_bounded_but_whole() -> None:
    from pipesim.testing.promises import MAX_ERROR_CHARS, _outcome

    words = "word " * (MAX_ERROR_CHARS // 2)
    out = _outcome(("error", words))
    assert len(out) < MAX_ERROR_CHARS + 100
    assert "word wor" not in out.replace("word word", "")  # cut at a word, never inside one
    assert f"{len(words):,} characters" in out
    assert _outcome(("error", "short")).endswith("short")


def test_stall_names_the_min_items_value() -> None:
    with pytest.raises(PipelineError) as info:
        pipesim.run(scenario(batching=HugeMinItems()))
    msg = str(info.value)
    assert "HugeMinItems" in msg and "min_items returned" in msg
    assert f"{HUGE:,}" in msg


def test_stall_blames_select_when_min_items_is_met() -> None:
    with pytest.raises(PipelineError) as info:
        pipesim.run(scenario(batching=NoneSelect()))
    msg = str(info.value)
    assert "NoneSelect" in msg and "select returned None" in msg
    assert f"min_items returned {CFG.batch_size}" in msg


@dataclass(frozen=True)
class BoundBug(PartialRollout):
    def staleness_bound(self, scenario: Any) -> int | None:
        raise RuntimeError("bound bug")


@dataclass(frozen=True)
class PauseBug(PartialRollout):
    def max_pause_s(self) -> float:
        raise RuntimeError("pause bug")


@dataclass(frozen=True)
class SingleBug(PartialRollout):
    def single_version(self, scenario: Any) -> bool:
        raise RuntimeError("single bug")


@pytest.mark.parametrize(
    ("policy", "method"),
    [(BoundBug(), "staleness_bound"), (PauseBug(), "max_pause_s"), (SingleBug(), "single_version")],
)
def test_a_promise_that_raises_is_noted_with_its_policy(policy: Any, method: str) -> None:
    result = pipesim.run(scenario(weight_update=PartialRollout()))
    sc = scenario(weight_update=policy)
    run = pipesim.run(sc)  # the engine does not read these promises: the run completes
    assert run.sim_time_s == result.sim_time_s
    with pytest.raises(RuntimeError, match="bug") as info:
        check_invariants(run)
    notes = getattr(info.value, "__notes__", [])
    assert any(type(policy).__name__ in n and method in n and "weight update" in n for n in notes), notes
