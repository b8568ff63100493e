"""A pool that is certainly too small is refused naming the field that sets it, and a trace given
as a list keeps its scenario hashable (a user's walkthrough).

* ``Scenario(pool_size=5)`` for a run that trains 64 episodes ran until the pool was spent, then
  raised a PipelineError naming no field that advised to "set pool_size", which was set;
* ``simulate_pipeline`` on too few durations gave the same advice, though it has no pool_size;
* ``TraceDurations(values=[...])`` kept the list (``hash(scenario)`` raised TypeError), and
  ``TraceDurations.from_values`` flattened a 2-D array and read booleans as 1.0 and 0.0.

The rows follow tests/test_refusals_core.py: the exception type and the field, never the sentence.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim import (
    LogNormalDurations,
    PipelineConfig,
    PipelineError,
    Scenario,
    TraceDurations,
    simulate_pipeline,
)
from pipesim.core.validate import FieldError
from pipesim.results.columns import S_TRAINED
from pipesim.testing.strategies import policy_scenarios
from tests.test_refusals_core import check_refusal

Row = tuple[str, Callable[[], Any], type[BaseException], str]

WALK = PipelineConfig(n_slots=16, batch_size=16, train_time_s=20, sync_time_s=2, max_staleness=1, steps=4)
"""The walkthrough's pipeline: steps 4 x batch_size 16 = 64 trained tasks; the default pool is 112."""


def _walk(pool_size: int | None) -> Scenario:
    return Scenario(pipeline=WALK, durations=LogNormalDurations(20, 0.8), pool_size=pool_size)


POOL: list[Row] = [
    ("run-pool_size-5", lambda: pipesim.run(_walk(5)), FieldError, "pool_size"),
    ("run-pool_size-one-short", lambda: pipesim.run(_walk(63)), FieldError, "pool_size"),
    ("run-with_-steps-outgrow", lambda: pipesim.run(_walk(64).with_(steps=5)), FieldError, "pool_size"),
    ("simulate-empty", lambda: simulate_pipeline([], 16, 16, 10, 1), FieldError, "durations"),
    ("simulate-one-short", lambda: simulate_pipeline([10.0] * 159, 16, 16, 10, 1), FieldError, "durations"),
    ("run-given-too-few", lambda: pipesim.run(_walk(None), [10.0] * 63), FieldError, "durations"),
    (  # durations given override the scenario's pool_size: they are what is named
        "run-given-too-few-beside-a-pool_size",
        lambda: pipesim.run(_walk(500), [10.0] * 10),
        FieldError,
        "durations",
    ),
]

TRACE: list[Row] = [
    ("from_values-2d", lambda: TraceDurations.from_values(np.zeros((2, 2))), FieldError, "values"),
    ("from_values-3d", lambda: TraceDurations.from_values(np.ones((1, 2, 2))), FieldError, "values"),
    ("from_values-scalar", lambda: TraceDurations.from_values(5.0), FieldError, "values"),  # type: ignore[arg-type]
    ("from_values-nested-list", lambda: TraceDurations.from_values([[1.0, 2.0]]), FieldError, "values"),
    ("from_values-bools", lambda: TraceDurations.from_values([True, False]), FieldError, "values"),
    ("from_values-bool-late", lambda: TraceDurations.from_values([1.0, 2.0, False]), FieldError, "values[2]"),
    (
        "from_values-bool-array",
        lambda: TraceDurations.from_values(np.array([True, False])),
        FieldError,
        "values",
    ),
    ("values-2d-array", lambda: TraceDurations(values=np.zeros((2, 2))), FieldError, "values"),  # type: ignore[arg-type]
    ("values-bool-list", lambda: TraceDurations(values=[True, 1.0]), FieldError, "values[0]"),  # type: ignore[arg-type]
    ("values-empty-list", lambda: TraceDurations(values=[]), FieldError, "values"),  # type: ignore[arg-type]
]

ROWS = [(f"pool/{r[0]}", *r[1:]) for r in POOL] + [(f"trace/{r[0]}", *r[1:]) for r in TRACE]


@pytest.mark.parametrize(("call", "kind", "field"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_a_pool_certainly_too_small_and_a_bad_trace_are_refused_naming_the_field(
    call: Callable[[], Any], kind: type[BaseException], field: str
) -> None:
    check_refusal(call, kind, field)


def test_the_refusals_state_the_count_the_run_needs() -> None:
    assert "at least 64" in str(check_refusal(lambda: pipesim.run(_walk(5)), FieldError, "pool_size"))
    err = check_refusal(lambda: simulate_pipeline([], 16, 16, 10, 1), FieldError, "durations")
    assert "at least 160" in str(err) and "pool_size" not in str(err)  # simulate_pipeline has none


def test_a_pool_the_run_certainly_draws_is_not_refused() -> None:
    """At ``steps x batch_size`` the check passes: whether the run completes is the run's to say
    (here it launches more than it trains, and runs dry)."""
    _walk(64).check_pool_size()
    Scenario(pipeline=WALK).check_pool_size()  # pool_size None: the default pool
    assert pipesim.run(_walk(80)).summary()["episodes_trained"] == 64


@given(steps=st.integers(1, 50), batch=st.integers(1, 50), pool=st.integers(1, 3000))
def test_check_pool_size_refuses_exactly_the_pools_below_steps_times_batch(
    steps: int, batch: int, pool: int
) -> None:
    sc = Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=batch, steps=steps), pool_size=pool)
    assert sc.min_pool_size == steps * batch
    if pool < steps * batch:
        check_refusal(sc.check_pool_size, FieldError, "pool_size")
    else:
        sc.check_pool_size()


