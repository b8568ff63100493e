"""The roles the kernel calls, one Protocol each, and what it reads of a run's composition.

A policy author reads one Protocol per role: :class:`Admission` (``admits``), :class:`WeightUpdate`
(``blocks_admission``, ``sync``), :class:`BatchPolicy` (``select``), :class:`FailurePolicy`
(``hazard_per_s``, ``on_failure``) and :class:`Routing` (``choose``); at most two optional speed
hints sit beside them (:mod:`pipesim.core.port`: ``closed``, ``min_items``). Each is re-exported
where the shipped policies of its role live (``pipesim.policies.base``, ``.faults``,
``.replicas``).

The kernel is built from a :class:`RunSpec`: the pipeline's configuration
(:class:`~pipesim.core.pipeline_config.PipelineConfig`) and the policies. :class:`pipesim.Scenario`
is one, composed at the edge (files, the command line, presets); the kernel never imports it, so
``core`` depends on nothing above it, type-level imports included (``tests/test_architecture.py``).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pipesim.core.episode import Episode
    from pipesim.core.pipeline_config import PipelineConfig
    from pipesim.core.port import PipelineView, ReplicaView

__all__ = [
    "Admission",
    "BatchPolicy",
    "FailurePolicy",
    "ReplicaLayout",
    "Routing",
    "RunSpec",
    "TimeoutRule",
    "WeightUpdate",
]


@runtime_checkable
class Admission(Protocol):
    """Decides whether one more episode may start now (a slot is known to be free)."""

    def admits(self, p: PipelineView) -> bool: ...


@runtime_checkable
class WeightUpdate(Protocol):
    """What happens around a weight sync: ``sync(p)`` runs inside the weight-sync process."""

    def blocks_admission(self, p: PipelineView) -> bool: ...

    def sync(self, p: PipelineView) -> Generator[Any, Any, None]: ...


@runtime_checkable
class BatchPolicy(Protocol):
    """Chooses the trainer's batch from the buffer of finished episodes.

    ``select`` returns ``(batch, discarded)`` and removes both from ``buffer`` in place, or
    returns ``(None, discarded)`` when no full batch can be formed yet. The trainer's version
    is ``p.version`` (it cannot change while the trainer waits for a batch).
    """

    def select(
        self, buffer: list[Episode], p: PipelineView
    ) -> tuple[list[Episode] | None, list[Episode]]: ...


@runtime_checkable
class FailurePolicy(Protocol):
    """A constant failure hazard and what to do with an episode whose worker failed."""

    hazard_per_s: float

    def on_failure(self, p: PipelineView, ep: Episode) -> None: ...


@runtime_checkable
class Routing(Protocol):
    """Chooses the replica for the next episode, or None if no replica can take one now."""

    def choose(self, engines: Sequence[ReplicaView]) -> ReplicaView | None: ...


class TimeoutRule(Protocol):
    """What the kernel reads of a timeout: the cap on each episode's generation, in seconds."""

    @property
    def cap_s(self) -> float: ...


class ReplicaLayout(Protocol):
    """What the kernel reads of a replica layout: each replica's slots, and a routing rule per run."""

    def slots_per_replica(self, n_slots: int) -> list[int]: ...

    def fresh_routing(self) -> Routing: ...


class RunSpec(Protocol):
    """What the kernel reads of a run's composition (:class:`pipesim.Scenario` is one)."""

    @property
    def pipeline(self) -> PipelineConfig: ...
    @property
    def admission(self) -> Any: ...
    @property
    def weight_update(self) -> Any: ...
    @property
    def batching(self) -> Any: ...
    @property
    def timeout(self) -> TimeoutRule | None: ...
    @property
    def failures(self) -> FailurePolicy | None: ...
    @property
    def replicas(self) -> ReplicaLayout | None: ...
    @property
    def seed(self) -> int: ...
    @property
    def needs_lifecycle(self) -> bool: ...
    @property
    def default_pool_size(self) -> int: ...
