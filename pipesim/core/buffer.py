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
from itertools import repeat
from operator import attrgetter, eq, is_
from typing import TYPE_CHECKING

import simpy
from simpy.resources.base import BaseResource, Get, Put

from pipesim.core.episode import BUFFERED, DISCARDED, Episode
from pipesim.core.errors import PipelineError, _state_written, episode_shown, not_buffered, shown

if TYPE_CHECKING:
    from pipesim.core.engine import Pipeline


_ID, _STATUS = attrgetter("id"), attrgetter("status")


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
        items = self.items
        before, dropped = len(items), pipeline.n_dropped
        self.selecting = True
        try:
            got = policy.select(items, pipeline)
        finally:
            self.selecting = False
        if not isinstance(got, tuple) or len(got) != 2:
            raise PipelineError(
                f"{type(policy).__name__}.select must return (batch or None, discarded), got {shown(got)}"
            )
        batch, discarded = got
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
        # what left the buffer in select, less what the port's drop took: what select returns
        gone = before - len(items) - (pipeline.n_dropped - dropped)
        if gone or batch is not None or discarded:
            _check_taken(pipeline, gone, batch or [], discarded or [])
        if discarded:
            for ep in discarded:
                ep.status = DISCARDED
            self._on_discard(discarded)
        if self._parents:
            self._check_parents(policy)
        if batch is not None:
            event.succeed(batch)
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


def _check_taken(p: Pipeline, gone: int, batch: list[Episode], discarded: list[Episode]) -> None:
    """What ``select`` took out of the buffer (``gone`` episodes, less the port's drops) is exactly
    what it returned, in ``batch`` or as ``discarded``, by identity: each returned object is the
    buffered episode of its id (not a copy: ``copy.copy`` or ``dataclasses.replace`` of one has its
    status, and would be trained while the original stays buffered for good), no object twice,
    none still in the buffer, and as many as left it. A count alone passes a select that removes
    one set and returns another (``del buffer[:b]; return buffer[b:2 * b]``), which trains
    episodes that stay buffered and loses the ones it removed.

    O(returned + buffer), all in C (``map``, and sets of the episodes, hashed by identity): about
    0.1 us a trained episode, against the microseconds each costs the engine. Only where that
    finds something wrong does the loop in Python say what (:func:`returned_twice` for an episode
    given twice, :func:`not_buffered` for one trained or dropped already, :func:`_taken_wrong`
    for copies, episodes left in the buffer and lost ones)."""
    live, returned = p.episodes.live, batch + discarded
    try:  # the common case, all in C: each the live episode of its id (so an Episode, hashed by
        # identity), distinct, buffered (the trainer checks the batch's status as it marks it), and
        # none still in the buffer
        if (
            len(returned) == gone
            and all(map(is_, map(live.get, map(_ID, returned)), returned))
            and len(taken := set(returned)) == gone
            and all(map(eq, map(_STATUS, discarded), repeat(BUFFERED)))  # the trainer reads the batch's
            and taken.isdisjoint(p.buffer.items)
        ):
            return
    except (AttributeError, TypeError):  # no episode (no id, or an unhashable one): named below
        pass
    seen: dict[int, str] = {}  # where each returned episode was first returned, by identity
    foreign: list[tuple[Episode, str]] = []
    for how, eps in (("in its batch", batch), ("as discarded", discarded)):
        for ep in eps:
            if not isinstance(ep, Episode):
                raise not_buffered(p, ep, how)  # no episode at all
            if (first := seen.get(id(ep))) is not None:
                raise returned_twice(p, ep, first, how)
            seen[id(ep)] = how
            if (own := live.get(ep.id)) is not ep and (
                ep.status == BUFFERED or (own is not None and own.status == BUFFERED)
            ):
                foreign.append((ep, how))  # a copy of a buffered episode (its status copied, or not)
            elif ep.status != BUFFERED:
                raise not_buffered(p, ep, how)  # trained already, dropped, or never finished
    raise _taken_wrong(p, gone, returned, len(batch), foreign)  # what the fast path found wrong


def _taken_wrong(
    p: Pipeline, gone: int, returned: list[Episode], n_batch: int, foreign: list[tuple[Episode, str]]
) -> PipelineError:
    """The :class:`PipelineError` for a ``select`` whose returned episodes are not what it took
    out (:func:`_check_taken`): which were not from the buffer, which it returned and left in the
    buffer, and which it took out and returned nowhere (buffered, in no list: lost). Identity is
    read by episode id, so where a policy wrote ``p.started`` (ids then repeat or skip: fewer
    episodes recorded than started) the written counter is named instead, with every policy."""
    if len(p.episodes) != p.started:
        return PipelineError(
            f"episode ids repeat or skip at t={p.env.now:.6g} s ({p.started} started, "
            f"{len(p.episodes)} episodes recorded): {_state_written(p)}"
        )
    here = {id(ep) for ep in p.buffer.items}
    back = {id(ep) for ep in returned}
    copied = {ep.id for ep, _ in foreign}
    lost = [
        ep.id
        for ep in p.episodes.live.values()
        if ep.status == BUFFERED and id(ep) not in here and id(ep) not in back and ep.id not in copied
    ]
    wrong = [
        f"returned {_ids([ep.id for ep, h in foreign if h == how])} {how}, not from the buffer "
        "(other objects than the buffered episodes of those ids: copies, as copy.copy or "
        "dataclasses.replace make, or episodes whose id was written)"
        for how in ("in its batch", "as discarded")
        if any(h == how for _, h in foreign)
    ]
    for how, eps in (("in its batch", returned[:n_batch]), ("as discarded", returned[n_batch:])):
        if kept := [ep.id for ep in eps if id(ep) in here]:
            wrong.append(f"returned {_ids(kept)} {how} without taking {_them(kept)} out of the buffer")
    if lost:
        wrong.append(
            f"took {_ids(lost)} out of the buffer and returned {_them(lost)} neither in its batch nor as "
            "discarded (lost: never trained, and counted as buffered for good)"
        )
    if not wrong:  # counts alone: it put objects into the buffer
        wrong.append(f"took {gone} episode(s) out of the buffer and returned {len(returned)}")
    return PipelineError(
        f"the batch policy {type(p.batching).__name__}.select at t={p.env.now:.6g} s, version "
        f"{p.version}: {'; '.join(wrong)}. select must take out of its buffer exactly the episodes "
        "it returns, in its batch or as discarded, and return the buffered episodes themselves "
        "(to wait, return None and leave the buffer as it was)"
    )


def returned_twice(p: Pipeline, ep: Episode, first: str, then: str) -> PipelineError:
    """``select`` returned the episode ``ep`` twice: ``first`` where it first returned it (in its
    batch, or as discarded), ``then`` where again. Said as that: the episode is buffered, and the
    error once called it "not a buffered episode (returned twice, trained already, ...)"."""
    where = f"twice {first}" if first == then else f"{first} and again {then}"
    return PipelineError(
        f"the batch policy {type(p.batching).__name__}.select returned {episode_shown(ep)} {where} at "
        f"t={p.env.now:.6g} s, version {p.version}: each buffered episode goes at most once into "
        "the batch or the discarded list (a batch of distinct episodes, each taken out of the buffer)"
    )


def _them(ids: list[int]) -> str:
    return "them" if len(ids) > 1 else "it"


def _ids(ids: list[int]) -> str:
    shown_ids = ", ".join(str(i) for i in ids[:8])
    more = f" and {len(ids) - 8} more" if len(ids) > 8 else ""
    return f"episode{'s' if len(ids) > 1 else ''} {shown_ids}{more}"
