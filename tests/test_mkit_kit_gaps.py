"""The kit's checks where a mutation audit found no test watching: the tightest of several promised
staleness bounds, a run that stalls both ways, state a policy keeps on itself when the runs still
agree, and a promise answered with a NumPy bool.

Each test fails on one mutant of :mod:`pipesim.testing` (named in its docstring) and passes on the
real kit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import pipesim
from pipesim.policies.batching import DropStale
from pipesim.testing import InvariantError, check_invariants, check_promises, promised_staleness_bound


@dataclass(frozen=True)
class Lies:
    """Starts up to 3 versions ahead, yet promises a staleness bound of 0."""

    def admits(self, p: Any) -> bool:
        return bool(p.started < (p.version + 3) * p.batch_size)

    def staleness_bound(self, scenario: Any) -> int:
        return 0


def test_the_tightest_of_two_promised_bounds_is_the_one_checked() -> None:
    """Two policies promise a bound: ``Lies`` 0 (broken), ``DropStale`` eta = 3 (kept). The kit
    holds the run to the tighter, 0, and fails it (a mutant taking the looser, ``max``, passed)."""
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=8, batch_size=4, steps=4, max_staleness=3),
        admission=Lies(),
        batching=DropStale(),
    )
    r = pipesim.run(sc)
    own = DropStale().staleness_bound(sc)
    assert own is not None and own > 0, "DropStale promises a bound of its own, looser than 0"
    assert promised_staleness_bound(r) == min(0, own) == 0
    assert r.trained["staleness"].max() > 0, "the run breaks the bound of 0"
    with pytest.raises(InvariantError) as err:
        check_invariants(r, sc)
    assert err.value.invariant == "promised staleness bound"


@dataclass(frozen=True)
class StartsTwo:
    """Admits two episodes in all: a batch of 4 never fills, so every run stalls."""

    def admits(self, p: Any) -> bool:
        return bool(p.started < 2)


def test_a_run_that_stalls_both_ways_is_named_not_passed() -> None:
    """The runs with and without the shortcuts both stop with the same stall: the traces agree,
    yet no promise has been put to the test. The kit names it "the run completes" (a mutant that
    took two equal errors for a pass returned silently)."""
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=2), admission=StartsTwo()
    )
    with pytest.raises(InvariantError) as err:
        check_promises(sc)
    assert err.value.invariant == "the run completes"
    assert "stall" in str(err.value)


@dataclass(frozen=True)
class Counting:
    """Appends every start it sees to a list on itself: the runs agree, the policy changes."""

    seen: list[int] = field(default_factory=list)

    def admits(self, p: Any) -> bool:
        self.seen.append(p.started)
        return bool(p.started < (p.version + 1) * p.batch_size)


def test_state_kept_on_a_policy_is_named_even_where_the_runs_agree() -> None:
    """The runs agree (``seen`` is never read), so only the final look at the policy's attributes
    finds the change, and a changed value (not an added or removed attribute) must count (two
    mutants: the final look dropped; values compared by key only)."""
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=2, steps=2), admission=Counting()
    )
    with pytest.raises(InvariantError) as err:
        check_promises(sc)
    assert err.value.invariant == "policies keep no state between runs"
    assert "Counting.seen" in str(err.value)


@dataclass(frozen=True)
class NumpyDrain(pipesim.Drain):
    """Drain, whose single-version promise is a NumPy bool (as a comparison of arrays gives)."""

    def single_version(self, scenario: Any) -> Any:
        return np.bool_(True)


def test_a_numpy_bool_promise_is_well_formed() -> None:
    """``np.bool_(True)`` is a bool to the kit: the run of a drain passes (a mutant accepting only
    Python's ``bool`` failed it as a malformed promise)."""
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=2, steps=3, max_staleness=1),
        admission=pipesim.CountThrottle(),
        weight_update=NumpyDrain(),
        durations=pipesim.ExponentialDurations(10.0),
        seed=1,
    )
    assert not isinstance(NumpyDrain().single_version(sc), bool)
    check_invariants(pipesim.run(sc), sc)
