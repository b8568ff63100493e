"""The unit of work: one agent episode and the policy versions it ran under.

An :class:`Episode` is created when a slot starts it and is finalised when it finishes. The
versions it ran under are not stored per event: the engine keeps one log of weight updates, and
each episode remembers the index range of updates that happened while it was in flight
(``update_from`` to ``update_to``). :meth:`Episode.segments` rebuilds the (version, start, end)
intervals from that log, so a sync costs nothing per episode in flight.

Relaunched work is honest: an episode that is aborted and restarted from scratch, or that fails
and is retried or re-queued, ends as its own record (status ``aborted`` or ``failed``, with the
generation seconds it lost in ``lost_s``), and the relaunch is a *new* :class:`Episode` with the
same ``task_id`` and ``parent`` set to the lost one's id. An episode that is only paused or
re-prefilled keeps its record; its re-prefill tokens are counted in ``reprefill_tokens``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np

from pipesim.core.validate import FieldError

# Episode status values.
RUNNING, BUFFERED, TRAINED, DISCARDED, ABORTED = "running", "buffered", "trained", "discarded", "aborted"
FAILED = "failed"  # an infrastructure (environment worker) failure; never trained, never scored
STATUSES: tuple[str, ...] = (RUNNING, BUFFERED, TRAINED, DISCARDED, ABORTED, FAILED)
"""The statuses in the order of their codes (the records' and the columns' ``status`` arrays)."""


@dataclass(frozen=True)
class UpdateRecord:
    """One weight update seen by the engine: generation paused over [start_s, end_s)."""

    start_s: float
    end_s: float
    version_after: int
    paused: bool
    replica: int = -1
    """The engine replica it applies to; -1 means every replica."""
    kind: str = "sync"
    """"sync" (weights change) or "train" (a colocated engine pauses while the trainer trains)."""

    def applies_to(self, replica: int) -> bool:
        return self.replica < 0 or self.replica == replica


RARE_DEFAULTS: dict[str, Any] = {
    "truncated": False,
    "parent": -1,
    "lost_s": 0.0,
    "fail_at_s": None,
    "reprefill_tokens": 0.0,
    "reprefill_s": 0.0,
    "discarded_s": None,
}
"""The fields only faults, relaunches, re-prefills and discards change, with the value every other
episode keeps (the records store an archived episode's only where it differs)."""

EPISODE_FIELDS: tuple[str, ...] = (
    "id",
    "task_id",
    "duration_s",
    "slot",
    "replica",
    "start_s",
    "end_s",
    "version",
    "update_from",
    "update_to",
    "offset_start",
    "status",
    "trained_step",
    "trained_version",
    "work_s",
    *RARE_DEFAULTS,
)
"""Every field of an :class:`Episode` (the records' columns, in this order)."""


@dataclass(slots=True, eq=False, init=False)
class Episode:
    """One launched episode: a fixed set of fields (:data:`EPISODE_FIELDS`), nothing else.

    A plain slotted dataclass: no ``__dict__``, so a field outside the list is an
    ``AttributeError`` (keep a policy's own per-episode data in a dict by ``episode.id``); it
    pickles and copies as any slotted dataclass does. Equality is identity (``eq=False``): two
    episodes are the same episode only if they are one object, as the kernel's bookkeeping (lists,
    ``in``, ``remove``) needs. A run keeps an episode as this object until the trainer takes it;
    then the run's records (:mod:`pipesim.core.records`) keep its fields as arrays and rebuild an
    equal-valued object when one is asked for. The arguments after ``parent`` are where and when
    it starts (the replica's ``start`` sets them; a caller that knows them may pass them). The
    fields only faults, relaunches and re-prefills change start at :data:`RARE_DEFAULTS`.

    The compute engine's compiled leaf (``setup.py``) does not read an episode per turn: its
    sequences carry what their turns need, and write the episode where it starts and ends.
    """

    id: int
    task_id: int
    duration_s: float
    version: int  # the version that started it (the chapter's label)
    parent: int = -1  # the id of the lost episode this one relaunches, or -1
    slot: int = -1
    replica: int = 0
    start_s: float = 0.0
    update_from: int = 0  # index into the update log at start
    offset_start: float = 0.0  # the engine's paused-time total when it started
    end_s: float | None = field(default=None, init=False)
    update_to: int = field(default=0, init=False)  # index into the update log at finish (exclusive)
    status: str = field(default=RUNNING, init=False)
    trained_step: int = field(default=-1, init=False)
    trained_version: int = field(default=-1, init=False)
    work_s: float = field(init=False)
    """Generation seconds it will take (capped, cut by a failure, + re-prefill); starts at ``duration_s``."""
    truncated: bool = field(default=False, init=False)  # cut at the episode timeout or the response cap
    lost_s: float = field(default=0.0, init=False)  # generation seconds thrown away (aborted or failed)
    fail_at_s: float | None = field(default=None, init=False)  # seconds after which its worker fails
    reprefill_tokens: float = field(default=0.0, init=False)
    reprefill_s: float = field(default=0.0, init=False)
    discarded_s: float | None = field(default=None, init=False)  # when a batch policy discarded it

    def __init__(
        self,
        id: int,
        task_id: int,
        duration_s: float,
        version: int,
        parent: int = -1,
        slot: int = -1,
        replica: int = 0,
        start_s: float = 0.0,
        update_from: int = 0,
        offset_start: float = 0.0,
    ) -> None:
        # written out rather than generated: the generated one calls __post_init__ for work_s,
        # one Python call per launched episode (the kernel launches one per completion)
        self.id = id
        self.task_id = task_id
        self.duration_s = duration_s
        self.version = version
        self.parent = parent
        self.slot = slot
        self.replica = replica
        self.start_s = start_s
        self.update_from = update_from
        self.offset_start = offset_start
        self.end_s = None
        self.update_to = 0
        self.status = RUNNING
        self.trained_step = -1
        self.trained_version = -1
        self.work_s = duration_s
        self.truncated = False
        self.lost_s = 0.0
        self.fail_at_s = None
        self.reprefill_tokens = 0.0
        self.reprefill_s = 0.0
        self.discarded_s = None

    def segments(
        self, updates: list[UpdateRecord], until_s: float | None = None
    ) -> list[tuple[int, float, float]]:
        """(version, start, end) intervals the episode generated under; pauses fall between them."""
        end = self.end_s if self.end_s is not None else until_s
        if end is None:
            raise FieldError(f"episode {self.id} is still running; pass until_s", "until_s")
        hi = self.update_to if self.end_s is not None else len(updates)
        out, version, seg_start = [], self.version, self.start_s
        for u in updates[self.update_from : hi]:
            if u.start_s > end:
                break
            if u.replica >= 0 and u.replica != self.replica:
                continue
            # generation under `version` up to the update; a paused update leaves a gap to end_s
            out.append((version, seg_start, u.start_s))
            seg_start, version = u.end_s, u.version_after
        out.append((version, seg_start, end))
        return out

    def newest_version(self, updates: list[UpdateRecord]) -> int:
        """The newest version the episode generated under (its last segment's)."""
        for i in range(self.update_to - 1, self.update_from - 1, -1):
            if updates[i].applies_to(self.replica):
                return updates[i].version_after
        return self.version

    def __repr__(self) -> str:
        return (
            f"Episode(id={self.id}, v={self.version}, d={self.duration_s:.3g}s, "
            f"start={self.start_s:.6g}, end={self.end_s}, status={self.status})"
        )


_READERS: dict[str, Callable[[Iterable[Episode]], list[Any]]] = {
    "id": lambda eps: [e.id for e in eps],
    "task_id": lambda eps: [e.task_id for e in eps],
    "duration_s": lambda eps: [e.duration_s for e in eps],
    "version": lambda eps: [e.version for e in eps],
    "parent": lambda eps: [e.parent for e in eps],
    "slot": lambda eps: [e.slot for e in eps],
    "replica": lambda eps: [e.replica for e in eps],
    "start_s": lambda eps: [e.start_s for e in eps],
    "update_from": lambda eps: [e.update_from for e in eps],
    "offset_start": lambda eps: [e.offset_start for e in eps],
    "end_s": lambda eps: [e.end_s for e in eps],
    "update_to": lambda eps: [e.update_to for e in eps],
    "status": lambda eps: [e.status for e in eps],
    "trained_step": lambda eps: [e.trained_step for e in eps],
    "trained_version": lambda eps: [e.trained_version for e in eps],
    "work_s": lambda eps: [e.work_s for e in eps],
    "truncated": lambda eps: [e.truncated for e in eps],
    "lost_s": lambda eps: [e.lost_s for e in eps],
    "fail_at_s": lambda eps: [e.fail_at_s for e in eps],
    "reprefill_tokens": lambda eps: [e.reprefill_tokens for e in eps],
    "reprefill_s": lambda eps: [e.reprefill_s for e in eps],
    "discarded_s": lambda eps: [e.discarded_s for e in eps],
}
"""A reader per field: a comprehension that names the attribute, which Python reads as a slot
directly (about 45 ns an episode, where ``map(attrgetter(name), ...)`` takes about 75 ns)."""


def episode_values(episodes: Iterable[Episode], name: str) -> list[Any]:
    """Attribute ``name`` of every episode, as a list in their order (one pass)."""
    read = _READERS.get(name)
    return list(map(attrgetter(name), episodes)) if read is None else read(episodes)


def episode_column(episodes: Sequence[Episode], name: str, dtype: Any) -> np.ndarray:
    """Attribute ``name`` of every episode as one numpy array of ``dtype``, in one pass.

    The columnar results (``pipesim.results.columns``) read episodes through this: no tuple per
    episode is built (only the list of the values, :func:`episode_values`), and an attribute only
    some episodes set (``truncated``, ``parent``, ...) reads its class default elsewhere.
    """
    return np.fromiter(episode_values(episodes, name), dtype, count=len(episodes))
