"""Batch-assembly policies: which finished episodes the trainer takes, and which it throws away.

``select(buffer, p)`` sees the buffer in finishing order and returns ``(batch, discarded)``,
removing both from ``buffer`` in place (see :class:`~pipesim.policies.base.BatchPolicy`). It runs when
the trainer waits for a batch, at the end of an instant, so ``p.version`` is the version the
batch will be trained with.

* :class:`~pipesim.policies.base.OldestFinishedFirst` -- the chapter's FIFO (in :mod:`pipesim.policies.base`).
* :class:`LowestVersionFirst` -- the B episodes started under the oldest versions, so stragglers
  are trained before fresher work overtakes them.
* :class:`WindowedFIFO` -- lowest version first, but only among the first ``window`` finished:
  between FIFO (window = B) and lowest-version-first (window = infinity).
* :class:`DropStale` -- the chapter's exercise 2: discard episodes older than eta at consumption,
  optionally putting their tasks back in the queue. It promises staleness <= eta.
* :class:`EvictStalest` -- a bounded buffer: beyond ``capacity`` episodes, the stalest are evicted.
* :class:`DropOverlong` -- DAPO's overlong filtering: truncated samples are discarded, not trained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipesim.core.engine import PipelineError
from pipesim.core.errors import check_int, shown
from pipesim.core.validate import refuse
from pipesim.policies.base import FullBatch

if TYPE_CHECKING:
    from pipesim.core.episode import Episode
    from pipesim.core.port import PipelineView
    from pipesim.core.roles import RunSpec

Selection = tuple["list[Episode] | None", "list[Episode]"]


def _take_lowest_versions(buffer: list[Episode], b: int, window: int) -> list[Episode]:
    """Remove and return the ``b`` lowest-version episodes among the first ``window`` (stable)."""
    head = range(min(window, len(buffer)))
    chosen = sorted(sorted(head, key=lambda i: buffer[i].version)[:b])  # positions, finishing order
    batch = [buffer[i] for i in chosen]
    for i in reversed(chosen):
        del buffer[i]
    return batch


def _oldest_finished(buffer: list[Episode], b: int) -> list[Episode] | None:
    """Remove and return the first ``b`` finished episodes (None, removing nothing, if fewer)."""
    if len(buffer) < b:
        return None
    batch = buffer[:b]
    del buffer[:b]
    return batch


@dataclass(frozen=True)
class LowestVersionFirst(FullBatch):
    """The B episodes with the lowest starting version (finishing order breaks ties)."""

    def select(self, buffer: list[Episode], p: PipelineView) -> tuple[list[Episode] | None, list[Episode]]:
        if len(buffer) < p.batch_size:
            return None, []
        return _take_lowest_versions(buffer, p.batch_size, len(buffer)), []


@dataclass(frozen=True)
class WindowedFIFO(FullBatch):
    """Lowest version first among the first ``window`` finished episodes (at least B of them)."""

    window: int = 128

    def __post_init__(self) -> None:
        check_int("window", self.window, 1)

    def select(self, buffer: list[Episode], p: PipelineView) -> tuple[list[Episode] | None, list[Episode]]:
        b = p.batch_size
        if len(buffer) < b:
            return None, []
        return _take_lowest_versions(buffer, b, max(self.window, b)), []


@dataclass(frozen=True)
class DropStale:
    """Discard episodes with v - version > eta when the trainer consumes (exercise 2).

    With ``requeue`` the task goes back to the queue and is relaunched under fresh weights,
    which keeps the task mix (and the length distribution) of the trained data; without it, long
    tasks are lost preferentially. Promises staleness <= eta for every trained episode.
    """

    requeue: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.requeue, bool):
            raise refuse("requeue", f"must be a bool, got {shown(self.requeue)}")

    def staleness_bound(self, scenario: RunSpec) -> int | None:
        return scenario.pipeline.max_staleness

    def select(self, buffer: list[Episode], p: PipelineView) -> tuple[list[Episode] | None, list[Episode]]:
        oldest_ok = p.version - p.max_staleness
        stale = [e for e in buffer if e.version < oldest_ok]
        if stale:
            buffer[:] = [e for e in buffer if e.version >= oldest_ok]
            if self.requeue:
                p.requeue([(e.task_id, e.id) for e in stale])
        return _oldest_finished(buffer, p.batch_size), stale


@dataclass(frozen=True)
class EvictStalest:
    """A buffer of at most ``capacity`` episodes: when the trainer asks, the stalest beyond it go.

    Eviction order is lowest starting version first, then oldest finished. The trainer then takes
    the oldest-finished B. A capacity below the batch size can never form a batch and is reported.
    """

    capacity: int = 256

    def __post_init__(self) -> None:
        check_int("capacity", self.capacity, 1)

    def select(self, buffer: list[Episode], p: PipelineView) -> tuple[list[Episode] | None, list[Episode]]:
        b = p.batch_size
        if self.capacity < b:
            raise PipelineError(f"EvictStalest capacity {self.capacity} < batch_size {b}: no batch can form")
        evicted: list[Episode] = []
        if len(buffer) > self.capacity:
            evicted = _take_lowest_versions(buffer, len(buffer) - self.capacity, len(buffer))
        return _oldest_finished(buffer, b), evicted


@dataclass(frozen=True)
class DropOverlong(FullBatch):
    """Discard truncated episodes when the trainer asks; train the oldest-finished B of the rest.

    DAPO's *overlong filtering* (arXiv 2503.14476, section 3.4; verl's ``recipe/dapo``, SkyRL's
    DAPO guide): a sample cut at the response cap has no final answer, so its reward is noise and
    its loss is masked. Masking keeps it in the batch at full training cost; this policy is the
    variant that drops it and fills the batch with complete samples, so it costs generation but
    no trainer place (the compute engine's token ledger counts it as ``discarded_over_length``).
    Truncated means ``Episode.truncated``: cut at the response cap by the compute engine, or at
    the episode timeout by the chapter's slots.
    """

    def min_items(self, p: PipelineView) -> int:
        """1, not a full batch's ``batch_size``: ``select`` discards what the cap cut whenever the
        trainer asks, short of a batch too, so the engine must ask it from the first item (with
        FullBatch's hint a cut episode was discarded only once B had finished: later, and the
        testing kit's with-and-without-shortcuts check found the two runs' discard times differ)."""
        return 1

    def select(self, buffer: list[Episode], p: PipelineView) -> tuple[list[Episode] | None, list[Episode]]:
        cut = [e for e in buffer if e.truncated]
        if cut:
            buffer[:] = [e for e in buffer if not e.truncated]
        return _oldest_finished(buffer, p.batch_size), cut
