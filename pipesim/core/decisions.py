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
naming the policy, the method and the type it returned, not a truth value. The check costs an
identity test on the common answer (``is True`` / ``is False``), so the hot pass pays nothing.

A policy's own SimPy code (the weight update's ``sync`` generator, and any generator it starts with
``p.process``) runs through :meth:`Decisions._checked`: each thing it yields must be a SimPy event
(not SimPy's "Invalid yield value" from inside its kernel), and a generator that spins -- yields
:data:`SPIN_LIMIT` events in a row without time advancing, or while its own event is the only
thing left in the queue (nothing else can ever happen: the stall of a run whose queue would
otherwise have run dry) -- is a ``PipelineError`` naming it, not a run that never returns. Syncs
yield a few events a step, so the wrapper costs nothing measurable; the episodes' own events never
pass through it.

Who is to blame for such a spin depends on who spins. The weight update's ``sync`` spinning is the
culprit itself (a sync that never ends: the trainer waits for it). A helper process started with
``p.process`` spinning alone is usually innocent: a heartbeat that loops forever only keeps the
queue from running dry, and the real cause is whatever stalled the run when everything else ran
out (an admission rule that admits no more, say). So a helper's spin alone is reported as that
stall, diagnosed by :func:`pipesim.core.stall.stalled` as of the moment the other events ran out
(:func:`pipesim.core.stall.kept_going`), with the helper named as what kept the run going (it
once read as the helper's fault, at t=100,218 s, and the admission rule that stalled the run at
t=218 s went unnamed). That holds at one instant too: a helper that polls with ``timeout(0)`` once
nothing runs spins without time advancing, but alone, so it is the stall's report as well (it
once took the blame). "Alone" for a helper also counts several helpers left with one another
(two heartbeats, one per sync, once hung the run: neither was ever the only event), unless a
queued event is one a sync waits on (its own timeout, which a helper may wait on beside it: the
sync goes on when it comes). A sync waiting on an event that is not queued (``drained()`` while it
keeps the engines paused) counts for nothing: a blanket "no sync under way" once hung such a run
beside two heartbeats. A sync waiting on a helper's own process is that helper's wait: beside a
heartbeat it reads as a stall after :data:`SPIN_LIMIT` of its beats (a 1 s beat: 28 hours of
waiting). A process is a helper by the name :meth:`~pipesim.core.port_impl.PolicyPort.process`
gives it (``"the process ..."``).

When such a stall happened is read as :func:`pipesim.core.stall.kept_going` says, from no earlier
than the helper's last yield with other events queued and the latest of those (read where the
queue is short, :data:`SHORT_QUEUE`: a stalled run's last events are few, a superseded wake-up
among them), so the time is the one the run without the helper reports.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, cast

import simpy

from pipesim.core import blame, errors, stall
from pipesim.core.errors import shown
from pipesim.core.port import BindsPipeline, MinItemsHint, warn_dropped_hints
from pipesim.core.port_impl import HELPER_PREFIX, PolicyPort

SPIN_LIMIT = 100_000
"""How many events in a row a policy's generator may yield at one instant, or as the only event
left in the run, before it is refused as spinning (about a second of SimPy events; a real sync
yields a handful per step)."""

SHORT_QUEUE = 16
"""How many events besides the helpers' own may be queued for a helper's yield to note the latest
of them (when the run stalled, where the helper then spins alone); a longer queue costs one
comparison."""

if TYPE_CHECKING:
    from pipesim.core.clock import Clock
    from pipesim.core.episode import Episode
    from pipesim.core.port import PipelineView
    from pipesim.core.roles import ReplicaLayout
    from pipesim.core.seams import EngineOptions, EngineReplica


