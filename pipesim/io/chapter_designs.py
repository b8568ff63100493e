"""The chapter's designs (Section 13.3) on the chapter's duration pool: what the registry's
built-in names (``synchronous``, ``async-eta2``, ``fig13.1-async``, ...) build. Kept apart from
:mod:`pipesim.io.registry`, which names them, so the report and the chapter's scenarios take the
designs without the registry's lookup."""

from __future__ import annotations

import dataclasses
from typing import Any

from pipesim.config import PipelineConfig, Scenario
from pipesim.policies.base import CountThrottle, Drain, PartialRollout

__all__ = ["CHAPTER_DESIGNS", "CHAPTER_POOL_SIZE", "FIG13_1", "chapter_design"]

CHAPTER_POOL_SIZE = 65_536
"""The chapter draws 65,536 durations with seed 0; a scenario with this pool size replays them."""


def chapter_design(name: str, max_staleness: int, drain: bool = False, **pipeline: Any) -> Scenario:
    """A chapter design on the chapter's pool (64 slots, B=64, 60 s train, 10 s sync, 20 steps)."""
    cfg = dataclasses.replace(PipelineConfig(max_staleness=max_staleness), **pipeline)
    return Scenario(
        pipeline=cfg,
        admission=CountThrottle(),
        weight_update=Drain() if drain else PartialRollout(),
        seed=0,
        pool_size=CHAPTER_POOL_SIZE,
        name=name,
    )


CHAPTER_DESIGNS: dict[str, tuple[int, bool]] = {
    "synchronous": (0, False),
    "one step ahead, drain": (1, True),
    "async eta=1, partial": (1, False),
    "async eta=2, partial": (2, False),
    "async eta=4, drain": (4, True),
}
"""The chapter's design table: label -> (max_staleness, drain)."""

FIG13_1 = dict(n_slots=8, batch_size=8, steps=4)
"""Figure 13.1's small pipeline: 8 slots, 8 episodes per step, 4 steps."""
