"""The trainer and the weight sync: the two processes of a training step.

:class:`Training` is a mixin of :class:`~pipesim.core.engine.Pipeline`. It holds no state of its
own (the pipeline's is declared below) and owns two SimPy processes that the pipeline starts:

* **trainer** (:meth:`Training._trainer`) -- one loop per step: take a batch from the
  :class:`~pipesim.core.buffer.EpisodeBuffer` (the buffer serves it at the controller's pass,
  after admission, as in the chapter), book it (the ledger row: every launched episode is
  trained, running, buffered or dropped at this step, which :mod:`pipesim.testing` checks), mark
  each episode trained at the trainer's version, show the batch to the observer, hand it to the
  records (final now: arrays, not objects), train for ``train_time_s`` or the trainer model's
  time, then request a weight sync and wait for it. With ``colocated`` the engines share the
  accelerators, so every replica pauses while the trainer trains (an update record of kind
  ``"train"`` per replica).
* **weight sync** (:meth:`Training._weight_sync`) -- runs the weight-update policy's ``sync``
  generator for each request, through the pipeline's checked runner (what it yields must be
  events; a spin is an error naming it), and then checks that it published exactly one version
  and wrote no counter of the view.

Users' answers are checked where they are used: a batch policy may hand back anything (each item
must be a buffered :class:`~pipesim.core.episode.Episode`), and a trainer model's time must be
finite seconds >= 0 (an int or a numpy real converted, NaN refused, with an error naming the
step). A clock that overflows to infinity during a step or a sync is an error, not a run that
never ends.

Split out of :mod:`pipesim.core.engine` (past 400 lines) along this seam: the engine builds the
run and keeps the controller and the episodes' launches; this module is the step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, cast

from pipesim.core import errors
from pipesim.core.episode import BUFFERED, TRAINED, Episode, UpdateRecord
from pipesim.core.errors import shown

if TYPE_CHECKING:
    import simpy

    from pipesim.core.buffer import EpisodeBuffer
    from pipesim.core.clock import Clock
    from pipesim.core.engine import Pipeline
    from pipesim.core.records import EpisodeRecords
    from pipesim.core.seams import EngineReplica

__all__ = ["Training"]

_INF = math.inf


class Training:
    """The trainer's and the weight sync's processes of a pipeline (module docstring)."""

    config: Any
    observer: Any
    trainer: Any
    weight_update: Any
    env: Clock
    buffer: EpisodeBuffer
    episodes: EpisodeRecords
    engines: list[EngineReplica]
    updates: list[UpdateRecord]
    version: int
    started: int
    n_dropped: int
    n_trained: int
    batches_taken: int
    sync_pending: bool
    ledger_log: list[tuple[int, int, int, int, int, int]]
    train_log: list[tuple[int, float, float, int]]
    _started_at_batch: int
    _sync_request: simpy.Event
    _sync_done: simpy.Event

    if TYPE_CHECKING:  # the pipeline's, from its other bases (none exists here at run time)

        @property
        def n_running(self) -> int: ...

        def poke(self) -> None: ...

        def _clock(self) -> float: ...

        def _checked(self, steps: object, what: str) -> Generator[simpy.Event, Any, None]: ...

        def _check_sync(self, before: int, name: str) -> None: ...

    def _trainer(self) -> Generator[simpy.Event, Any, None]:
        colocated = self.config.colocated
        for step in range(self.config.steps):
            batch = yield self.buffer.get()
            self.batches_taken += 1
            self.n_trained += len(batch)
            # the books at each step, from the engine's own state: every launched episode is
            # trained, running, buffered or dropped (pipesim.testing checks it, step by step)
            self.ledger_log.append(
                (step, self.started, self.n_trained, self.n_running, len(self.buffer.items), self.n_dropped)
            )
            self._started_at_batch = self.started
            self.poke()  # the buffer shrank: rules that count it (QueueAhead) may admit again
            start, version = self.env.now, self.version
            for ep in batch:  # an Episode checked first: a batch policy may hand back anything
                if not isinstance(ep, Episode) or ep.status != BUFFERED:  # twice, trained, foreign
                    raise errors.not_buffered(cast("Pipeline", self), ep)
                ep.status = TRAINED
                ep.trained_step = step
                ep.trained_version = version
            if self.observer is not None:
                self.observer.on_batch(step, version, batch, start)
            self.episodes.archive(batch, step, version)  # final now: kept as arrays, not objects
            if colocated:  # the engine shares the accelerators: it pauses while the trainer trains
                for e in self.engines:
                    e.pause()
            if self.trainer is None:
                train_s = self.config.train_time_s
            else:  # its answer checked here, with an error naming the step
                train_time_s: Callable[[int, list[Episode]], object] = self.trainer.train_time_s
                got = train_time_s(step, batch)
                if type(got) is float and 0.0 <= got < _INF:
                    train_s = got
                else:  # converted, or named (NaN fails the test)
                    train_s = errors.seconds(got, f"the trainer model's time for step {step}")
            yield self.env.timeout(train_s)
            if self._clock() == math.inf:
                raise errors.clock_overflow(
                    cast("Pipeline", self), f"train_time_s {shown(train_s)} at step {step}"
                )
            if colocated:
                for e in self.engines:
                    self.updates.append(UpdateRecord(start, self.env.now, e.version, True, e.index, "train"))
                    e.resume()
            self.train_log.append((step, start, self.env.now, version))
            self.sync_pending = True
            self._sync_done = self.env.event()
            self._sync_request.succeed()
            yield self._sync_done

    def _weight_sync(self) -> Generator[simpy.Event, Any, None]:
        while True:
            yield self._sync_request
            self._sync_request = self.env.event()
            before, name = self.version, type(self.weight_update).__name__
            yield from self._checked(self.weight_update.sync(self), f"{name}.sync")
            if self._clock() == math.inf:
                raise errors.clock_overflow(cast("Pipeline", self), f"the sync of {name}")
            self._check_sync(before, name)  # one version published, no counter written
            self._sync_done.succeed()