class Decisions(PolicyPort):
    """The controller's questions, each asked of the policy it belongs to."""

    admission: Any
    batching: Any
    env: Clock
    _items: list[Episode]
    _admits: Callable[[Any], object]
    _blocks: Callable[[Any], object]
    _min_items: Callable[[Any], object] | None
    _single: EngineReplica | None
    _choose: Callable[[list[EngineReplica]], EngineReplica | None] | None
    routing: object
    """The routing rule this run routes with (its own fresh copy), None with one engine."""

    def _bind_policies(self, options: EngineOptions) -> None:
        """Bind the policies' methods once; act on the batch policy's ``min_items`` unless
        ``options`` says not to (then ``select`` is asked at every pass the trainer waits)."""
        for role, policy in (
            ("admission", self.admission),
            ("weight update", self.weight_update),
            ("batch policy", self.batching),
        ):
            warn_dropped_hints(policy, role)
        self._helper_waits: dict[int, int] = {}  # the events helper processes wait on, by id
        self._sync_waits: dict[int, int] = {}  # the events syncs (checked, not helpers) wait on
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
        self.routing = None
        if replicas is not None:
            routing = self.routing = replicas.fresh_routing()
            if isinstance(routing, BindsPipeline):  # it reads the pipeline (the upcoming task)
                routing.bind(cast("PipelineView", self))
            self._choose = cast(Any, routing.choose)

    def _blocked(self) -> bool:
        """Whether the weight-update policy blocks admission now (its answer checked)."""
        yes = self._blocks(self)
        return yes is True or (yes is not False and self._blocked_answer(yes))

    def _blocked_answer(self, yes: object) -> bool:
        """``blocks_admission``'s answer when it is not a bool: a numpy bool, else an error."""
        return blame.bool_answer(self.weight_update, "blocks_admission", yes)

    def _check_sync(self, before: int, name: str) -> None:
        """After weight update ``name``'s sync: no policy wrote the view's counters
        (:func:`~pipesim.core.errors.view_written`), and the sync published exactly one version."""
        if (err := errors.view_written(cast("Any", self))) is not None:
            raise err
        if self.version == before + 1:  # end_sync or skip_sync, once
            return
        if self.version == before:  # the common slip: no end_sync (begun and left open, or never begun)
            left = (
                f"it began a sync at t={self._sync_start:g} and left it open"
                if self.syncing
                else "it neither began nor skipped one"
            )
            raise errors.PipelineError(
                f"{name}.sync returned without end_sync or skip_sync at t={self.env.now:g} ({left}; "
                f"version still {before}): a sync publishes exactly one version, so it must end "
                "with one end_sync (after begin_sync) or skip_sync"
            )
        raise errors.PipelineError(
            f"{name}.sync moved the trainer's version from {before} to {self.version}: a sync "
            "publishes exactly one version (one end_sync or skip_sync)"
        )

    def _check_choice(self, engine: object) -> None:
        """The launch on the replica the routing rule chose failed: a ``PipelineError`` naming the
        rule where its choice was no accepting replica of this run (else the launch's own error
        stands). Asked only after a failure, or for a choice whose ``index`` is not this run's
        replica (one kept from an earlier run would start episodes outside this run's books)."""
        if any(engine is e for e in self.engines) and getattr(engine, "accepting", False):
            return
        routing = type(self.routing).__name__
        got = next((f"replica {e.index}, which accepts none now" for e in self.engines if e is engine), None)
        index = getattr(engine, "index", None)
        if got is None and isinstance(index, int) and hasattr(engine, "accepting"):
            got = (
                f"a replica of another run (its replica {index}: a rule that keeps the "
                "replicas it was given from one run to the next routes into a run that is over)"
            )
        raise errors.PipelineError(
            f"{routing}.choose must return one of the replicas it is given that accepts an episode "
            f"(or None), got {got or shown(engine)}"
        ) from None

    def _checked(self, steps: object, what: str) -> Generator[simpy.Event, Any, None]:
        """Run a policy's generator ``steps`` (``what`` names it: ``"Drain.sync"``) as a SimPy
        process would, checking what it yields (module docstring): a non-event or a spin is a
        ``PipelineError`` naming ``what``. An event that fails (a sub-process that raised) is
        thrown into ``steps``, as ``yield from`` would."""
        if isinstance(steps, Iterator) and not isinstance(steps, Generator):
            steps = (ev for ev in steps)  # an iterator of events: driven like a generator
        if not isinstance(steps, Generator):
            raise errors.PipelineError(f"{what} must be a generator (yield its events), got {shown(steps)}")
        env, spins, last = self.env, 0, -1.0
        helper = what.startswith(HELPER_PREFIX)  # started with p.process (module docstring)
        waits = self._helper_waits
        mine = waits if helper else self._sync_waits  # where this generator's waits are kept
        alone_at: float | None = None  # when this generator was first left alone, in this spin
        busy_at = -1.0  # the others run out no earlier: its last yield beside them, or their latest
        send: Any = None
        thrown: Exception | None = None
        while True:
            try:
                ev = steps.send(send) if thrown is None else steps.throw(thrown)
            except StopIteration:
                return
            except errors.PipelineError:
                raise
            except Exception as exc:  # the policy's own error: say whose (its frames may not)
                blame.note_culprit(exc, what)
                raise
            if not isinstance(ev, simpy.Event):
                raise errors.PipelineError(
                    f"{what} yielded {shown(ev)} ({type(ev).__name__}), not a SimPy event: yield "
                    "what p.timeout, p.drained, p.all_of or p.process return"
                )
            now = env.now
            alone = env.alone(ev) or (helper and self._helpers_alone(ev))
            if alone:
                alone_at = now if alone_at is None else alone_at
            else:
                alone_at, busy_at = None, now
                later = env.latest_besides(ev, waits, len(waits) + SHORT_QUEUE) if helper else None
                if later is not None:
                    busy_at = max(now, later)  # those events come before the run can stall
            spins = spins + 1 if now == last or alone else 0
            last = now
            if spins >= SPIN_LIMIT:
                if helper and alone_at is not None:  # kept a stalled run going (module docstring)
                    since = (min(max(busy_at, 0.0), alone_at), alone_at)  # the others ran out in between
                    raise stall.kept_going(cast("Any", self), what, spins, since)
                raise errors.spinning(cast("Any", self), what, spins)
            send, thrown = None, None
            mine[id(ev)] = mine.get(id(ev), 0) + 1  # by id: an event's own == is not asked
            try:
                send = yield ev
            except Exception as exc:  # the event failed: the generator handles it, or raises it
                thrown = exc
            finally:
                _forget(mine, id(ev))

    def _helpers_alone(self, ev: simpy.Event) -> bool:
        """Whether the queue holds nothing but ``ev`` and events that helper processes
        (``p.process``) wait on, none of them one a sync waits on too: only those helpers can act,
        so the run is stalled unless one of them ends it (module docstring). The queue's length is
        compared first, so a run with episodes in flight pays one comparison."""
        waits = self._helper_waits
        return self.env.alone_among(ev, waits, len(waits), self._sync_waits)

    def _admitted(self) -> bool:
        """Whether the admission rule lets one more episode start now."""
        yes = self._admits(self)
        return yes is True or (yes is not False and blame.bool_answer(self.admission, "admits", yes))

    def _batch_may_form(self) -> bool:
        """Whether the batch policy may form a batch from the buffer now: no where the buffer is
        shorter than its ``min_items`` (:class:`~pipesim.core.port.MinItemsHint`), else yes."""
        min_items = self._min_items
        if min_items is None:
            return True
        n = min_items(self)
        if type(n) is not int or n < 0:  # the answer checked: a numpy integer converted, else named
            n = blame.count_answer(self.batching, "min_items", n)
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


def _forget(waits: dict[int, int], key: int) -> None:
    """One helper process no longer waits on the event of id ``key`` (it came, or the generator
    was closed): the event is alive while waited on, so its id names no other."""
    n = waits.get(key, 0)
    if n > 1:
        waits[key] = n - 1
    else:
        waits.pop(key, None)
