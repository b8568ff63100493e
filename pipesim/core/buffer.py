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
or episodes take zero time. :meth:`EpisodeBuffer.serve` walks the get queue itself (SimPy's
``BaseResource._trigger_get`` loop, in a few lines): an exception raised in a batch policy's
``select`` then shows the user's frames under pipesim's, with no frame of SimPy's between them.

A batch policy may requeue the tasks of episodes it discards in the same ``select``
(``DropStale(requeue=True)``): the parent is still buffered when ``requeue`` checks it, so the
port notes it (:meth:`EpisodeBuffer.requeued_from`) and the buffer checks, once ``select`` has
returned, that it came back as discarded.
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
        self.selecting = False
        """Whether the batch policy's ``select`` is running (the port reads it in ``requeue``)."""
        self._parents: list[Episode] = []  # buffered parents requeued during this select
        self.lost_in_select = 0
        """Episodes ``select`` took out of the buffer and returned neither in a batch nor as
        discarded (nor dropped through the port), over the run: a stall or unbalanced books then
        name the batch policy, and otherwise the policies that may not edit ``p.buffered``."""

    def get(self) -> BatchGet:  # type: ignore[override]
        return BatchGet(self)

    def _do_put(self, event: Put) -> bool:  # pragma: no cover - episodes bypass the queue
        raise NotImplementedError("finished episodes enter the buffer through Pipeline.on_finished")

    def _trigger_get(self, put_event: Put | None) -> None:  # type: ignore[override]
        """Defer: a new get only asks the controller to serve at the end of the instant."""
        self._pipeline.poke()

    def serve(self) -> None:
        """Serve pending gets now (the controller calls it at the end of an instant, when
        the batch policy's hints say a batch may be formed; serving when none can is harmless).
        The loop of ``BaseResource._trigger_get``, kept here so that no SimPy frame sits between
        the controller and a batch policy's ``select`` in a traceback: each get still waiting is
        asked in turn, and one that succeeds leaves the queue."""
        queue = self.get_queue
        i = 0
        while i < len(queue):
            event = queue[i]
            self._do_get(event)
            if event.triggered:
                del queue[i]
            else:
                i += 1

    def requeued_from(self, parent: Episode) -> None:
        """``select`` requeued the task of ``parent``, still buffered: it must return it as discarded."""
        self._parents.append(parent)

    def _do_get(self, event: BatchGet) -> bool:  # type: ignore[override]
        pipeline = self._pipeline
        policy = pipeline.batching
        before, dropped = len(self.items), pipeline.n_dropped
        self.selecting = True
        try:
            got = policy.select(self.items, pipeline)
        finally:
            self.selecting = False
        # what left the buffer in select, less what the port's drop took: what select returns
        gone = before - len(self.items) - (pipeline.n_dropped - dropped)
        if not isinstance(got, tuple) or len(got) != 2:
            raise PipelineError(
                f"{type(policy).__name__}.select must return (batch or None, discarded), got {shown(got)}"
            )
        batch, discarded = got
        if discarded:
            gone -= len(discarded)
            for ep in discarded:
                if getattr(ep, "status", None) != BUFFERED:  # twice, or never in the buffer
                    raise not_buffered(self._pipeline, ep, "as discarded")
                ep.status = DISCARDED
            self._on_discard(discarded)
        if self._parents:
            self._check_parents(policy)
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
            gone -= len(batch)
            event.succeed(batch)
        if gone > 0:  # counted, not refused: the books' check names it (pipesim.core.errors)
            self.lost_in_select += gone
        return True

    def _check_parents(self, policy: object) -> None:
        """Each buffered episode whose task ``select`` requeued came back as discarded (else the
        requeue relaunches an episode that is trained, or still buffered)."""
        parents, self._parents = self._parents, []
        for ep in parents:
            if ep.status != DISCARDED:
                raise PipelineError(
                    f"the batch policy {type(policy).__name__} called requeue with parent {ep.id} (task "
                    f"{ep.task_id}) in select, and then did not return episode {ep.id} as discarded (it "
                    f"is {ep.status}): a parent is an episode dropped for good, so requeue the tasks of "
                    "the episodes select returns as discarded, or pass parent -1"
                )
