"""Policies that model real systems' own code (``scenarios/systems.py`` builds the presets).

Each class names the repository, file and function whose rule it models. They read only the
port (:class:`pipesim.core.port.PipelineView`: ``started``, ``n_dropped``, ``version``, ``n_running``,
``n_buffered``, ``batch_size``), so the engine does not change for them.

* :class:`VerlRollouter` -- verl fully async (``recipe/fully_async_policy``): the rollouter's
  stale-sample counter, reset at each parameter update to the work in flight and queued.
* :class:`VerlMessageQueue` -- verl fully async (``message_queue.py``, ``MessageQueue.put_sample``):
  a bounded queue that evicts its oldest sample when full; its freshness check (:func:`verl_put_accepted`).
* :class:`RollGroupExpiry` -- ROLL (``GroupQueue.advance_step``): groups created more than
  ``async_generation_ratio`` steps ago expire and their rollouts are ignored.
* :class:`RollGroupAdmission` -- ROLL: ``(1 + ratio)`` steps of groups are created at the first
  step and one step of groups at each step after, expired ones not replaced.
* :class:`PipelineRLLag` -- PipelineRL (``pipelinerl/actor.py``, ``ActorLoop``): groups submitted
  while fewer than ``ceil(max_lag / attempts) + (v + 1) * groups_per_update``.
* :class:`SlimeAsyncWorker` -- slime (``slime/rollout/fully_async_rollout.py``,
  ``AsyncRolloutWorker._loop``): a pool of trajectories bounded by concurrency and by the queue
  of completed groups, no version bound.
* :class:`OpenRLHFBatches` -- OpenRLHF (``openrlhf/trainer/ppo_trainer_async.py``,
  ``GenerateSamplesActor.fit``): whole batches, one at a time, behind a bounded queue.

Every admission rule here says when it is *closed* (no finishing episode can make it admit), and
the batch policies give the ``ready`` / ``min_items`` hints, so the engine's shortcuts apply;
``pipesim.testing.check_promises`` confirms they change nothing on the presets.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pipesim.config import Scenario
    from pipesim.core.episode import Episode
    from pipesim.core.port import PipelineView


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_number(name: str, value: object, minimum: float) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < minimum:  # type: ignore[operator]
        raise ValueError(f"{name} must be a finite number >= {minimum}, got {value!r}")


class _GroupBook:
    """One run's view of the buffer by prompt group (sample ``t`` of group ``t // n``), kept up to
    date incrementally: the batch rules below call :meth:`absorb` with the buffer, then take whole
    groups out with :meth:`remove`. Only these rules remove episodes from their buffer, so the
    buffer's first ``scanned`` entries are always the ones already absorbed."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.scanned = 0
        self.members: dict[int, list[Episode]] = {}  # group -> its buffered samples
        self.complete: dict[int, None] = {}  # groups with all n samples buffered, in completion order

    def absorb(self, buffer: Sequence[Episode]) -> None:
        for i in range(self.scanned, len(buffer)):
            ep = buffer[i]
            g = ep.task_id // self.n
            m = self.members.setdefault(g, [])
            m.append(ep)
            if len(m) == self.n:
                self.complete[g] = None
        self.scanned = len(buffer)

    def remove(self, buffer: list[Episode], groups: Sequence[int]) -> list[Episode]:
        """Take ``groups`` (complete or not) out of the buffer; their samples, group by group."""
        out: list[Episode] = []
        for g in groups:
            out.extend(self.members.pop(g, ()))
            self.complete.pop(g, None)
        if out:
            gone = {id(e) for e in out}
            buffer[:] = [e for e in buffer if id(e) not in gone]
        self.scanned = len(buffer)
        return out


_BOOKS: weakref.WeakKeyDictionary[object, _GroupBook] = weakref.WeakKeyDictionary()


def _book(p: PipelineView, n: int, batch_size: int, who: str) -> _GroupBook:
    """The run's group book (created at the first call; keyed by the pipeline, not the policy)."""
    book = _BOOKS.get(p)
    if book is None:
        if batch_size % n:
            raise ValueError(f"{who}: batch_size {batch_size} is not a whole number of groups of {n}")
        book = _BOOKS[p] = _GroupBook(n)
    return book


