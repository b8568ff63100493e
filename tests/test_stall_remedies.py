"""A stall from dropped episodes offers the remedies that apply to the run.

The message offered "a retry (RetryFailed)" to a run that already had ``RetryFailed`` and whose
drops were mostly a weight update's aborts; a retry is offered only where failed episodes are
among the drops and the failure policy does not retry.
"""

from __future__ import annotations

import pytest

import pipesim
from pipesim.policies.faults import DropFailed, RetryFailed

BASE = pipesim.PipelineConfig(
    n_slots=32, batch_size=32, train_time_s=60, sync_time_s=10, max_staleness=2, steps=8
)


def _stall(**kw: object) -> str:
    with pytest.raises(pipesim.PipelineError) as info:
        pipesim.run(pipesim.Scenario(pipeline=BASE, seed=0, **kw))  # type: ignore[arg-type]
    return str(info.value)


def test_a_run_that_retries_is_not_told_to_retry() -> None:
    msg = _stall(failures=RetryFailed(hazard_per_s=0.002), weight_update=pipesim.AbortRestart())
    assert "stalled" in msg and "AReaLThrottle" in msg
    assert "RetryFailed)" not in msg.split("so none is replaced")[1]


def test_a_run_that_drops_failed_episodes_is_not_offered_a_retry_that_stalls_too() -> None:
    """A retry was offered here, but a relaunch counts in ``p.started`` beside the failed episode,
    so under CountThrottle ``RetryFailed`` stalls the same way (tests/test_batch_identity.py runs
    each remedy the message names)."""
    msg = _stall(failures=DropFailed(hazard_per_s=0.004))
    assert "(DropFailed)" in msg and "RetryFailed" not in msg and "AReaLThrottle" in msg
