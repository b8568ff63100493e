"""Several inference-engine replicas: how slots are split, how episodes are routed, how each syncs.

A :class:`Replicas` config splits the pipeline's ``n_slots`` over ``n_replicas`` engines (each a
:class:`~pipesim.core.engine.Slots` process with its own virtual clock and weight version). A
:class:`Routing` rule picks the replica for each admitted episode among those with a free slot
that are not paused:

* :class:`RoundRobin` -- the next replica in turn (a router without load information);
* :class:`LeastLoaded` -- the replica with the fewest running episodes (SGLang router style).
* :class:`GroupAffinity` -- every sample of a prompt group to the replica its group's first
  sample went to, while that replica accepts (a prompt sent once with ``n`` samples, as verl's
  rollout sends ``rollout.n``; SGLang's cache-aware router): with the compute engine's
  ``share_group_prefix`` this is what lets a group share its prompt's KV.

:class:`PerReplicaSync` is the weight update of a fleet whose replicas sync separately: each
replica pauses for its own sync time (from its link's bandwidth, say), switches to the new
weights and resumes at once, while the others keep generating. The trainer's version advances
when the slowest replica is done. Routing costs O(n_replicas) per admitted episode.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pipesim.core.errors import check_int, check_number, shown
from pipesim.core.port import PipelineView, ReplicaView
from pipesim.core.roles import Routing as Routing  # the role lives in core; re-exported
from pipesim.core.validate import FieldError, refuse


class RoundRobin:
    """Each episode goes to the next available replica in turn."""

    def __init__(self) -> None:
        self._next = 0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RoundRobin)

    def __hash__(self) -> int:
        return hash(RoundRobin)

    def __repr__(self) -> str:
        return "RoundRobin()"

    def fresh(self) -> RoundRobin:
        return RoundRobin()

    def choose(self, engines: Sequence[ReplicaView]) -> ReplicaView | None:
        n = len(engines)
        for k in range(n):
            e = engines[(self._next + k) % n]
            if e.accepting:
                self._next = (self._next + k + 1) % n
                return e
        return None


@dataclass(frozen=True)
class LeastLoaded:
    """Each episode goes to the available replica with the fewest running episodes (lowest index on ties)."""

    def choose(self, engines: Sequence[ReplicaView]) -> ReplicaView | None:
        best: ReplicaView | None = None
        for e in engines:
            if e.accepting and (best is None or e.n_running < best.n_running):
                if e.n_running == 0:  # nothing beats an idle replica, and this is the first one:
                    return e  # the same choice, without scanning the rest (a huge, idle cluster)
                best = e
        return best


def check_routing(name: str, value: object) -> None:
    """:class:`FieldError` for ``name`` unless ``value`` is a routing rule instance: an object with
    a ``choose`` method that is neither a class, nor a number or string, nor a numpy value. The
    runtime-checkable :class:`Routing` protocol only asks for a ``choose`` attribute, which every
    numpy scalar and array has (``ndarray.choose``): ``Replicas(2, routing=np.int64(3))`` passed
    and then failed inside numpy at the run's first admission."""
    plain = isinstance(value, type | numbers.Number | str | bytes)  # a class, a number, a word
    numpy_value = type(value).__module__.split(".")[0] == "numpy"
    if plain or numpy_value or not isinstance(value, Routing):
        raise refuse(name, f"must be a routing rule instance (with choose), got {shown(value)}")


@runtime_checkable
class FreshRouting(Protocol):
    """A routing rule with per-run state: each run gets :meth:`fresh`'s copy."""

    def fresh(self) -> Routing: ...


