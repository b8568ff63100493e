"""The trainer's buffer as a SimPy resource.

Finished episodes travel from the generation slots to the trainer through an
:class:`EpisodeBuffer`, a SimPy resource in the template-method style of ``simpy.Store``:
``put(episodes)`` always succeeds (the buffer is unbounded), and ``get()`` succeeds with a full
batch as soon as the :class:`~pipesim.policies.BatchPolicy` can form one. A put carries every
episode that finished at one instant, so the cost is one SimPy event per instant, not per episode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import simpy
from simpy.resources.base import BaseResource, Get, Put

from pipesim.episode import BUFFERED, DISCARDED, Episode

if TYPE_CHECKING:
    from pipesim.engine import Pipeline


class EpisodesPut(Put):
    def __init__(self, resource: EpisodeBuffer, episodes: list[Episode]) -> None:
        self.episodes = episodes
        super().__init__(resource)


class BatchGet(Get):
    """Succeeds with a list of episodes: the trainer's next batch."""


class EpisodeBuffer(BaseResource):
    """Unbounded buffer of finished episodes; gets are served by the pipeline's batch policy."""

    def __init__(self, env: simpy.Environment, pipeline: Pipeline, on_discard: Callable[[list[Episode]], None]):
        super().__init__(env, capacity=float("inf"))
        self.items: list[Episode] = []
        self._pipeline = pipeline
        self._on_discard = on_discard

    def put(self, episodes: list[Episode]) -> EpisodesPut:  # type: ignore[override]
        return EpisodesPut(self, episodes)

    def get(self) -> BatchGet:  # type: ignore[override]
        return BatchGet(self)

    def _do_put(self, event: EpisodesPut) -> bool:  # type: ignore[override]
        for ep in event.episodes:
            ep.status = BUFFERED
        self.items.extend(event.episodes)
        event.succeed()
        return True

    def _do_get(self, event: BatchGet) -> bool:  # type: ignore[override]
        batch, discarded = self._pipeline.batching.select(self.items, self._pipeline)
        if discarded:
            for ep in discarded:
                ep.status = DISCARDED
            self._on_discard(discarded)
        if batch is not None:
            event.succeed(batch)
        return True
