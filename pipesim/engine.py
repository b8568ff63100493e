"""The simulation kernel: a rollout pipeline as four kinds of SimPy process.

Processes
---------
* **controller** -- at the end of every simulated instant in which something changed, asks the
  admission policy whether free slots may start episodes, and starts them with the current
  version. "End of instant" is a SimPy event of a priority below NORMAL, so every completion,
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
from collections.abc import Generator
from typing import Any

import simpy
from simpy.events import NORMAL, EventPriority

from pipesim.buffer import EpisodeBuffer
from pipesim.config import Scenario
from pipesim.episode import TRAINED, Episode, UpdateRecord

END_OF_INSTANT = EventPriority(NORMAL + 1)


class PipelineError(RuntimeError):
    """The configuration cannot complete its steps (pool exhausted, or no progress possible)."""


class _EndOfInstant(simpy.Event):
    """An event processed after every NORMAL and URGENT event at the current time."""

    def fire(self) -> None:
        self._ok = True
        self._value = None
        self.env.schedule(self, END_OF_INSTANT, 0)


class Slots:
    """The generation slots of one engine replica: one SimPy process, a heap of running episodes.

    Invariants: ``len(free) + len(running) == n_slots``; each running episode's real end time is
    ``vend + offset`` while the replica is not paused; ``offset`` only grows.
    """

    def __init__(self, pipeline: Pipeline, n_slots: int, index: int = 0) -> None:
        self.p = pipeline
        self.env = pipeline.env
        self.index = index
        self.n_slots = n_slots
        self.free = list(range(n_slots))  # a heap: the lowest free slot starts next
        self.running: list[tuple[float, int, Episode]] = []  # heap of (vend, episode id, episode)
        self.offset = 0.0  # total paused seconds: real time = virtual time + offset
        self.paused_since: float | None = None
        self._target_vend: float | None = None  # the heap top we are sleeping until
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
                if self._target_vend is None:
                    yield never
                else:
                    yield self.env.timeout(self._target_time - self.env.now)
                    self._sleeping = False
                    self._finish_due(self._target_vend)
            except simpy.Interrupt:
                pass
            self._sleeping = False
            self._retarget()

    def _retarget(self) -> None:
        if self.running and self.paused_since is None:
            vend = self.running[0][0]
            self._target_vend = vend
            now = self.env.now
            delay = max(vend + self.offset - now, 0.0)
            self._target_time = now + delay  # the float SimPy will schedule at
        else:
            self._target_vend = None

    def _wake(self) -> None:
        if self._sleeping:
            self._sleeping = False
            self.process.interrupt()

    # -- primitives used by the controller and the weight-update policies ----------------------
    @property
    def n_running(self) -> int:
        return len(self.running)

    def start(self, ep: Episode) -> None:
        now = self.env.now
        ep.slot = heapq.heappop(self.free)
        ep.replica = self.index
        ep.start_s = now
        ep.update_from = len(self.p.updates)
        vend = (now - self.offset) + ep.duration_s
        ep.vend = vend
        heapq.heappush(self.running, (vend, ep.id, ep))

    def kick(self) -> None:
        """Re-arm the timer if a newly started episode finishes before the current target."""
        if self.paused_since is None and self.running:
            if self._target_vend is None or self.running[0][0] < self._target_vend:
                self._wake()

    def pause(self) -> None:
        """Stop the virtual clock. Episodes due exactly now finish first, as in the chapter."""
        if self.paused_since is not None:
            return
        if self._target_vend is not None and self._target_time <= self.env.now:
            self._finish_due(self._target_vend)
        self.paused_since = self.env.now
        self._target_vend = None
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
        self._target_vend = None
        self._wake()

    def _finish_due(self, vend: float) -> None:
        running, free, now, n_upd = self.running, self.free, self.env.now, len(self.p.updates)
        done = []
        while running and running[0][0] <= vend:
            ep = heapq.heappop(running)[2]
            heapq.heappush(free, ep.slot)
            ep.end_s = now
            ep.update_to = n_upd
            done.append(ep)
        self._target_vend = None
        if done:
            self.p.on_finished(done)
        if not running and self._drained is not None:
            ev, self._drained = self._drained, None
            ev.succeed()


class Pipeline:
    """One simulated run: builds the processes, runs them, and keeps the raw records."""

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
        self.syncing = False
        self.sync_pending = False
        self.finished = False
        self.episodes: list[Episode] = []
        self.updates: list[UpdateRecord] = []
        self.train_log: list[tuple[int, float, float, int]] = []  # (step, start, end, version)
        self.sync_log: list[tuple[float, float, int]] = []  # (start, end, version after)
        self.discarded: list[Episode] = []
        self.buffer = EpisodeBuffer(self.env, self, self.discarded.extend)
        self.engine = Slots(self, self.config.n_slots)
        self._sync_start = 0.0
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
        self.buffer.put(episodes)
        self.poke()

    def begin_sync(self, pause: bool) -> None:
        self.sync_pending = False
        self.syncing = True
        self._sync_start = self.env.now
        if pause:
            self.engine.pause()

    def end_sync(self) -> None:
        now = self.env.now
        self.version += 1
        paused = self.engine.paused_since is not None
        self.updates.append(UpdateRecord(self._sync_start, now, self.version, paused))
        self.sync_log.append((self._sync_start, now, self.version))
        self.engine.resume()
        self.syncing = False
        self.poke()

    # -- processes -----------------------------------------------------------------------------
    def _controller(self) -> Generator[simpy.Event, Any, None]:
        while True:
            yield self._wakeup
            self._wakeup = _EndOfInstant(self.env)
            if self.version >= self.config.steps:
                self.finished = True
                self.done.succeed()
                return
            if self.weight_update.blocks_admission(self):
                continue
            engine, admission, pool = self.engine, self.admission, self._durations
            while engine.free and admission.admits(self):
                n = self.started
                if n >= len(pool):
                    raise PipelineError(
                        f"durations pool exhausted: the run needed more than {len(pool)} episodes "
                        f"(at t={self.env.now:.6g} s, version {self.version} of {self.config.steps}); "
                        f"pass at least {self.scenario.default_pool_size} durations or set pool_size"
                    )
                ep = Episode(n, n, pool[n], self.version)
                self.started = n + 1
                self.episodes.append(ep)
                engine.start(ep)
            engine.kick()

    def _trainer(self) -> Generator[simpy.Event, Any, None]:
        for step in range(self.config.steps):
            batch = yield self.buffer.get()
            start, version = self.env.now, self.version
            for ep in batch:
                ep.status = TRAINED
                ep.trained_step = step
                ep.trained_version = version
            yield self.env.timeout(self.config.train_time_s)
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
                f"{self.config.steps}: nothing is running, {len(self.buffer.items)} episodes buffered "
                f"(batch_size {self.batch_size}), {self.started} started; the admission policy "
                f"{type(self.admission).__name__} admits no further episode"
            ) from None