@dataclass(frozen=True)
class GroupAffinity:
    """Each episode of a prompt group (tasks ``g * group_size`` .. ``(g + 1) * group_size - 1``)
    goes to the replica its group's first episode went to, while that replica accepts; the
    group's first episode, and any whose home is full or paused, goes where ``fallback`` says
    (default :class:`LeastLoaded`), and that replica becomes the group's home.

    It reads the task the next admitted episode starts (``PipelineView.upcoming_task``), so it is
    bound to the pipeline before the run (:class:`~pipesim.core.port.BindsPipeline`); a requeued
    task keeps its group. O(1) per admitted episode plus the fallback's cost; one int per group.

    A frozen dataclass whose fields (``group_size``, ``fallback``) are its identity, so a scenario
    file writes and reads it like any catalogued policy; the per-run state (the group homes, the
    bound pipeline) lives outside the fields, is not compared, and starts empty in each
    :meth:`fresh` copy, which is what every run routes with (:meth:`Replicas.fresh_routing`).
    """

    group_size: int
    fallback: Routing = field(default_factory=lambda: LeastLoaded())
    _home: dict[int, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    _pipeline: PipelineView | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_int("group_size", self.group_size, 1)
        if self.fallback is None:  # None still means the default, as before
            object.__setattr__(self, "fallback", LeastLoaded())
        else:
            check_routing("fallback", self.fallback)

    def __hash__(self) -> int:
        return hash((GroupAffinity, self.group_size))

    def __repr__(self) -> str:
        if self.fallback == LeastLoaded():  # the default: code that pastes the repr needs no import
            return f"GroupAffinity(group_size={self.group_size})"
        return f"GroupAffinity(group_size={self.group_size}, fallback={self.fallback!r})"

    def fresh(self) -> GroupAffinity:
        fallback = self.fallback.fresh() if isinstance(self.fallback, FreshRouting) else self.fallback
        return GroupAffinity(self.group_size, fallback)

    def bind(self, pipeline: PipelineView) -> None:
        object.__setattr__(self, "_pipeline", pipeline)
        bind = getattr(self.fallback, "bind", None)
        if callable(bind):  # a fallback that reads the pipeline (another GroupAffinity) is bound too
            bind(pipeline)

    def choose(self, engines: Sequence[ReplicaView]) -> ReplicaView | None:
        if self._pipeline is None:
            raise RuntimeError("GroupAffinity.choose before bind(pipeline): the engine binds it at start")
        group = self._pipeline.upcoming_task // self.group_size
        home = self._home.get(group)
        if home is not None and home < len(engines) and engines[home].accepting:
            return engines[home]
        e = self.fallback.choose(engines)
        if e is not None:
            self._home[group] = e.index
        return e


@dataclass(frozen=True)
class Replicas:
    """``n_replicas`` engines sharing the pipeline's ``n_slots`` (the first ones get any remainder).

    The routing object of a run is stateful (round robin remembers its turn), so a scenario gets a
    fresh one per run through :meth:`fresh_routing`.
    """

    n_replicas: int = 2
    routing: Any = field(default_factory=RoundRobin)

    def __post_init__(self) -> None:
        if isinstance(self.n_replicas, bool) or not isinstance(self.n_replicas, int) or self.n_replicas < 1:
            raise refuse("n_replicas", f"must be an integer >= 1, got {shown(self.n_replicas)}")
        check_routing("routing", self.routing)

    def slots_per_replica(self, n_slots: int) -> list[int]:
        if n_slots < self.n_replicas:
            raise FieldError(f"n_slots ({n_slots}) must be >= n_replicas ({self.n_replicas})", "n_slots")
        q, r = divmod(n_slots, self.n_replicas)
        return [q + (i < r) for i in range(self.n_replicas)]

    def fresh_routing(self) -> Routing:
        """The routing object for one run: the rule's :meth:`~FreshRouting.fresh` copy where it has
        one, else a deep copy, so state a rule keeps (a round-robin turn) starts afresh in every
        run and the same scenario and seed route the same way however often it runs. A rule that
        cannot be copied (it holds a lock, say) is used as it is: give it ``fresh()``."""
        routing = self.routing
        if isinstance(routing, FreshRouting):
            return routing.fresh()
        try:
            return copy.deepcopy(routing)
        except (TypeError, copy.Error, RecursionError):
            return routing


@dataclass(frozen=True)
class PerReplicaSync:
    """Each replica pauses only for its own sync time, then runs the new weights while others sync.

    ``sync_times_s[i]`` is replica i's sync time; None uses the pipeline's ``sync_time_s`` for all.
    """

    sync_times_s: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        times = self.sync_times_s
        if times is None:
            return
        if not isinstance(times, tuple | list):  # a bare 1.0: a TypeError from the loop named nothing
            raise refuse(
                "sync_times_s", f"must be a list of seconds (one per replica) or None, got {shown(times)}"
            )
        object.__setattr__(self, "sync_times_s", tuple(times))  # a list: hashable, and as a file loads it
        for i, t in enumerate(times):
            check_number(f"sync_times_s[{i}]", t, 0, unit=" of seconds")

    def check_replicas(self, n_replicas: int) -> None:
        """FieldError naming ``sync_times_s`` unless it has one entry per replica (or is None):
        the scenario asks at construction, not at the run's first sync."""
        if self.sync_times_s is not None and len(self.sync_times_s) != n_replicas:
            raise refuse(
                "sync_times_s",
                f"has {len(self.sync_times_s)} entries for {n_replicas} replica(s) (Scenario.replicas)",
            )

    def times_for(self, p: PipelineView) -> list[float]:
        n = len(p.replicas)
        if self.sync_times_s is None:
            return [p.config.sync_time_s] * n
        if len(self.sync_times_s) != n:
            raise refuse("sync_times_s", f"has {len(self.sync_times_s)} entries for {n} replicas")
        return [float(t) for t in self.sync_times_s]

    def blocks_admission(self, p: PipelineView) -> bool:
        return False  # paused replicas are skipped by routing; the others keep admitting

    def sync(self, p: PipelineView) -> Generator[Any, Any, None]:
        p.begin_sync(pause=False)
        target = p.version + 1
        procs = [p.process(self._one(p, i, t, target)) for i, t in enumerate(self.times_for(p))]
        yield p.all_of(procs)
        p.end_sync(engines=False)

    @staticmethod
    def _one(p: PipelineView, replica: int, sync_s: float, target: int) -> Generator[Any, Any, None]:
        start = p.now
        p.pause_replica(replica)
        yield p.timeout(sync_s)
        p.publish_replica(replica, target, since_s=start)
