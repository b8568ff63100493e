"""Group batching: the trainer takes whole prompt groups, and may reject some (dynamic filtering).

GRPO-style trainers score a sample against the other samples of its prompt (``rollout.n`` of
them), so they batch **groups**: a group is ready when its last sample is, and a batch of ``B``
samples is ``B / n`` complete groups -- verl's ``data.train_batch_size`` counts prompts, each
expanded to ``rollout.n`` samples (``verl/trainer/ppo/ray_trainer.py``, where the batch is
``repeat(..., interleave=True)``-ed by ``rollout.n``). ``B`` stays in samples here, the kernel's
unit, and must be a multiple of ``n``.

:class:`WholeGroups` maps kernel task ``t`` to sample ``t % n`` of group ``t // n`` (the
compute workload's numbering, :mod:`pipesim.compute.workload`; any duration model works too).

Rules, in the order a request sees them:

1. **Relaunched and requeued samples** keep their task id, so a relaunch (after an abort, a
   retry after a failure, a stale sample put back in the queue) fills the same place in the
   same group: a group is complete when each of its ``n`` tasks has one finished episode in the
   buffer. A lost episode (aborted, failed) never reaches the buffer, so the group waits for the
   relaunch. The kernel never buffers two episodes of one task; if it did, that is a
   :class:`~pipesim.core.errors.PipelineError`.
2. **Dynamic filtering.** When a group completes it is rejected with probability
   ``filter_rate``, a decision drawn once per group: the ``g``-th uniform of
   ``numpy.random.default_rng([run_seed, seed, FILTER_SEED_SALT])`` (:func:`filter_stream`), the
   run's seed (``Scenario.seed``) beside the policy's. So a run's seed varies which groups are
   rejected (``pipesim sweep --seeds N`` measures the filter's variance too), while within one
   seed the decision does not depend on timing: two designs run at one seed reject the same
   groups (common random numbers). :meth:`WholeGroups.rejected` lists them for a run seed. The
   salt keeps the stream apart from the run's other draws (the duration pool's
   ``default_rng(seed)``, a compute run's token lengths, the failure stream's
   ``[seed, FAILURE_SEED_SALT]``). A rejected group costs its generation but
   no trainer place: its samples are discarded (the token ledger counts them as
   ``discarded_filtered``). It stands for DAPO's dynamic sampling -- verl
   ``recipe/dapo/dapo_ray_trainer.py``, ``RayDAPOTrainer.fit``, keeps only prompts whose reward
   std over the group is > 0 (not all correct, not all wrong) and generates more batches until
   ``train_batch_size`` prompts are kept -- and AReaL's success-rate filter
   (``realhf/impl/agent/math_single_step_agent.py``: groups whose success rate is outside
   ``[success_rate_lb, success_rate_ub]`` are not sent to the trainer). The decision here is
   independent of the group's lengths; a real filter correlates with difficulty.
3. **Stale dropping** (``drop_stale``), checked when a sample arrives and whenever the trainer's
   version has moved: a buffered sample with ``version < v - eta`` is stale. Without
   ``requeue`` its task is never run again, so its group can never complete: the **whole group
   is dropped** (its buffered samples discarded now, its samples still in flight discarded when
   they arrive), so no group waits forever for a sample that will not come. With ``requeue`` only
   the stale samples are discarded and their tasks put back in the queue; the group stays and
   completes with the fresh samples (its filter decision is the same).
4. **Abandoning**: when the trainer waits, no batch can form, nothing is in flight and every
   replica is free to start work, admission has had its turn (it runs before the batch policy)
   and started nothing, so no incomplete group can ever complete -- a sample lost for good to a
   failure (``DropFailed``), or a relaunch that the admission rule will not start while the
   group's other samples hold its budget. Every incomplete group is then dropped whole (its
   samples discarded, counted as stale; ``groups_abandoned``), which frees the admission budget
   of rules that subtract drops. Where none has a sample buffered, a group begun (a task
   below the port's ``next_new_task``) whose every begun sample was lost before it finished is
   dropped so, while no requeued task waits: it has nothing to discard, but it is counted (a
   rule that counts groups, ``SlimeSubmit``, replaces it), its later arrivals are discarded,
   and the controller is asked for another pass (``p.settled()``). So a group with a dropped
   sample never deadlocks the run; a run that still cannot form a batch (a rule that counts
   every start) stops with a :class:`~pipesim.core.errors.PipelineError` naming its policies,
   never hangs.
5. **The batch**: the first ``B / n`` accepted complete groups in completion order, each group's
   samples in finishing order.

Admission must let filtered and dropped work be replaced: a rule that counts every start
(:class:`~pipesim.policies.base.CountThrottle`) cannot form a batch once groups are rejected.
Use one that subtracts drops (``AReaLThrottle``, ``AsyncRatio``, ``LagBound``, ``OverSample``).
A group that loses a sample for good to a failure (``DropFailed``) never completes; with
``drop_stale`` it expires like any stale group, without it its samples stay buffered until rule 4
abandons it; one of which no sample finished only rule 4 abandons. With ``requeue`` its other
samples are re-run each time they go stale, so pair ``requeue`` with a failure policy that
relaunches (``RetryFailed``, ``RequeueFailed``).

The policy's per-run bookkeeping (which groups are complete, rejected or dropped) lives beside
the run, keyed by the pipeline, never in the frozen policy object, so one policy serves many
runs. ``ready`` is exact and incremental: O(1) per finished sample.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

import numpy as np

from pipesim.core.errors import MAX_SEED, PipelineError, shown
from pipesim.core.validate import check_int, refuse
from pipesim.policies.bookkeeping import check_whole_groups

if TYPE_CHECKING:
    from pipesim.core.episode import Episode
    from pipesim.core.port import PipelineView
    from pipesim.core.roles import RunSpec

_DRAW_BLOCK = 4096

FILTER_SEED_SALT = 0xF117
"""Mixed into the filter's seed (:func:`filter_stream`) so that its uniforms are not the ones the
run's duration pool or token lengths draw from ``default_rng(seed)`` (``[s, 0]`` seeds as ``s``
does), nor the failure stream's (``[seed, FAILURE_SEED_SALT]``)."""


