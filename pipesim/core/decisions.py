"""The controller's questions, asked at every pass and after every completion: is admission
blocked, which replica takes the next episode, may one more start, may the trainer's batch form.

Each question belongs to one policy, and each policy may have promised what its answer depends
on (:mod:`pipesim.core.port`, "Promises"): a weight update's :class:`~pipesim.core.port.AdmissionGateHint`
names the flag that blocks admission, an admission rule's :class:`~pipesim.core.port.StartLimitHint`
the start count it admits below, a batch policy's :class:`~pipesim.core.port.ReadyCountHint` the
buffer length from which it is ready. Where a policy has promised, the answer is read from the
pipeline's own counters, and the policy is asked again only when the version or the drop count
moves; otherwise the policy is called. The answers are the same either way
(``pipesim.testing.check_promises`` compares the traces; ``EngineOptions(hints=False)`` asks
the policies every time).

:class:`Decisions` is the pipeline's base (between its port, :class:`~pipesim.core.port_impl.PolicyPort`,
and :class:`~pipesim.core.engine.Pipeline`) and holds the bound policy methods and what their
promises said. A policy's answer is an object, checked where it is used: a numpy bool counts as a
bool, a numpy integer as an int, anything else is a :class:`~pipesim.core.errors.PipelineError`
naming the policy and the method.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from mypy_extensions import mypyc_attr

from pipesim.core import errors
from pipesim.core.port import BindsPipeline, ReadyHint, admission_gate, ready_count, start_limit
from pipesim.core.port_impl import PolicyPort

if TYPE_CHECKING:
    from pipesim.core.episode import Episode
    from pipesim.core.port import PipelineView
    from pipesim.core.seams import EngineAnswers, EngineOptions, EngineReplica
    from pipesim.policies.replicas import Replicas

NO_GATE, NEVER, WHILE_SYNCING, WHILE_SYNC_DUE = -1, 0, 1, 2
"""How admission is blocked: the policy asked (no promise), or the gate it promised, in the order
of :data:`pipesim.core.port.ADMISSION_GATES`."""


@mypyc_attr(allow_interpreted_subclasses=True)
class Decisions(PolicyPort):
    """The controller's questions, answered from the policies' promises where they made them."""

    admission: Any
    batching: Any
    _items: list[Episode]
    _admits: Callable[[Any], object]
    _blocks: Callable[[Any], object]
    _ready: Callable[[list[Episode], Any], object] | None
    _ready_count: Callable[[Any], object] | None
    _start_limit: Callable[[Any], object] | None
    _gate: int
    _limit: int
    _limit_version: int
    _limit_drops: int
    _count: int
    _count_version: int
    _count_drops: int
    _single: EngineReplica | None
    _choose: Callable[[list[EngineReplica]], EngineReplica | None]

    def _bind_policies(self, options: EngineOptions) -> None:
        """Bind the policies' methods once, and act on their promises unless ``options`` says not
        to (then ``ready`` is not asked either: every pass the trainer waits serves it)."""
        hints = options.hints
        self._admits = self.admission.admits
        self._blocks = self.weight_update.blocks_admission
        gate = admission_gate(self.weight_update) if hints else None
        self._gate = NO_GATE if gate is None else gate
        self._start_limit = start_limit(self.admission) if hints else None
        self._limit = self._count = 0
        self._limit_version = self._limit_drops = self._count_version = self._count_drops = -1
        batching = self.batching
        self._ready = batching.ready if hints and isinstance(batching, ReadyHint) else None
        self._ready_count = ready_count(batching) if hints else None

    def _bind_routing(self, replicas: Replicas | None) -> None:
        """The routing rule of the engines built: which replica starts the next episode (None when
        none accepts); routing sees the replicas through the port and returns one of them."""
        self._single = self.engines[0] if replicas is None else None
        self._choose = self._only_engine
        if replicas is not None:
            routing = replicas.fresh_routing()
            if isinstance(routing, BindsPipeline):  # it reads the pipeline (the upcoming task)
                routing.bind(cast("PipelineView", self))
            self._choose = cast(Any, routing.choose)

    def _only_engine(self, engines: list[EngineReplica]) -> EngineReplica | None:
        """The routing rule of a single engine: it, while it accepts episodes."""
        e = engines[0]
        return e if bool(cast("EngineAnswers", e).accepting) else None

    def _blocked(self) -> bool:
        """Whether the weight-update policy blocks admission now: the flag its AdmissionGateHint
        names, or its ``blocks_admission`` asked."""
        gate = self._gate
        if gate == NEVER:
            return False
        if gate == WHILE_SYNCING:
            return self.syncing
        if gate == WHILE_SYNC_DUE:
            return self.syncing or self.sync_pending
        return bool(self._blocks(self))

    def _next_engine(self) -> EngineReplica | None:
        """The replica the next episode would start on (None: none accepts one)."""
        single = self._single
        if single is not None:
            return single if bool(cast("EngineAnswers", single).accepting) else None
        return self._choose(self.engines)

    def _admitted(self) -> bool:
        """Whether the admission rule lets one more episode start now: the counter against its
        StartLimitHint (asked again after a new version or a drop), or its ``admits`` asked."""
        if self._start_limit is None:
            yes = self._admits(self)
            return yes is True or (yes is not False and errors.bool_answer(self.admission, "admits", yes))
        if self._limit_version != self.version or self._limit_drops != self.n_dropped:
            self._limit = errors.int_answer(self.admission, "start_limit", self._start_limit(self))
            self._limit_version, self._limit_drops = self.version, self.n_dropped
        return self.started < self._limit

    def _batch_may_form(self) -> bool:
        """Whether the batch policy may form a batch from the buffer now: the buffer's length
        against its ReadyCountHint (asked again after a new version or a drop), or its ``ready``
        asked, or (neither) yes."""
        if self._ready_count is not None:
            if self._count_version != self.version or self._count_drops != self.n_dropped:
                got = self._ready_count(self)
                self._count = errors.int_answer(self.batching, "ready_count", got)
                self._count_version, self._count_drops = self.version, self.n_dropped
            return len(self._items) >= self._count
        ready = self._ready
        return ready is None or bool(ready(self._items, self))

    def _controller_has_work(self) -> bool:
        """Would a controller pass at the end of this instant do anything?

        Skipping a pass that would do nothing is exact, because every other event that can make
        admission or batch assembly possible (a sync ending, the trainer taking a batch, a
        discard) pokes the controller itself.
        """
        if self.buffer.get_queue and self._batch_may_form():
            return True
        if self._blocked():
            return False
        for e in self.engines:  # a plain loop (asking the routing rule could move its state)
            if bool(cast("EngineAnswers", e).accepting):
                return self._admitted()
        return False
