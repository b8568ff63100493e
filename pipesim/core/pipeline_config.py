"""The pipeline's configuration: sizes and times, the kernel's own input (a frozen dataclass,
validated at construction, units in the names). :class:`pipesim.Scenario` composes it with the
policies at the edge (files, the command line, presets); the kernel reads only this and the
roles of :mod:`pipesim.core.roles`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipesim.core.errors import MAX_SLOTS, check_int, check_number, shown
from pipesim.core.validate import refuse

__all__ = ["PipelineConfig", "check_time"]


def check_time(name: str, value: Any) -> None:
    """Raise ValueError naming ``name`` unless ``value`` is a finite number of seconds >= 0."""
    check_number(name, value, 0, unit=" of seconds")


@dataclass(frozen=True)
class PipelineConfig:
    """Sizes and times of one rollout pipeline (the chapter's ``simulate_pipeline`` arguments)."""

    n_slots: int = 64
    """Concurrent episodes the inference engine can run (generation slots)."""
    batch_size: int = 64
    """Episodes the trainer consumes per step (B)."""
    train_time_s: float = 60.0
    """Seconds one training step takes."""
    sync_time_s: float = 10.0
    """Seconds one weight sync takes; generation is paused or drained around it."""
    max_staleness: int = 0
    """Staleness bound eta: the throttle lets generation run at most eta batches ahead."""
    steps: int = 20
    """Training steps to simulate; the run ends when the last step's sync finishes."""
    colocated: bool = False
    """Engine and trainer share accelerators: generation pauses while the trainer trains."""
    stream_batches: bool = False
    """The trainer streams its batch (gradient accumulation over a stream, as PipelineRL's does):
    it trains on each episode of a step as the episode arrives, an equal share of the step's
    time each, and steps once the batch is complete, so most of a step's training overlaps the
    wait for its last episodes (:func:`pipesim.core.training.stream_end_s`). Refused with
    ``colocated``: colocated engines pause while the trainer trains, which a stream cannot be."""

    def __post_init__(self) -> None:
        check_int("n_slots", self.n_slots, 1, MAX_SLOTS, "each slot is a Python object")
        check_int("batch_size", self.batch_size, 1, MAX_SLOTS, "each episode of a batch is a Python object")
        check_time("train_time_s", self.train_time_s)
        check_time("sync_time_s", self.sync_time_s)
        check_int("max_staleness", self.max_staleness, 0)
        check_int("steps", self.steps, 1)
        if not isinstance(self.colocated, bool):
            raise refuse("colocated", f"must be a bool, got {shown(self.colocated)}")
        if not isinstance(self.stream_batches, bool):
            raise refuse("stream_batches", f"must be a bool, got {shown(self.stream_batches)}")
        if self.stream_batches and self.colocated:
            raise refuse(
                "stream_batches",
                "cannot be True with colocated=True: colocated engines pause while the trainer "
                "trains, and a streaming trainer trains while they generate its batch",
            )
