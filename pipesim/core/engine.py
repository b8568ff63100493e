"""The simulation kernel: a rollout pipeline as four kinds of SimPy process.

Processes
---------
* **controller** -- at the end of every simulated instant in which something changed, asks the
  admission policy whether free slots may start episodes, starts them with the current version,
  and then lets the buffer serve the trainer's pending request for a batch. "End of instant" is a
  SimPy event of a priority below NORMAL, so every completion, training step and sync that happens
  at the same time has already been processed. This is the ordering the chapter's loop has, and it
  is what makes ties (integer traces, zero durations) come out the same as the chapter's. When a
  completion is provably the last thing happening at its instant (nothing else is scheduled at
  it), the pass runs in place instead of through the event: the same decisions, one event fewer.
* **slots** (:class:`~pipesim.core.slots.Slots`, one process per engine replica) -- the generation slots of an
  inference engine. Running episodes sit in a heap keyed by their finishing time on a *virtual
  clock* that stops while generation is paused. Pausing for a sync therefore costs O(1) however
  many episodes are in flight: the clock offset grows, and each episode's real end time is
  derived when it is needed. Free slots are a heap, so starting an episode costs O(log n_slots).
  Completions that cannot change a decision (admission closed for good, no batch they could
  complete) are *quiet*: the process sleeps past them and accounts for them lazily, when it
  wakes or when anyone looks (:meth:`~pipesim.core.slots.Slots.catch_up`), if the policies promise
  what makes that invisible (``docs/policies.md``, "Hints"; :mod:`pipesim.core.quiet`): the
  engine's one shortcut. A wake-up that would be the next event of the whole run is taken in the
  process itself, without a round trip through SimPy's queue (``Slots._run``).
* **trainer** -- takes a batch from the :class:`~pipesim.core.buffer.EpisodeBuffer` (a SimPy
  resource fed by the slots), trains for ``train_time_s``, then requests a weight sync and waits.
* **weight sync** -- runs the weight-update policy's ``sync`` generator for each request and
  publishes the new version. A sync may first wait for the buffer to hold a batch
  (``p.buffered_at_least``, fired where completions enter it: :mod:`pipesim.core.waits`).
  These two, the step, are the pipeline's mixin :class:`~pipesim.core.training.Training`.

What the controller asks of the policies at every pass (blocked? admitted? which replica? may a
batch form?) is :class:`~pipesim.core.decisions.Decisions`, the pipeline's base: it answers from
the policies' promises where they made them.

Finished episodes reach the trainer only through the buffer, and each episode records the version
that started it and the index range of weight updates it lived through.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt
import simpy

from pipesim.core import blame, errors
from pipesim.core.buffer import EpisodeBuffer
from pipesim.core.clock import Clock
from pipesim.core.decisions import Decisions
from pipesim.core.episode import BUFFERED, DISCARDED, Episode, UpdateRecord
from pipesim.core.errors import PipelineError as PipelineError  # re-exported (pipesim, batching)
from pipesim.core.errors import shown
from pipesim.core.lifecycle import EpisodeLifecycle
from pipesim.core.port import FixedWork
from pipesim.core.quiet import make_quiet
from pipesim.core.records import EpisodeRecords
from pipesim.core.runbooks import RunBooks
from pipesim.core.seams import BatchObserver, EngineOptions, EngineReplica, EpisodeSource, TrainerModel
from pipesim.core.slots import Slots
from pipesim.core.training import Training
from pipesim.core.validate import FieldError, check_seam
from pipesim.core.waits import BufferWaits

if TYPE_CHECKING:
    from pipesim.core.roles import RunSpec

_INF = math.inf
DEFAULT_OPTIONS = EngineOptions()


class Pipeline(Decisions, RunBooks, BufferWaits, Training):
    """One simulated run: builds the processes, runs them, and keeps the raw records.

    Versions: ``version`` is the trainer's (training steps handed to the weight sync, whether
    the sync moved weights or was skipped); each replica's ``Slots.version`` is the version of the
    weights it generates with, and an episode is labelled with its replica's version at start.
    With the chapter's policies the two are always equal.

    Tasks: the duration pool is a list of tasks consumed in order; ``requeued`` holds task ids
    put back (infrastructure failures, drop-at-consumption with requeue, restarts), launched
    before any new task. ``n_dropped`` counts launched episodes that will never be trained and no
    longer occupy a slot or the buffer (discarded, aborted, failed); admission rules that do not
    count dropped work subtract it from ``started``.
    """

    admission_refused = False
    """Whether the last admission loop ended because the policy said no (and not for want of a
    free slot). Only a hint of when to look for quiet completions: ``quiet_completions`` checks."""
    quiet_completions: Callable[[int], int] | None

    def __init__(
        self,
        scenario: RunSpec,
        durations: Sequence[float] | npt.NDArray[np.float64],
        *,
        source: EpisodeSource | None = None,
        observer: BatchObserver | None = None,
        trainer: TrainerModel | None = None,
        options: EngineOptions = DEFAULT_OPTIONS,
        engine_factory: Callable[[Pipeline, int, int], EngineReplica] | None = None,
    ) -> None:
        """``durations``: the pool, one entry per task, consumed in order (a list, or a float64
        array, read in place). The seams
        (:mod:`pipesim.core.seams`): ``source`` supplies each started episode's work instead (the pool
        then only bounds the number of tasks); ``observer`` sees every batch; ``trainer`` times
        each step; ``engine_factory(pipeline, n_slots, index)`` builds each replica (default: the
        chapter's slots). ``options`` switches the one shortcut."""
        if not isinstance(options, EngineOptions):
            raise FieldError(f"options must be a pipesim.EngineOptions, got {shown(options)}", "options")
        for name, seam, protocol, what in (
            ("source", source, EpisodeSource, "an episode source"),
            ("observer", observer, BatchObserver, "a batch observer"),
            ("trainer", trainer, TrainerModel, "a trainer model"),
        ):
            if seam is not None:  # named now, not by an AttributeError at the first batch or sync
                check_seam(name, seam, protocol, what)
        if engine_factory is not None and not callable(engine_factory):
            raise FieldError(
                f"engine_factory must be callable, got {shown(engine_factory)}", "engine_factory"
            )
        self.scenario = scenario
        self.options = options
        self.source = source
        self._source_reprices = source is not None and not (  # the FixedWork hint, acted on
            options.hints and isinstance(source, FixedWork) and source.fixed_work()
        )
        self.observer = observer
        self.trainer = trainer
        self.config = scenario.pipeline
        self.admission = scenario.admission
        self.weight_update = scenario.weight_update
        self.batching = scenario.batching
        self.batch_size = self.config.batch_size
        self.max_staleness = self.config.max_staleness
        self.env = Clock()  # SimPy's environment, through the one adapter to its internals
        if isinstance(durations, np.ndarray):
            # a view, not a list: indexing it gives the same Python floats, and a pool of a
            # million tasks costs no list of a million float objects (32 bytes a task)
            self._durations: Sequence[float] = cast(
                Sequence[float], memoryview(cast(Any, np.ascontiguousarray(durations, dtype=np.float64)))
            )
        else:
            self._durations = durations
        self._n_pool = len(self._durations)
        self.version = 0
        self.started = 0
        self.started_at_version = [0]  # episodes launched when each trainer version was published
        self.next_task = 0
        self.n_dropped = 0
        self.batches_taken = 0
        self.n_trained = 0
        self.ledger_log: list[tuple[int, int, int, int, int, int]] = []
        """(step, started, trained, running, buffered, dropped) when the trainer took each batch."""
        self.requeued: deque[tuple[int, int]] = deque()  # (task id, id of the episode it replaces)
        self.syncing = False
        self.sync_pending = False
        self.finished = False
        planned = self.config.steps * self.config.batch_size
        big = planned >= options.archive_min_episodes
        self.episodes = EpisodeRecords(options.archive_block_episodes if big else 0, planned)
        """Every launched episode: objects while they can change, arrays once trained."""
        self._live = self.episodes.live  # where launch puts each episode (changed in place only)
        # the source's draw, bound once (typed object: a user's source may answer anything, and
        # its answer is checked where it is used, with an error naming the source)
        self._work_s: Callable[[int, int, int, int], object] | None = None
        if source is not None:
            self._work_s = source.work_s
        self.updates: list[UpdateRecord] = []
        self.train_log: list[tuple[int, float, float, int]] = []  # (step, start, end, version)
        self.sync_log: list[tuple[float, float, int]] = []  # (start, end, version after)
        self.buffer = EpisodeBuffer(self.env, self, self._on_discard)
        # what every completion and controller pass reads, bound once (a run never changes them)
        self._items: list[Episode] = self.buffer.items  # the buffer's list (changed in place only)
        self._steps = self.config.steps
        self._bind_policies(options)  # the policies' methods, and what their promises say
        replicas = scenario.replicas
        sizes = [self.config.n_slots] if replicas is None else replicas.slots_per_replica(self.config.n_slots)
        build: Callable[[Pipeline, int, int], EngineReplica] = (
            Slots if engine_factory is None else engine_factory
        )
        self.engines: list[EngineReplica] = [build(self, n, i) for i, n in enumerate(sizes)]
        if engine_factory is not None:
            for i, e in enumerate(self.engines):
                check_seam(
                    "engine_factory", e, EngineReplica, "a factory of engine replicas", f" as replica {i}"
                )
        self.slot_group: list[Slots] | None = (
            cast(list[Slots], self.engines)
            if len(self.engines) > 1 and all(type(e) is Slots for e in self.engines)
            else None
        )
        """Several slot replicas: whichever looks at an instant first finishes every replica's
        completions due then, in one order (:func:`pipesim.core.completions.finish_together`)."""
        self._bind_routing(replicas)
        self.lifecycle = EpisodeLifecycle.build(scenario) if scenario.needs_lifecycle else None
        self.reports_in_place = self.lifecycle is None and type(self).on_finished is Pipeline.on_finished
        """Whether the only replica may finish a lone completion itself and run the pass in place
        (``Slots._run``), doing what ``on_finished`` does without the call: no lifecycle decides
        anything at a completion, and no subclass watches ``on_finished``."""
        self.quiet_completions = make_quiet(self, options)  # None where they are not allowed
        self.lazy_completions = self.quiet_completions is not None
        self._sync_start = 0.0
        self._pause_start: float | None = None
        self._instant = -1.0
        self._instant_first = 0  # episodes started before the current instant
        self._started_at_batch = 0  # episodes started when the trainer last took a batch
        self._launch_limit = 2 * self._n_pool + 100 * (self.config.n_slots + self.batch_size)
        self._wakeup = self.env.end_of_instant()
        self._pass_due = False  # whether _wakeup has fired (a pass is scheduled at the end of the instant)
        self._free_until = self.env.free_until  # asked after every completion: bound once
        self.pass_in_place = True
        """An exact economy, always on: a completion that is the last thing at its instant runs the
        controller pass at once instead of through the end-of-instant event. Tests turn it off
        (before ``run``) to check that it is invisible (``tests/test_engine_paths.py``)."""
        self._sync_request: simpy.Event = self.env.event()
        self._sync_done: simpy.Event = self.env.event()
        self.done = self.env.event()
        self.env.process(self._controller())
        self.env.process(self._trainer())
        self.env.process(self._weight_sync())

    # -- state changes other processes report --------------------------------------------------
    def poke(self) -> None:
        """Ask the controller to look again at the end of this instant (idempotent)."""
        if not self._pass_due:
            self._pass_due = True
            self._wakeup.fire()

    def on_finished(
        self, episodes: list[Episode], now: float, in_pass: bool = False, awake: EngineReplica | None = None
    ) -> None:
        """A replica finished ``episodes`` by ``now`` (the current time).

        ``in_pass``: quiet completions caught up by the controller pass, which needs no other.
        ``awake``: the replica, if the caller is its own process (it re-arms when this returns).
        """
        if self.lifecycle is not None:
            episodes = self.lifecycle.on_finished(self, episodes)
        if episodes:  # into the buffer, at once (no SimPy event, no Python call per completion)
            items = self._items
            for ep in episodes:
                ep.status = BUFFERED
                items.append(ep)
            if self._buffer_waits is not None:  # a sync waits for the buffer: it resumes before the pass
                self._fire_buffer_waits()
        if in_pass or self._pass_due:
            return  # a pass is running, or already due at the end of this instant
        if self.pass_in_place and self._free_until(now):
            # Nothing else is scheduled at this instant and the slots process that called us
            # schedules nothing at it either, so the end of the instant is now: running the pass
            # here is exactly what the END_OF_INSTANT event would do, one event sooner.
            self._controller_pass(now, awake)
        elif self.lifecycle is not None or self._controller_has_work():
            self.poke()

    def _on_discard(self, episodes: list[Episode]) -> None:
        now = self.env.now
        for ep in episodes:
            ep.discarded_s = now
        self.n_dropped += len(episodes)
        self.episodes.retire(episodes, DISCARDED)  # final: kept as arrays, not objects
        self.poke()  # dropped work frees admission budget (QueueAhead, rules that subtract drops)

    # -- launching -----------------------------------------------------------------------------
    def launch(self, engine: EngineReplica, task: int | None = None, parent: int = -1) -> Episode:
        """Start one episode on ``engine``: a given task, a requeued one, or the next new one."""
        now: float = self.env.now
        started = self.started
        if now != self._instant:
            self._instant, self._instant_first = now, started
        elif started - self._instant_first >= self._launch_limit:
            raise errors.zero_time_loop(self, started - self._instant_first)
        if started - self._started_at_batch >= self._launch_limit:
            raise errors.no_batch(self, started - self._started_at_batch)
        if task is None:
            if self.requeued:
                task, parent = self.requeued.popleft()
            else:
                task = self.next_task
                if task >= self._n_pool:
                    raise errors.pool_exhausted(self, self._n_pool)
                self.next_task = task + 1
        version, work_s = engine.version, self._work_s
        if type(version) is not int:  # a replica's own version (a numpy int converted), else named
            version = blame.int_answer(engine, "version", version)
        if work_s is None:
            work = self._durations[task]
        else:  # its answer checked here: a clear error naming the source, not a bad clock later
            got = work_s(started, task, version, parent)
            if type(got) is float and 0.0 <= got < _INF:
                work = got
            else:
                work = errors.source_seconds(self, got)  # converted, or named (NaN fails the test)
        ep = Episode(started, task, work, version, parent)
        self.started = started + 1
        self._live[started] = ep
        engine.start(ep, now, None if self.lifecycle is None else self.lifecycle.work_s(ep))
        return ep

    # -- processes -----------------------------------------------------------------------------
    def _controller(self) -> Generator[simpy.Event, Any, None]:
        while not self.finished:
            yield self._wakeup
            self._wakeup = self.env.end_of_instant()
            self._pass_due = False
            self._controller_pass(self.env.now)

    def _controller_pass(self, now: float, awake: EngineReplica | None = None) -> None:
        """The end-of-instant decisions at ``now``: admit episodes, then serve the trainer's batch.

        The admission loop is the one loop for one engine or several (the routing rule picks the
        replica), and :meth:`launch` is the one way an episode starts. ``awake``: the replica in
        whose process the pass runs (from :meth:`on_finished`); it re-arms itself when the pass
        returns, so it needs no kick.
        """
        if self.finished or (self._buffer_waits is not None and self._fire_before_pass()):
            return  # over, or deferred behind a sync that a replica's own completion woke
        if self.lazy_completions and (only := self.engines[0]).behind:
            only.catch_up(now)  # policies and the results see every completion due by now
        if (version := self.version) >= self._steps:
            self.finished = True
            self.done.succeed()
            return
        if (b := self._blocks(self)) is False or (b is not True and not self._blocked_answer(b)):
            started_before = self.started
            if (single := self._single) is not None:  # one engine: no routing rule to ask
                # _admitted() inlined: the admission rule is asked once per episode started
                admits, launch = self._admits, self.launch
                while single.accepting:
                    yes = admits(self)
                    if yes is not True and (
                        yes is False or not blame.bool_answer(self.admission, "admits", yes)
                    ):
                        break
                    launch(single)
                self.admission_refused = bool(single.accepting)  # ended on the policy's no
            else:
                # the admission rule first: the routing rule is asked only for an episode that
                # will start, so its state (round robin's turn) never depends on passes that
                # start nothing
                choose, refused, engines = self._choose, True, self.engines
                assert choose is not None  # bound by _bind_routing where there are replicas
                while self._admitted():
                    if (engine := choose(engines)) is None:
                        refused = False  # no replica accepts one
                        break
                    i = getattr(engine, "index", None)  # this run's replica, not one kept from another run
                    if type(i) is not int or not 0 <= i < len(engines) or engines[i] is not engine:
                        self._check_choice(engine)
                    try:
                        self.launch(engine)
                    except Exception:
                        self._check_choice(engine)  # no replica, or a full one: the rule is named
                        raise
                self.admission_refused = refused
            if self.started != started_before and (awake is None or single is not awake):
                for e in self.engines:  # a new episode may finish before a sleeping replica's target
                    if e is not awake:
                        e.kick()
        if self.version != version:  # only a sync publishes: a policy wrote p.version (one compare a pass)
            raise errors.version_written(self, version, "admission")
        # the trainer takes its batch after admission, as in the chapter
        if (buffer := self.buffer).get_queue and self._batch_may_form():
            buffer.serve()
            if self.version != version:
                raise errors.version_written(self, version, "batch")
        if self.lazy_completions and (only := self.engines[0]).behind:
            only.kick()  # what is quiet may have changed (a new version, a waiting trainer)
