"""Weight-update policies of real systems: what a sync does to the episodes in flight.

Each policy is a ``sync(p)`` generator run by the weight-sync process, written with the
actions of the port (:class:`pipesim.core.port.PipelineView`): ``begin_sync(pause)``,
``pause_engines()``, ``end_sync()``, ``skip_sync()``, ``abort_running()``, ``stretch_running()``.
The chapter's two are in :mod:`pipesim.policies.base` (:class:`~pipesim.policies.base.PartialRollout`,
:class:`~pipesim.policies.base.Drain`).

* :class:`BatchDrain` -- OpenRLHF's ``VLLMLock``: the sync waits until the batch being generated
  has wholly started and finished, so a whole batch runs under one version.
* :class:`AbortReprefill` -- the engine aborts in-flight requests and drops their KV cache; after
  the sync each resumes under the new weights by re-prefilling the tokens it already generated
  (AReaL's interruptible rollout, slime's abort-and-resume). Tokens generated are modelled as
  generation seconds x ``decode_rate_tok_s``; the re-prefill takes tokens / ``prefill_rate_tok_s``.
* :class:`AbortRestart` -- in-flight episodes are aborted and their work is lost. With
  ``restart=True`` the tasks are relaunched from scratch first after the sync (slime's fully
  async mode); with ``restart=False`` they are dropped (over-sampling with abort).
* :class:`InFlightUpdate` -- a double-buffered transfer: the weights stream to the engine while it
  generates; generation pauses only for ``load_time_s`` per replica, and sequences continue under
  the new weights (one sequence mixes versions). The planner's ``inflight`` design, not
  PipelineRL's code: its ``vllm1.py`` ``receive_weight_update`` pauses generation for the whole
  receive (lines 155-182), which is :class:`~pipesim.policies.base.PartialRollout`.
* :class:`OverlappedSwap` -- the transfer overlaps generation into a second copy of the weights
  and swaps atomically at its end: generation never pauses (it costs memory for two copies).
* :class:`SyncEveryK` -- weights move every ``k`` trainer steps (verl
  ``trigger_parameter_sync_step``); other steps only advance the trainer's version.
* :class:`AfterNextBatch` -- the sync waits until the next batch is collected, then runs an
  inner policy's (slime ``train_async.py``: "sync generate before update weights").

Aborting costs O(in-flight) per sync, which its semantics require; the others cost O(1).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipesim.core.episode import Episode
from pipesim.core.errors import check_number, shown
from pipesim.core.port import PipelineView, SingleVersionPromise, pauses_only
from pipesim.core.validate import refuse
from pipesim.policies.base import Drain, PartialRollout, WeightUpdate
from pipesim.policies.faults import check_positive

if TYPE_CHECKING:
    from pipesim.core.roles import RunSpec


def at_batch_edge(p: PipelineView) -> bool:
    """Whether the next admitted episode would begin a new batch: the first task of a batch, with
    no episode of an earlier task still to be relaunched.

    Tasks are numbered in launch order and a relaunched or requeued episode keeps its task id, so
    batch k is tasks ``k B`` .. ``k B + B - 1`` however often one of them is relaunched; counted
    by starts (``p.started % B``), one relaunch shifted every later edge. ``p.upcoming_task`` is
    the next new task, or the oldest requeued one. A requeued task that is the first of its batch
    is no edge while other episodes of that batch live: launched - dropped (the live episodes: new
    tasks begun, less those waiting in the requeue and those dropped for good) then exceeds it.
    Without relaunches it is ``p.started % B == 0``, bit for bit (``upcoming_task`` is
    ``started`` and live work never exceeds it). O(1).
    """
    task = p.upcoming_task
    return task % p.batch_size == 0 and p.started - p.n_dropped <= task


@dataclass(frozen=True)
class BatchDrain(Drain):
    """Drain at batch boundaries: every batch of B is generated under one version.

    OpenRLHF/OpenRLHF ``openrlhf/trainer/ppo_trainer_async.py`` (HEAD 3c3be62): the generator
    holds ``VLLMLock`` (lines 19-34) for a whole ``generate_samples`` batch (lines 128-140), and
    ``TrainingActor.broadcast_to_vllm`` takes the same lock (lines 255-265). A broadcast asked for
    mid-batch waits until the batch is generated; the next batch waits for the broadcast.
    :class:`~pipesim.policies.base.Drain` stops admission at the request, so with fewer slots than
    the batch it split one batch across two versions.

    * ``blocks_admission``: while syncing, and while a sync is pending at a batch boundary
      (:func:`at_batch_edge`); the rest of a batch begun still starts, a relaunched task of it
      included.
    * ``sync``: waits until nothing runs and the batch has wholly started. A drain succeeds before
      the controller's pass of its instant (slots freed together, the rest of the batch not yet
      started), so mid-batch it waits for that pass (``p.settled()``); if the pass starts nothing
      and nothing runs, the admission rule stopped mid-batch and the sync goes ahead.

    The promises are :class:`~pipesim.policies.base.Drain`'s, inherited: no episode spans two
    versions (the sync runs on empty engines), and under the count throttle staleness <= eta.

    Batch edges are counted by tasks, not starts (:func:`at_batch_edge`): batch k is tasks ``k B``
    .. ``k B + B - 1``, and a relaunch (``RetryFailed``) or a requeued task (``RequeueFailed``,
    ``AbortRestart``) keeps its task id, so it stays in its batch. Counted by starts, one retry
    shifted every later edge and steps mixed two versions (``verl_one_step_off_policy`` with 32
    slots and ``RetryFailed(1e-4)``: 17 of 20 steps), though no episode spans two versions. A
    failure that drops its task (``DropFailed``) leaves its batch short of B, which no edge can
    mend: :class:`~pipesim.policies.admission.BatchThrottle` refuses it. OpenRLHF has no
    per-sample retry, and its preset refuses failures (:func:`~pipesim.policies.systems.openrlhf_refusal`).
    """

    def blocks_admission(self, p: PipelineView) -> bool:
        return p.syncing or (p.sync_pending and at_batch_edge(p))

    def sync(self, p: PipelineView) -> Generator[Any, Any, None]:
        while True:
            yield p.drained()
            if p.n_running:
                continue  # started since the drain was signalled
            if at_batch_edge(p):
                break  # the batch is whole and done: the lock is free
            before = p.started
            yield p.settled()  # the controller's pass of this instant starts the rest
            if not p.n_running and p.started == before:
                break  # it started nothing: the batch cannot go on now
        p.begin_sync(pause=True)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


@dataclass(frozen=True)
class AbortReprefill:
    """Pause for the sync, drop the KV cache, and charge each resumed episode a re-prefill."""

    decode_rate_tok_s: float = 40.0
    prefill_rate_tok_s: float = 4000.0

    def __post_init__(self) -> None:
        check_positive("decode_rate_tok_s", self.decode_rate_tok_s)
        check_positive("prefill_rate_tok_s", self.prefill_rate_tok_s)

    def blocks_admission(self, p: PipelineView) -> bool:
        return p.syncing

    def reprefill(self, ep: Episode, generated_s: float) -> tuple[float, float]:
        """(seconds, tokens) to re-prefill what ``ep`` generated so far. ``generated_s`` counts its
        earlier re-prefills too (they ran on its slot), which generated no tokens: they are excluded."""
        tokens = max(generated_s - ep.reprefill_s, 0.0) * self.decode_rate_tok_s
        return tokens / self.prefill_rate_tok_s, tokens

    def sync(self, p: PipelineView) -> Generator[Any, Any, None]:
        p.begin_sync(pause=True)
        p.stretch_running(self.reprefill)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


@dataclass(frozen=True)
class AbortRestart:
    """Abort every in-flight episode at the sync; relaunch its task from scratch, or drop it.

    The aborted episode keeps its record (status ``aborted``, ``lost_s`` = seconds it generated);
    a restart is a new episode with the same task and ``parent`` = the aborted one's id, launched
    before any new task.

    Pair it with an admission rule that subtracts drops (``OverSample``, ``AReaLThrottle``; slime
    pairs abort with over-sampling): :class:`~pipesim.policies.base.CountThrottle` counts starts,
    so every aborted episode (and its restart) uses up budget for good and the run drifts to
    synchronous as it goes on.
    """

    restart: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.restart, bool):
            raise refuse("restart", f"must be a bool, got {shown(self.restart)}")

    def blocks_admission(self, p: PipelineView) -> bool:
        return p.syncing

    def sync(self, p: PipelineView) -> Generator[Any, Any, None]:
        p.begin_sync(pause=True)
        aborted = p.abort_running()  # in finishing order within each replica, replica by replica
        if self.restart:
            p.requeue([(ep.task_id, ep.id) for ep in aborted], first=True)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


@dataclass(frozen=True)
class InFlightUpdate:
    """Transfer while generating, then pause each replica only for ``load_time_s``.

    A double-buffered transfer, what the planner's ``inflight`` design assumes. PipelineRL's own
    code does not do this: ``pipelinerl/vllm1.py``, ``receive_weight_update`` (HEAD 58d3934, lines
    155-182) wraps the NCCL receive and ``load_weights`` in ``pause_generation(mode="keep")``, so
    generation stops for the whole receive (the ``pipelinerl`` preset's default,
    :class:`~pipesim.policies.base.PartialRollout`; ``load_time_s`` there opts into this one).
    """

    load_time_s: float = 1.0

    def __post_init__(self) -> None:
        check_number("load_time_s", self.load_time_s, 0, unit=" of seconds")

    def blocks_admission(self, p: PipelineView) -> bool:
        return False  # paused replicas take no episodes; routing skips them

    def max_pause_s(self) -> float:
        """The promise: no sync pauses generation for longer than this."""
        return float(self.load_time_s)

    def sync(self, p: PipelineView) -> Generator[Any, Any, None]:
        p.begin_sync(pause=False)
        yield p.timeout(p.config.sync_time_s)  # the broadcast overlaps generation
        p.pause_engines()
        yield p.timeout(self.load_time_s)
        p.end_sync()


@dataclass(frozen=True)
class OverlappedSwap:
    """Transfer into a second copy of the weights while generating; swap atomically at the end."""

    def blocks_admission(self, p: PipelineView) -> bool:
        return False

    def max_pause_s(self) -> float:
        return 0.0

    def sync(self, p: PipelineView) -> Generator[Any, Any, None]:
        p.begin_sync(pause=False)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


@dataclass(frozen=True)
class SyncEveryK:
    """Move weights only after every ``k``-th trainer step, with ``inner`` doing the real sync."""

    k: int = 2
    inner: WeightUpdate = field(default_factory=PartialRollout)

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise refuse("k", f"must be an integer >= 1, got {shown(self.k)}")
        if isinstance(self.inner, type) or not isinstance(self.inner, WeightUpdate):
            raise refuse("inner", f"must be a weight-update policy instance, got {shown(self.inner)}")

    def pauses_only(self) -> bool:
        """The skipped syncs touch nothing; the real ones are the inner policy's."""
        return pauses_only(self.inner)

    def blocks_admission(self, p: PipelineView) -> bool:
        return self.inner.blocks_admission(p)

    def sync(self, p: PipelineView) -> Generator[Any, Any, None]:
        if (p.version + 1) % self.k == 0:
            yield from self.inner.sync(p)
        else:
            p.skip_sync()


