"""The event driver of a compute replica: its SimPy timer, batch changes and tool calls.

:class:`ReplicaDriver` is the middle of three layers of
:class:`~pipesim.compute.engine.ComputeReplica`: :class:`~pipesim.compute.batch.BatchState`
below it knows nothing of SimPy (the token clock, the heap of resident sequences, the KV
scheduler); this layer turns its next batch change into one pending wakeup on SimPy's queue (a
:class:`~pipesim.core.clock.Wakeup`; superseded ones ignored), or handles it in place when it
comes strictly before every other queued event (:mod:`pipesim.compute.inplace`); finishes
sequences and hands the episodes to the kernel; and sends multi-turn sequences to their tool
calls and back (:class:`~pipesim.compute.pool.EnvWorkers`, or one wakeup per call when the
environment workers are unlimited). The engine module above adds the kernel's
:class:`pipesim.EngineReplica` port. The model itself is described in :mod:`pipesim.compute.engine`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Protocol

import simpy
from mypy_extensions import mypyc_attr

from pipesim.compute import prefix
from pipesim.compute.batch import BatchState, Seq
from pipesim.compute.cost import ReplicaCost
from pipesim.compute.inplace import drive
from pipesim.compute.pool import EnvWorkers
from pipesim.compute.series import ReplicaSeries
from pipesim.compute.source import TokenTable
from pipesim.core.clock import Clock, Wakeup

if TYPE_CHECKING:
    from pipesim.core.episode import Episode, UpdateRecord


HANDLE_IN_PLACE = True
"""Whether new replicas handle in place what comes first in SimPy's queue (``handle_in_place``);
tests set it False for the reference (a module global: both builds read it at construction)."""


class Host(Protocol):
    """What a replica reads of the run it serves: the kernel's
    :class:`~pipesim.core.engine.Pipeline`, or a closed loop's stand-in
    (:class:`~pipesim.compute.refill.Refill`). A protocol, not the class, so that the compiled
    build, which checks a compiled class where one is declared, takes either."""

    env: Clock
    updates: list[UpdateRecord]

    def on_finished(self, episodes: list[Episode], now: float) -> None: ...


@mypyc_attr(allow_interpreted_subclasses=True)
class ReplicaDriver(BatchState):
    """A replica's batch on the SimPy clock (see the module docstring); the kernel's port is
    :class:`~pipesim.compute.engine.ComputeReplica`."""

    """One continuous-batching replica (see the module docstring)."""

    def __init__(
        self,
        pipeline: Host,
        n_slots: int,
        index: int,
        cost: ReplicaCost,
        source: TokenTable,
        record: bool = False,
        pool: EnvWorkers | None = None,
        series: ReplicaSeries | bool | None = None,
    ) -> None:
        """``pool``: the environment workers tool calls queue for (None: unlimited). ``series``:
        keep the binned time series (:meth:`timeline_frame`), in the given
        :class:`~pipesim.compute.batch.ReplicaSeries` or a default one (True), or none (False);
        None (the default) keeps one when ``record`` is set. It costs about a quarter of the
        simulator's speed on a closed loop, hence off unless asked for."""
        super().__init__(cost, index)
        if not isinstance(pipeline.env, Clock):  # the one adapter to SimPy's internals
            raise TypeError(
                f"a compute replica's host must run on a pipesim.core.clock.Clock (host.env), "
                f"got a {type(pipeline.env).__name__}"
            )
        self.p, self.env = pipeline, pipeline.env
        self.handle_in_place: bool = HANDLE_IN_PLACE
        """Handle a batch change or tool return that comes first in SimPy's queue in place
        (:meth:`_drive`); False sends every one through a SimPy event, the slower reference the
        tests compare against (the results are identical). An instance attribute, read from
        :data:`HANDLE_IN_PLACE` when the replica is made: the compiled build reads it the same way
        (a class attribute of a compiled class ignored a patch of the class)."""
        self._updates = pipeline.updates  # the host's list (appended to, never replaced mid-run)
        self.n_slots = n_slots
        self.version = 0
        self._weights_version = 0  # the version its sequences' gen_at_update was taken at
        self.behind = False  # no quiet completions here
        self.source = source
        # the table's lookup and containers, bound once (a table appends to its lists and writes
        # their entries, never replaces them): no attribute lookup through the protocol per sample
        self._tokens_of: Callable[[int], tuple[int, int, int]] = source.tokens_of
        self._truncated: list[bool] = source.truncated
        self._turns: dict[int, list[tuple[int, float, int]]] = source.turns
        self._generated: list[float] = source.generated
        self.free = list(range(n_slots))
        self.offset = 0.0
        self._timer: Wakeup | simpy.Event | None = None
        self._timer_at = math.inf
        self._target_v = math.inf
        self._in_event = False
        self._settle_pending = False
        self._drained: simpy.Event | None = None
        self.record = record
        self.pool = pool
        self._keep_kv = cost.config.keeps_tool_kv  # "keep" under "reserve" is refused at construction
        self.tooling: dict[Seq, None] = {}  # sequences in a tool call
        self.tool_calls = 0
        self.timeline: list[tuple[float, int, int, float, float, bool]] = []
        self._pause_recorded = -math.inf
        self._on_timer_cb = self._on_timer  # one bound method each: how _drive knows its own events
        self._on_tool_cb = self._on_tool
        self._on_settle_cb = self._on_settle
        self._on_pool_cb = self._on_pool
        if series or (series is None and record):
            self.series = series if isinstance(series, ReplicaSeries) else ReplicaSeries()

    def _snap(self, now: float, force: bool = False) -> None:
        """At the timer's instant, the clock is exactly at the target: no float shortfall, and no
        overshoot either (the planned time rounds at the magnitude of the clock, so the token
        clock read back from it misses the target by about eps * now / a; counted, the misses
        add up with simulated time and the ledger drifts)."""
        due = force or self._timer_at <= now + 1e-9 * max(1.0, now)
        if due and self.v != self._target_v < math.inf:
            self._snap_tokens(now, self._target_v)

    def _snap_tokens(self, now: float, target: float) -> None:
        tokens = self.n * (target - self.v)
        self.tokens_generated += tokens
        if self.series is not None:
            self.series.add_tokens(now, tokens)
        self.v = target
        self._dirty = True

    def _plan(self, now: float) -> float:
        """Aim the timer at the next batch change: set ``_target_v`` and ``_timer_at`` and return
        the time (``inf``: nothing to wait for, paused or empty). Creates no event."""
        self._timer = None
        if self._dirty:
            self._rate()
        n = self.n
        waiting = self.waiting
        self._queued = len(waiting)
        if self.paused_since is not None or n == 0:
            self._timer_at = math.inf
            return math.inf
        heap = self.heap
        while heap and heap[0][2] != heap[0][3].stamp:
            heappop(heap)
        v = self.v
        v_next = heap[0][0] if heap else math.inf
        if self._preempt:
            v_full = self._full_v()
            if v_full < v_next:
                v_next = v_full
        if waiting and v < self._admit_v < v_next:
            v_next = self._admit_v
        dv = v_next - v
        if dv < 0.0:
            dv = 0.0
        t0 = self.t0
        at = (t0 if t0 > now else now) + dv * (self.a + self.c * dv)
        if waiting and self._admit_t < at:  # the end of the prefill step in progress
            at, v_next = self._admit_t, v
        self._target_v, self._timer_at = v_next, at
        if self.record:  # the cache's resident tokens (never above the budget); the rate is priced
            # on the tokens decode attention reads, kv_base + n*v (a shared prompt once per member,
            # no cached prefix of a tool call)
            read = self.kv_base + n * v
            rate = self.cost.tokens_per_s(n, read)
            self.timeline.append((now, n, len(waiting), read + self.held_total, rate, self._bound))
        return at

    def _rearm(self, now: float) -> None:
        at = self._plan(now)
        if at < math.inf:  # what env.timeout(delay) schedules: at the clock + delay
            self._timer = self._schedule(self.env.now + (at - now if at > now else 0.0), self._on_timer_cb)

    def _schedule(self, t: float, callback: Callable[[Wakeup], None], value: Seq | None = None) -> Wakeup:
        """A :class:`~pipesim.core.clock.Wakeup` for ``callback`` at the absolute time ``t``."""
        return self.env.call_at(t, callback, value)

    def _time(self) -> float:
        """SimPy's clock."""
        now: float = self.env.now
        return now

    def _settle_later(self) -> None:
        """Settle at the end of this instant, after what else is due now (a zero timeout)."""
        self._settle_pending = True
        self._schedule(self._time() + 0.0, self._on_settle_cb)

    def _on_timer(self, ev: Wakeup | simpy.Event) -> None:
        if ev is not self._timer:
            return  # superseded by a later change of the batch
        now = self.env.now
        self._advance(now)
        self._snap(now, force=True)
        self._drive(now)

    def _on_settle(self, _ev: Wakeup) -> None:
        self._settle_pending = False
        if self.paused_since is None:
            now = self.env.now
            self._advance(now)
            self._drive(now)

    def _drive(self, now: float) -> None:
        """Handle the batch change due now, and the ones after it while this replica's come first
        in SimPy's queue, in place (:func:`pipesim.compute.inplace.drive`)."""
        drive(self, now)

    def _arm_at(self, t: float) -> None:
        """Arm the timer at the absolute time ``t`` (what ``env.timeout(t - now)`` computed as
        ``now + (t - now)`` gives), scheduled as SimPy's ``schedule`` does."""
        self._timer = self._schedule(t, self._on_timer_cb)

    def _step(self, now: float, rearm: bool = True) -> float:
        """Finish what is due, preempt if the cache is full, admit, report, re-arm (or, with
        ``rearm=False``, plan the next change and return its time without arming a timer)."""
        self._in_event = True
        try:
            done = self._finish_due(now)
            n = self.n
            over = self.kv_base + n * (self.v + 1.0) + self.held_total > self._budget + 1e-6
            if n and self._preempt and over and not self._mid_iteration():
                self._preempt_if_full()  # over is its loop condition, tested here first
            if self.paused_since is None:
                if self.waiting:
                    self._admit(now)
                else:
                    self._admit_v = self._admit_t = math.inf  # what _admit does with no one waiting
            if done:
                self._finished(done, now)  # may start episodes here (queued): admit them
                if self.waiting and self.paused_since is None:
                    self._admit(now)
            if self._drained is not None and len(self.free) == self.n_slots:
                ev, self._drained = self._drained, None
                ev.succeed()
        finally:
            self._in_event = False
        if rearm:
            self._rearm(now)
            return self._timer_at
        return self._plan(now)

    # -- batch changes -----------------------------------------------------------------------------
    def _finish_due(self, now: float) -> list[Seq]:
        """Take the sequences whose last turn ends by now off the batch (and free their slots), in
        episode id order. Their episodes are not touched here: :meth:`_finished` writes them."""
        heap, v = self.heap, self.v
        lim = v + 1e-7 + 1e-12 * v
        done: list[Seq] = []
        if not heap or heap[0][0] > lim:
            return done
        generated = self._generated
        preempt, share = self._preempt, self._share
        free = self.free
        while heap and heap[0][0] <= lim:
            _, eid, stamp, seq = heappop(heap)
            if stamp != seq.stamp:
                continue
            seq.stamp = -1
            self.n -= 1
            self.kv_base -= seq.kv_off
            if not preempt:
                self.reserved -= seq.prompt + seq.max_tokens
            self._dirty = True
            if seq.turns is not None and seq.turn + 1 < len(seq.turns):
                self._end_turn(seq)
                continue
            if share:  # its reference on the group's prompt goes (the last one frees it)
                prefix.leave(self, seq)
            heappush(free, seq.slot)
            generated[eid] = float(seq.response)
            done.append(seq)
        if done:
            self.completions += len(done)
            self._since_finish = 0
            if len(done) > 1:
                done.sort(key=_seq_id)
        return done

    def _finished(self, done: list[Seq], now: float) -> None:
        """Report ``done`` (finished by :meth:`_finish_due` at ``now``) to the host: the one place
        a finished sequence writes its episode (its end, the update log's length, the seconds it
        generated, pauses excluded), once. :class:`~pipesim.compute.refill.LoopReplica`, which
        keeps no episodes, overrides it."""
        n_upd = len(self._updates)
        clock = (self.paused_since if self.paused_since is not None else now) - self.offset
        end = now + 0.0
        episodes: list[Episode] = []
        for seq in done:
            ep = seq.ep
            if ep is None:
                raise TypeError(f"sequence {seq.id} finished on replica {self.index} without an episode")
            ep.end_s = end
            ep.update_to = n_upd
            if self._truncated[ep.id]:
                ep.truncated = True  # cut at max_response_tokens (DropOverlong drops it)
            g = clock - seq.origin  # generated_s(ep)
            ep.duration_s = ep.work_s = g if g > 0.0 else 0.0
            if seq.gen_at_update > 0.0:
                ep.tokens_before_update = seq.gen_at_update
            episodes.append(ep)
        self.p.on_finished(episodes, now)

    # -- multi-turn episodes ----------------------------------------------------------------------
    def _end_turn(self, seq: Seq) -> None:
        """``seq`` ends a turn: it leaves the GPU for its tool call (its KV kept or dropped)."""
        self._since_finish = 0
        seq.gen_before = float(seq.turn_end)
        turns = seq.turns
        assert turns is not None
        _, tool_s, obs = turns[seq.turn]
        if self._keep_kv:
            seq.cached = seq.prompt + seq.gen_before + seq.obs
            self.held[seq] = seq.cached
            self.held_total += seq.cached
        elif self._share:  # its KV is dropped for the call: so is its reference on the prompt
            prefix.leave(self, seq)
        seq.turn += 1
        seq.obs += obs
        seq.fresh = obs
        seq.turn_end += turns[seq.turn][0]
        self.tooling[seq] = None
        self.tool_calls += 1
        if self.pool is None:  # a timeout carrying the sequence, so that _drive knows it as ours
            self._schedule(self._time() + tool_s, self._on_tool_cb, seq)
        else:
            self.pool.call_for(tool_s, self, seq)

    def _on_tool(self, ev: Wakeup) -> None:
        seq = ev.value
        assert seq is not None
        self._tool_return(seq)

    def _on_pool(self, ev: Wakeup) -> None:
        """A tool call on the environment workers ended: free the worker, then take ``seq`` back."""
        seq = ev.value
        assert seq is not None and self.pool is not None
        self.pool.done()
        self._tool_return(seq)

    def _tool_return(self, seq: Seq) -> None:
        """The tool answered: ``seq`` queues for the GPU (its observation to prefill)."""
        if seq not in self.tooling:
            return  # taken off the replica (aborted) during the call
        del self.tooling[seq]
        self.waiting.append(seq)
        if not self._in_event and self.paused_since is None and not self._settle_pending:
            env = self.env
            now = self._time()
            if self.handle_in_place and env.free_until(now):  # the settle event would be next: now
                self._advance(now)
                self._drive(now)
                return
            self._settle_later()

    def _off_gpu(self) -> list[Seq]:
        """Sequences on this replica but not resident: waiting for the KV cache, or in a tool call."""
        return list(self.waiting) + list(self.tooling)

    def _record_pause(self, now: float) -> None:
        """Add the pause so far (from ``paused_since``, or the last pause recorded) to the series."""
        assert self.series is not None and self.paused_since is not None
        start = max(self.paused_since, self._pause_recorded)
        kv = self.kv_base + self.n * self.v + self.held_total
        self.series.add(start, now, False, self.n, self._queued, kv, kv, False, True)
        self._pause_recorded = now


def _seq_id(seq: Seq) -> int:
    return seq.id
