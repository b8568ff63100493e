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
f counts the groups the filter rejected (slime's ``remaining -= 1``) and the ones
:class:`~pipesim.policies.groups.WholeGroups` dropped whole since the round began (expired by
``drop_stale``: samples from old weights, at the sync or eta versions later; or abandoned, one whose
every begun sample failed included), less the round's leftovers: f = rejected + max(0, dropped -
leftovers), leftovers = the groups alive at the round's start without ``partial_rollout`` (which the
round does not count), else 0. slime has no stale drop; a group that can no longer be trained is to
its loop what a rejected one is, so the loop goes on submitting chunks until the round has its
batch.
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

Why drops count beyond the leftovers: the groups that can still fill the round's batch are its S
submitted and (without ``partial_rollout``) its leftovers, less those rejected or dropped since it
began, so the batch needs S + leftovers - rejected - dropped >= target. Counting rejections alone
is at least as cautious while dropped <= leftovers, so those rounds run as before. With
``partial_rollout`` every group alive at the round's start is carried (in S), so every drop
counts. Without it, generating through the sync (``colocated=False``), the round's groups begun
before the sync expire in the round (at eta 0 their samples are a version old), mixed with the
previous round's leftovers, whose drops the leftovers cover; the counts cannot tell them apart, and
need not. So counting changes no run that finished without it, except where a later rejection's
chunk rescued a round already short of groups: that chunk now goes out at the drop (with a filter
and ``drop_stale``, as with the carried groups' expiry).
Refused at the first start, naming ``weight_update``: ``AbortRestart(restart=False)`` (under
``SyncEveryK`` or ``AfterNextBatch`` too) with ``partial_rollout``, which drops the very groups the
loop counts as carried (one whose begun samples were all aborted is never seen by ``WholeGroups``
until the run is stuck, so it stays counted and rounds have less room), and with
``colocated=False``, where the sync falls mid-round and drops the round's own groups unseen. Most
such runs stalled; the port says how many episodes were dropped, not which groups.

The round's first fresh task is ``p.next_new_task``, not ``p.upcoming_task``: in a colocated run
the round begins after the sync, and ``AbortRestart(restart=True)`` has requeued the aborted
samples there, so ``upcoming_task`` is a relaunch (a task of a leftover group). Read from it,
without ``partial_rollout``, the round put its fresh groups too low and submitted fewer than
slime's chunks: 18 of 41 random draws of that mix stalled, and the rest trained on fewer fresh
groups (``tests/test_slime_stall_mixes.py``). With ``partial_rollout`` the carried count was low
by as much and the two cancel, so those runs are unchanged; so is every run whose rounds begin
with no relaunch waiting.

Failures (:class:`~pipesim.policies.faults.DropFailed`): a group that loses a sample for good
never completes. One with a sample buffered is expired (``drop_stale``) or abandoned once the
run is stuck (``WholeGroups`` rule 4) and replaced as a dropped group; one whose every begun
sample failed (always so with one sample a group) never reaches the buffer, and the loop counted
it alive for good: carried with ``partial_rollout`` (each round had one fresh group less), a
leftover without (covering a drop that was the round's own), so rounds ran out of groups and
most such mixes stalled (24 of 40 random ones in an audit). ``WholeGroups`` abandons these unseen
groups too, found from ``p.next_new_task`` when the run is stuck, and the loop replaces them. The
replacement waits for that moment (nothing running, the trainer waiting): a bubble slime, which
has no failed-sample model, has no counterpart of. Where failures leave too few whole groups for
the pool (a hazard of 0.01 to 0.03 per second with four samples a group), the run ends with the
pool-exhausted ``PipelineError`` naming the failures, as ``OverSample`` does on most of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError, check_int, refuse
from pipesim.policies.groups import GroupStats, WholeGroups
from pipesim.policies.updates import AbortRestart, AfterNextBatch, SyncEveryK

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
    """One run's round: its index, the task it began at (its first fresh group's first), its
    carried groups, the groups alive at its start that it does not count as submitted (its
    leftovers, without ``partial_rollout``), and the filtered and dropped counts it began at."""

    __slots__ = ("carried", "dropped0", "filtered0", "index", "leftovers", "task0")

    def __init__(
        self, index: int, task0: int, alive: int, partial: bool, filtered0: int, dropped0: int
    ) -> None:
        self.index, self.task0 = index, task0
        self.carried, self.leftovers = (alive, 0) if partial else (0, max(alive, 0))
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
    carried over by the abort count as submitted in the next round (``--partial-rollout``). The
    groups ``WholeGroups`` drops whole (``drop_stale``) are replaced as the ones the filter
    rejects are, beyond the leftovers a round does not count.
    Needs :class:`~pipesim.policies.groups.WholeGroups` as the scenario's batch policy (refused at
    the first start, naming ``batching``), and refuses ``AbortRestart(restart=False)`` with
    ``partial_rollout`` or ``colocated=False`` (at the first start, naming ``weight_update``).
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
            if r is None:  # the run's first start
                self._check_weight_update(p)
            stats = groups.stats(p)
            # groups with a sample begun: relaunches waiting in the queue belong to older groups
            begun = -(-p.next_new_task // groups.samples_per_group)
            gone = stats.groups_trained + stats.groups_filtered + _dropped(stats)
            alive = begun - gone  # in flight or partly buffered: carried with partial_rollout
            task0 = begun * groups.samples_per_group  # a carried group's unbegun samples are not fresh
            r = _ROUNDS[p] = _Round(
                p.batches_taken, task0, alive, self.partial_rollout, stats.groups_filtered, _dropped(stats)
            )
        return r

    def _check_weight_update(self, p: PipelineView) -> None:
        """Refuse an abort that drops the groups the loop counts (module docstring): with
        ``partial_rollout`` the carried ones, without it those begun before a sync that falls
        mid-round (``colocated=False``)."""
        wu = p.scenario.weight_update
        while isinstance(wu, SyncEveryK | AfterNextBatch):
            wu = wu.inner
        if not isinstance(wu, AbortRestart) or wu.restart:
            return
        if self.partial_rollout:
            why = (
                "partial_rollout carries the groups the abort interrupts into the next round, and "
                "AbortRestart(restart=False) drops them: the loop would count them as submitted for good"
            )
        elif not p.config.colocated:
            why = (
                "with colocated=False the sync falls inside a round, and AbortRestart(restart=False) "
                "drops the round's own groups in flight there, which the loop cannot see"
            )
        else:
            return
        raise FieldError(
            f"SlimeSubmit: {why}, so a round runs out of groups and the run stalls; use AbortReprefill "
            "(or AbortRestart(restart=True)) to carry them, or drop them with partial_rollout=False "
            "and colocated=True",
            "weight_update",
        )

    def submitted(self, p: PipelineView) -> int:
        """Groups submitted in the current round so far, carried ones included (slime's count):
        each rejected group lowers slime's ``remaining``, and so does each group dropped whole
        since the round began, beyond the leftovers alive at its start that it does not count."""
        groups = self._groups(p)
        r = self._round(p, groups)
        target = p.batch_size // groups.samples_per_group
        chunk = target if self.over_sampling_batch_size is None else self.over_sampling_batch_size
        stats = groups.stats(p)
        dropped = max(0, _dropped(stats) - r.dropped0 - r.leftovers)
        return slime_round_groups(chunk, target, stats.groups_filtered - r.filtered0 + dropped)

    def admits(self, p: PipelineView) -> bool:
        groups = self._groups(p)
        r = self._round(p, groups)
        fresh = self.submitted(p) - r.carried
        return p.upcoming_task < r.task0 + groups.samples_per_group * fresh
