"""A policy author's walkthrough (walk3): two errors that blamed the wrong thing.

* a sync yielding ``p.env.timeout(float("nan"))`` (SimPy's own timeout, not the port's checked
  ``p.timeout``) stopped the run with "the simulated clock overflowed ... an episode's end is too
  long for a float", naming no policy: the NaN entry broke SimPy's queue and the clock. The clock
  now refuses a NaN time where the event is made, and the error carries the sync's name;
* a batch policy returning one buffered episode twice in its batch was told the episode "is not
  a buffered episode (returned twice, trained already, dropped, or not from the buffer)", with
  the episode's repr cut inside its end time (``d=6.63s,...22105407715``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pytest

import pipesim
from pipesim import PipelineError
from pipesim.core.clock import Clock
from pipesim.core.episode import Episode
from pipesim.core.errors import MAX_SHOWN_CHARS, shown
from tests.test_batch_identity import TwiceBatch  # its batch repeats its first episode last

CFG = pipesim.PipelineConfig(
    n_slots=16, batch_size=8, train_time_s=20, sync_time_s=5, max_staleness=2, steps=10
)


def scenario(**changes: Any) -> pipesim.Scenario:
    sc = pipesim.Scenario(CFG, pipesim.AgentDurations(tool_median_s=2.0), seed=0)
    return sc.with_(**changes)


@dataclass(frozen=True)
class EnvNaN:
    """A sync that waits on SimPy's own timeout, with a NaN delay."""

    def blocks_admission(self, p: Any) -> bool:
        return bool(p.syncing)

    def sync(self, p: Any) -> Any:
        p.begin_sync(pause=True)
        yield p.env.timeout(float("nan"))
        p.end_sync()


@dataclass(frozen=True)
class DupAcross:
    """Returns the oldest episode in its batch and again as discarded."""

    def select(self, buffer: Any, p: Any) -> Any:
        b = p.batch_size
        if len(buffer) < b:
            return None, []
        batch = buffer[:b]
        del buffer[:b]
        return batch, [batch[0]]


def test_a_nan_timeout_from_a_sync_names_the_sync_not_an_episode() -> None:
    with pytest.raises(ValueError) as info:  # noqa: PT011 - the note and the text are checked below
        pipesim.run(scenario(weight_update=EnvNaN()))
    assert not isinstance(info.value, PipelineError)  # not the clock overflow the run used to report
    assert "overflowed" not in str(info.value) and "nan" in str(info.value)
    assert any("EnvNaN.sync" in note for note in getattr(info.value, "__notes__", []))


def test_the_clock_refuses_a_nan_time_where_the_event_is_made() -> None:
    env = Clock()
    with pytest.raises(ValueError):  # noqa: PT011
        env.timeout(math.nan)
    assert not env.queue  # nothing scheduled: the queue's order is intact
    env.timeout(1.5)
    env.run()
    assert env.now == 1.5  # a number still schedules as SimPy does


@pytest.mark.parametrize(
    ("policy", "where"), [(TwiceBatch(), "twice in its batch"), (DupAcross(), "again as discarded")]
)
def test_an_episode_returned_twice_is_said_to_be_returned_twice(policy: object, where: str) -> None:
    with pytest.raises(PipelineError) as info:
        pipesim.run(scenario(batching=policy))
    msg = str(info.value)
    assert f"batch policy {type(policy).__name__}" in msg and where in msg
    assert "not a buffered episode" not in msg  # it is buffered: the old message contradicted itself
    assert "status=buffered)" in msg  # the repr whole, or cut at a field boundary


def test_a_long_episode_repr_is_cut_at_a_field_boundary() -> None:
    from pipesim.core.errors import episode_shown

    ep = Episode(id=123_456_789, task_id=7, duration_s=6.6273322105407715, version=12, start_s=91.79791234567)
    ep.end_s = 98.42660221054077151
    text = episode_shown(ep)
    assert len(repr(ep)) > MAX_SHOWN_CHARS >= len(text)  # the case: too long whole
    assert text.startswith("Episode(id=123456789, ") and text.endswith(f", status={ep.status})")
    kept = text[len("Episode(") : -len(f", ..., status={ep.status})")].split(", ")
    assert all(f in repr(ep) for f in kept)  # each field shown is whole
    assert episode_shown("x" * 500) == shown("x" * 500)  # anything else as shown() shows it
