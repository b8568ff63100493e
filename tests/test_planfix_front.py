"""The Pareto front within the report's resolution (``pipesim.plan.evaluate.FRONT_TOLERANCE``): a
design printed as fresh as a faster one is no trade-off (a user's walkthrough: an A100 plan put
two slower designs at mean staleness 0.23 beside its pick at 0.23)."""

from __future__ import annotations

import pytest

from pipesim.plan import Design, Evaluated, nondominated
from pipesim.plan.evaluate import FRONT_TOLERANCE, dominates, objectives


def _e(t: int, thr: float, stale: float, disc: float = 0.0) -> Evaluated:
    m = {"throughput_per_hour": thr, "staleness_mean": stale, "discarded_share": disc}
    return Evaluated(Design(trainer_gpus=t, tp=1, eta=0, update="partial"), 12, [], m, True)


def test_designs_within_the_printed_resolution_of_a_faster_one_leave_the_front() -> None:
    pick = _e(0, 5_242.0, 0.2291)
    same_a = _e(1, 5_154.0, 0.2290)  # 0.0001 fresher: printed 0.23 as the pick
    same_b = _e(2, 4_517.0, 0.2289, 0.0004)  # and 0.0 % discarded either way
    fresher = _e(3, 4_000.0, 0.15)  # a real trade-off
    front = nondominated([same_b, fresher, pick, same_a])
    assert [e.design for e in front] == [pick.design, fresher.design]
    # the tolerance is what the report prints: two decimals of staleness, one of a percent
    assert f"{pick.metrics['staleness_mean']:.2f}" == f"{same_b.metrics['staleness_mean']:.2f}"
    assert FRONT_TOLERANCE[1] == pytest.approx(0.01) and FRONT_TOLERANCE[2] == pytest.approx(0.001)


def test_a_chain_of_small_steps_does_not_push_a_much_fresher_design_off() -> None:
    """Each design is 0.009 fresher than the next faster one (within the tolerance), so each is
    dominated by its neighbour; the slowest is 0.018 fresher than the fastest, more than the
    tolerance, and stays on the front."""
    fast, mid, slow = _e(0, 3.0, 0.018), _e(1, 2.0, 0.009), _e(2, 1.0, 0.0)
    assert dominates(objectives(mid.metrics), objectives(slow.metrics), FRONT_TOLERANCE)
    assert not dominates(objectives(fast.metrics), objectives(slow.metrics), FRONT_TOLERANCE)
    assert [e.design for e in nondominated([slow, mid, fast])] == [fast.design, slow.design]
