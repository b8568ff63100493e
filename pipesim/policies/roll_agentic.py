"""ROLL's agentic pipeline: its group supply and its group queue (``scenarios.systems.roll``).

alibaba/ROLL ``roll/distributed/scheduler/rollout_scheduler.py``: :class:`RollGroupAdmission`
(``GroupQueue.advance_step``), :class:`RollGroupQueue` (``GroupQueue.get``,
``GroupQueueManager.get_batch``), and :class:`RollGroupExpiry`, the order the preset had before
it took ROLL's. Re-exported from :mod:`pipesim.policies.systems`, out of which they were split
(past 400 lines) when the supply came to count tasks. ROLL's RLVR pipeline is
:mod:`pipesim.policies.roll`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipesim.policies.bookkeeping import RatioGroups, check_int, group_book, refuse_lost_samples
from pipesim.policies.faults import DropFailed, RetryFailed

if TYPE_CHECKING:
    from pipesim.core.episode import Episode
    from pipesim.core.port import PipelineView

__all__ = ["RollGroupAdmission", "RollGroupExpiry", "RollGroupQueue", "roll_create_step"]


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
    the group filter are, in ``GroupQueue.put``). So every task counts, dropped or not: the
    chapter's throttle with eta = ratio, over tasks (``upcoming_task``). ``async_generation_ratio``
    is an integer (``range()``). A task run again after a failure (``RetryFailed``'s relaunch,
    ``RequeueFailed``'s requeue) fills the group it filled before, not a new one: counted by
    starts, each relaunch spent a group of the supply, and ``RetryFailed(1e-3)`` stalled the preset
    at version 10 of 20, ``RequeueFailed`` at its first failure (its task never started again).
    """

    ratio: int = 1

    def __post_init__(self) -> None:
        check_int("ratio", self.ratio, 0)

    def admits(self, p: PipelineView) -> bool:
        return p.upcoming_task < (p.version + 1 + self.ratio) * p.batch_size

    def staleness_knob(self) -> str:
        """Its ``ratio`` bounds staleness, not the pipeline's ``max_staleness`` (OwnStalenessBound)."""
        return "async_generation_ratio"

    def closed(self, p: PipelineView) -> bool:
        """Counts only tasks and versions: no finishing episode changes its answer, unless a failure
        can put a task back (a requeue lowers the next task): closed only under failures known not
        to (none, ``DropFailed``, ``RetryFailed``)."""
        failures = p.scenario.failures
        return not self.admits(p) and (failures is None or isinstance(failures, DropFailed | RetryFailed))


@dataclass(frozen=True)
class RollGroupQueue(RatioGroups):
    """ROLL agentic's batch: whole groups in creation order, the trainer waiting for the oldest.

    alibaba/ROLL ``roll/distributed/scheduler/rollout_scheduler.py``. ``GroupQueue.get`` takes
    ``next(iter(self.groups))`` ("must consume the first group (smallest episode_id)") and waits
    until it holds ``group_size`` rollouts; ``GroupQueueManager.get_batch`` starts one such ``get``
    per env group and starts the next round only when every queue has handed over one group, until
    ``rollout_batch_size`` rollouts; a group with ``current_step - create_step > ratio`` is skipped.
    ``roll/pipeline/agentic/agentic_config.py`` sets ``max_traj_per_env`` to ``ceil(rollout_batch_size
    / (num_env_groups * group_size))`` when async, and ``advance_step`` creates that many groups
    per queue per step, so with ROLL's example configs (``examples/qwen2.5-0.5B-agentic/
    agent_val_frozen_lake_async.yaml``: 128 env groups x group_size 8 = rollout_batch_size 1024)
    a batch is exactly ``max_traj_per_env`` rounds: the groups created for its step, one step's
    worth in creation order. The number of env groups does not change which groups: batch k (the
    k-th request, at version k) takes groups ``k B/n`` .. ``(k + 1) B/n - 1``, waiting for the
    slowest of them. Those were created at step ``k - ratio`` (:func:`roll_create_step`), so
    ``advance_step`` never expires one and get_batch never skips one: this rule drops nothing.

    Promises staleness <= ratio under :class:`RollGroupAdmission` (which never starts group g
    before version ``g n / B - ratio``). Not modelled: a supply that is not a whole number of
    groups per env group (``max_traj_per_env`` rounded up), where the surplus ages at the queue
    heads and the round-robin over env groups decides what expires. Failures that lose a sample
    are refused (a group that never completes would be waited on for good).
    """

    MIN_RATIO = 0  # ratio 0: the batch is the groups of the current step (synchronous)

    def min_items(self, p: PipelineView) -> int:
        refuse_lost_samples(p, "RollGroupQueue")  # asked whenever the trainer waits
        return p.batch_size

    def select(self, buffer: list[Episode], p: PipelineView) -> tuple[list[Episode] | None, list[Episode]]:
        refuse_lost_samples(p, "RollGroupQueue")
        b, n = p.batch_size, self.samples_per_group
        if len(buffer) < b:  # fewer than a batch finished: no batch (min_items' promise)
            return None, []
        book = group_book(p, n, b, "RollGroupQueue")
        book.absorb(buffer)
        first = p.batches_taken * (b // n)  # the oldest group not yet trained
        wanted = range(first, first + b // n)
        if any(g not in book.complete for g in wanted):
            return None, []  # GroupQueue.get waits on the head of its queue
        return book.remove(buffer, wanted), []


@dataclass(frozen=True)
class RollGroupExpiry(RatioGroups):
    """The first B groups to finish, groups older than ``async_generation_ratio`` steps expired.

    What the ``roll`` preset did before it took :class:`RollGroupQueue`'s order, kept to compare
    the two: ROLL's ``GroupQueue.get`` hands groups over oldest first, so ROLL never trains a group
    before an older one of its queue. alibaba/ROLL ``roll/distributed/scheduler/rollout_scheduler.py``:
    ``GroupQueue.advance_step(step)`` removes every group with ``step - group.create_step >
    async_generation_ratio`` (finished or not), and ``GroupQueue.put`` ignores a rollout whose group
    is gone. Here, when the trainer at version v asks for a batch, episodes whose group was created
    before ``v - ratio`` are discarded (an expired one still running finishes and is discarded at
    the next request), then the first B finished are taken: stragglers expire, and with exactly B
    groups a step each expiry eats the ratio's headroom for good. Promises staleness <= ratio,
    counted from the group's creation step, which is never after the episode's start.

    ``samples_per_group`` n > 1: one pipesim episode is one sample and a ROLL group is samples
    ``g * n`` to ``g * n + n - 1`` (the compute workload's numbering). The trainer takes the first
    B / n groups to complete, whole; a group expires as a whole (its create step is that of its
    first sample). :class:`RollGroupQueue` numbers groups the same way.
    """

    MIN_RATIO = 0  # ratio 0: groups of the current step only

    def select(self, buffer: list[Episode], p: PipelineView) -> tuple[list[Episode] | None, list[Episode]]:
        b, oldest_ok = p.batch_size, p.version - self.ratio
        if len(buffer) < b:  # no request to serve yet: nothing expires (min_items' promise)
            return None, []
        n = self.samples_per_group
        if n > 1:
            book = group_book(p, n, b, "RollGroupExpiry")
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
