"""A sync step asked for twice within one sync (pipesim.core.port_sync).

A second ``pause_engines`` while the replicas are paused is harmless and keeps the first pause's
start, as a replica's own pause does (``Slots.pause``; ``pause_replica`` twice is the same): the
update record and the events' pause rows span the pause the replicas really took. A second
``begin_sync`` while one is open, and a ``pause_engines`` outside a sync, are refused naming the
weight update: the first would move the sync log's start, the second leave a pause no record holds.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import pytest

import pipesim
from pipesim import PipelineError
from pipesim.testing import check_invariants

CONFIG = pipesim.PipelineConfig(
    n_slots=8, batch_size=4, train_time_s=5, sync_time_s=2, max_staleness=1, steps=4
)


def run(weight_update: object) -> Any:
    return pipesim.run(pipesim.Scenario(pipeline=CONFIG, weight_update=weight_update, seed=0))  # type: ignore[arg-type]


@dataclass(frozen=True)
class PausesAgain:
    """Begins (pausing or not), pauses after ``first_s`` unless begun paused, and again ``again_s``
    later "to make sure", then ends ``rest_s`` after that."""

    begin_paused: bool
    first_s: float = 0.0
    again_s: float = 5.0
    rest_s: float = 1.0

    def blocks_admission(self, p: Any) -> bool:
        return bool(p.syncing)

    def sync(self, p: Any) -> Generator[Any, Any, None]:
        p.begin_sync(pause=self.begin_paused)
        if not self.begin_paused:
            yield p.timeout(self.first_s)
            p.pause_engines()
        yield p.timeout(self.again_s)
        p.pause_engines()
        yield p.timeout(self.rest_s)
        p.end_sync()


@pytest.mark.timeout(60)
def test_a_second_pause_engines_keeps_the_first_pause_in_the_records() -> None:
    r = run(PausesAgain(begin_paused=True))
    paused = [(u.start_s, u.end_s) for u in r.updates if u.paused]
    assert paused == [(start, end) for start, end, _ in r.sync_log]  # the pause spans the sync: 6 s
    assert all(end - start == pytest.approx(6.0) for start, end in paused)
    ev = r.events
    rows = ev[ev["kind"] == "pause"]
    assert len(rows) > 0
    assert set(zip(rows["start_s"], rows["end_s"], strict=True)) <= set(paused)
    check_invariants(r)


@pytest.mark.timeout(60)
def test_a_pause_taken_later_in_the_sync_and_repeated_records_from_the_first() -> None:
    r = run(PausesAgain(begin_paused=False, first_s=2.0))
    paused = [(u.start_s, u.end_s) for u in r.updates if u.paused]
    assert len(paused) == len(r.sync_log) > 0
    for (start, end), (sync_start, sync_end, _) in zip(paused, r.sync_log, strict=True):
        assert end == sync_end
        assert start - sync_start == pytest.approx(2.0)  # the first pause_engines, not the second
        assert end - start == pytest.approx(6.0)
    check_invariants(r)


@dataclass(frozen=True)
class BeginsAgain:
    """Begins (pausing), waits ``wait_s``, begins again, waits a second, ends."""

    wait_s: float

    def blocks_admission(self, p: Any) -> bool:
        return bool(p.syncing)

    def sync(self, p: Any) -> Generator[Any, Any, None]:
        p.begin_sync(pause=True)
        yield p.timeout(self.wait_s)
        p.begin_sync(pause=True)
        yield p.timeout(1.0)
        p.end_sync()


@dataclass(frozen=True)
class PausesBeforeBegin:
    """Pauses the replicas, then begins a sync that does not pause (the pause would go unrecorded)."""

    def blocks_admission(self, p: Any) -> bool:
        return bool(p.syncing)

    def sync(self, p: Any) -> Generator[Any, Any, None]:
        p.pause_engines()
        yield p.timeout(1.0)
        p.begin_sync(pause=False)
        p.end_sync()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("policy", "needle"),
    [
        (BeginsAgain(wait_s=5.0), "BeginsAgain.sync called begin_sync while a sync is open"),
        (BeginsAgain(wait_s=0.0), "BeginsAgain.sync called begin_sync while a sync is open"),
        (PausesBeforeBegin(), "PausesBeforeBegin.sync called pause_engines with no sync begun"),
    ],
    ids=["begin-twice-later", "begin-twice-at-once", "pause-before-begin"],
)
def test_a_sync_step_out_of_order_is_refused_naming_the_weight_update(policy: object, needle: str) -> None:
    with pytest.raises(PipelineError) as info:
        run(policy)
    message = str(info.value)
    assert needle in message
    assert "Traceback" not in message and "simpy" not in message.lower()
    if isinstance(policy, BeginsAgain):
        assert "end_sync" in message.split(needle, 1)[1]  # says to end the open sync first