@dataclass(frozen=True)
class VerlRollouter:
    """verl fully async: the rollouter's pause rule, its queue bound and its concurrency cap.

    Modelled on volcengine/verl ``recipe/fully_async_policy/fully_async_rollouter.py``:

    * ``set_max_required_samples``: ``max_required_samples = int(required_samples * (1 +
      staleness_threshold) * trigger_parameter_sync_step)`` with ``required_samples =
      ppo_mini_batch_size * require_batches`` (pipesim's B: the samples one trainer step takes);
      ``max_queue_size`` is the same number, and ``max_concurrent_samples = min(servers * 16,
      max_required_samples)`` (``max_concurrent`` here; None: the slot count).
    * ``_processor_worker``: each *new* sample taken from the pending queue adds one to
      ``staleness_samples`` (a cancelled partial rollout taken back from the cancel queue does not).
    * ``update_param_version``: at each parameter update the counter is reset to
      ``len(active_tasks) + cancel_queue.qsize() + message queue size`` -- the work in flight and
      queued, not zero.
    * ``_should_pause_generation``: no new sample while the message queue holds
      ``max_queue_size`` or the counter reaches ``max_required_samples``.

    In pipesim's counters: the parameter version is ``V = (v // k) * k`` (weights move every ``k``
    trainer steps), the trainer has taken ``V * B`` episodes when it is published, so the work in
    flight and queued then is ``started_at_version[V] - dropped - V * B`` and the counter now is
    ``started - dropped - V * B``. Dropped episodes are subtracted at once rather than at the
    next reset (the verl presets drop nothing, so for them the count is exact).

    The cancel queue (``pause``, ``_processor_worker``): with ``partial_rollout`` the sync cancels
    the samples in flight into ``cancel_queue``; after ``resume`` the processor takes them back
    *before* any new sample, under the same concurrency cap, but only once
    ``_should_pause_generation`` is false again. A hold after the sync would need an engine hook
    (paused episodes that stay off their slots until admission opens); it is not needed, because
    the hold can never bind: with no drops, the work present at a reset is the reset value plus
    the starts since, less the ``k * B`` the trainer took, so it is at most ``cap - k * B``, below
    the counter's cap, and the queue (part of that work) is below ``max_queue_size`` (= cap). So
    right after every reset the cancelled samples restart at once, as pipesim's paused episodes
    do. They restart as *new requests* (``PartialSingleTurnAgentLoop.run`` sends ``prompt_ids +
    response_ids``) after ``clear_kv_cache``, so they re-prefill their prefix: the preset pairs
    this rule with :class:`~pipesim.policies.updates.AbortReprefill`. verl's processor also waits
    for every active task to finish after a pause before it looks again; nothing can start then
    anyway (the counter only moves at a reset), so that wait changes nothing here.
    """

    staleness_threshold: float = 0.5
    trigger_parameter_sync_step: int = 1
    max_concurrent: int | None = None
    max_queue_size: int | None = None

    def __post_init__(self) -> None:
        _check_number("staleness_threshold", self.staleness_threshold, 0.0)
        _check_int("trigger_parameter_sync_step", self.trigger_parameter_sync_step, 1)
        if self.max_concurrent is not None:
            _check_int("max_concurrent", self.max_concurrent, 1)
        if self.max_queue_size is not None:
            _check_int("max_queue_size", self.max_queue_size, 1)

    def max_required_samples(self, batch_size: int) -> int:
        """verl's ``max_required_samples``: int() truncates, as in ``set_max_required_samples``."""
        return int(batch_size * (self.staleness_threshold + 1) * self.trigger_parameter_sync_step)

    def stale_samples(self, p: PipelineView) -> int:
        """verl's ``staleness_samples`` now: the reset value at the last update plus new starts."""
        k = self.trigger_parameter_sync_step
        param_version = (p.version // k) * k
        return p.started - p.n_dropped - param_version * p.batch_size

    def admits(self, p: PipelineView) -> bool:
        cap = self.max_required_samples(p.batch_size)
        concurrent = cap if self.max_concurrent is None else min(self.max_concurrent, cap)
        if p.n_running >= concurrent:
            return False
        return not self.closed(p)

    def closed(self, p: PipelineView) -> bool:
        """The counter or the queue says no: a finishing episode only grows the queue, so only a
        start, a drop or a new version changes this (the concurrency cap is not part of it)."""
        cap = self.max_required_samples(p.batch_size)
        queue_cap = cap if self.max_queue_size is None else self.max_queue_size
        return self.stale_samples(p) >= cap or p.n_buffered >= queue_cap


def verl_put_accepted(queue_version: int, sample_version: int, staleness_threshold: float) -> bool:
    """verl's ``MessageQueue.put_sample`` freshness check: a sample is dropped when ``queue_version
    - sample_version > staleness_threshold`` (versions count parameter syncs; the threshold is the
    same float as the rollouter's, so with 0.5 any lag of one sync is too much)."""
    return queue_version - sample_version <= staleness_threshold


@dataclass(frozen=True)
class VerlMessageQueue:
    """verl fully async's message queue between rollouter and trainer, as the trainer's batch rule.

    volcengine/verl ``recipe/fully_async_policy/message_queue.py``, ``MessageQueue``: a
    ``deque(maxlen=max_queue_size)``; ``put_sample`` first drops a sample whose ``param_version``
    lags the queue's ``current_param_version`` by more than ``staleness_threshold``
    (:func:`verl_put_accepted`), then, if the queue is full, evicts the *oldest* sample
    (``popleft``) and appends; ``get_samples(min_batch_count)`` waits for that many and pops them
    oldest first. ``max_queue_size`` None is verl's own choice, ``set_max_required_samples``:
    ``int(B * (1 + staleness_threshold) * trigger_parameter_sync_step)``.

    * Eviction is exact here although it runs when the trainer asks rather than at each put: a
      deque of ``maxlen`` N that only receives appends between two gets holds the last N put, and
      the buffer is in finishing (put) order, so dropping all but the newest N at the get leaves
      the same samples. With verl's default N the queue never overflows (the rollouter's counter
      admits at most N samples of work per parameter version, see :class:`VerlRollouter`); a
      smaller ``max_queue_size`` makes it evict.
    * The freshness check compares two versions taken at the put: ``rollout_sample.param_version``
      is the rollouter's version when the sample *finished* (``_process_single_sample_streaming``)
      and the queue's is moved by ``ParameterSynchronizer.sync_weights`` after the rollouter has
      paused (partial rollouts cancelled, or active tasks awaited) and before the rollouter's own
      ``update_param_version`` and ``resume``. No sample finishes in between, so the staleness at a
      put is 0 for every sample under every sync verl has, and nothing is ever dropped by it. The
      policy applies it with that value. Weight updates that let samples finish mid-sync
      (per-replica or in-flight updates, which verl does not have) would need the version each
      episode finished under and the queue's version at that instant, which the port does not
      expose. That needs a hook: ``Episode.finish_version`` on the port, or a batch-policy
      ``on_put(episode, p)`` the engine calls when an episode enters the buffer.
    * ``samples_per_group`` n > 1: a queue item is a ``RolloutSample``, one prompt with its
      ``rollout.n`` responses (``_process_single_sample_streaming`` puts it once
      ``generate_single_sample_async`` has all n), so the queue holds complete groups (sample
      ``t`` of group ``t // n``), the trainer takes the oldest B / n, and a full queue evicts the
      oldest group; ``max_queue_size`` None is then ``int(B / n * (1 + threshold) * k)`` groups,
      a given one is in samples (``// n`` groups). The rollouter's queue check still counts the
      finished samples of unfinished groups, which verl holds in its active tasks.
    """

    max_queue_size: int | None = None
    staleness_threshold: float = 0.5
    trigger_parameter_sync_step: int = 1
    samples_per_group: int = 1

    def __post_init__(self) -> None:
        if self.max_queue_size is not None:
            _check_int("max_queue_size", self.max_queue_size, 1)
        _check_number("staleness_threshold", self.staleness_threshold, 0.0)
        _check_int("trigger_parameter_sync_step", self.trigger_parameter_sync_step, 1)
        _check_int("samples_per_group", self.samples_per_group, 1)

    def group_capacity(self, batch_size: int) -> int:
        """The queue's size in groups (``samples_per_group`` > 1)."""
        n = self.samples_per_group
        if self.max_queue_size is not None:
            return self.max_queue_size // n
        return int(batch_size // n * (self.staleness_threshold + 1) * self.trigger_parameter_sync_step)

    def capacity(self, batch_size: int) -> int:
        if self.max_queue_size is not None:
            return self.max_queue_size
        k = self.trigger_parameter_sync_step
        return int(batch_size * (self.staleness_threshold + 1) * k)

    def ready(self, buffer: Sequence[Episode], p: PipelineView) -> bool:
        """A batch needs B queued samples; eviction only matters beyond the capacity (at least B)."""
        return len(buffer) >= p.batch_size

    def min_items(self, p: PipelineView) -> int:
        return p.batch_size

    def select(self, buffer: list[Episode], p: PipelineView) -> tuple[list[Episode] | None, list[Episode]]:
        b, cap = p.batch_size, self.capacity(p.batch_size)
        if cap < b:
            raise ValueError(f"VerlMessageQueue max_queue_size {cap} < batch_size {b}: no batch can form")
        if self.samples_per_group > 1:
            return self._select_groups(buffer, p)
        evicted: list[Episode] = []
        if len(buffer) > cap:  # popleft at each put that found the deque full
            evicted = buffer[: len(buffer) - cap]
            del buffer[: len(buffer) - cap]
        if len(buffer) < b:
            return None, evicted
        batch = buffer[:b]
        del buffer[:b]
        return batch, evicted

    def _select_groups(
        self, buffer: list[Episode], p: PipelineView
    ) -> tuple[list[Episode] | None, list[Episode]]:
        n, b = self.samples_per_group, p.batch_size
        book = _book(p, n, b, "VerlMessageQueue")
        book.absorb(buffer)
        over = len(book.complete) - self.group_capacity(b)
        evicted = book.remove(buffer, list(book.complete)[:over]) if over > 0 else []
        if len(book.complete) < b // n:
            return None, evicted
        return book.remove(buffer, list(book.complete)[: b // n]), evicted


def roll_create_step(episode_index: int, batch_size: int, ratio: int) -> int:
    """The step at which ROLL created the group the ``episode_index``-th start fills.

    ``GroupQueue.advance_step`` creates ``(1 + ratio)`` steps' worth of groups at the first step
    (all with ``create_step`` 0) and one step's worth at each later step ``s`` (``create_step`` s);
    environments take groups oldest first, so the n-th start fills the n-th group created.
    """
    return max(0, episode_index // batch_size - ratio)


@dataclass(frozen=True)
class RollGroupAdmission:
    """ROLL's group supply: groups exist for ``(v + 1 + ratio) * B`` starts by step v.

    alibaba/ROLL ``roll/distributed/scheduler/rollout_scheduler.py``, ``GroupQueue.advance_step``:
    the first call creates ``async_generation_ratio`` extra steps of groups, every call one more
    step's worth, and expired groups are removed without being replaced (only groups rejected by
    the group filter are, in ``GroupQueue.put``). So every start counts, dropped or not: the
    chapter's throttle with eta = ratio. ``async_generation_ratio`` is an integer (``range()``).
    """

    ratio: int = 1

    def __post_init__(self) -> None:
        _check_int("ratio", self.ratio, 0)

    def admits(self, p: PipelineView) -> bool:
        return p.started < (p.version + 1 + self.ratio) * p.batch_size

    def closed(self, p: PipelineView) -> bool:
        """Counts only starts and versions: no finishing episode changes its answer."""
        return not self.admits(p)


@dataclass(frozen=True)
class RollGroupExpiry:
    """ROLL: groups older than ``async_generation_ratio`` steps expire; their rollouts are ignored.

    alibaba/ROLL ``roll/distributed/scheduler/rollout_scheduler.py``: ``GroupQueue.advance_step(step)``
    removes every group with ``step - group.create_step > async_generation_ratio`` (finished or
    not), and ``GroupQueue.put`` ignores a rollout whose group is gone -- its environment has done
    the work for nothing. The trainer then takes complete groups in order. Here, when the trainer
    at version v asks for a batch, episodes whose group was created before ``v - ratio`` are
    discarded (an expired one still running finishes and is discarded at the next request), then
    the first B finished are taken. Promises staleness <= ratio, counted from the group's creation
    step, which is never after the episode's start.

    ``samples_per_group`` n > 1: one pipesim episode is one sample and a ROLL group is samples
    ``g * n`` to ``g * n + n - 1`` (the compute workload's numbering). ``GroupQueue.get`` hands over
    a group once ``group_size`` rollouts are in it, so the trainer takes the first B / n groups to
    complete, whole; a group expires as a whole (its create step is that of its first sample).
    """

    ratio: int = 1
    samples_per_group: int = 1

    def __post_init__(self) -> None:
        _check_int("ratio", self.ratio, 0)
        _check_int("samples_per_group", self.samples_per_group, 1)

    def staleness_bound(self, scenario: Scenario) -> int | None:
        return self.ratio

    def ready(self, buffer: Sequence[Episode], p: PipelineView) -> bool:
        """A cheap necessary condition for a batch: B finished episodes, expired or not."""
        return len(buffer) >= p.batch_size

    def min_items(self, p: PipelineView) -> int:
        return p.batch_size

    def select(self, buffer: list[Episode], p: PipelineView) -> tuple[list[Episode] | None, list[Episode]]:
        b, oldest_ok = p.batch_size, p.version - self.ratio
        n = self.samples_per_group
        if n > 1:
            book = _book(p, n, b, "RollGroupExpiry")
            book.absorb(buffer)
            gone = [g for g in book.members if roll_create_step(g * n, b, self.ratio) < oldest_ok]
            dropped = book.remove(buffer, gone)
            if len(book.complete) < b // n:
                return None, dropped
            return book.remove(buffer, list(book.complete)[: b // n]), dropped
        expired = [e for e in buffer if roll_create_step(e.id, b, self.ratio) < oldest_ok]
        if expired:
            buffer[:] = [e for e in buffer if roll_create_step(e.id, b, self.ratio) >= oldest_ok]
        if len(buffer) < b:
            return None, expired
        batch = buffer[:b]
        del buffer[:b]
        return batch, expired


@dataclass(frozen=True)
class PipelineRLLag:
    """PipelineRL's lag bound: submit groups while fewer than ``lag_groups + (v + 1) * B``.

    ServiceNow/PipelineRL ``pipelinerl/actor.py``, ``ActorLoop.run``: ``can_submit_before_update``
    starts at ``lag_groups + groups_per_update`` with ``lag_groups = ceil(max_lag / attempts)``
    (``finetune.max_lag`` in samples, ``attempts`` samples per group) and grows by
    ``groups_per_update`` at each new weight version; a problem is submitted while
    ``submitted_groups < can_submit_before_update``. A pipesim episode is one group and B is
    ``groups_per_update``. Nothing is subtracted for dropped work (PipelineRL drops none), and
    ``max_lag = 0`` is synchronous: exactly one update's groups per version.
    """

    max_lag: int = 0
    attempts: int = 1

    def __post_init__(self) -> None:
        _check_int("max_lag", self.max_lag, 0)
        _check_int("attempts", self.attempts, 1)

    @property
    def lag_groups(self) -> int:
        return math.ceil(self.max_lag / self.attempts)

    def admits(self, p: PipelineView) -> bool:
        return p.started < self.lag_groups + (p.version + 1) * p.batch_size

    def closed(self, p: PipelineView) -> bool:
        """Counts only starts and versions: no finishing episode changes its answer."""
        return not self.admits(p)

    def staleness_bound(self, scenario: Scenario) -> int | None:
        return 0 if self.max_lag == 0 else None


@dataclass(frozen=True)
class SlimeAsyncWorker:
    """slime's fully asynchronous rollout worker: a fixed pool of trajectories in flight.

    THUDM/slime ``slime/rollout/fully_async_rollout.py``, ``AsyncRolloutWorker._loop``: the worker
    tops up while ``len(active_tasks) < max_concurrent`` and ``output_queue.qsize() <
    max_concurrent`` -- concurrency and the completed-but-unconsumed queue are its only bounds;
    no version bound (``max_concurrent`` is ``sglang_server_concurrency * engines /
    n_samples_per_prompt``; None here: the slot count).
    """

    max_concurrent: int | None = None

    def __post_init__(self) -> None:
        if self.max_concurrent is not None:
            _check_int("max_concurrent", self.max_concurrent, 1)

    def _cap(self, p: PipelineView) -> int:
        return self.max_concurrent if self.max_concurrent is not None else p.config.n_slots

    def admits(self, p: PipelineView) -> bool:
        return p.n_running < self._cap(p) and not self.closed(p)

    def closed(self, p: PipelineView) -> bool:
        """The queue is full: finishing episodes only fill it further."""
        return p.n_buffered >= self._cap(p)


@dataclass(frozen=True)
class OpenRLHFBatches:
    """OpenRLHF ``--async_train``: whole rollout batches, one at a time, behind a bounded queue.

    OpenRLHF/OpenRLHF ``openrlhf/trainer/ppo_trainer_async.py``, ``GenerateSamplesActor.fit``: for
    each prompt batch it waits while the ray ``Queue`` (``maxsize`` = ``OPENRLHF_ASYNC_QUEUE_SIZE``,
    default 1) is full, then generates the whole batch (``generate_samples``) and puts it on the
    queue; the trainer (``TrainingActor.fit``) takes one batch per step. So a new batch of B
    starts only when no episode of the previous one is running and fewer than ``queue_size``
    finished batches wait; the episodes of a batch start as slots allow.
    """

    queue_size: int = 1

    def __post_init__(self) -> None:
        _check_int("queue_size", self.queue_size, 1)

    def admits(self, p: PipelineView) -> bool:
        if p.started % p.batch_size:
            return True  # the rest of the batch being generated
        return p.n_running == 0 and p.n_buffered < self.queue_size * p.batch_size

    def closed(self, p: PipelineView) -> bool:
        """Between batches with the queue full: finishing episodes only fill it further."""
        return p.started % p.batch_size == 0 and p.n_buffered >= self.queue_size * p.batch_size
