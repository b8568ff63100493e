"""Scheduling decisions as small policy objects behind Protocols.

The SimPy processes in :mod:`pipesim.core.engine` never decide anything themselves; at each decision
point they ask a policy. A policy sees the pipeline only through the port
(:class:`pipesim.core.port.PipelineView`: read-only counters, versions and replicas, and a few named
actions), never the engine class:

* :class:`Admission` -- may a free generation slot start one more episode now? Asked by the
  controller at the end of every simulated instant in which something changed.
* :class:`WeightUpdate` -- what a weight sync does to episodes in flight. ``sync`` is a SimPy
  generator run by the weight-sync process, written with the port's actions
  (``begin_sync``, ``end_sync``, ``drained()``, ``timeout``); ``blocks_admission`` says when the
  controller must not start episodes.
* :class:`BatchPolicy` -- which finished episodes the trainer takes (and which it discards).

The chapter's design space is three objects: :class:`CountThrottle`, :class:`PartialRollout` /
:class:`Drain`, and :class:`OldestFinishedFirst`. The policies of real systems live beside them:
:mod:`pipesim.policies.admission` (AReaL, OpenRLHF, ROLL, PipelineRL, verl, over-sampling),
:mod:`pipesim.policies.updates` (abort and re-prefill, abort and restart, in-flight update, overlapped
swap, sync every k), :mod:`pipesim.policies.batching` (lowest version first, windowed FIFO, drop stale,
evict stalest), :mod:`pipesim.policies.faults` (timeouts, worker failures) and
:mod:`pipesim.policies.replicas`
(routing, per-replica syncs); ``docs/policies.md`` maps them to the systems. A new policy is a new
class of a few lines; nothing in the engine changes. ``pipesim.testing.check_invariants`` checks
what every policy must keep, and what a policy promises (the promise Protocols of
:mod:`pipesim.core.port`: ``staleness_bound``, ``max_pause_s``, ``single_version``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pipesim.core.port import StalenessPromise
from pipesim.core.roles import Admission as Admission  # the roles live in core; re-exported
from pipesim.core.roles import BatchPolicy as BatchPolicy
from pipesim.core.roles import WeightUpdate as WeightUpdate
from pipesim.core.validate import CrossFieldError

if TYPE_CHECKING:
    from pipesim.core.episode import Episode
    from pipesim.core.port import PipelineView
    from pipesim.core.roles import RunSpec


@runtime_checkable
class OwnStalenessBound(Protocol):
    """An admission rule whose staleness bound is a parameter of its own: it never reads the
    pipeline's ``max_staleness``. ``staleness_knob()`` names that bound as its system calls it
    (verl's ``staleness_threshold``, ROLL's ``async_generation_ratio``).

    Why: under such a rule a new ``max_staleness`` runs the same design under a label that says
    otherwise (a sweep over it gave identical rows), so ``Scenario.with_`` -- and the sweeps,
    ``--set`` and ``--over`` built on it -- refuse the change (:func:`unread_staleness`), and the
    presets name the knob when given ``max_staleness``.
    """

    def staleness_knob(self) -> str: ...


def not_a_knob(name: str, owner: str, knob: str) -> str:
    """The one wording of a refused ``max_staleness``: the presets' and ``Scenario.with_``'s."""
    return f"{name}: max_staleness is not a knob of {owner}; its staleness bound is {knob}"


class UnreadStaleness(CrossFieldError):
    """A scenario's ``max_staleness`` that none of its policies reads (:func:`unread_staleness`);
    its field is ``pipeline.max_staleness``."""

    def __init__(self, message: str, field: str = "pipeline.max_staleness", file: str | None = None) -> None:
        super().__init__(message, field, file)


def unread_staleness(scenario: Any) -> str:
    """Why ``scenario``'s ``max_staleness`` changes nothing ("" where it may change something).

    ``scenario``: a :class:`pipesim.Scenario` (typed ``Any``: the policies sit below ``config``).

    It changes nothing when it is not 0, the admission rule bounds staleness itself
    (:class:`OwnStalenessBound`), the weight update and the batch policy are pipesim's own and
    none of their staleness promises moves with it (``DropStale``, ``WholeGroups(drop_stale=True)``
    and ``Drain`` under a count throttle read it beside any admission rule). A policy of the
    user's may read ``p.max_staleness`` without a promise: pipesim cannot know, so it lets such a
    scenario be. (With ``pool_size`` unset the field still sizes the pool, which only changes
    which tasks are drawn.)
    """
    k = scenario.pipeline.max_staleness
    adm = scenario.admission
    if k == 0 or not isinstance(adm, OwnStalenessBound) or not callable(adm.staleness_knob):
        return ""
    others = (scenario.weight_update, scenario.batching)
    if not all(_pipesim_own(q) for q in others):
        return ""
    at_zero = dataclasses.replace(scenario, pipeline=dataclasses.replace(scenario.pipeline, max_staleness=0))
    promises = [q for q in others if isinstance(q, StalenessPromise)]
    if any(q.staleness_bound(scenario) != q.staleness_bound(at_zero) for q in promises):
        return ""
    rule = f"{type(adm).__name__} (it never reads it)"
    return f"{not_a_knob(scenario.name, rule, adm.staleness_knob())}; leave max_staleness at 0 (got {k})"


def _pipesim_own(policy: object) -> bool:
    """Whether ``policy`` and the policies it holds (``SyncEveryK``'s inner one) are pipesim's."""
    module = type(policy).__module__
    if not module.startswith("pipesim.") or module == "pipesim.policies.missing":
        return False  # a MissingPolicy stands for a user's policy, which may read the field
    if dataclasses.is_dataclass(policy):
        held = (getattr(policy, f.name) for f in dataclasses.fields(policy))
        nested = [
            v
            for v in held
            if not isinstance(v, type) and (dataclasses.is_dataclass(v) or hasattr(v, "__dict__"))
        ]
        return all(_pipesim_own(v) for v in nested)
    return True


class CountsOnly:
    """An admission rule that reads only counters no finishing episode changes: ``p.started``,
    ``p.n_dropped``, the version, and running + buffered (a completion moves an episode from one
    to the other). Once it says no, only a start, a drop or a new version can change its mind, so
    it is *closed*: the promise that lets the engine skip quiet completions (``Slots.catch_up``).
    """

    def admits(self, p: PipelineView) -> bool:
        raise NotImplementedError

    def closed(self, p: PipelineView) -> bool:
        return not self.admits(p)


class FullBatch:
    """A batch policy that needs ``batch_size`` finished episodes before it can form a batch.

    Its hint follows: ``min_items`` (the engine asks ``select`` only from that many on, and
    completions that leave the buffer short of it are quiet).
    """

    def min_items(self, p: PipelineView) -> int:
        return p.batch_size


@dataclass(frozen=True)
class CountThrottle(CountsOnly):
    """The chapter's (and AReaL's) count-based bound: start only while started < (v + 1 + eta) * B.

    It counts episodes *started*, so it bounds how far generation runs ahead in batches, but a
    straggler that started long ago can still be trained many versions later.
    """

    def admits(self, p: PipelineView) -> bool:
        return p.started < (p.version + 1 + p.max_staleness) * p.batch_size


@dataclass(frozen=True)
class PartialRollout:
    """Interrupt in-flight episodes: they pause during the sync and resume under the new weights.

    The sync starts the moment the trainer asks for it. Pausing is lazy (a clock offset in the
    engine), so a sync costs O(1) however many episodes are in flight.
    """

    def pauses_only(self) -> bool:
        """Its sync touches episodes in flight only by pausing every one (a promise to the engine)."""
        return True

    def blocks_admission(self, p: PipelineView) -> bool:
        return p.syncing

    def sync(self, p: PipelineView) -> Generator[Any, Any, None]:
        p.begin_sync(pause=True)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


@dataclass(frozen=True)
class Drain:
    """Drain before syncing: stop starting episodes, wait for the in-flight ones, then sync.

    No episode ever spans two versions, at the price of waiting for the slowest one in flight.
    """

    def pauses_only(self) -> bool:
        """Its sync waits for the drain, then pauses empty engines (a promise to the engine)."""
        return True

    def single_version(self, scenario: RunSpec) -> bool:
        """No episode is in flight across a sync, so none runs under two versions."""
        return True

    def blocks_admission(self, p: PipelineView) -> bool:
        return p.syncing or p.sync_pending

    def staleness_bound(self, scenario: RunSpec) -> int | None:
        """With the count throttle, draining bounds staleness by eta: no episode outlives a sync.
        The count throttle itself, not a subclass: a user's ``CountThrottle`` subclass may admit
        further ahead, and the promise would be a lie the invariants blame on it."""
        return scenario.pipeline.max_staleness if type(scenario.admission) is CountThrottle else None

    def sync(self, p: PipelineView) -> Generator[Any, Any, None]:
        yield p.drained()  # every replica, not only the first
        p.begin_sync(pause=True)  # the engines are empty; pausing records that nothing generates
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


@dataclass(frozen=True)
class OldestFinishedFirst(FullBatch):
    """The chapter's trainer: the B episodes that finished earliest, in finishing order."""

    def select(self, buffer: list[Episode], p: PipelineView) -> tuple[list[Episode] | None, list[Episode]]:
        b = p.batch_size
        if len(buffer) < b:
            return None, []
        batch = buffer[:b]
        del buffer[:b]
        return batch, []
