"""``BatchThrottle``: the count throttle in whole batches (verl one-step off, slime train_async).

Its promises are checked against the engine with every shortcut off (``check_promises``: its
``closed`` must never say no where a quiet completion could end the batch), and its rule from
the run's own books: no episode of batch k + 1 starts while one of batch k runs, and at each
step the starts stay under the chapter's ``(v + 1 + eta) * B``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim import BatchThrottle, CountThrottle, PipelineConfig, Scenario, run
from pipesim.policies.base import Drain, OldestFinishedFirst, PartialRollout
from pipesim.policies.updates import AbortReprefill, InFlightUpdate, OverlappedSwap
from pipesim.testing import check_invariants, check_promises, policy_scenarios, run_trace

WHOLE = dict(
    admissions=[BatchThrottle()],
    failures=[None],
    with_timeouts=False,
    batchings=[OldestFinishedFirst()],
    weight_updates=st.sampled_from([PartialRollout(), Drain(), OverlappedSwap()])
    | st.builds(AbortReprefill, st.floats(1.0, 100.0), st.floats(10.0, 10_000.0))
    | st.builds(InFlightUpdate, st.floats(0.0, 5.0)),
)


@settings(max_examples=20)
@given(policy_scenarios(**WHOLE))
def test_batch_throttle_keeps_its_promises_and_starts_whole_batches(sc: Scenario) -> None:
    check_promises(sc)  # the engine's shortcuts and the plain engine give one event trace
    r = run(sc)
    check_invariants(r, sc)
    b, eta = sc.pipeline.batch_size, sc.pipeline.max_staleness
    starts = sorted((e.start_s, e.id) for e in r.episodes)
    ends = {e.id: e.end_s for e in r.episodes}
    for _, i in starts:
        k = i // b
        if k >= 1:  # every episode of batch k - 1 had ended (none started later than it)
            prev = [ends[j] for j in range(b * (k - 1), b * k)]
            first = min(e.start_s for e in r.episodes if e.id // b == k)
            assert all(t is not None and t <= first for t in prev)
    for step, started, *_ in r.ledger_log:
        assert started <= (step + 1 + eta) * b


@pytest.mark.parametrize("n_slots", [4, 8, 16])
def test_synchronous_batch_throttle_is_the_count_throttle(n_slots: int) -> None:
    """eta = 0: the count throttle already waits for the trainer's version, which comes only
    after the whole batch finished, so the two rules give one event trace at any slot count."""
    sc = Scenario(pipeline=PipelineConfig(n_slots=n_slots, batch_size=8, steps=5, max_staleness=0), seed=3)
    assert run_trace(sc.with_(admission=BatchThrottle())) == run_trace(sc.with_(admission=CountThrottle()))