def filter_stream(run_seed: int, policy_seed: int) -> np.random.Generator:
    """The generator of a run's filter decisions: group ``g`` is decided by its ``g``-th uniform.
    Seeded by the run's seed (``Scenario.seed``) and the policy's ``seed``, and by nothing that
    depends on timing."""
    return np.random.default_rng([run_seed, policy_seed, FILTER_SEED_SALT])


@dataclass
class GroupStats:
    """What a :class:`WholeGroups` did in one run (:meth:`WholeGroups.stats`)."""

    groups_trained: int = 0
    groups_filtered: int = 0
    groups_expired: int = 0
    """Groups dropped whole because a sample went stale (``drop_stale`` without ``requeue``)."""
    groups_abandoned: int = 0
    """Incomplete groups dropped whole because nothing in flight could complete them (rule 4)."""
    samples_requeued: int = 0
    filtered_ids: set[int] = field(default_factory=set)
    """Episode ids discarded by the filter (the rest of the discarded ones were stale)."""


class _State:
    """One run's bookkeeping: buffered members per group, complete groups, dead groups."""

    def __init__(self, policy: WholeGroups, p: PipelineView) -> None:
        policy.check_batch_size(p.batch_size)
        self.policy = policy
        self.per_batch = p.batch_size // policy.samples_per_group
        self.scanned = 0  # buffer[:scanned] has been absorbed
        self.order: list[int] = []  # arrival number of each buffered episode, parallel to the buffer
        self.arrival: dict[int, int] = {}  # episode id -> arrival number
        self.arrived = 0
        self.members: dict[int, dict[int, Episode]] = {}  # group -> task -> buffered episode
        self.complete: dict[int, None] = {}  # accepted complete groups, in completion order
        self.dead: set[int] = set()  # rejected or expired: later arrivals are discarded
        self.trained: set[int] = set()  # groups trained, at or above ``unseen_from``
        self.unseen_from = 0  # every group below it was trained or dropped (:meth:`_unseen`)
        self.pending: list[Episode] = []  # decided discards not yet handed back
        self.requeue: list[tuple[int, int]] = []
        self.checked_version = p.version
        self.uniforms = np.empty(0)
        self.rng = filter_stream(p.scenario.seed, policy.seed) if policy.filter_rate > 0.0 else None
        self.stats = GroupStats()

    def rejects(self, g: int) -> bool:
        rate = self.policy.filter_rate
        if self.rng is None:
            return False
        while g >= len(self.uniforms):
            self.uniforms = np.concatenate([self.uniforms, self.rng.random(_DRAW_BLOCK)])
        return bool(self.uniforms[g] < rate)

    def absorb(self, buffer: Sequence[Episode], p: PipelineView) -> None:
        """Take in the episodes that finished since the last call."""
        if len(buffer) < self.scanned:  # someone else removed episodes: start over from the buffer
            self._rebuild(buffer)
        n = self.policy.samples_per_group
        stale_from = p.version - p.max_staleness if self.policy.drop_stale else None
        order, arrival = self.order, self.arrival
        for i in range(self.scanned, len(buffer)):
            ep = buffer[i]
            order.append(self.arrived)
            arrival[ep.id] = self.arrived
            self.arrived += 1
            g, task = ep.task_id // n, ep.task_id
            if g in self.dead:
                self.pending.append(ep)
                continue
            m = self.members.setdefault(g, {})
            if task in m:
                raise PipelineError(
                    f"WholeGroups: task {task} has two finished episodes in the buffer ({m[task].id} and "
                    f"{ep.id}); a relaunch must replace a lost episode"
                )
            m[task] = ep
            if stale_from is not None and ep.version < stale_from:
                self._stale(g, stale_from, p)
            elif len(m) == n:
                self._completed(g)
        self.scanned = len(buffer)
        if stale_from is not None and p.version != self.checked_version:
            self.checked_version = p.version
            for g in [g for g, m in self.members.items() if any(e.version < stale_from for e in m.values())]:
                self._stale(g, stale_from, p)

    def _completed(self, g: int) -> None:
        if self.rejects(g):
            eps = self.members.pop(g).values()
            self.pending.extend(eps)
            self.stats.filtered_ids.update(e.id for e in eps)
            self.stats.groups_filtered += 1
            self.dead.add(g)
        else:
            self.complete[g] = None

    def _stale(self, g: int, stale_from: int, p: PipelineView) -> None:
        m = self.members[g]
        self.complete.pop(g, None)
        if self.policy.requeue:
            stale = [e for e in m.values() if e.version < stale_from]
            for e in stale:
                del m[e.task_id]
            if not m:
                del self.members[g]
            self.pending.extend(stale)
            self.requeue.extend((e.task_id, e.id) for e in stale)
            self.stats.samples_requeued += len(stale)
        else:
            self.pending.extend(self.members.pop(g).values())
            self.dead.add(g)
            self.stats.groups_expired += 1

    def _rebuild(self, buffer: Sequence[Episode]) -> None:
        n = self.policy.samples_per_group
        self.members, order = {}, list(self.complete)
        for ep in buffer:
            self.members.setdefault(ep.task_id // n, {})[ep.task_id] = ep
        self.complete = {g: None for g in order if len(self.members.get(g, ())) == n}
        self.pending = [e for e in self.pending if e in buffer]
        self.order = list(range(self.arrived, self.arrived + len(buffer)))
        self.arrival = {e.id: a for e, a in zip(buffer, self.order, strict=True)}
        self.arrived += len(buffer)
        self.scanned = len(buffer)

    def remove(self, buffer: list[Episode], gone: list[Episode]) -> None:
        """Take ``gone`` out of the buffer: by position when few (the buffer stays in finishing
        order, so arrival numbers are sorted and bisect finds each), by one pass when many."""
        arrival, order = self.arrival, self.order
        if len(gone) <= 64:
            for i in sorted((bisect_left(order, arrival.pop(e.id)) for e in gone), reverse=True):
                del buffer[i]
                del order[i]
        else:
            ids = {e.id for e in gone}
            for i in ids:
                del arrival[i]
            keep = [j for j, e in enumerate(buffer) if e.id not in ids]
            buffer[:] = [buffer[j] for j in keep]
            self.order = [order[j] for j in keep]
        self.scanned = len(buffer)

    def stuck(self, p: PipelineView) -> bool:
        """No batch, nothing to hand back, nothing in flight, every replica free to start work:
        admission has had its turn (it runs before the batch policy in a controller pass) and
        started nothing, so the incomplete groups can never complete: those with a sample
        buffered, and those begun whose every begun sample was lost (:meth:`_unseen`, asked only
        then)."""
        if self.pending or len(self.complete) >= self.per_batch:
            return False
        buffered = len(self.members) > len(self.complete)  # an incomplete group has a sample buffered
        idle = p.n_running == 0 and not p.syncing and all(r.accepting for r in p.replicas)
        return idle and (buffered or bool(self._unseen(p)))

    def _unseen(self, p: PipelineView) -> list[int]:
        """Groups begun (a task below ``p.next_new_task``) with nothing buffered, never trained nor
        dropped: every sample begun was lost (failed, aborted) before it finished. None while a
        requeued task waits (its group may be one: admission may start it once budget frees).
        Groups below ``unseen_from`` are settled; the scan moves it past those it meets first."""
        if p.upcoming_task != p.next_new_task:
            return []
        begun = -(-p.next_new_task // self.policy.samples_per_group)
        members, dead, trained = self.members, self.dead, self.trained
        g = self.unseen_from
        while g < begun and (g in dead or g in trained):
            trained.discard(g)
            g += 1
        self.unseen_from = g
        return [g for g in range(g, begun) if g not in members and g not in dead and g not in trained]

    def abandon(self, p: PipelineView) -> None:
        """Drop every incomplete group whole (see :meth:`stuck`): those with a sample buffered,
        else the unseen ones. Their discards ask the controller for another pass, which abandons
        the unseen ones if the run is stuck still. An unseen group is counted
        (``groups_abandoned``) and its later arrivals discarded, but it has no episode to hand
        back, so the pass is asked for here (``p.settled()``): what an admission rule counts of
        the groups (``SlimeSubmit``) has changed."""
        incomplete = [g for g in self.members if g not in self.complete]
        for g in incomplete:
            self.pending.extend(self.members.pop(g).values())
            self.dead.add(g)
            self.stats.groups_abandoned += 1
        if not incomplete:
            unseen = self._unseen(p)
            self.dead.update(unseen)
            self.stats.groups_abandoned += len(unseen)
            p.settled()

    def ready(self, p: PipelineView) -> bool:
        return bool(self.pending) or len(self.complete) >= self.per_batch or self.stuck(p)


_STATES: WeakKeyDictionary[PipelineView, _State] = WeakKeyDictionary()
"""Each run's group bookkeeping, made fresh for the run (a frozen policy is shared across a
sweep's runs), by its pipeline; it goes when the pipeline goes."""


@dataclass(frozen=True)
class WholeGroups:
    """Batches of whole prompt groups of ``samples_per_group``; optionally filtered and stale-dropped.

    See the module docstring for the rules. ``filter_rate`` is the fraction of complete groups
    rejected (dynamic filtering), drawn per group from the run's seed and ``seed``
    (:func:`filter_stream`; ``seed`` picks another stream at every run seed); ``drop_stale`` discards samples
    older than eta at consumption (whole groups, or only the stale samples re-run with ``requeue``).
    """

    samples_per_group: int
    filter_rate: float = 0.0
    seed: int = 0
    drop_stale: bool = False
    requeue: bool = False

    def __post_init__(self) -> None:
        n = self.samples_per_group
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise refuse("samples_per_group", f"must be an integer >= 1, got {shown(n)}")
        r = self.filter_rate
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0.0 <= r < 1.0 or math.isnan(r):
            raise refuse("filter_rate", f"must be a number in [0, 1), got {shown(r)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise refuse("seed", f"must be an integer >= 0, got {shown(self.seed)}")
        for name in ("drop_stale", "requeue"):
            if not isinstance(getattr(self, name), bool):
                raise refuse(name, f"must be a bool, got {shown(getattr(self, name))}")
        if self.requeue and not self.drop_stale:
            raise refuse("requeue", "needs drop_stale=True (only stale samples are requeued)")

    def check_batch_size(self, batch_size: int) -> None:
        """``FieldError`` naming ``samples_per_group`` unless ``batch_size`` is a whole number of
        groups (:func:`~pipesim.policies.bookkeeping.check_whole_groups`): the scenario asks at
        construction, a compute run of ``groups=`` before it starts."""
        check_whole_groups(batch_size, self.samples_per_group)

    def staleness_bound(self, scenario: RunSpec) -> int | None:
        """With ``drop_stale``, no trained sample is older than eta."""
        return scenario.pipeline.max_staleness if self.drop_stale else None

    def rejected(self, n_groups: int, run_seed: int = 0) -> np.ndarray:
        """Whether each of groups ``0 .. n_groups - 1`` is rejected by the filter in a run of seed
        ``run_seed`` (the scenario's ``seed``; a compute run's ``run.result.scenario.seed``), as a
        bool array: the decisions that run makes of the groups that complete."""
        check_int("n_groups", n_groups, 0)
        check_int("run_seed", run_seed, 0, MAX_SEED - 1)
        if self.filter_rate <= 0.0:
            return np.zeros(n_groups, dtype=bool)
        return np.asarray(filter_stream(run_seed, self.seed).random(n_groups) < self.filter_rate)

    def _state(self, p: PipelineView) -> _State:
        s = _STATES.get(p)
        if s is None or s.policy is not self:
            s = _STATES[p] = _State(self, p)
        return s

    def stats(self, p: PipelineView) -> GroupStats:
        """What this policy did in the run of pipeline ``p`` (empty if it never ran there)."""
        s = _STATES.get(p)
        return s.stats if s is not None and s.policy is self else GroupStats()

    def select(self, buffer: list[Episode], p: PipelineView) -> tuple[list[Episode] | None, list[Episode]]:
        s = self._state(p)
        s.absorb(buffer, p)
        if s.stuck(p):
            s.abandon(p)
        discarded, s.pending = s.pending, []
        if s.requeue:
            p.requeue(s.requeue)
            s.requeue = []
        batch: list[Episode] | None = None
        if len(s.complete) >= s.per_batch:
            groups = list(s.complete)[: s.per_batch]
            batch = []
            for g in groups:
                del s.complete[g]
                s.trained.add(g)
                batch.extend(sorted(s.members.pop(g).values(), key=_finish_key))
            s.stats.groups_trained += len(groups)
        if discarded or batch:
            s.remove(buffer, discarded + batch if batch else discarded)
        return batch, discarded


def _finish_key(ep: Episode) -> tuple[float, int]:
    return (ep.end_s if ep.end_s is not None else math.inf, ep.id)
