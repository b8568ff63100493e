"""The kit's timeout cap beside ``DropOverlong`` (:func:`pipesim.testing.adjustments.cap_for`).

``DropOverlong`` drops what a timeout cuts, so a cap below every duration drops every episode and
the pool runs out: a draw that can make no progress, which the kit promises not to draw. A fixed
50 s floor missed ``LogNormalDurations(51.0, 0.0)`` (51 s every time; Hypothesis seed 5 of
``tests/test_presetfix_openrlhf.py`` drew it). The cap now sits above the top of the durations.
"""

from __future__ import annotations

from typing import Any

import pytest

from pipesim import OldestFinishedFirst, PipelineConfig, Scenario, TraceDurations
from pipesim.policies.admission import AReaLThrottle
from pipesim.policies.batching import DropOverlong
from pipesim.policies.faults import Timeout
from pipesim.policies.updates import BatchDrain
from pipesim.testing import check_promises
from pipesim.testing.adjustments import cap_for, upper_s
from pipesim.workload.durations import AgentDurations, ExponentialDurations, LogNormalDurations

TIGHT = Timeout(cap_s=50.0)


def scenario(durations: Any, timeout: Any) -> Scenario:
    cfg = PipelineConfig(n_slots=1, batch_size=1, train_time_s=0, sync_time_s=0, max_staleness=0, steps=1)
    return Scenario(
        cfg,
        durations=durations,
        admission=AReaLThrottle(),
        weight_update=BatchDrain(),
        batching=DropOverlong(),
        pool_size=60,
        timeout=timeout,
    )


def test_a_constant_duration_just_over_50_s_is_not_cut_away() -> None:
    durations = LogNormalDurations(51.0, 0.0)
    timeout = cap_for(DropOverlong(), TIGHT, durations)
    assert timeout.cap_s > 51.0
    check_promises(scenario(durations, timeout))  # was: InvariantError, the durations pool ran out


@pytest.mark.parametrize(
    "durations",
    [
        LogNormalDurations(100.0, 1.5),
        ExponentialDurations(100.0),
        AgentDurations(mean_turns=6.0, max_turns=10),
        TraceDurations((3.0, 80.0, 7.0)),
    ],
)
def test_the_cap_sits_above_the_durations_drawn(durations: Any) -> None:
    top = upper_s(durations)
    assert top is not None and top > 0
    assert cap_for(DropOverlong(), TIGHT, durations).cap_s > top


def test_the_cap_is_left_alone_elsewhere() -> None:
    durations = LogNormalDurations(51.0, 0.0)
    assert cap_for(OldestFinishedFirst(), TIGHT, durations) is TIGHT  # nothing cut is dropped
    assert cap_for(DropOverlong(), None, durations) is None
    wide = Timeout(cap_s=1000.0)
    assert cap_for(DropOverlong(), wide, durations) is wide  # already above the durations
    assert cap_for(DropOverlong(), Timeout(cap_s=5.0)).cap_s == 50.0  # no durations: the floor


def test_no_drawn_cap_sits_below_the_drawn_durations() -> None:
    """The strategy passes its drawn duration model to cap_for: beside DropOverlong no drawn
    timeout cuts every episode of LogNormalDurations(51, 0) (it drew a 50 s cap, and the pool ran
    out)."""
    from hypothesis import find, settings
    from hypothesis import strategies as st
    from hypothesis.errors import NoSuchExample

    from pipesim.testing.strategies import policy_scenarios

    s = policy_scenarios(
        weight_updates=st.just(BatchDrain()),
        batchings=st.just(DropOverlong()),
        durations=st.just(LogNormalDurations(51.0, 0.0)),
    )
    with pytest.raises(NoSuchExample):
        find(
            s,
            lambda sc: sc.timeout is not None and sc.timeout.cap_s <= 51.0,
            settings=settings(max_examples=200, database=None),
        )
