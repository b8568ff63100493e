"""The checks of what a policy passes to the port's task actions (``requeue``, ``relaunch``): a
replica index, a task of the pool, and the parent episode a relaunch replaces.

:class:`PortArgs` is a mixin of :class:`~pipesim.core.port_impl.PolicyPort`. It holds the
argument checks apart from the actions because a parent's check reads the run's records (live
and archived episodes, the buffer while a batch policy's ``select`` runs), which the actions
themselves never need; each check is O(1) and refuses through ``PolicyPort._refused``, naming the
calling policy, the action and the bad value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pipesim.core import errors
from pipesim.core.episode import ABORTED, BUFFERED, DISCARDED, FAILED
from pipesim.core.episode import STATUSES as STATUSES_BY_CODE
from pipesim.core.errors import PipelineError, shown

if TYPE_CHECKING:
    from pipesim.core.buffer import EpisodeBuffer
    from pipesim.core.records import EpisodeRecords
    from pipesim.core.seams import EngineReplica

__all__ = ["DROPPED", "PortArgs"]

DROPPED = frozenset((DISCARDED, ABORTED, FAILED))
"""The statuses :meth:`PolicyPort.drop` gives: an episode dropped is discarded, aborted or failed."""


class PortArgs:
    """Argument checks of the port's task actions (a mixin of ``PolicyPort``)."""

    engines: list[EngineReplica]
    buffer: EpisodeBuffer
    episodes: EpisodeRecords
    _durations: Sequence[float]

    def _refused(self, message: str) -> PipelineError:
        raise NotImplementedError  # PolicyPort's

    def _replica(self, replica: object, action: str) -> int:
        if isinstance(replica, bool) or not isinstance(replica, int) or not 0 <= replica < len(self.engines):
            n = len(self.engines)
            raise self._refused(f"{action}: replica must be an int in [0, {n}), got {shown(replica)}")
        return replica

    def _check_task(self, task: object, action: str) -> int:
        n = len(self._durations)
        if isinstance(task, bool) or not isinstance(task, int) or not 0 <= task < n:
            raise self._refused(
                f"{action}: task must be an int in [0, {n}) (the pool's tasks), got {shown(task)}"
            )
        return task

    def _check_parent(self, parent: object, task: int, action: str) -> int:
        """The episode a relaunch of ``task`` replaces: its id, or -1 for none. A parent is an
        episode of this run dropped for good (aborted, discarded or failed) that ran ``task``: the
        relaunch runs the lost episode again (:mod:`pipesim.core.episode`). One that a batch
        policy's ``select`` discards is still buffered while ``select`` runs: the buffer checks it
        once ``select`` returns (:meth:`EpisodeBuffer.requeued_from`). O(1) a pair."""
        if isinstance(parent, bool) or not isinstance(parent, int) or parent < -1:
            raise self._refused(
                f"{action}: parent must be an int (the lost episode's id, or -1), got {shown(parent)}"
            )
        if parent == -1:
            return parent
        n = len(self.episodes)
        found = self._status_and_task(parent) if parent < n else None
        if found is not None and found[1] == task:
            if found[0] in DROPPED:
                return parent
            if found[0] == BUFFERED and self.buffer.selecting:  # select discards it: checked on return
                self.buffer.requeued_from(self.episodes.live[parent])
                return parent
        raise self._refused(f"{action}: {errors.bad_parent(task, parent, n, found)}")

    def _status_and_task(self, episode_id: int) -> tuple[str, int]:
        """The status and task of launched episode ``episode_id``, live or archived (records)."""
        records = self.episodes
        ep = records.live.get(episode_id)
        if ep is not None:
            return ep.status, ep.task_id
        code = int(records.arrays["status"][episode_id])
        return STATUSES_BY_CODE[code], records.task_id.get(episode_id, episode_id)
