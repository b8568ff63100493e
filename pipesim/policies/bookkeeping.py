"""Shared bookkeeping of the real systems' policies: argument checks and a per-run group book.

:func:`check_whole_groups` is the one check that a batch is whole prompt groups. Every batch rule
that takes whole groups has a ``check_batch_size(batch_size)`` calling it, which
:class:`pipesim.config.Scenario` calls at construction (as it calls ``check_replicas``), so a
scenario file or a ``Scenario(...)`` whose ``batch_size`` is no multiple of the group is refused
when it is built, naming ``batching.samples_per_group`` (and the file), not by the rule mid-run.

:class:`GroupBook` (one per pipeline, kept beside the run in a weak dictionary, never in the frozen
policy object) tracks which prompt groups are complete in the buffer, for the presets whose queue
or expiry works on whole groups (:mod:`pipesim.policies.verl`, :mod:`pipesim.policies.systems`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar
from weakref import WeakKeyDictionary

from pipesim.core.errors import check_int as check_int  # re-exported: verl, systems
from pipesim.core.errors import check_number as check_number  # re-exported: verl
from pipesim.core.validate import FieldError
from pipesim.policies.faults import DropFailed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pipesim.core.episode import Episode
    from pipesim.core.port import PipelineView
    from pipesim.core.roles import RunSpec


class GroupBook:
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


def check_whole_groups(batch_size: int, n: int, who: str = "") -> None:
    """:class:`FieldError` naming ``samples_per_group`` (``n``) unless ``batch_size`` is a whole
    number of groups of ``n``: such a rule takes whole groups, so no batch of ``batch_size`` could
    form. The message names the batch too, since either may be the one to change, and ``who``,
    the rule, where given (:func:`group_book`'s guard mid-run; at construction the scenario names
    the role)."""
    if batch_size % n:
        rule = f"{who}: " if who else ""
        raise FieldError(
            f"{rule}samples_per_group ({n}): batch_size ({batch_size:,} samples) must be a whole number of "
            f"groups of {n} (the trainer takes whole groups): give a samples_per_group that divides "
            f"batch_size, or a batch_size that is a multiple of {n}",
            "samples_per_group",
        )


_BOOKS: WeakKeyDictionary[PipelineView, GroupBook] = WeakKeyDictionary()
"""Each run's group book, made fresh for the run, by its pipeline (it goes when the pipeline goes)."""


def group_book(p: PipelineView, n: int, batch_size: int, who: str) -> GroupBook:
    """The run's group book (created at the first call; keyed by the pipeline, not the policy).
    A scenario refuses a batch that is not whole groups when it is built (the rules'
    ``check_batch_size``); this is the guard for a pipeline built some other way, the same check
    (:func:`check_whole_groups`, naming ``who``): it had its own copy, which named ``batch_size``
    where the scenario names ``samples_per_group``."""
    book = _BOOKS.get(p)
    if book is None:
        check_whole_groups(batch_size, n, who)
        book = _BOOKS[p] = GroupBook(n)
    return book


def refuse_lost_samples(p: PipelineView, who: str) -> None:
    """FieldError naming ``failures`` where they lose a sample of a group for good
    (``DropFailed``), for a rule (``who``) that waits for the oldest groups whole: the run stalled
    at its first failure with an error that named no failure."""
    failures = p.scenario.failures
    if isinstance(failures, DropFailed):
        raise FieldError(
            f"{who} waits for every sample of the oldest groups, as ROLL's GroupQueue.get does, and "
            f"{type(failures).__name__} loses a sample for good, so the run would stall at the first "
            "failure; run without failures, with RetryFailed or RequeueFailed (the task runs again), or "
            "with batching=RollGroupExpiry(...) (the first groups to finish, stragglers expired)",
            "failures",
        )


@dataclass(frozen=True)
class RatioGroups:
    """What ROLL's batch rules share (``policies.roll.RollReplayBuffer``, RLVR's replay buffer;
    ``policies.systems.RollGroupQueue``, the agentic pipeline's group queue; ``RollGroupExpiry``,
    the first groups to finish): ``ratio`` (``async_generation_ratio``) bounds staleness and is the
    rule's own promise, groups are
    ``samples_per_group`` consecutive samples, and a batch needs ``batch_size`` finished samples.
    ``MIN_RATIO``: the smallest ``ratio`` the rule accepts."""

    ratio: int = 1
    samples_per_group: int = 1
    MIN_RATIO: ClassVar[int] = 1

    def __post_init__(self) -> None:
        check_int("ratio", self.ratio, self.MIN_RATIO)
        check_int("samples_per_group", self.samples_per_group, 1)

    def check_batch_size(self, batch_size: int) -> None:
        """:func:`check_whole_groups` (the scenario asks at construction)."""
        check_whole_groups(batch_size, self.samples_per_group)

    def staleness_bound(self, scenario: RunSpec) -> int | None:
        return self.ratio

    def min_items(self, p: PipelineView) -> int:
        """``batch_size``: each rule's ``select`` returns at once, dropping nothing, below it, so
        the engine that skips those calls drops the same episodes at the same times."""
        return p.batch_size
