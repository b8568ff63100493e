"""The trainer's buffer as a SimPy resource.

Finished episodes travel from the generation slots to the trainer through an
:class:`EpisodeBuffer`, a SimPy resource in the template-method style of ``simpy.Store``:
finished episodes are appended to ``items`` at once by the pipeline
(:meth:`~pipesim.core.engine.Pipeline.on_finished`: the buffer is unbounded, so adding never
waits, and costs no SimPy event), and ``get()`` succeeds with a full batch as soon as the
:class:`~pipesim.policies.base.BatchPolicy` can form one.

Gets are served only at the end of an instant (the controller calls :meth:`EpisodeBuffer.serve`
after admitting episodes), never the moment an episode lands. That is the chapter's order -- start
episodes, then start training, then process what happens next -- and it matters when training
or episodes take zero time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import simpy
from simpy.resources.base import BaseResource, Get, Put

from pipesim.core.episode import BUFFERED, DISCARDED, Episode
from pipesim.core.errors import PipelineError, not_buffered, shown

if TYPE_CHECKING:
    from pipesim.core.engine import Pipeline


class BatchGet(Get):
    """Succeeds with a list of episodes: the trainer's next batch."""


class EpisodeBuffer(BaseResource):
    """Unbounded buffer of finished episodes; gets are served by the pipeline's batch policy."""

    def __init__(
        self, env: simpy.Environment, pipeline: Pipeline, on_discard: Callable[[list[Episode]], None]
    ) -> None:
        super().__init__(env, capacity=float("inf"))
        self.items: list[Episode] = []
        self._pipeline = pipeline
        self._on_discard = on_discard

    def get(self) -> BatchGet:  # type: ignore[override]
        return BatchGet(self)

    def _do_put(self, event: Put) -> bool:  # pragma: no cover - episodes bypass the queue
        raise NotImplementedError("finished episodes enter the buffer through Pipeline.on_finished")

    def _trigger_get(self, put_event: Put | None) -> None:  # type: ignore[override]
        """Defer: a new get only asks the controller to serve at the end of the instant."""
        self._pipeline.poke()

    def serve(self) -> None:
        """Serve pending gets now (the controller calls it at the end of an instant, when
        the batch policy's hints say a batch may be formed; serving when none can is harmless)."""
        BaseResource._trigger_get(self, None)

    def _do_get(self, event: BatchGet) -> bool:  # type: ignore[override]
        policy = self._pipeline.batching
        got = policy.select(self.items, self._pipeline)
        if not isinstance(got, tuple) or len(got) != 2:
            raise PipelineError(
                f"{type(policy).__name__}.select must return (batch or None, discarded), got {shown(got)}"
            )
        batch, discarded = got
        if discarded:
            for ep in discarded:
                if getattr(ep, "status", None) != BUFFERED:  # twice, or never in the buffer
                    raise not_buffered(self._pipeline, ep, "as discarded")
                ep.status = DISCARDED
            self._on_discard(discarded)
        if batch is not None:
            if isinstance(batch, tuple):
                batch = list(batch)
            if not isinstance(batch, list) or not batch:
                raise PipelineError(
                    f"{type(policy).__name__}.select must return a non-empty list as its batch, or None "
                    f"to wait, got {shown(batch)}"
                )
            if len(batch) != self._pipeline.batch_size:  # every step trains batch_size episodes
                raise PipelineError(
                    f"{type(policy).__name__}.select returned a batch of {len(batch)} episodes; the "
                    f"batch size is {self._pipeline.batch_size} (return None to wait for more, and "
                    "put the rest back in the buffer)"
                )
            event.succeed(batch)
        return True
