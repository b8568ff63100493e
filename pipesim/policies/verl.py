"""verl fully async's rules, read from ``recipe/fully_async_policy`` (volcengine/verl; since January
2026 ``verl/experimental/fully_async_policy``, the same code).

* :class:`VerlRollouter` -- the rollouter's stale-sample counter (``fully_async_rollouter.py``),
  reset at each parameter update to the work in flight and queued; generation pauses while it
  reaches ``(1 + staleness_threshold) x trigger_parameter_sync_step x require_batches x
  ppo_mini_batch_size`` or the queue is full; concurrency capped by ``max_concurrent_samples``
  prompts, each holding its place until all its ``rollout.n`` responses are done.
* :class:`VerlMessageQueue` -- ``message_queue.py`` (``MessageQueue.put_sample``): a bounded
  queue that evicts its oldest sample when full; its freshness check (:func:`verl_put_accepted`).

The class docstrings cite the functions each rule models. :mod:`pipesim.policies.systems` holds
the other systems and re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipesim.core.validate import FieldError
from pipesim.policies.bookkeeping import check_int, check_number, check_whole_groups, group_book

if TYPE_CHECKING:
    from pipesim.core.episode import Episode
    from pipesim.core.port import PipelineView


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
    next reset. The count is exact while nothing is dropped: with verl's default queue size the
    queue never overflows, and the freshness check never fires (:class:`VerlMessageQueue`). With
    a smaller ``max_queue_size`` the queue evicts, and verl keeps counting an evicted sample
    until the next reset, so between an eviction and that reset this counter is lower than
    verl's by the samples evicted since the last update, and may admit a sample verl would hold.

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

    **Prompts, not responses** (``samples_per_prompt`` n = ``rollout.n`` > 1; one episode is one
    response, group ``t // n``). verl's unit of work is a ``RolloutSample``: one prompt, whose n
    responses ``generate_sequences_no_post`` (``agent_loop/agent_loop.py``) starts together as n
    requests and gathers; ``_processor_worker`` adds it to ``active_tasks`` as *one* task, counts
    it once in ``staleness_samples`` and caps ``len(active_tasks)`` at ``max_concurrent_samples``
    (``while len(self.active_tasks) >= self.max_concurrent_samples``: wait for one task to
    complete). So here, with n > 1: new work starts as whole groups (the rest of a group in
    progress is always admitted); a group is *active* from its start until all n of its
    responses have finished, and a new one starts only while fewer than ``max_concurrent // n``
    groups are active (``max_concurrent`` stays in responses, ``servers x 16 x n`` for verl's
    ``servers x 16`` prompts); and the counter's cap is verl's, in prompts:
    ``int(B / n x (1 + threshold) x k)`` groups. A group's short responses therefore keep its
    place while its longest one decodes, which caps the responses in flight below the slots
    (the per-response cap this replaces refilled a place as soon as any response finished).
    """

    staleness_threshold: float = 0.5
    trigger_parameter_sync_step: int = 1
    max_concurrent: int | None = None
    max_queue_size: int | None = None
    samples_per_prompt: int = 1

    def __post_init__(self) -> None:
        check_number("staleness_threshold", self.staleness_threshold, 0.0)
        check_int("trigger_parameter_sync_step", self.trigger_parameter_sync_step, 1)
        if self.max_concurrent is not None:
            check_int("max_concurrent", self.max_concurrent, 1)
        if self.max_queue_size is not None:
            check_int("max_queue_size", self.max_queue_size, 1)
        check_int("samples_per_prompt", self.samples_per_prompt, 1)
        n = self.samples_per_prompt
        if n > 1 and self.max_concurrent is not None and self.max_concurrent < n:
            raise FieldError(
                f"max_concurrent {self.max_concurrent} < samples_per_prompt {n}: not one prompt "
                "group could ever run",
                "max_concurrent",
            )

    def max_required_samples(self, batch_size: int) -> int:
        """verl's ``max_required_samples`` (in responses): int() truncates, as in
        ``set_max_required_samples``, and verl counts prompts, so with n > 1 it is a whole
        number of prompt groups."""
        n, k = self.samples_per_prompt, self.trigger_parameter_sync_step
        return int(batch_size // n * (self.staleness_threshold + 1) * k) * n

    def active_groups(self, p: PipelineView) -> int:
        """verl's ``len(active_tasks)`` with n > 1: prompt groups started and not yet complete
        (complete: trained, evicted whole by the queue, or all n buffered)."""
        n, b = self.samples_per_prompt, p.batch_size
        queue = p.scenario.batching
        if not (isinstance(queue, VerlMessageQueue) and queue.samples_per_group == n):
            raise FieldError(
                f"VerlRollouter with samples_per_prompt {n} counts complete prompts in the group book "
                f"its VerlMessageQueue keeps: give batching=VerlMessageQueue(samples_per_group={n}) "
                f"(scenarios.systems.verl_fully_async does), not {type(queue).__name__}",
                "samples_per_prompt",
            )
        book = group_book(p, n, b, "VerlRollouter")
        book.absorb(p.buffered)
        done = (p.batches_taken * b + p.n_dropped) // n + len(book.complete)
        return -(-p.started // n) - done

    def stale_samples(self, p: PipelineView) -> int:
        """verl's ``staleness_samples`` now: the reset value at the last update plus new starts."""
        k = self.trigger_parameter_sync_step
        param_version = (p.version // k) * k
        return p.started - p.n_dropped - param_version * p.batch_size

    def admits(self, p: PipelineView) -> bool:
        n = self.samples_per_prompt
        if n > 1 and p.started % n:
            return True  # the rest of the prompt group being started: its n requests go together
        cap = self.max_required_samples(p.batch_size)
        concurrent = cap if self.max_concurrent is None else min(self.max_concurrent, cap)
        if n > 1:
            if self.active_groups(p) >= concurrent // n:
                return False
        elif p.n_running >= concurrent:
            return False
        return not self.closed(p)

    def closed(self, p: PipelineView) -> bool:
        """The counter or the queue says no: a finishing episode only grows the queue, so only a
        start, a drop or a new version changes this (the concurrency cap is not part of it; nor
        is a prompt group half started, which is always admitted)."""
        n = self.samples_per_prompt
        if n > 1 and p.started % n:
            return False
        cap = self.max_required_samples(p.batch_size)
        queue_cap = cap if self.max_queue_size is None else self.max_queue_size
        return self.stale_samples(p) >= cap or p.n_buffered >= queue_cap

    def staleness_knob(self) -> str:
        """Its counter bounds staleness, not the pipeline's ``max_staleness`` (OwnStalenessBound)."""
        return "staleness_threshold (with trigger_parameter_sync_step)"


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
      ``on_put(episode, p)`` the engine calls when an episode enters the buffer. (The check is in
      development versions of the recipe; in the merged ``message_queue.py``, at ``b25bb7d4f``
      (``put_sample``, lines 67-96) and at verl's newest snapshot ``b178a3c``, it only evicts when
      full. Either way nothing is dropped.)
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
            check_int("max_queue_size", self.max_queue_size, 1)
        check_number("staleness_threshold", self.staleness_threshold, 0.0)
        check_int("trigger_parameter_sync_step", self.trigger_parameter_sync_step, 1)
        check_int("samples_per_group", self.samples_per_group, 1)

    def check_batch_size(self, batch_size: int) -> None:
        """``FieldError`` naming ``samples_per_group`` unless ``batch_size`` is whole groups
        (:func:`~pipesim.policies.bookkeeping.check_whole_groups`: the trainer takes B / n queue
        items), or ``max_queue_size`` where a set queue cannot hold one batch. The scenario asks at
        construction; both were refused mid-run, at the first batch, naming ``batch_size``."""
        check_whole_groups(batch_size, self.samples_per_group)
        if self.capacity(batch_size) < batch_size:
            raise FieldError(
                f"max_queue_size ({self.max_queue_size:,}) < batch_size ({batch_size:,}): the queue "
                "cannot hold one batch, so none can form",
                "max_queue_size",
            )

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

    def min_items(self, p: PipelineView) -> int:
        return p.batch_size

    def select(self, buffer: list[Episode], p: PipelineView) -> tuple[list[Episode] | None, list[Episode]]:
        b, cap = p.batch_size, self.capacity(p.batch_size)
        if cap < b:
            raise FieldError(
                f"VerlMessageQueue max_queue_size {cap} < batch_size {b}: no batch can form", "max_queue_size"
            )
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
        book = group_book(p, n, b, "VerlMessageQueue")
        book.absorb(buffer)
        over = len(book.complete) - self.group_capacity(b)
        evicted = book.remove(buffer, list(book.complete)[:over]) if over > 0 else []
        if len(book.complete) < b // n:
            return None, evicted
        return book.remove(buffer, list(book.complete)[: b // n]), evicted
