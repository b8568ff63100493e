"""A stall in ``p.buffered_at_least(n)`` names ``n`` and the most the admission lets the buffer
hold while the trainer waits for the sync. The hint assumed ``AfterNextBatch`` (whose ``n`` is the
batch): a wait for 9 at eta = 1, B = 4 was told that "eta >= 1 lets it finish", though eta was 1
and the count throttle never lets more than eta * B = 4 episodes run ahead of the trainer."""

from __future__ import annotations

import math
import re
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import pytest

import pipesim
from pipesim.core.errors import PipelineError
from pipesim.policies.updates import AfterNextBatch

B = 4


@dataclass(frozen=True)
class WaitsForBuffered:
    """A user's weight update: a partial-rollout sync once ``n`` finished episodes are buffered."""

    n: int
    block_while_waiting: bool = False  # starts no episode past the version's own batch

    def pauses_only(self) -> bool:
        return True

    def blocks_admission(self, p: pipesim.PipelineView) -> bool:
        return (self.block_while_waiting and p.started >= (p.version + 1) * p.batch_size) or p.syncing

    def sync(self, p: pipesim.PipelineView) -> Generator[Any, Any, None]:
        if p.version + 1 < p.config.steps:
            yield p.buffered_at_least(self.n)
        p.begin_sync(pause=True)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


@dataclass(frozen=True)
class AtMostSix:
    """A user's admission that starts six episodes in all: two past the first batch of four."""

    def admits(self, p: pipesim.PipelineView) -> bool:
        return p.started < 6


def scenario(eta: int, **policies: Any) -> pipesim.Scenario:
    config = pipesim.PipelineConfig(
        n_slots=8, batch_size=B, train_time_s=5, sync_time_s=2, max_staleness=eta, steps=4
    )
    return pipesim.Scenario(pipeline=config, seed=0, **policies)


def stall_message(sc: pipesim.Scenario) -> str:
    with pytest.raises(PipelineError) as exc:
        pipesim.run(sc)
    return str(exc.value)


def numbers(text: str) -> set[int]:
    return {int(x.replace(",", "")) for x in re.findall(r"(?<![\d.])\d[\d,]*(?![\d.])", text)}


@pytest.mark.parametrize(("n", "eta"), [(9, 1), (5, 1), (13, 3), (9, 2)])
def test_a_wait_past_the_count_throttles_lead_names_the_wait_the_lead_and_the_eta_it_needs(
    n: int, eta: int
) -> None:
    message = stall_message(scenario(eta, weight_update=WaitsForBuffered(n)))
    assert "WaitsForBuffered" in message and "CountThrottle" in message
    said = numbers(message.split("buffered_at_least", 1)[1])  # the hint, after the state line
    assert {n, eta * B, math.ceil(n / B)} <= said, message  # the wait, the lead, the eta that fits
    assert "eta >= 1" not in message  # the old advice, wrong at eta >= 1


def test_the_same_wait_at_the_eta_it_names_finishes() -> None:
    """The remedy the hint gives is one: max_staleness = ceil(n / B) runs."""
    result = pipesim.run(scenario(math.ceil(9 / B), weight_update=WaitsForBuffered(9)))
    assert result.summary()["episodes_trained"] == 4 * B


def test_after_next_batch_at_eta_zero_names_its_batch_and_eta_one() -> None:
    """The case the hint was written for still names the batch waited for and eta 1."""
    message = stall_message(scenario(0, weight_update=AfterNextBatch()))
    assert "AfterNextBatch" in message
    assert {B, 1} <= numbers(message), message


def test_an_admission_of_ones_own_is_named_with_the_lead_it_left() -> None:
    """Six started in all: two run ahead of the trainer's batch of four, and a wait for 3 stalls."""
    message = stall_message(scenario(1, weight_update=WaitsForBuffered(3), admission=AtMostSix()))
    assert "AtMostSix" in message
    assert {3, 2} <= numbers(message.split("buffered_at_least", 1)[1]), message


def test_a_weight_update_that_blocks_admission_while_it_waits_is_named_not_the_admission() -> None:
    """The count throttle (eta 1) would admit a batch ahead; the weight update starts none."""
    message = stall_message(scenario(1, weight_update=WaitsForBuffered(2, block_while_waiting=True)))
    assert "WaitsForBuffered.blocks_admission" in message