@dataclass(frozen=True)
class AfterNextBatch:
    """Sync only once the next batch has been collected, then run ``inner``'s sync.

    THUDM/slime ``train_async.py``, ``train``: after training step i, ``if (rollout_id + 1) %
    update_weights_interval == 0`` it first waits for the rollout generating meanwhile ("sync
    generate before update weights": ``ray.get(rollout_data_next_future)``) and only then calls
    ``update_weights()``; batch i + 1, collected before that update, is trained after it. With
    ``fully_async_rollout.generate_rollout_fully_async`` that rollout returns once the worker's
    queue holds the next batch's completed groups. Here the sync first waits until the buffer
    holds ``p.batch_size`` finished episodes (``p.buffered_at_least``), then runs ``inner.sync``;
    the trainer, waiting for the sync, takes nothing from the buffer meanwhile. So every episode
    of that batch finished under weights at least one step older than the trainer's: for step
    >= 1 the staleness by newest version is >= 1 (the engine's plain order syncs at once, and
    episodes finishing after the update carry the new weights).

    * ``blocks_admission``: never while it waits for the batch (its episodes must still start:
      a ``Drain`` inner would block at the request), else ``inner``'s.
    * After the last step it syncs at once: slime launches no rollout after the last one
      (``if rollout_id + 1 < args.num_rollout``), so there is no batch to wait for.
    * Promises: ``pauses_only`` and ``single_version`` are ``inner``'s (the wait touches no
      episode); no staleness bound is passed on, as the wait changes what ``inner``'s assumed.
    * With ``SyncEveryK(k, AfterNextBatch(...))`` it waits only before the real syncs, as slime's
      ``update_weights_interval``. An admission that never lets the buffer hold a batch ahead of
      the trainer (the count throttle at eta = 0) stalls, named in the error; at eta = 1 the batch
      waited for is the last one admitted, so the wait is a drain (``async-eta1``: 528/h, against
      506/h with ``Drain`` and 1,836/h with ``PartialRollout``).
    """

    inner: WeightUpdate = field(default_factory=AbortReprefill)

    def __post_init__(self) -> None:
        if isinstance(self.inner, type) or not isinstance(self.inner, WeightUpdate):
            raise refuse("inner", f"must be a weight-update policy instance, got {shown(self.inner)}")

    def pauses_only(self) -> bool:
        """The wait touches no episode in flight; the sync is ``inner``'s."""
        return pauses_only(self.inner)

    def single_version(self, scenario: RunSpec) -> bool:
        """``inner``'s promise (False where it makes none): the wait runs no episode across a version."""
        inner = self.inner
        return isinstance(inner, SingleVersionPromise) and inner.single_version(scenario) is True

    def blocks_admission(self, p: PipelineView) -> bool:
        if p.sync_pending and p.n_buffered < p.batch_size and p.version + 1 < p.config.steps:
            return False  # waiting for the batch: its episodes start
        return self.inner.blocks_admission(p)

    def sync(self, p: PipelineView) -> Generator[Any, Any, None]:
        if p.version + 1 < p.config.steps:  # the last step has no next rollout to wait for
            yield p.buffered_at_least(p.batch_size)
        yield from self.inner.sync(p)
