"""A stall's advice to declare ``drops_work`` is for the user's batch policies only.

Filtering with pipesim's ``WholeGroups`` beside ``CountThrottle`` stalls (the throttle counts the
filtered episodes as started); the error named the remedy, then told the user to give
``WholeGroups``, pipesim's own class, the attribute ``drops_work = True``: advice to edit pipesim.
A user's subclass that discards still gets the advice (``pipesim/core/stall.py::_remedies``).
"""

from __future__ import annotations

import pytest

import pipesim
from pipesim.policies.groups import WholeGroups


class MyGroups(WholeGroups):
    """A user's batch policy (in a tests module) that filters as WholeGroups does."""


def _stall(batching: WholeGroups) -> str:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=32, steps=5),
        batching=batching,
        pool_size=3000,
    )
    with pytest.raises(pipesim.PipelineError) as info:
        pipesim.run(sc)
    return str(info.value)


def test_pipesims_own_policy_is_not_told_to_declare_drops_work() -> None:
    msg = _stall(WholeGroups(4, filter_rate=0.3))
    assert "AReaLThrottle" in msg  # the remedy is still named
    assert "drops_work" not in msg


def test_a_users_policy_that_discards_is_told_to_declare_drops_work() -> None:
    msg = _stall(MyGroups(4, filter_rate=0.3))
    assert "MyGroups" in msg and "drops_work = True" in msg
