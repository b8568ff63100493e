"""The controller's questions, asked at every pass and after every completion: is admission
blocked, which replica takes the next episode, may one more start, may the trainer's batch form.

Each question belongs to one policy and is asked of it: ``blocks_admission`` of the weight update,
``choose`` of the routing rule, ``admits`` of the admission rule. The batch policy's ``select``
is asked while the trainer waits, except where its :class:`~pipesim.core.port.MinItemsHint` says
the buffer is too short for any batch (the one hint read here: it also feeds quiet completions).

:class:`Decisions` is the pipeline's base (between its port, :class:`~pipesim.core.port_impl.PolicyPort`,
and :class:`~pipesim.core.engine.Pipeline`) and holds the bound policy methods. Users write
policies, so an answer is checked where it is used: a numpy bool counts as a bool, a numpy integer
as an int, anything else (``None``, ``"no"``, ``1``) is a :class:`~pipesim.core.errors.PipelineError`
naming the policy, the method and the type it returned, not a truth value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from pipesim.core import errors
from pipesim.core.port import BindsPipeline, MinItemsHint, warn_dropped_hints
from pipesim.core.port_impl import PolicyPort

if TYPE_CHECKING:
    from pipesim.core.episode import Episode
    from pipesim.core.port import PipelineView
    from pipesim.core.roles import ReplicaLayout
    from pipesim.core.seams import EngineOptions, EngineReplica


class Decisions(PolicyPort):
    """The controller's questions, each asked of the policy it belongs to."""

    admission: Any
    batching: Any
    _items: list[Episode]
    _admits: Callable[[Any], object]
    _blocks: Callable[[Any], object]
    _min_items: Callable[[Any], object] | None
    _single: EngineReplica | None
    _choose: Callable[[list[EngineReplica]], EngineReplica | None] | None

    def _bind_policies(self, options: EngineOptions) -> None:
        """Bind the policies' methods once; act on the batch policy's ``min_items`` unless
        ``options`` says not to (then ``select`` is asked at every pass the trainer waits)."""
        for role, policy in (
            ("admission", self.admission),
            ("weight update", self.weight_update),
            ("batch policy", self.batching),
        ):
            warn_dropped_hints(policy, role)
        self._admits = self.admission.admits
        self._blocks = self.weight_update.blocks_admission
        batching = self.batching
        hinted = options.hints and isinstance(batching, MinItemsHint)
        self._min_items = batching.min_items if hinted else None

    def _bind_routing(self, replicas: ReplicaLayout | None) -> None:
        """The routing rule of the engines built: which replica starts the next episode (None when
        none accepts); routing sees the replicas through the port and returns one of them."""
        self._single = self.engines[0] if replicas is None else None
        self._choose = None  # one engine: the admission loop starts episodes on it directly
        if replicas is not None:
            routing = replicas.fresh_routing()
            if isinstance(routing, BindsPipeline):  # it reads the pipeline (the upcoming task)
                routing.bind(cast("PipelineView", self))
            self._choose = cast(Any, routing.choose)

    def _blocked(self) -> bool:
        """Whether the weight-update policy blocks admission now."""
        return bool(self._blocks(self))

    def _admitted(self) -> bool:
        """Whether the admission rule lets one more episode start now."""
        yes = self._admits(self)
        return yes is True or (yes is not False and errors.bool_answer(self.admission, "admits", yes))

    def _batch_may_form(self) -> bool:
        """Whether the batch policy may form a batch from the buffer now: no where the buffer is
        shorter than its ``min_items`` (:class:`~pipesim.core.port.MinItemsHint`), else yes."""
        min_items = self._min_items
        if min_items is None:
            return True
        n = min_items(self)
        if type(n) is not int:  # the answer checked: a numpy integer converted, else named
            n = errors.int_answer(self.batching, "min_items", n)
        return len(self._items) >= n

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
            if e.accepting:
                return self._admitted()
        return False
