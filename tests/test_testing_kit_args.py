"""The kit's strategy arguments: a list of objects or a strategy; anything else is refused naming
the argument (one object instead of a list reached Hypothesis as "object has no attribute
'validate'"; an empty list as "Cannot sample from a length-zero sequence")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim.core.validate import FieldError
from pipesim.testing import check_invariants, policy_scenarios, scenarios
from tests.test_refusals_core import check_refusal

BAD: list[tuple[str, Any]] = [
    ("one object", pipesim.CountThrottle()),
    ("empty", []),
    ("a string", "CountThrottle"),
]


@pytest.mark.parametrize(("what", "value"), BAD, ids=[b[0] for b in BAD])
@pytest.mark.parametrize("arg", ["admissions_", "weight_updates_", "batchings_", "failures", "durations"])
def test_policy_scenarios_refuses_what_is_no_list_or_strategy_naming_the_argument(
    arg: str, what: str, value: Any
) -> None:
    check_refusal(lambda: policy_scenarios(**{arg: value}), FieldError, arg)


@pytest.mark.parametrize(("what", "value"), BAD, ids=[b[0] for b in BAD])
@pytest.mark.parametrize("arg", ["admissions", "weight_updates", "batchings"])
def test_scenarios_refuses_what_is_no_list_or_strategy_naming_the_argument(
    arg: str, what: str, value: Any
) -> None:
    check_refusal(lambda: scenarios(**{arg: value}), FieldError, arg)


@dataclass(frozen=True)
class DropOlderThan:
    """A user's batch policy that drops what is more than ``k`` versions old, and says it drops."""

    k: int = 0
    drops_work = True

    def select(self, buffer: list[Any], p: Any) -> tuple[list[Any] | None, list[Any]]:
        old = [e for e in buffer if p.version - e.version > self.k]
        buffer[:] = [e for e in buffer if p.version - e.version <= self.k]
        if len(buffer) < p.batch_size:
            return None, old
        batch = buffer[: p.batch_size]  # finishing order; taken out of the buffer
        del buffer[: p.batch_size]
        return batch, old

    def staleness_bound(self, scenario: Any) -> int:
        return self.k


@settings(max_examples=25, deadline=None)
@given(sc=policy_scenarios(batchings_=st.builds(DropOlderThan, st.integers(0, 2))))
def test_a_user_batch_policy_that_declares_it_drops_work_is_drawn_only_where_runs_can_finish(sc: Any) -> None:
    """Drawn with CountThrottle (dropped episodes count against its cap) or with SyncEveryK(k) at a
    staleness under k - 1 (every episode too old), such a policy stalled on the kit's own draws."""
    r = pipesim.run(sc)
    check_invariants(r, sc)
