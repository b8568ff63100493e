"""A policy that writes an episode's fields is caught by ``check_invariants`` (pipesim.testing.fields).

Python lets a batch policy write ``ep.version = 0`` on the episodes it is handed; the run goes on
and reports staleness from the written value. The kit replays each field from the run's other
books (the update log, the pauses, the launch order) and names the invariant and the policy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim import OldestFinishedFirst, PartialRollout, PipelineConfig, Scenario
from pipesim.policies.replicas import Replicas
from pipesim.testing import InvariantError, check_invariants, policy_scenarios
from pipesim.testing.fields import _paused_within, episode_field_errors

CFG = PipelineConfig(n_slots=4, batch_size=4, train_time_s=1.0, sync_time_s=1.0, steps=3)
FIELDS = "episodes keep the fields the kernel gave them"


class Editing:
    """Takes the oldest finished episodes, after writing ``field`` on each (``value(ep)``)."""

    def __init__(self, field: str, value: Any) -> None:
        self.field, self.value = field, value

    def select(self, buffer: list[Any], p: Any) -> object:
        got = OldestFinishedFirst().select(buffer, p)
        for ep in got[0] if got and got[0] else []:
            setattr(ep, self.field, self.value(ep))
        return got


EDITS = [
    ("version-0", "version", lambda ep: 0),
    ("version-ahead", "version", lambda ep: ep.version + 1),
    ("start-earlier", "start_s", lambda ep: ep.start_s - 0.5),
    ("duration-halved", "duration_s", lambda ep: ep.duration_s / 2),
    ("end-later", "end_s", lambda ep: ep.end_s + 1.0),
    ("replica-unknown", "replica", lambda ep: 3),
    ("slot-unknown", "slot", lambda ep: 9),
    ("update-from-reset", "update_from", lambda ep: 0),
]


def test_a_renumbered_episode_is_refused_as_the_select_returns_it() -> None:
    """An id written by the batch policy is caught by the buffer's identity check, at the select
    (it was caught by ``check_invariants`` after the run)."""
    with pytest.raises(pipesim.PipelineError, match=r"Editing\.select .*whose id was written"):
        pipesim.run(
            Scenario(
                pipeline=CFG, weight_update=PartialRollout(), batching=Editing("id", lambda ep: ep.id + 1000)
            )
        )


@pytest.mark.parametrize(("field", "value"), [r[1:] for r in EDITS], ids=[r[0] for r in EDITS])
def test_a_written_episode_field_is_named_with_the_policy(field: str, value: Any) -> None:
    result = pipesim.run(
        Scenario(pipeline=CFG, weight_update=PartialRollout(), batching=Editing(field, value))
    )
    with pytest.raises(InvariantError) as info:
        check_invariants(result)
    assert info.value.invariant == FIELDS
    assert "Editing" in str(info.value)


def test_the_same_policy_without_the_edit_passes() -> None:
    """The rows above fail for the edit, not for the policy: with a write of the same value, the
    run passes every invariant."""
    result = pipesim.run(
        Scenario(
            pipeline=CFG, weight_update=PartialRollout(), batching=Editing("version", lambda ep: ep.version)
        )
    )
    check_invariants(result)


def test_versions_are_replayed_per_replica() -> None:
    """Two replicas synced one at a time run different versions at once: each episode's version
    is its own replica's, not the pipeline's."""
    sc = Scenario(
        pipeline=PipelineConfig(
            n_slots=6, batch_size=4, train_time_s=1.0, sync_time_s=2.0, steps=4, max_staleness=2
        ),
        weight_update=PartialRollout(),
        replicas=Replicas(2),
    )
    result = pipesim.run(sc)
    assert not episode_field_errors(result)
    assert len({ep.version for ep in result.episodes}) > 1


@settings(max_examples=60, deadline=None)
@given(policy_scenarios())
def test_no_run_of_the_kernel_breaks_it(sc: Scenario) -> None:
    """Every policy family, timeouts, faults and replicas: the kernel's own fields always agree."""
    assert episode_field_errors(pipesim.run(sc)) == []


intervals = st.lists(
    st.tuples(st.floats(0, 100), st.floats(0, 20)).map(lambda t: (t[0], t[0] + t[1])), max_size=12
)


@settings(max_examples=200, deadline=None)
@given(intervals, st.lists(st.tuples(st.floats(0, 120), st.floats(0, 40)), min_size=1, max_size=8))
def test_paused_time_within_agrees_with_the_pairwise_sum(pauses: list[Any], spans: list[Any]) -> None:
    """The cumulative shortcut (disjoint pauses) and the pairwise sum (overlapping ones) against a
    plain loop over every pause."""
    start = np.array([a for a, _ in spans])
    end = start + np.array([d for _, d in spans])
    want = [sum(max(0.0, min(e, b) - max(s, a)) for s, e in pauses) for a, b in zip(start, end, strict=True)]
    assert np.allclose(_paused_within(pauses, start, end), want, rtol=1e-12, atol=1e-9)
    disjoint, t = [], 0.0
    for s, e in sorted(pauses):
        s = max(s, t)
        if e > s:
            disjoint.append((s, e))
            t = e
    want = [
        sum(max(0.0, min(e, b) - max(s, a)) for s, e in disjoint) for a, b in zip(start, end, strict=True)
    ]
    assert np.allclose(_paused_within(disjoint, start, end), want, rtol=1e-12, atol=1e-9)
