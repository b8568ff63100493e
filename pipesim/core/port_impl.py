"""The engine's side of the port: the read-only properties and actions of
:class:`~pipesim.core.port.PipelineView`.

:class:`PolicyPort` is a mixin of :class:`~pipesim.core.engine.Pipeline`. It holds no state of its own:
each property reads the pipeline's records, each action changes them the one way the engine
knows to be consistent (slots freed, episodes marked, the update log extended, the controller
asked to look again). The weight sync's steps (begin, pause, publish the next version to every
replica and to the episode source, or skip) are its base :class:`~pipesim.core.port_sync.SyncActions`.
Keeping the actions here keeps the kernel module about the processes.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import simpy

from pipesim.core import blame, errors
from pipesim.core.clock import Clock
from pipesim.core.episode import ABORTED, BUFFERED, DISCARDED, FAILED, TRAINED, Episode, UpdateRecord
from pipesim.core.errors import PipelineError, shown
from pipesim.core.port import pauses_only
from pipesim.core.port_args import DROPPED as DROPPED  # re-exported
from pipesim.core.port_args import PortArgs
from pipesim.core.port_sync import SyncActions

if TYPE_CHECKING:
    from pipesim.core.buffer import EpisodeBuffer
    from pipesim.core.engine import Pipeline
    from pipesim.core.records import EpisodeRecords
    from pipesim.core.seams import EngineReplica, EpisodeSource


FINAL = frozenset((TRAINED, DISCARDED, ABORTED, FAILED))
"""Statuses an episode never leaves: the records keep such an episode once (pipesim.core.records)."""
HELPER_PREFIX = "the process "
"""How a policy's own process (:meth:`PolicyPort.process`) is named in messages; the checked
runner (``pipesim.core.decisions``) tells a helper from a sync by it."""

ABORT_LOOP_LIMIT = 100
"""How many ``abort_running`` calls in a row at one instant, each after new starts and with no
batch taken between them, are refused (beyond one per replica) as a zero-time loop of starts and
aborts. A weight update aborts once per sync (or per replica's sync), and a sync needs a batch, so
a real run makes one such call in a row; below this many, an exhausted pool says the same."""


class PolicyPort(PortArgs, SyncActions):
    """What policies see and may do; every method here is part of :class:`~pipesim.core.port.PipelineView`.

    Users write policies, so every value a policy passes in is checked by the method it reaches,
    which names the calling policy, the method and the bad value (a ``PipelineError``,
    :meth:`_refused`), not later by whatever reads it.
    """

    env: Clock
    engines: list[EngineReplica]
    buffer: EpisodeBuffer
    requeued: deque[tuple[int, int]]
    next_task: int
    updates: list[UpdateRecord]
    episodes: EpisodeRecords
    n_dropped: int
    weight_update: Any
    source: EpisodeSource | None
    _source_reprices: bool  # a source that is not FixedWork: publish sees the episodes in flight
    version: int
    started: int
    started_at_version: list[int]
    sync_log: list[tuple[float, float, int]]
    sync_pending: bool
    syncing: bool
    _sync_start: float
    _pause_start: float | None
    _durations: Sequence[float]
    _started_at_batch: int  # the engine's: started when the trainer last took a batch
    _abort_loop: tuple[float, int, int, int] = (-1.0, -1, -1, 0)
    """(time, started at the last batch, started, count) of the last abort_running: how many calls
    in a row came at one instant, each after new starts, with no batch taken (ABORT_LOOP_LIMIT)."""

    def poke(self) -> None:  # implemented by the pipeline
        raise NotImplementedError

    def launch(self, engine: EngineReplica, task: int | None = None, parent: int = -1) -> Episode:
        raise NotImplementedError

    def _refused(self, message: str) -> PipelineError:
        """The error for a port action a policy misused: ``message`` starts with the action, and the
        policy that called it is named (:func:`~pipesim.core.blame.calling_policy`; only an error
        pays for the stack walk)."""
        return PipelineError(f"{blame.calling_policy(cast('Pipeline', self))} called {message}")

    # -- reads ------------------------------------------------------------------------------------
    @property
    def now(self) -> float:
        return self.env.now

    @property
    def n_running(self) -> int:
        total = 0
        for e in self.engines:
            total += self._running_on(e)
        return total

    def _running_on(self, e: EngineReplica) -> int:
        """Replica ``e``'s running count (a numpy int converted), else a ``PipelineError`` naming it."""
        n = e.n_running
        return n if type(n) is int else blame.int_answer(e, "n_running", n)

    @property
    def n_buffered(self) -> int:
        return len(self.buffer.items)

    @property
    def buffered(self) -> Sequence[Episode]:
        return self.buffer.items

    @property
    def replicas(self) -> Sequence[EngineReplica]:
        return self.engines

    @property
    def upcoming_task(self) -> int:
        requeued = self.requeued
        return requeued[0][0] if requeued else self.next_task

    @property
    def next_new_task(self) -> int:
        return self.next_task

    # -- waiting ----------------------------------------------------------------------------------
    def timeout(self, delay_s: float) -> simpy.Event:
        # SimPy gets the value as given (a numpy float included)
        if (
            isinstance(delay_s, bool)
            or not isinstance(delay_s, int | float)
            or not 0.0 <= float(delay_s) < math.inf
        ):
            raise self._refused(
                f"timeout: asked for a timeout of {shown(delay_s)} s: need a finite number of "
                f"seconds >= 0{errors.float_hint(delay_s)}"
            )
        return self.env.timeout(delay_s)

    def all_of(self, events: Iterable[simpy.Event]) -> simpy.Event:
        return self.env.all_of(list(events))

    def process(self, generator: Generator[Any, Any, None]) -> simpy.Event:
        """A policy's own process, checked as the sync is (``Decisions._checked``): what it yields
        must be events, and a process that spins alone is an error naming it, not a hang."""
        what = f"{HELPER_PREFIX}{getattr(generator, '__qualname__', type(generator).__name__)}"
        return self.env.process(self._checked(generator, what))

    def _checked(self, steps: object, what: str) -> Generator[simpy.Event, Any, None]:
        raise NotImplementedError  # the pipeline's (pipesim.core.decisions)

    def drained(self) -> simpy.Event:
        """An event that succeeds once no replica runs an episode (at once if none does)."""
        events = [e.drained() for e in self.engines]
        return events[0] if len(events) == 1 else self.env.all_of(events)

    def settled(self) -> simpy.Event:
        """An end of instant queued behind the controller's wake-up (poked): after its pass."""
        self.poke()
        ev = self.env.end_of_instant()
        ev.fire()
        return ev

    # -- tasks and episodes ---------------------------------------------------------------------
    _relaunched: set[int] | None = None  # parents requeued or relaunched so far (made at the first)

    def _relaunch_once(self, parents: list[int], action: str) -> None:
        """A relaunch is "that lost episode run again": at most one per dropped parent (else
        ``episodes_restarted`` exceeds the episodes dropped). Checked before any is recorded."""
        if (done := self._relaunched) is None:
            done = self._relaunched = set()
        new: set[int] = set()
        for parent in parents:
            if parent >= 0 and (parent in done or parent in new):
                raise self._refused(
                    f"{action} with parent {parent} a second time{' in one call' * (parent in new)}: "
                    f"episode {parent} is requeued or relaunched once already, and a dropped episode is "
                    "run again at most once (give each parent once, or -1 for a task that replaces none)"
                )
            new.add(parent)
        new.discard(-1)
        done |= new  # in place: O(parents) a call

    def requeue(self, tasks: Iterable[tuple[int, int]], first: bool = False) -> None:
        try:
            pairs = list(tasks)
        except TypeError:
            raise self._refused(
                f"requeue with {shown(tasks)}: tasks must be an iterable of (task, parent) pairs"
            ) from None
        if not pairs:
            return
        checked = []
        for pair in pairs:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise self._refused(
                    "requeue: each item must be a (task, parent) pair (a task id, and the id of the "
                    f"episode it replaces or -1), got {shown(pair)}"
                )
            task = self._check_task(pair[0], "requeue")
            checked.append((task, self._check_parent(pair[1], task, "requeue")))
        self._relaunch_once([parent for _, parent in checked], "requeue")
        if first:
            self.requeued.extendleft(reversed(checked))
        else:
            self.requeued.extend(checked)
        self.poke()

    def relaunch(self, replica: int, task: int, parent: int) -> None:
        engine = self.engines[self._replica(replica, "relaunch")]
        t = self._check_task(task, "relaunch")
        parent_id = self._check_parent(parent, t, "relaunch")
        running = self._running_on(engine)
        if running >= getattr(engine, "n_slots", math.inf):
            raise self._refused(f"relaunch on replica {replica}: no free slot ({running} running)")
        self._relaunch_once([parent_id], "relaunch")
        self.launch(engine, task=t, parent=parent_id)

    def drop(self, episodes: list[Episode], status: str) -> None:
        """Drop launched episodes for good (``PipelineView.drop``). A buffered one leaves the buffer
        (dropped as discarded: it finished); one still on a slot is refused (``abort_running``
        takes episodes off their slots); each is checked before any changes, so a refusal
        leaves the books as they were."""
        try:
            eps = list(episodes)
        except TypeError:
            raise self._refused(f"drop with {shown(episodes)}: drop takes a list of episodes") from None
        self._drop(eps, status, True)

    def _drop(self, episodes: list[Episode], status: str, checked: bool) -> None:
        """Drop ``episodes`` with ``status``; ``checked``: refuse one still on a slot (the port's
        ``drop``; ``abort_running`` drops what its replicas took off their slots)."""
        if status not in DROPPED:  # the records and results know these three alone
            raise self._refused(f"drop: status must be one of {sorted(DROPPED)}, got {shown(status)}")
        seen: set[int] = set()
        leaving: set[int] = set()  # buffered ones, which leave the buffer
        for ep in episodes:
            if not isinstance(ep, Episode):
                raise self._refused(f"drop({shown(status)}) with {shown(ep)}: drop takes launched episodes")
            if ep.status in FINAL or id(ep) in seen:  # trained or dropped already, or twice in this list
                was = ep.status if ep.status in FINAL else f"given twice, {ep.status}"
                raise self._refused(f"drop({shown(status)}): {shown(ep)} is {was} already; it ends once")
            seen.add(id(ep))
            if ep.status == BUFFERED:
                if status != DISCARDED:
                    raise self._refused(
                        f"drop({shown(status)}): {shown(ep)} is buffered (it finished): drop a "
                        f"buffered episode as {DISCARDED!r}"
                    )
                leaving.add(id(ep))
            elif checked and ep.end_s is None:  # running, on a slot: it would finish into the buffer
                raise self._refused(
                    f"drop({shown(status)}): {shown(ep)} is still running on a slot: take running "
                    "episodes off their slots with abort_running (it drops them as aborted; requeue "
                    "their tasks to run them again)"
                )
        now = self.env.now
        for ep in episodes:
            if id(ep) in leaving:
                ep.discarded_s = now  # when it left the buffer, as for a batch policy's discards
            ep.status = status
        if leaving:  # in place: the buffer's list is the one a batch policy's select edits
            items = self.buffer.items
            items[:] = [ep for ep in items if id(ep) not in leaving]
        self.n_dropped += len(episodes)
        self.episodes.retire(episodes, status)  # final: kept as arrays, not objects
        if episodes:
            self.poke()  # dropped work frees admission budget for rules that subtract it

    def abort_running(self) -> list[Episode]:
        self._check_pauses_only("abort_running")
        self._check_abort_loop()
        aborted = []
        for e in self.engines:
            for ep, generated_s in e.abort_all():
                ep.lost_s = generated_s
                aborted.append(ep)
        self._drop(aborted, ABORTED, False)
        return aborted

    def _check_abort_loop(self) -> None:
        """Refuse the :data:`ABORT_LOOP_LIMIT`-th abort_running in a row at one instant, each after
        new starts, with no batch taken: every episode admitted is aborted at once, and the run
        would use up its pool without time advancing (``abort_running`` in ``admits``, which must
        only read). The policy that called it is named; a run pays a few comparisons per abort."""
        now, at_batch, started = self.env.now, self._started_at_batch, self.started
        t, batch_mark, before, count = self._abort_loop
        if t != now or batch_mark != at_batch:
            count = 0
        elif started > before:
            count += 1
        self._abort_loop = (now, at_batch, started, count)
        if count >= ABORT_LOOP_LIMIT + len(self.engines):
            raise self._refused(
                f"abort_running {count:,} times at t={now:.6g} s, each after new episodes started and "
                "with no batch trained: every episode admitted is aborted at once, a zero-time loop of "
                "starts and aborts. admits (asked before every start) must only read the view; abort "
                "in a weight update's sync"
            )

    def _check_pauses_only(self, action: str) -> None:
        """Refuse ``action``, which touches episodes in flight otherwise than by pausing them all,
        called from the weight update's own code where it promises ``pauses_only()``
        (:class:`~pipesim.core.port.PausesOnly`). Such a lie changed no trace (every action first
        finishes the completions the engine slept past), so comparing runs with the shortcut and
        without never caught it: a sync that aborted every episode in flight passed the kit.
        Asked only of a weight update that promises it; the stack is walked only then."""
        wu = self.weight_update
        if pauses_only(wu) and blame.called_by(wu):
            raise PipelineError(
                f"the weight update policy {type(wu).__name__} called {action}, but its pauses_only() "
                "is True: a weight update that promises pauses_only touches episodes in flight only by "
                "pausing them all; return False from pauses_only (or leave it out) for a sync that "
                "aborts or stretches them"
            )

    def stretch_running(self, extra: Callable[[Episode, float], object]) -> None:
        self._check_pauses_only("stretch_running")
        if not callable(extra):
            raise self._refused(
                f"stretch_running with {shown(extra)} ({type(extra).__name__}): extra must be a callable "
                "(episode, generated_s) -> (seconds, re-prefill tokens), e.g. lambda ep, g: (2.0, 0.0)"
            )
        what = f"a stretch of weight update {type(self.weight_update).__name__}"

        def charge(ep: Episode, generated_s: float) -> float:
            got = extra(ep, generated_s)  # checked here: the error names the weight update
            if not isinstance(got, tuple) or len(got) != 2:
                raise PipelineError(f"{what} must be (seconds, tokens), got {shown(got)}")
            seconds = errors.seconds(got[0], what)  # floats: a numpy float32 stays out of the clock
            ep.reprefill_s += seconds
            ep.reprefill_tokens += errors.seconds(got[1], what, "tokens")
            return seconds

        for e in self.engines:
            e.stretch_all(charge)
