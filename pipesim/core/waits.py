"""Waiting for the buffer: the port's :meth:`~pipesim.core.port.PipelineView.buffered_at_least`.

A weight update that syncs only once the next batch has been collected (slime's ``train_async.py``:
"sync generate before update weights"; :class:`~pipesim.policies.updates.AfterNextBatch`) waits
for an event "the buffer holds at least n finished episodes". :class:`BufferWaits` is the mixin of
:class:`~pipesim.core.engine.Pipeline` that keeps those waits and fires them:

* **where completions enter the buffer.** ``Pipeline.on_finished`` fires them after appending,
  before it decides whether to run the controller pass in place, so the waiter resumes at this
  instant ahead of the end-of-instant pass (the event is scheduled now, so the pass is not run
  in place). A lone completion that a replica finishes itself (``Slots._run``) appends without
  ``on_finished`` and runs the pass at once: the pass fires the waits first and, if one fired,
  defers itself to the end of the instant (:meth:`BufferWaits._fire_before_pass`), which is the
  order the general path has.
* **quiet completions** (:mod:`pipesim.core.quiet`). The replica may sleep past completions that
  cannot change a decision; a pending wait makes the one that reaches ``n`` matter
  (:attr:`BufferWaits.buffer_need`), and a new wait catches up what is due by now and re-aims the
  replica. So a weight update that promises ``pauses_only`` keeps its promise wrapped.

Only a completion makes the buffer grow, so a wait that is short now can be satisfied by nothing
else. A wait that nothing can satisfy leaves the run's queue dry: a stall, whose message names the
waiting weight update (:mod:`pipesim.core.stall`), never a hang.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

import simpy

from pipesim.core.errors import PipelineError, shown

if TYPE_CHECKING:
    from pipesim.core.clock import Clock
    from pipesim.core.episode import Episode
    from pipesim.core.seams import EngineReplica


class BufferWaits:
    """The pending ``buffered_at_least`` events of a pipeline, and where they fire."""

    env: Clock
    engines: list[EngineReplica]
    lazy_completions: bool
    _items: list[Episode]
    _buffer_waits: list[tuple[int, simpy.Event]] | None = None
    """(n, event) per pending wait, None while there is none (what the hot path tests)."""

    def _refused(self, message: str) -> PipelineError:  # the port's (pipesim.core.port_impl)
        raise NotImplementedError

    def poke(self) -> None:  # the pipeline's
        raise NotImplementedError

    @property
    def buffer_need(self) -> int | None:
        """The fewest buffered episodes a pending wait needs (None: no wait pending)."""
        waits = self._buffer_waits
        return None if waits is None else min(n for n, _ in waits)

    def buffered_at_least(self, n: int) -> simpy.Event:
        """An event that succeeds once the buffer holds at least ``n`` finished episodes (at once
        if it does). Completions due by now that a replica slept past are counted first."""
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise self._refused(f"buffered_at_least with {shown(n)}: n must be an integer >= 1")
        n = int(n)  # a numpy integer counts as one
        if self.lazy_completions and (only := self.engines[0]).behind:
            only.catch_up(self.env.now, in_pass=False)  # as drained() does
        ev = self.env.event()
        if len(self._items) >= n:
            ev.succeed()
            return ev
        if self._buffer_waits is None:
            self._buffer_waits = []
        self._buffer_waits.append((n, ev))
        if self.lazy_completions:
            self.engines[0].kick()  # it may sleep past the completion that reaches n: re-aim
        return ev

    def _fire_buffer_waits(self) -> bool:
        """Succeed every pending wait the buffer satisfies now; whether one fired."""
        waits, have = self._buffer_waits, len(self._items)
        if waits is None or all(n > have for n, _ in waits):
            return False
        for n, ev in waits:
            if n <= have:
                ev.succeed()
        left = [(n, ev) for n, ev in waits if n > have]
        self._buffer_waits = left or None
        return True

    def _fire_before_pass(self) -> bool:
        """At the top of a controller pass: a wait that a replica's own in-place completion
        satisfied fires now, and the pass is deferred to the end of the instant (poked), behind
        the waiter, as ``on_finished`` orders them; whether the caller must return."""
        if self._fire_buffer_waits():
            self.poke()
            return True
        return False
