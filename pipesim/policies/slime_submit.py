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
:class:`~pipesim.policies.updates.AbortReprefill`). With f groups filtered since the round began,
the round has submitted S = chunk x k groups, k >= 1 the fewest chunks with S - f >= target, and
a free slot starts the next task while

    tasks of groups begun this round < n x (S - carried),

carried = the groups alive at the round's start (in flight or partly buffered) with
``partial_rollout``, else 0; the unbegun samples of a carried group start whenever a slot is free.
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
in the same instant). No staleness bound is promised: ``WholeGroups(drop_stale=True)`` gives one,
at eta 0 without ``partial_rollout`` (``slime("sync")``). With ``partial_rollout`` (``april``, whose
groups are then ``drop_stale=False``) the mix with ``drop_stale=True`` can fall short: the loop
replaces the groups the filter rejects, as slime does, not the ones ``drop_stale`` expires (slime
has no such drop), so a round may never reach its batch and the run stops with the stall
``PipelineError`` (a stress run of random filtered mixes: about 13% of them). No preset uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError, check_int, refuse
from pipesim.policies.groups import WholeGroups

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
    """One run's round: its index, the task and filter count it began at, its carried groups."""

    __slots__ = ("carried", "filtered0", "index", "task0")

    def __init__(self, index: int, task0: int, carried: int, filtered0: int) -> None:
        self.index, self.task0, self.carried, self.filtered0 = index, task0, carried, filtered0


_ROUNDS: WeakKeyDictionary[PipelineView, _Round] = WeakKeyDictionary()
"""Each run's current round, by its pipeline (a frozen policy is shared across a sweep's runs)."""


@dataclass(frozen=True)
class SlimeSubmit:
    """slime's ``generate_rollout_async`` submit loop: chunks of groups until a batch is accepted.

    See the module docstring. ``over_sampling_batch_size`` is slime's knob, in groups (prompts)
    per submit; None is slime's default, the rollout batch (B / n). ``partial_rollout``: groups
    carried over by the abort count as submitted in the next round (``--partial-rollout``).
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
            r = _ROUNDS[p] = _Round(p.batches_taken, task0, carried, stats.groups_filtered)
        return r

    def submitted(self, p: PipelineView) -> int:
        """Groups submitted in the current round so far, carried ones included (slime's count)."""
        groups = self._groups(p)
        r = self._round(p, groups)
        target = p.batch_size // groups.samples_per_group
        chunk = target if self.over_sampling_batch_size is None else self.over_sampling_batch_size
        return slime_round_groups(chunk, target, groups.stats(p).groups_filtered - r.filtered0)

    def admits(self, p: PipelineView) -> bool:
        groups = self._groups(p)
        r = self._round(p, groups)
        fresh = self.submitted(p) - r.carried
        return p.upcoming_task < r.task0 + groups.samples_per_group * fresh