@settings(max_examples=30)
@given(policy_scenarios())
def test_every_trained_episode_is_a_task_of_its_own(sc: Scenario) -> None:
    """The bound is certain: whatever the policies (drops, relaunches, requeues, failures,
    timeouts, replicas), a run that completes trained ``steps x batch_size`` distinct tasks, so it
    drew at least :attr:`Scenario.min_pool_size` of its pool."""
    try:
        r = pipesim.run(sc)
    except PipelineError:
        return  # a design that cannot finish: nothing trained to count
    c = r.columns
    trained = c.task_id[c.status == S_TRAINED]
    assert len(trained) == len(set(trained.tolist())) == sc.min_pool_size
    assert len(set(c.task_id.tolist())) >= sc.min_pool_size


def test_a_set_pool_that_runs_dry_names_its_pool_size_and_does_not_advise_setting_it() -> None:
    with pytest.raises(PipelineError, match="durations pool exhausted") as info:
        pipesim.run(_walk(64))  # not refused (64 is the count trained) but short of what it launches
    msg = str(info.value)
    assert "pool_size is set to 64" in msg and "set pool_size" not in msg, msg


def test_given_durations_that_run_dry_advise_more_durations_not_a_pool_size() -> None:
    for sc in (_walk(None), _walk(500)):
        with pytest.raises(PipelineError, match="durations pool exhausted") as info:
            pipesim.run(sc, [20.0] * 64)
        msg = str(info.value)
        assert "pass more durations" in msg and "set pool_size" not in msg, msg
    with pytest.raises(PipelineError, match="durations pool exhausted") as info:
        simulate_pipeline([20.0] * 160, 16, 16, 10, 1, max_staleness=1)
    assert "pass more durations" in str(info.value) and "pool_size" not in str(info.value)


def test_a_trace_given_as_a_list_keeps_its_scenario_hashable() -> None:
    trace = TraceDurations(values=[5.0, 6.0, 7.0], cycle=True)  # type: ignore[arg-type]
    assert trace.values == (5.0, 6.0, 7.0) and isinstance(trace.values, tuple)
    sc = _walk(None).with_(durations=trace)
    assert hash(sc) == hash(sc.with_(durations=TraceDurations(values=(5.0, 6.0, 7.0), cycle=True)))
    assert pipesim.run(sc).summary()["episodes_trained"] == 64


@given(
    values=st.lists(st.floats(0, 1e6) | st.integers(0, 10**6), min_size=1, max_size=30), cycle=st.booleans()
)
def test_a_trace_from_any_sequence_equals_and_hashes_as_the_tuple(values: list[float], cycle: bool) -> None:
    from_list = TraceDurations(values=values, cycle=cycle)  # type: ignore[arg-type]
    from_array = TraceDurations(values=np.asarray(values, dtype=np.float64), cycle=cycle)  # type: ignore[arg-type]
    as_tuple = TraceDurations(values=tuple(values), cycle=cycle)
    assert from_list == from_array == as_tuple == TraceDurations.from_values(values, cycle=cycle)
    assert hash(from_list) == hash(from_array) == hash(as_tuple)
    assert isinstance(from_list.values, tuple) and isinstance(from_array.values, tuple)
    assert hash(Scenario(durations=from_list)) == hash(Scenario(durations=as_tuple))


@pytest.mark.parametrize("steps", [5, 1_000, 262_144, 300_000])
def test_the_remedy_for_a_short_pool_is_one_a_pool_may_take(steps: int) -> None:
    """The refusal's advice never names a pool larger than a pool may hold: at 100,000 steps of 64
    it said "set pool_size too (at least 6,400,256)", which pool_size then refused (at most
    4,194,304). Past that, it says no pool can, and what can."""
    from pipesim.core.errors import MAX_DURATION_POOL

    sc = _walk(64).with_(steps=steps)
    with pytest.raises(FieldError) as info:
        sc.check_pool_size()
    assert info.value.field == "pool_size"
    advised = [int(n.replace(",", "")) for n in re.findall(r"at least ([\d,]+)", str(info.value))]
    assert all(n <= MAX_DURATION_POOL for n in advised)
    assert ("no pool can" in str(info.value)) == (steps * WALK.batch_size > MAX_DURATION_POOL)
