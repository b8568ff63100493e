"""Policies that model real systems' own code (``scenarios/systems.py`` builds the presets).

Each class names the repository, file and function whose rule it models. They read only the
port (:class:`pipesim.core.port.PipelineView`: ``started``, ``n_dropped``, ``version``, ``n_running``,
``n_buffered``, ``batch_size``), so the engine does not change for them.

* :class:`VerlRollouter` -- verl fully async (``recipe/fully_async_policy``): the rollouter's
  stale-sample counter, reset at each parameter update to the work in flight and queued.
  It and the next two live in :mod:`pipesim.policies.verl` and are re-exported here.
* :class:`VerlMessageQueue` -- verl fully async (``message_queue.py``, ``MessageQueue.put_sample``):
  a bounded queue that evicts its oldest sample when full; its freshness check (:func:`verl_put_accepted`).
* :class:`RollGroupQueue` -- ROLL (``GroupQueueManager.get_batch``, ``GroupQueue.get``): the
  trainer takes whole groups in creation order, waiting for the oldest; the ``roll`` preset's.
* :class:`RollGroupExpiry` -- the first B groups to finish, older groups expired: not ROLL's order.
* :class:`RollGroupAdmission` -- ROLL: ``(1 + ratio)`` steps of groups are created at the first
  step and one step of groups at each step after, expired ones not replaced.
* :class:`PipelineRLLag` -- PipelineRL (``pipelinerl/actor.py``, ``ActorLoop``): groups submitted
  while fewer than ``ceil(max_lag / attempts) + (v + 1) * groups_per_update``; with ``attempts``
  > 1 an episode is one rollout of a group.
* :class:`SlimeAsyncWorker` -- slime (``slime/rollout/fully_async_rollout.py``,
  ``AsyncRolloutWorker._loop``): a pool of trajectories bounded by concurrency and by the queue
  of completed groups, no version bound.
* :class:`OpenRLHFBatches` -- OpenRLHF (``openrlhf/trainer/ppo_trainer_async.py``,
  ``GenerateSamplesActor.fit``): whole batches, one at a time, behind a pool of queue tokens;
  :func:`openrlhf_refusal` says what OpenRLHF's async trainer cannot be.

Every admission rule here says when it is *closed* (no finishing episode can make it admit), and
the batch policies give the ``ready`` / ``min_items`` hints, so the engine's shortcuts apply;
``pipesim.testing.check_promises`` confirms they change nothing on the presets. Each bounds
staleness its own way and never reads the pipeline's ``max_staleness``, so each names its knob
(``staleness_knob``, :class:`~pipesim.policies.base.OwnStalenessBound`) and a change of that field
is refused rather than run as the same design under a new label.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipesim.core.errors import PipelineError
from pipesim.core.validate import FieldError
from pipesim.policies.bookkeeping import check_int
from pipesim.policies.roll_agentic import RollGroupAdmission as RollGroupAdmission  # re-exported here
from pipesim.policies.roll_agentic import RollGroupExpiry as RollGroupExpiry
from pipesim.policies.roll_agentic import RollGroupQueue as RollGroupQueue
from pipesim.policies.roll_agentic import roll_create_step as roll_create_step
from pipesim.policies.verl import VerlMessageQueue, VerlRollouter, verl_put_accepted

__all__ = [
    "OpenRLHFBatches",
    "PipelineRLLag",
    "RollGroupAdmission",
    "RollGroupExpiry",
    "RollGroupQueue",
    "SlimeAsyncWorker",
    "VerlMessageQueue",
    "VerlRollouter",
    "openrlhf_refusal",
    "roll_create_step",
    "verl_put_accepted",
]

if TYPE_CHECKING:
    from pipesim.core.port import PipelineView
    from pipesim.core.roles import RunSpec


@dataclass(frozen=True)
class PipelineRLLag:
    """PipelineRL's lag bound: submit groups while fewer than ``lag_groups + (v + 1) * G``.

    ServiceNow/PipelineRL ``pipelinerl/actor.py``, ``ActorLoop.run``: ``can_submit_before_update``
    starts at ``lag_groups + groups_per_update`` with ``lag_groups = ceil(max_lag / attempts)``
    (``finetune.max_lag`` in samples, ``attempts`` samples per group) and grows by
    ``groups_per_update`` (G) at each new weight version; a problem is submitted while
    ``submitted_groups < can_submit_before_update``. Nothing is subtracted for dropped work
    (PipelineRL drops none), and ``max_lag = 0`` is synchronous: exactly one update's groups per
    version.

    ``attempts`` 1: a pipesim episode is a sample and a group, G is ``batch_size``, and the bound
    counts starts (relaunches included). ``attempts`` n > 1: a pipesim episode is one rollout
    (``schedule_rollouts`` gives each attempt its own ``llm_max_rollouts`` slot and tags it with the
    version at its own start), group g is tasks ``g n`` .. ``g n + n - 1`` (the numbering of
    :class:`~pipesim.policies.groups.WholeGroups`, which assembles the batch), G is ``batch_size /
    n``. The scheduler launches a group's attempts one after another as slots free, before the next
    problem's, so a group counts as submitted when its first attempt starts (PipelineRL counts it
    when the problem enters the problem queue, which can run ahead of the slots by
    ``problem_queue_size``: a group waiting there is tagged with the version at its start here as
    there) and its other attempts start whatever the bound. Counted by tasks (``upcoming_task``),
    so a relaunched or requeued attempt never counts as a new group.
    """

    max_lag: int = 0
    attempts: int = 1

    def __post_init__(self) -> None:
        check_int("max_lag", self.max_lag, 0)
        check_int("attempts", self.attempts, 1)

    @property
    def lag_groups(self) -> int:
        return math.ceil(self.max_lag / self.attempts)

    def check_batch_size(self, batch_size: int) -> None:
        """A batch is whole groups of ``attempts`` (the scenario asks at construction)."""
        if batch_size % self.attempts:
            raise FieldError(
                f"attempts ({self.attempts}): batch_size ({batch_size:,} samples) must be a whole "
                f"number of groups of {self.attempts} (the trainer takes whole groups)",
                "attempts",
            )

    def admits(self, p: PipelineView) -> bool:
        n = self.attempts
        if n == 1:
            return p.started < self.lag_groups + (p.version + 1) * p.batch_size
        task = p.upcoming_task
        if task % n:
            return True  # the rest of a group already submitted
        return task // n < self.lag_groups + (p.version + 1) * (p.batch_size // n)

    def closed(self, p: PipelineView) -> bool:
        """Counts only starts (tasks) and versions: no finishing episode changes its answer. With
        ``attempts`` > 1 a finishing episode that requeues its task (``failures``, a filtering batch
        policy) changes the next task, so the hint is withheld there."""
        if self.attempts > 1:
            filtering: float = getattr(p.scenario.batching, "filter_rate", 0.0)
            if p.scenario.failures is not None or filtering > 0.0:
                return False
        return not self.admits(p)

    def staleness_bound(self, scenario: RunSpec) -> int | None:
        return 0 if self.max_lag == 0 else None

    def staleness_knob(self) -> str:
        """``max_lag`` bounds how far it runs ahead, not ``max_staleness`` (OwnStalenessBound)."""
        return "max_lag (in samples)"


@dataclass(frozen=True)
class SlimeAsyncWorker:
    """slime's fully asynchronous rollout worker: a fixed pool of trajectories in flight.

    THUDM/slime ``slime/rollout/fully_async_rollout.py``, ``AsyncRolloutWorker._loop``: the worker
    tops up while ``len(active_tasks) < max_concurrent`` and ``output_queue.qsize() <
    max_concurrent`` -- concurrency and the completed-but-unconsumed queue are its only bounds;
    no version bound. ``max_concurrent`` is ``sglang_server_concurrency * get_rollout_num_engines``
    (``_get_global_worker``, line 59), counted in groups: one active task and one queue item per
    prompt group (the slime preset's fully asynchronous mode refuses ``n_samples_per_prompt`` > 1,
    so here a group is one episode); None here: the slot count. Not modelled: the worker reaps and
    tops up once every ``poll_interval`` = 1.0 s (lines 91, 171), where this rule starts an
    episode the moment a slot frees.
    """

    max_concurrent: int | None = None

    def __post_init__(self) -> None:
        if self.max_concurrent is not None:
            check_int("max_concurrent", self.max_concurrent, 1)

    def _cap(self, p: PipelineView) -> int:
        return self.max_concurrent if self.max_concurrent is not None else p.config.n_slots

    def unformable(self, batch_size: int, n_slots: int) -> str:
        """Why a batch of ``batch_size`` can never form with this cap ("" when it can): the worker
        stops at cap finished with at most cap running, so 2 cap - 1 is the most ever buffered
        (a run stalled there, after simulating up to it). The slime preset asks at construction."""
        cap = self.max_concurrent if self.max_concurrent is not None else n_slots
        if batch_size < 2 * cap:
            return ""
        return (
            f"batch_size {batch_size} can never form with max_concurrent "
            f"{'(n_slots) ' if self.max_concurrent is None else ''}{cap}: the worker stops once {cap} "
            f"finished episodes wait, so at most {2 * cap - 1} are ever buffered; give batch_size "
            f"< {2 * cap} or max_concurrent > {batch_size // 2}"
        )

    def admits(self, p: PipelineView) -> bool:
        if why := self.unformable(p.batch_size, p.config.n_slots):
            raise PipelineError(f"SlimeAsyncWorker: {why}")
        return p.n_running < self._cap(p) and not self.closed(p)

    def closed(self, p: PipelineView) -> bool:
        """The queue is full: finishing episodes only fill it further."""
        return p.n_buffered >= self._cap(p)

    def staleness_knob(self) -> str:
        """No version bound at all, so ``max_staleness`` means nothing here (OwnStalenessBound)."""
        return "none: the worker has no version bound (max_concurrent caps the work in flight)"


def openrlhf_refusal(scenario: RunSpec) -> FieldError | None:
    """Why OpenRLHF's async trainer cannot be ``scenario`` (None where it can): the field to change.

    * ``failures``: OpenRLHF has no per-sample retry or drop (a failed Ray task raises); counted by
      starts, a relaunch shifted every later batch edge (``RetryFailed(1e-4)``: staleness 4 at
      ``async_queue_size`` 1).
    * ``batching.filter_rate``: OpenRLHF's dynamic filtering (``samples_generator.py`` 168-195)
      refills a batch under one version, where a filtering ``WholeGroups`` relaunches into a later
      batch: not modelled.
    * ``colocated``: async mode never shares the training GPUs with vLLM (``train_ppo_ray.py``
      56, 75: one placement group only with ``colocate_all`` and not ``async_enable``).
    """
    if scenario.failures is not None:
        return FieldError(
            f"OpenRLHF async has no per-sample retry or drop (a failed Ray task raises), got "
            f"failures={type(scenario.failures).__name__}: its batches are counted by starts, so a "
            "relaunch or a drop shifts every later batch edge (mixed versions, the async_queue_size "
            "bound broken); leave failures=None",
            "failures",
        )
    if getattr(scenario.batching, "filter_rate", 0.0):
        return FieldError(
            "OpenRLHF's dynamic filtering is not modelled: it replaces a filtered group within the "
            "same batch under one version, where a filtering batch policy relaunches it into a later "
            "batch; leave filter_rate at 0",
            "batching.filter_rate",
        )
    if scenario.pipeline.colocated:
        return FieldError(
            "OpenRLHF async never puts vLLM on the training GPUs (train_ppo_ray.py: a shared "
            "placement group only with colocate_all and not async_enable); leave colocated=False",
            "colocated",
        )
    return None


@dataclass(frozen=True)
class OpenRLHFBatches:
    """OpenRLHF ``--train.async_enable``: whole rollout batches, one at a time, ``async_queue_size`` ahead.

    OpenRLHF/OpenRLHF ``openrlhf/trainer/ppo_trainer_async.py`` (HEAD 3c3be62): a pool of
    ``async_queue_size`` ``rollout_slots`` tokens (lines 287-297). ``GenerateSamplesActor.fit``
    takes a token before each prompt batch (line 110), generates the whole batch
    (``generate_samples``) and queues it; ``TrainingActor.fit`` returns the token as it takes the
    batch (line 230). So a new batch of B starts only when no episode of the previous one is
    running and fewer than ``queue_size`` finished batches wait; the episodes of a batch start as
    slots allow. (Commit 67302219's ``--async_train``, ``OPENRLHF_ASYNC_QUEUE_SIZE`` and a
    Queue-full wait were superseded by these.)

    Batch edges are counted by starts (``started % B``), which holds while every start is a new
    task and none is dropped, as in OpenRLHF. A run that relaunches or drops (failures, a filtering
    batch policy, an aborting weight update) is refused: at its first start naming the field
    (:func:`openrlhf_refusal`), else at the first batch edge that finds one (a PipelineError).
    """

    queue_size: int = 1

    def __post_init__(self) -> None:
        check_int("queue_size", self.queue_size, 1)

    def admits(self, p: PipelineView) -> bool:
        if p.started % p.batch_size:
            return True  # the rest of the batch being generated
        if p.started == 0 or p.n_dropped or p.upcoming_task != p.started:
            self._check(p)  # every start a new task, none dropped
        return p.n_running == 0 and p.n_buffered < self.queue_size * p.batch_size

    def _check(self, p: PipelineView) -> None:
        if (err := openrlhf_refusal(p.scenario)) is not None:
            raise err
        if p.started == 0:
            return
        raise PipelineError(
            f"OpenRLHFBatches: {p.started:,} starts ({p.n_dropped:,} dropped, next task "
            f"{p.upcoming_task:,}): a start relaunched or dropped work, which OpenRLHF never does, "
            "and its batch edges (counted by starts) no longer fall between batches"
        )

    def closed(self, p: PipelineView) -> bool:
        """Between batches with the queue full: finishing episodes only fill it further."""
        return p.started % p.batch_size == 0 and p.n_buffered >= self.queue_size * p.batch_size

    def staleness_knob(self) -> str:
        """Its queue of ``queue_size`` batches bounds staleness, not ``max_staleness`` (OwnStalenessBound)."""
        return "async_queue_size"
