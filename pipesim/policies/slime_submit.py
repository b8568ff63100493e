"""slime's submit loop under a dynamic-sampling filter: :class:`SlimeSubmit`.

RLsys-Foundation/APRIL ``slime/rollout/sglang_example.py`` at a72b585 (THUDM/slime 624b824 has
the same loop), ``generate_rollout_async``. One call is one round (a rollout): ::

    while len(data) < rollout_batch_size:                      # target, in groups
        while remaining_batch_size < rollout_batch_size:       # :242-245
            submit_generate_tasks(get_samples(over_sampling_batch_size))  # remaining += chunk
        done = wait(FIRST_COMPLETED)
        for group in done:
            if dynamic_filter and not dynamic_filter(group):   # :260-262
                remaining_batch_size -= 1; continue
            data.append(group)
    abort()                                                    # :277, unconditionally

So a round submits whole chunks of ``over_sampling_batch_size`` groups (slime's default is the
rollout batch, ``utils/arguments.py``:929-930), the first one at once; each group the filter
rejects (DAPO's ``--dynamic-sampling-filter-path ...check_reward_nonzero_std``) lowers
``remaining``, and while ``remaining`` is below the target another chunk goes out. The round stops
at ``rollout_batch_size`` accepted whole groups and ``abort`` runs whatever is left: without
``--partial-rollout`` the unfinished groups are gone (:194-195); with it (APRIL) they go to the back
of the data buffer (``buffer.py``:166-176) and ``get_samples`` hands them out first in the next
round (:20-24, :159-164), so a carried group is one of that round's submitted groups.

Here, with n = ``samples_per_group`` of the run's :class:`~pipesim.policies.groups.WholeGroups`
(which draws the filter's decisions) and target = B / n, round r is the generation of the batch
the trainer takes at its step r (``p.batches_taken`` = r). By the round's start the previous
round's leftovers were aborted (dropped, or kept running as carried groups by
:class:`~pipesim.policies.updates.AbortReprefill`). With f of the round's groups gone since it
began, the round has submitted S = chunk x k groups, k >= 1 the fewest chunks with S - f >= target,
and a free slot starts the next task while

    tasks of groups begun this round < n x (S - carried),

carried = the groups alive at the round's start (in flight or partly buffered) with
``partial_rollout``, else 0; the unbegun samples of a carried group start whenever a slot is free.
f counts the groups the filter rejected (slime's ``remaining -= 1``) and, with ``partial_rollout``,
the ones :class:`~pipesim.policies.groups.WholeGroups` dropped whole: expired by ``drop_stale`` (a
carried group's samples from the old weights, at the sync or eta versions later) or abandoned. slime
has no stale drop; a group that can no longer be trained is to its loop what a rejected one is, so
the loop goes on submitting chunks until the round has its batch.
So f = 0 with chunk = target submits exactly one batch of groups. A group submitted but not begun
when the round ends (every slot busy) has no progress to lose or carry: slime aborts it or carries
it untouched, and here it is simply submitted again in the next round.
The weight update ends the round: ``AbortRestart(restart=False)`` drops the unfinished groups
(and ``WholeGroups(drop_stale=True)`` at eta 0 the finished samples of each), ``AbortReprefill``
carries them. The presets (``scenarios.systems.slime("sync")``, ``scenarios.systems.april``) are
colocated, so generation pauses from the instant the batch forms and the sync's abort is slime's.

What differs from slime: carried groups beyond the first chunk resume at once after the sync
(``AbortReprefill`` resumes every request), where slime hands them out a chunk at a time;
complete groups beyond the target in one instant are kept for the next step (slime drops them).
The filter's decision reaches the rule when the batch policy sees the group, which is at once
while the trainer waits for the batch (always, in the colocated loop; a discard pokes admission
in the same instant). The rule promises no staleness bound; ``WholeGroups(drop_stale=True)``
gives one, at eta 0 without ``partial_rollout`` (``slime("sync")``) and with it (``april``'s
policies with ``drop_stale=True``, which no preset uses; ``tests/test_slime_stale_mix.py``).

Why dropped groups count only with ``partial_rollout``: then every group alive at the round's
start is one of its carried groups, so every group dropped after the start is one of the round's.
Without it the groups that expire are mostly the previous round's aborted leftovers, not the
round's (slime's ``abort`` already removed them): counting them would over-submit, and counts
cannot tell them from the round's own. Counting changes no run that finished without it: at
filter rate 0 rejections never raise S, and without ``drop_stale`` a group is abandoned only when
nothing can complete; either way, once a drop takes S - f below the target, the round could never
have reached its batch and the run stalled. With a filter and ``drop_stale`` the next chunk now goes
out when a group expires, where it waited for a later rejection, so such runs change.
Two mixes still stall: ``partial_rollout`` with ``AbortRestart(restart=False)``, which drops the
groups the loop counts as carried (a group whose begun samples were all aborted stays counted), and
``drop_stale`` expiring groups in their own round without ``partial_rollout`` (generated through the
sync, ``colocated=False``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError, check_int, refuse
from pipesim.policies.groups import GroupStats, WholeGroups

if TYPE_CHECKING:
    from pipesim.core.port import PipelineView

__all__ = ["SlimeSubmit", "slime_round_groups"]


def slime_round_groups(chunk: int, target: int, filtered: int) -> int:
    """Groups slime has submitted in a round once ``filtered`` of them were rejected: the fewest
    whole chunks (at least one) with submitted - filtered >= target (:242-245, :260-262)."""
    submitted = chunk
    while submitted - filtered < target:
        submitted += chunk
    return submitted


class _Round:
    """One run's round: its index, the task and the filtered and dropped counts it began at, its
    carried groups."""

    __slots__ = ("carried", "dropped0", "filtered0", "index", "task0")

    def __init__(self, index: int, task0: int, carried: int, filtered0: int, dropped0: int) -> None:
        self.index, self.task0, self.carried = index, task0, carried
        self.filtered0, self.dropped0 = filtered0, dropped0


def _dropped(stats: GroupStats) -> int:
    """Groups dropped whole that the filter did not reject: expired (``drop_stale``) or abandoned."""
    return stats.groups_expired + stats.groups_abandoned


_ROUNDS: WeakKeyDictionary[PipelineView, _Round] = WeakKeyDictionary()
"""Each run's current round, by its pipeline (a frozen policy is shared across a sweep's runs)."""


@dataclass(frozen=True)
class SlimeSubmit:
    """slime's ``generate_rollout_async`` submit loop: chunks of groups until a batch is accepted.

    See the module docstring. ``over_sampling_batch_size`` is slime's knob, in groups (prompts)
    per submit; None is slime's default, the rollout batch (B / n). ``partial_rollout``: groups
    carried over by the abort count as submitted in the next round (``--partial-rollout``), and
    the round's groups that ``WholeGroups`` drops whole (``drop_stale``) are replaced as the ones
    the filter rejects are.
    Needs :class:`~pipesim.policies.groups.WholeGroups` as the scenario's batch policy (refused at
    the first start, naming ``batching``).
    """

    over_sampling_batch_size: int | None = None
    partial_rollout: bool = False

    def __post_init__(self) -> None:
        if self.over_sampling_batch_size is not None:
            check_int("over_sampling_batch_size", self.over_sampling_batch_size, 1)
        if not isinstance(self.partial_rollout, bool):
            raise refuse("partial_rollout", f"must be a bool, got {shown(self.partial_rollout)}")

    def _groups(self, p: PipelineView) -> WholeGroups:
        groups = p.scenario.batching
        if not isinstance(groups, WholeGroups):
            raise FieldError(
                "SlimeSubmit counts whole prompt groups and the groups the dynamic filter rejects: "
                f"the batch policy must be WholeGroups, got {type(groups).__name__}",
                "batching",
            )
        return groups

    def _round(self, p: PipelineView, groups: WholeGroups) -> _Round:
        r = _ROUNDS.get(p)
        if r is None or r.index != p.batches_taken:
            stats = groups.stats(p)
            begun = -(-p.upcoming_task // groups.samples_per_group)  # groups with a sample begun
            gone = (
                stats.groups_trained + stats.groups_filtered + stats.groups_expired + stats.groups_abandoned
            )
            carried = begun - gone if self.partial_rollout else 0  # alive: in flight or partly buffered
            task0 = begun * groups.samples_per_group  # a carried group's unbegun samples are not fresh
            r = _ROUNDS[p] = _Round(p.batches_taken, task0, carried, stats.groups_filtered, _dropped(stats))
        return r

    def submitted(self, p: PipelineView) -> int:
        """Groups submitted in the current round so far, carried ones included (slime's count):
        each rejected group lowers slime's ``remaining``, and with ``partial_rollout`` so does each
        of the round's groups dropped whole (every group alive at the round's start is carried)."""
        groups = self._groups(p)
        r = self._round(p, groups)
        target = p.batch_size // groups.samples_per_group
        chunk = target if self.over_sampling_batch_size is None else self.over_sampling_batch_size
        stats = groups.stats(p)
        gone = stats.groups_filtered - r.filtered0
        if self.partial_rollout:
            gone += _dropped(stats) - r.dropped0
        return slime_round_groups(chunk, target, gone)

    def admits(self, p: PipelineView) -> bool:
        groups = self._groups(p)
        r = self._round(p, groups)
        fresh = self.submitted(p) - r.carried
        return p.upcoming_task < r.task0 + groups.samples_per_group * fresh
