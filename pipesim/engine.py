"""The simulation kernel: a rollout pipeline as four kinds of SimPy process.

Processes
---------
* **controller** -- at the end of every simulated instant in which something changed, asks the
  admission policy whether free slots may start episodes, starts them with the current version,
  and then lets the buffer serve the trainer's pending request for a batch. "End of instant" is a SimPy event of a priority below NORMAL, so every completion,
  training step and sync that happens at the same time has already been processed. This is the
  ordering the chapter's loop has, and it is what makes ties (integer traces, zero durations)
  come out the same as the chapter's.
* **slots** (:class:`Slots`, one process per engine replica) -- the generation slots of an
  inference engine. Running episodes sit in a heap keyed by their finishing time on a *virtual
  clock* that stops while generation is paused. Pausing for a sync therefore costs O(1) however
  many episodes are in flight: the clock offset grows, and each episode's real end time is
  derived when it is needed. Free slots are a heap, so starting an episode costs O(log n_slots).
* **trainer** -- takes a batch from the :class:`~pipesim.buffer.EpisodeBuffer` (a SimPy
  resource fed by the slots), trains for ``train_time_s``, then requests a weight sync and waits.
* **weight sync** -- runs the weight-update policy's ``sync`` generator for each request and
  publishes the new version.

Finished episodes reach the trainer only through the buffer, and each episode records the version
that started it and the index range of weight updates it lived through.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Generator
from typing import Any

import simpy
from simpy.events import NORMAL, EventPriority

from pipesim.buffer import EpisodeBuffer
from pipesim.config import Scenario
from pipesim.episode import TRAINED, Episode, UpdateRecord
from pipesim.faults import EpisodeLifecycle

END_OF_INSTANT = EventPriority(NORMAL + 1)


class PipelineError(RuntimeError):
    """The configuration cannot complete its steps (pool exhausted, or no progress possible)."""


class _EndOfInstant(simpy.Event):
    """An event processed after every NORMAL and URGENT event at the current time."""

    def fire(self) -> None:
        self._ok = True
        self._value = None
        self.env.schedule(self, END_OF_INSTANT, 0)


def delay_until(now: float, at: float) -> float:
    """A delay ``d`` with ``now + d == at`` in floating point, so SimPy fires exactly at ``at``.

    ``at - now`` alone can land an ulp off, which would split one simulated instant in two.
    """
    if at <= now:
        return 0.0
    d = at - now
    for _ in range(8):
        total = now + d
        if total == at:
            break
        d = math.nextafter(d, math.inf if total < at else 0.0)
    return d


class Slots:
    """The generation slots of one engine replica: one SimPy process, a heap of running episodes.

    Invariants: ``len(free) + len(running) == n_slots``. Paused time is accounted lazily: the
    heap is keyed by finishing time on a virtual clock that stops while paused
    (``vend = start - offset_at_start + duration``), and an episode's real end is
    ``start + duration + (offset_now - offset_at_start)``. For an episode that no pause touched,
    that is exactly ``start + duration``, the same float the chapter's loop computes.
    """

    def __init__(self, pipeline: Pipeline, n_slots: int, index: int = 0) -> None:
        self.p = pipeline
        self.env = pipeline.env
        self.index = index
        self.n_slots = n_slots
        self.free = list(range(n_slots))  # a heap: the lowest free slot starts next
        self.running: list[tuple[float, int, Episode]] = []  # heap of (vend, episode id, episode)
        self.offset = 0.0  # total paused seconds so far
        self.version = 0  # the weights this replica generates with
        self.paused_since: float | None = None
        self._target: Episode | None = None  # the heap top we are sleeping until
        self._target_time = 0.0
        self._sleeping = False  # waiting on a timer or idle (interruptible)
        self._drained: simpy.Event | None = None
        self.process = self.env.process(self._run())

    # -- the process ---------------------------------------------------------------------------
    def _run(self) -> Generator[simpy.Event, Any, None]:
        never = self.env.event()  # idle: woken only by an interrupt
        while True:
            self._sleeping = True
            try:
                if self._target is None:
                    yield never
                else:
                    yield self.env.timeout(delay_until(self.env.now, self._target_time))
                    self._sleeping = False
                    self._finish_due()
            except simpy.Interrupt:
                pass
            self._sleeping = False
            self._retarget()

    def due(self, ep: Episode) -> float:
        """Real time at which running episode ``ep`` finishes if nothing else pauses it."""
        return (ep.start_s + ep.work_s) + (self.offset - ep.offset_start)

    def _retarget(self) -> None:
        if self.running and self.paused_since is None:
            ep = self.running[0][2]
            self._target = ep
            self._target_time = max(self.due(ep), self.env.now)
        else:
            self._target = None

    def _wake(self) -> None:
        if self._sleeping:
            self._sleeping = False
            self.process.interrupt()

    # -- primitives used by the controller and the weight-update policies ----------------------
    @property
    def n_running(self) -> int:
        return len(self.running)

    @property
    def vnow(self) -> float:
        """The virtual clock now (it stands still while the replica is paused)."""
        return (self.paused_since if self.paused_since is not None else self.env.now) - self.offset

    def generated_s(self, ep: Episode) -> float:
        """Seconds running episode ``ep`` has generated so far (pauses excluded)."""
        return max(self.vnow - (ep.start_s - ep.offset_start), 0.0)

    def start(self, ep: Episode, work_s: float | None = None) -> None:
        """Start ``ep`` on the lowest free slot; it generates for ``work_s`` (default its duration)."""
        now = self.env.now
        ep.slot = heapq.heappop(self.free)
        ep.replica = self.index
        ep.start_s = now
        ep.update_from = len(self.p.updates)
        ep.offset_start = self.offset
        if work_s is not None:
            ep.work_s = work_s
        ep.vend = (now - self.offset) + ep.work_s
        heapq.heappush(self.running, (ep.vend, ep.id, ep))

    def abort_all(self) -> list[tuple[Episode, float]]:
        """Take every running episode off its slot now; return each with the seconds it generated.

        O(in-flight), as aborts are. The caller decides the episodes' fate (status, relaunch).
        """
        now, n_upd = self.env.now, len(self.p.updates)
        out = []
        for _, _, ep in sorted(self.running):
            heapq.heappush(self.free, ep.slot)
            ep.end_s = now
            ep.update_to = n_upd
            out.append((ep, self.generated_s(ep)))
        self.running = []
        self._target = None
        self._wake()
        if self._drained is not None:
            ev, self._drained = self._drained, None
            ev.succeed()
        return out

    def stretch_all(self, extra_s: Callable[[Episode, float], float]) -> None:
        """Delay each running episode by ``extra_s(ep, generated_s)`` seconds (re-prefill). O(in-flight)."""
        running = []
        for vend, eid, ep in self.running:
            extra = extra_s(ep, self.generated_s(ep))
            ep.work_s += extra
            ep.vend = vend + extra
            running.append((ep.vend, eid, ep))
        heapq.heapify(running)
        self.running = running
        self._target = None
        self._wake()

    def kick(self) -> None:
        """Re-arm the timer if a newly started episode finishes before the current target."""
        if self.paused_since is None and self.running:
            if self._target is None or self.running[0][0] < self._target.vend:
                self._wake()

    def pause(self) -> None:
        """Stop the virtual clock. Episodes due exactly now finish first, as in the chapter."""
        if self.paused_since is not None:
            return
        self._finish_due()
        self.paused_since = self.env.now
        self._wake()

    def resume(self) -> None:
        if self.paused_since is None:
            return
        self.offset += self.env.now - self.paused_since
        self.paused_since = None
        self._wake()

    def drained(self) -> simpy.Event:
        """An event that succeeds when no episode is running on this replica (now, if none is)."""
        ev = self.env.event()
        if not self.running:
            ev.succeed()
        else:
            self._drained = ev
        return ev

    def remove(self, ep: Episode) -> None:
        """Take a running episode off its slot (aborts); O(n) in the running heap, as aborts are."""
        self.running = [r for r in self.running if r[2] is not ep]
        heapq.heapify(self.running)
        heapq.heappush(self.free, ep.slot)
        self._target = None
        self._wake()

    def _finish_due(self) -> None:
        """Finish every episode due by now; ties go to the buffer in start order, as in the chapter."""
        running, free, now = self.running, self.free, self.env.now
        done = []
        while running and self.due(running[0][2]) <= now:
            ep = heapq.heappop(running)[2]
            heapq.heappush(free, ep.slot)
            done.append(ep)
        self._target = None
        if not done:
            return
        if len(done) > 1:
            done.sort(key=lambda e: e.id)
        n_upd = len(self.p.updates)
        for ep in done:
            ep.end_s = now
            ep.update_to = n_upd
        self.p.on_finished(done)
        if not running and self._drained is not None:
            ev, self._drained = self._drained, None
            ev.succeed()


class Pipeline:
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

    def __init__(self, scenario: Scenario, durations: list[float]) -> None:
        self.scenario = scenario
        self.config = scenario.pipeline
        self.admission = scenario.admission
        self.weight_update = scenario.weight_update
        self.batching = scenario.batching
        self.batch_size = self.config.batch_size
        self.max_staleness = self.config.max_staleness
        self.env = simpy.Environment()
        self._durations = durations
        self.version = 0
        self.started = 0
        self.started_at_version = [0]  # episodes launched when each trainer version was published
        self.next_task = 0
        self.n_dropped = 0
        self.batches_taken = 0
        self.requeued: deque[tuple[int, int]] = deque()  # (task id, id of the episode it replaces)
        self.syncing = False
        self.sync_pending = False
        self.finished = False
        self.episodes: list[Episode] = []
        self.updates: list[UpdateRecord] = []
        self.train_log: list[tuple[int, float, float, int]] = []  # (step, start, end, version)
        self.sync_log: list[tuple[float, float, int]] = []  # (start, end, version after)
        self.discarded: list[Episode] = []
        self.buffer = EpisodeBuffer(self.env, self, self._on_discard)
        replicas = scenario.replicas
        sizes = [self.config.n_slots] if replicas is None else replicas.slots_per_replica(self.config.n_slots)
        self.engines = [Slots(self, n, i) for i, n in enumerate(sizes)]
        self.engine = self.engines[0]
        self._router = None if replicas is None else replicas.fresh_routing()
        self.lifecycle = EpisodeLifecycle.build(scenario) if scenario.needs_lifecycle else None
        self._sync_start = 0.0
        self._pause_start: float | None = None
        self._instant = -1.0
        self._instant_launches = 0
        self._launch_limit = 2 * len(durations) + 100 * (self.config.n_slots + self.batch_size)
        self._wakeup = _EndOfInstant(self.env)
        self._sync_request: simpy.Event = self.env.event()
        self._sync_done: simpy.Event = self.env.event()
        self.done = self.env.event()
        self.env.process(self._controller())
        self.env.process(self._trainer())
        self.env.process(self._weight_sync())

    # -- state changes other processes report --------------------------------------------------
    def poke(self) -> None:
        """Ask the controller to look again at the end of this instant (idempotent)."""
        if not self._wakeup.triggered:
            self._wakeup.fire()

    def on_finished(self, episodes: list[Episode]) -> None:
        if self.lifecycle is not None:
            episodes = self.lifecycle.on_finished(self, episodes)
        if episodes:
            self.buffer.put(episodes)
        self.poke()

    def _on_discard(self, episodes: list[Episode]) -> None:
        self.discarded.extend(episodes)
        self.n_dropped += len(episodes)

    def drop(self, episodes: list[Episode], status: str) -> None:
        """Record launched episodes that will never be trained (aborted, failed)."""
        for ep in episodes:
            ep.status = status
        self.n_dropped += len(episodes)

    @property
    def n_running(self) -> int:
        return sum(e.n_running for e in self.engines)

    def begin_sync(self, pause: bool) -> None:
        self.sync_pending = False
        self.syncing = True
        self._sync_start = self.env.now
        self._pause_start = None
        if pause:
            self.pause_engines()

    def pause_engines(self) -> None:
        """Stop generation on every replica (during a sync that started without pausing, too)."""
        self._pause_start = self.env.now
        for e in self.engines:
            e.pause()

    def end_sync(self, engines: bool = True) -> None:
        """Publish the next version; with ``engines`` the replicas switch to it now, and resume.

        The update record spans the pause (from ``pause_engines``), or is an instant swap if
        generation never paused. Per-replica syncs pass ``engines=False`` and record their own.
        """
        now = self.env.now
        self.version += 1
        self.started_at_version.append(self.started)
        if engines:
            start = self._pause_start if self._pause_start is not None else now
            self.updates.append(UpdateRecord(start, now, self.version, self._pause_start is not None))
            for e in self.engines:
                e.version = self.version
                e.resume()
        self.sync_log.append((self._sync_start, now, self.version))
        self._pause_start = None
        self.syncing = False
        self.poke()

    def skip_sync(self) -> None:
        """The trainer's version advances but no weights move (sync every k steps)."""
        self.sync_pending = False
        self.version += 1
        self.started_at_version.append(self.started)
        self.poke()

    # -- launching -----------------------------------------------------------------------------
    def _route(self) -> Slots | None:
        if self._router is not None:
            return self._router.choose(self.engines)
        e = self.engine
        return e if e.free and e.paused_since is None else None

    def launch(self, engine: Slots, task: int | None = None, parent: int = -1) -> Episode:
        """Start one episode on ``engine``: a given task, a requeued one, or the next new one."""
        now = self.env.now
        if now != self._instant:
            self._instant, self._instant_launches = now, 0
        self._instant_launches += 1
        if self._instant_launches > self._launch_limit:
            raise PipelineError(
                f"no progress: {self._instant_launches} episodes launched at t={now:.6g} s without "
                f"time advancing (version {self.version} of {self.config.steps}); the policies "
                f"{type(self.admission).__name__} / {type(self.weight_update).__name__} / "
                f"{type(self.batching).__name__} relaunch work in a zero-time loop"
            )
        if task is None:
            if self.requeued:
                task, parent = self.requeued.popleft()
            else:
                task = self.next_task
                if task >= len(self._durations):
                    raise PipelineError(
                        f"durations pool exhausted: the run needed more than {len(self._durations)} "
                        f"episodes (at t={now:.6g} s, version {self.version} of {self.config.steps}); "
                        f"pass at least {self.scenario.default_pool_size} durations or set pool_size"
                    )
                self.next_task = task + 1
        ep = Episode(self.started, task, self._durations[task], engine.version)
        ep.parent = parent
        self.started += 1
        self.episodes.append(ep)
        if self.lifecycle is None:
            engine.start(ep)
        else:
            engine.start(ep, self.lifecycle.work_s(ep))
        return ep

    # -- processes -----------------------------------------------------------------------------
    def _controller(self) -> Generator[simpy.Event, Any, None]:
        while True:
            yield self._wakeup
            self._wakeup = _EndOfInstant(self.env)
            if self.version >= self.config.steps:
                self.finished = True
                self.done.succeed()
                return
            if not self.weight_update.blocks_admission(self):
                self._admit()
            self.buffer.serve()  # the trainer takes its batch after admission, as in the chapter

    def _admit(self) -> None:
        admission, route = self.admission, self._route
        while (engine := route()) is not None and admission.admits(self):
            self.launch(engine)
        for e in self.engines:
            e.kick()

    def _trainer(self) -> Generator[simpy.Event, Any, None]:
        colocated = self.config.colocated
        for step in range(self.config.steps):
            batch = yield self.buffer.get()
            self.batches_taken += 1
            self.poke()  # the buffer shrank: rules that count it (QueueAhead) may admit again
            start, version = self.env.now, self.version
            for ep in batch:
                ep.status = TRAINED
                ep.trained_step = step
                ep.trained_version = version
            if colocated:  # the engine shares the accelerators: it pauses while the trainer trains
                for e in self.engines:
                    e.pause()
            yield self.env.timeout(self.config.train_time_s)
            if colocated:
                for e in self.engines:
                    self.updates.append(UpdateRecord(start, self.env.now, e.version, True, e.index, "train"))
                    e.resume()
            self.train_log.append((step, start, self.env.now, version))
            self.sync_pending = True
            self._sync_done = self.env.event()
            self._sync_request.succeed()
            yield self._sync_done

    def _weight_sync(self) -> Generator[simpy.Event, Any, None]:
        while True:
            yield self._sync_request
            self._sync_request = self.env.event()
            yield from self.weight_update.sync(self)
            self._sync_done.succeed()

    def run(self) -> None:
        self.poke()
        try:
            self.env.run(until=self.done)
        except PipelineError as exc:  # raised inside a process: re-raise without SimPy's frames
            raise PipelineError(str(exc)) from None
        except RuntimeError as exc:
            if self.done.triggered or "until" not in str(exc):
                raise
            raise PipelineError(
                f"the pipeline stalled at t={self.env.now:.6g} s, version {self.version} of "
                f"{self.config.steps}: {self.n_running} running, {len(self.buffer.items)} episodes "
                f"buffered (batch_size {self.batch_size}), {self.started} started, {self.n_dropped} "
                f"dropped; the admission policy {type(self.admission).__name__} admits no further "
                f"episode (with {type(self.weight_update).__name__} and {type(self.batching).__name__})"
            ) from None
