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
  ``"train"`` per replica). With ``stream_batches`` (below) it waits until the streamed step's
  end instead of ``train_time_s`` from the handover.
* **weight sync** (:meth:`Training._weight_sync`) -- runs the weight-update policy's ``sync``
  generator for each request, through the pipeline's checked runner (what it yields must be
  events; a spin is an error naming it), and then checks that it published exactly one version
  and wrote no counter of the view.

**A streamed batch** (``PipelineConfig.stream_batches``, PipelineRL's trainer: it runs forward
and backward on each packed micro-batch as it arrives and steps once the step's samples are in,
``pipelinerl/finetune_loop.py``). No event per episode: at the handover the step's end follows
in closed form (:func:`stream_end_s`). Episode ``i`` of the batch, in arrival order, takes a
share ``c_i`` of the step's time and arrives at ``a_i = max(end_s, free)``, ``free`` being when
the trainer was free (the previous step's sync ended; 0 at step 0); then ``f_0 = free``,
``f_i = max(f_(i-1), a_i) + c_i`` and the step ends at ``f_B``. The shares are equal
(``train_s / B``) unless the trainer model weighs its samples: a model with a
``sample_weights(step, batch)`` method (one finite weight >= 0 per episode, in the batch's order)
gives episode ``i`` the share ``train_s w_i / sum(w)``. The compute trainer weighs by each sample's
tokens, as PipelineRL's packed micro-batches cost, so a long sample arriving last holds the step
longer than a short one would. The last arrival is
taken as the handover itself (``now``): the batch is known complete only when the buffer serves
it (a batch policy that selects or filters decides it then), so the step never ends before
``now + c_last`` and the wait is never negative. Without gaps (every episode in before the trainer was
free) it is ``now + train_s``, the batch trainer's end. The train log's interval is
``[f_B - train_s, f_B)``: the step's compute packed against its end, a schedule the stream can
always be rearranged into (each episode arrives before its share starts there, since
``f_B >= a_i + c_i + ... + c_B``), so ``end - start`` is the step's compute in both modes and
every busy share read from the log (``trainer/idle_ratio``, the compute engine's GPU share and
step phases) stays exact; the start may fall before the handover, which is the overlap.

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

__all__ = ["Training", "stream_end_s"]

_INF = math.inf


def stream_end_s(
    arrivals_s: list[float],
    train_s: float,
    free_s: float,
    now_s: float,
    weights: list[float] | None = None,
) -> float:
    """The end of a streamed step (module docstring): each of the ``B`` episodes, taken in arrival
    order (ties in the batch's order), trains its share of ``train_s`` once it has arrived and the
    trainer is free: ``train_s / B`` each, or ``train_s * w_i / sum(w)`` with ``weights`` (one per
    arrival, >= 0; all zero are equal shares). Arrivals before ``free_s`` count from it, none after
    ``now_s`` (the handover), and the last is ``now_s``: the result is at least ``now_s`` plus the
    last arrival's share and at most ``now_s + train_s``.

    The recurrence ``f_i = max(f_(i-1), a_i) + c_i`` unrolled: the latest of ``free_s + train_s``
    and, for each arrival, it plus the shares from it on (written ``train_s * rest / total``, the
    first arrival's as ``train_s`` itself, so that a whole batch in before ``free_s`` ends at
    exactly ``free_s + train_s``, the batch trainer's end)."""
    n = len(arrivals_s)
    # scaled to the heaviest (equal weights are then the equal split to the last bit, and no
    # product of a tiny weight and train_s rounds to a subnormal); none or all zero: equal
    top = 0.0 if weights is None else max(weights)
    weights = [w / top for w in weights] if weights is not None and top > 0.0 else [1.0] * n
    order = sorted(range(n), key=arrivals_s.__getitem__)
    total = math.fsum(weights)
    end = free_s + train_s
    rest = total
    for k, i in enumerate(order[:-1]):  # rest: the weight of the arrivals from the k-th on
        a = arrivals_s[i]
        if a > free_s:  # (one before it counts from it: free_s + train_s covers it)
            if a > now_s:  # (a finished episode's end is never after the handover)
                a = now_s
            t = a + (train_s if k == 0 else train_s * rest / total)
            if t > end:
                end = t
        rest -= weights[i]
    last = now_s + train_s * weights[order[-1]] / total  # the handover (>= free_s)
    return end if end > last else last


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
        colocated, stream = self.config.colocated, self.config.stream_batches
        for step in range(self.config.steps):
            free = self.env.now  # the previous step's sync ended (0 at step 0)
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
            if stream:  # the step's end in closed form, at or after now + its last share
                end = stream_end_s(
                    [free if e.end_s is None else e.end_s for e in batch],
                    train_s,
                    free,
                    start,
                    self._sample_weights(step, batch),
                )
                yield self.env.wake_at(self.env.wake_up(), end)
            else:
                yield self.env.timeout(train_s)
            if self._clock() == math.inf:
                raise errors.clock_overflow(
                    cast("Pipeline", self), f"train_time_s {shown(train_s)} at step {step}"
                )
            if colocated:
                for e in self.engines:
                    self.updates.append(UpdateRecord(start, self.env.now, e.version, True, e.index, "train"))
                    e.resume()
            end = self.env.now
            self.train_log.append((step, max(end - train_s, free) if stream else start, end, version))
            self.sync_pending = True
            self._sync_done = self.env.event()
            self._sync_request.succeed()
            yield self._sync_done

    def _sample_weights(self, step: int, batch: list[Episode]) -> list[float] | None:
        """The trainer model's weights of the batch's samples for a streamed step (None: equal
        shares), checked here with an error naming the model and the step: one finite number
        >= 0 per episode (:func:`stream_end_s` reads all zero as equal shares)."""
        weigh = getattr(self.trainer, "sample_weights", None)
        if weigh is None:
            return None
        what = f"{type(self.trainer).__name__}.sample_weights at step {step}"
        got = weigh(step, batch)
        try:
            weights = [errors.seconds(w, f"each of {what}", "numbers") for w in got]
        except TypeError:
            raise errors.PipelineError(
                f"{what} must return one number per episode, got {shown(got)}"
            ) from None
        if len(weights) != len(batch):
            raise errors.PipelineError(
                f"{what} must return one number per episode ({len(batch)}), got {len(weights)}"
            )
        return weights  # stream_end_s scales them to the heaviest (all zero: equal shares)

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
