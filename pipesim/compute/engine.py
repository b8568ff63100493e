"""A compute-grounded engine replica: continuous batching on a fluid virtual token clock.

:class:`ComputeReplica` implements :class:`pipesim.EngineReplica` (the seam the chapter's slots
implement), so the kernel's controller, trainer and weight-update policies drive it unchanged.

The model
---------
Every *resident* sequence (admitted to the GPU: its KV cache is allocated) advances at the same
tokens per second, one token per decode iteration, and an iteration of ``b`` sequences reading
``K`` cached tokens takes ``t_iter = A(b) + B*K`` seconds (:mod:`pipesim.compute.cost`). The
replica keeps a **virtual token clock** ``v``: the tokens each resident sequence has decoded since
the replica started. A sequence admitted at ``v0`` that must still generate ``r`` tokens finishes
at ``v0 + r``, the key of a heap; so an event (arrival, completion, preemption, pause) costs
O(log n) and nothing happens between events. Within an interval the batch is fixed, but the KV it
reads grows by ``b`` tokens per iteration, so real time is a quadratic in ``v``::

    t(v) = t0 + a (v - v0) + c (v - v0)^2,   a = A(b) + B (K0 - b/2),   c = B b / 2

the integral of the iteration time with a half-token (midpoint) correction, which makes an
interval of whole iterations *exact* against stepping them one at a time; it is inverted in
closed form. What stays approximate: an interval may end mid-iteration (a real engine finishes
the iteration before admitting anyone, so arrivals here start up to one iteration early), and
partial tokens are fluid.

Prefill (prompts, and recomputed contexts after a preemption or a KV drop) is a **stall of the
whole batch**: the sequences admitted at one instant are prefilled together in one iteration of
``prefill_s`` seconds, during which no one decodes (vLLM's default prefill-first scheduling
without chunked prefill); ``t0`` moves to the end of the stall.

KV cache: a resident sequence holds ``prompt + generated`` tokens; admission is FIFO up to
``max_num_seqs``. Under ``kv_policy="preempt"`` (vLLM) a sequence is admitted while the cache
(plus the watermark) has room for its context, the cache grows as sequences decode, and the
instant it is full (an event at ``v = (budget - K_base) / b``) the most recently admitted
sequence is preempted: its KV is freed, it waits at the head of the queue and, re-admitted, pays
the prefill of its prompt and everything it generated (recompute). Under ``"reserve"`` a
sequence is admitted only if its prompt plus ``max_tokens`` fit beside the others' reservations;
none is ever preempted. A replica that preempts without ever finishing stops with ``PipelineError``.

The clock and the scheduler are :class:`~pipesim.compute.batch.BatchState`; this class adds the
SimPy timer (one pending timeout, superseded ones ignored) and the kernel's calls.

Interplay with the kernel: ``pause``/``resume`` freeze the token clock (a weight sync, or the
trainer of a colocated design); ``abort_all`` records the tokens each sequence generated;
``stretch_all`` (re-prefill after dropping the KV at a sync, e.g. ``AbortReprefill``) calls the
policy's function for its accounting but charges the real cost: one prefill stall of every
resident context. Tokens come from the :class:`~pipesim.compute.workload.TokenSource` side table;
an episode's ``duration_s`` / ``work_s`` become the seconds it generated (pauses excluded).

Over time: a replica built with ``series`` (or ``record``) keeps a
:class:`~pipesim.compute.batch.ReplicaSeries`, fixed-width bins of integrals (running and queued
sequences, KV tokens, decoded tokens, busy, compute-bound and paused seconds) whose width doubles
as the run grows, so memory stays bounded (4,096 rows at most by default) at any length;
:meth:`ComputeReplica.timeline_frame` turns it into a DataFrame whose columns integrate to the
replica's totals. :func:`step_breakdown` and :func:`verl_metrics` split the trainer's steps and
give the idle ratios under verl's ``fully_async_policy`` names.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import simpy
from simpy.events import NORMAL

from pipesim.compute.batch import BatchState, ReplicaSeries, Seq
from pipesim.compute.cost import ReplicaCost
from pipesim.compute.workload import TokenSource
from pipesim.core.episode import Episode

if TYPE_CHECKING:
    from pipesim.core.engine import Pipeline
    from pipesim.results.run import RunResult


class EnvWorkers:
    """Environment workers (sandboxes) shared by replicas: at most ``n`` tool calls run at once,
    the others wait FIFO. A counting semaphore on the SimPy clock (what a ``simpy.Resource`` of
    capacity ``n`` does, without its O(n) release), one timeout per call."""

    def __init__(self, env: simpy.Environment, n: int) -> None:
        self.env, self.n = env, n
        self.busy = 0
        self.queue: deque[tuple[float, Callable[[], None]]] = deque()
        self.calls = 0
        self.busy_s = 0.0  # worker-seconds spent in tool calls

    def call(self, seconds: float, then: Callable[[], None]) -> None:
        """Run a tool call of ``seconds`` on a free worker (or when one frees), then ``then()``."""
        self.calls += 1
        if self.busy < self.n:
            self.busy += 1
            self._run(seconds, then)
        else:
            self.queue.append((seconds, then))

    def _run(self, seconds: float, then: Callable[[], None]) -> None:
        self.busy_s += seconds

        def done(_ev: simpy.Event) -> None:
            if self.queue:
                self._run(*self.queue.popleft())
            else:
                self.busy -= 1
            then()

        self.env.timeout(seconds).callbacks.append(done)  # type: ignore[union-attr]


class ComputeReplica(BatchState):
    """One continuous-batching replica (see the module docstring)."""

    handle_in_place = True
    """Handle a batch change or tool return that comes first in SimPy's queue in place
    (:meth:`_drive`); False sends every one through a SimPy event, the slower reference the tests
    compare against (the results are identical)."""

    def __init__(
        self,
        pipeline: Pipeline,
        n_slots: int,
        index: int,
        cost: ReplicaCost,
        source: TokenSource,
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
        self.p, self.env = pipeline, pipeline.env
        self.n_slots = n_slots
        self.version = 0
        self.behind = False  # no quiet completions here
        self.source = source
        self.free = list(range(n_slots))
        self.offset = 0.0
        self._timer: simpy.Event | None = None
        self._timer_at = math.inf
        self._target_v = math.inf
        self._in_event = False
        self._settle_pending = False
        self._drained: simpy.Event | None = None
        self.record = record
        self.pool = pool
        self._keep_kv = cost.config.tool_kv == "keep" and self._preempt
        self.tooling: dict[Seq, None] = {}  # sequences in a tool call
        self.tool_calls = 0
        self.timeline: list[tuple[float, int, int, float, float, bool]] = []
        self._pause_recorded = -math.inf
        self._on_timer_cb = self._on_timer  # one bound method each: how _drive knows its own events
        self._on_tool_cb = self._on_tool
        if series or (series is None and record):
            self.series = series if isinstance(series, ReplicaSeries) else ReplicaSeries()

    def _snap(self, now: float, force: bool = False) -> None:
        """At the timer's instant, the clock is exactly at the target (no float shortfall)."""
        due = force or self._timer_at <= now + 1e-9 * max(1.0, now)
        if due and self.v < self._target_v < math.inf:
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
            heapq.heappop(heap)
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
        if self.record:
            kv = self.kv_base + n * v
            rate = self.cost.tokens_per_s(n, kv)
            self.timeline.append((now, n, len(waiting), kv, rate, self._bound))
        return at

    def _rearm(self, now: float) -> None:
        at = self._plan(now)
        if at < math.inf:
            ev = self.env.timeout(at - now if at > now else 0.0)
            ev.callbacks.append(self._on_timer_cb)  # type: ignore[union-attr]
            self._timer = ev

    def _on_timer(self, ev: simpy.Event) -> None:
        if ev is not self._timer:
            return  # superseded by a later change of the batch
        now = self.env.now
        self._advance(now)
        self._snap(now, force=True)
        self._drive(now)

    def _on_settle(self, _ev: simpy.Event) -> None:
        self._settle_pending = False
        if self.paused_since is None:
            now = self.env.now
            self._advance(now)
            self._drive(now)

    def _drive(self, now: float) -> None:
        """Handle the batch change due now; then, while this replica's next change comes strictly
        before every other event in SimPy's queue, handle it here at its instant instead of
        through a timeout of its own, and arm a timeout for the first one that does not.

        That is exactly what SimPy would do with the timeout: it would pop it next (nothing else
        is due before it, nor at the same instant, where a queued event's lower id would go
        first), set its clock to ``now + delay`` and call :meth:`_on_timer`. Setting the clock
        (``Environment._now``, as :meth:`simpy.Environment.step` does) and handling the change
        directly leaves every result bit-identical and saves an event, its heap push and its pop;
        in a closed loop on one replica the whole run is one event. This replica's own superseded
        timeouts at the head of the queue are dropped on the way (popped, they would do nothing).
        (``pipesim/core/slots.py`` pushes its wake-ups onto ``env._queue`` in the same spirit, and
        the kernel's ``Pipeline.on_finished`` runs its controller pass in place on the same
        ``peek`` test.)
        """
        env = self.env
        queue = env._queue  # type: ignore[attr-defined]
        on_timer, on_tool, tooling = self._on_timer_cb, self._on_tool_cb, self.tooling
        heappop = heapq.heappop
        while True:
            at = self._step(now, rearm=False)
            if at == math.inf:
                return
            if not self.handle_in_place:  # the reference: every change through a timeout
                timer = env.timeout(at - now if at > now else 0.0)
                timer.callbacks.append(on_timer)  # type: ignore[union-attr]
                self._timer = timer
                return
            t = now + (at - now) if at > now else now + 0.0  # when SimPy's timeout would fire
            at_t = True  # the next change is the one planned for t (not a tool return before it)
            while queue and queue[0][0] <= t:  # what SimPy would pop before t
                tt, _, _, ev = queue[0]
                cbs = ev.callbacks
                cb = cbs[0] if cbs and len(cbs) == 1 else None
                if cb is on_timer:  # this replica's superseded timeout: popped, it does nothing
                    heappop(queue)
                    continue
                if cb is not on_tool or tt >= t:
                    self._arm_at(t)  # someone else's event comes first
                    return
                # this replica's tool call returns first: what SimPy and _on_tool would do
                heappop(queue)
                ev.callbacks = None  # type: ignore[assignment]
                env._now = now = tt  # type: ignore[attr-defined]
                seq = ev._value
                if seq not in tooling:
                    continue  # taken off the replica during the call
                del tooling[seq]
                self.waiting.append(seq)
                if self._settle_pending or (queue and queue[0][0] <= now):
                    if not self._settle_pending:  # others at this instant: settle after them
                        self._settle_pending = True
                        ev = env.timeout(0.0)
                        ev.callbacks.append(self._on_settle)  # type: ignore[union-attr]
                    self._arm_at(t)
                    return
                at_t = False
                break
            if at_t:
                env._now = now = t  # type: ignore[attr-defined]
                self._advance(now)
                target = self._target_v  # _snap(now, force=True), inlined
                if self.v < target < math.inf:
                    self._snap_tokens(now, target)
            else:
                self._advance(now)

    def _arm_at(self, t: float) -> None:
        """Arm the timer at the absolute time ``t`` (what ``env.timeout(t - now)`` computed as
        ``now + (t - now)`` gives), scheduled as SimPy's ``schedule`` does."""
        env = self.env
        ev = simpy.Event(env)
        ev._ok = True
        ev._value = None
        ev.callbacks.append(self._on_timer_cb)  # type: ignore[union-attr]
        heapq.heappush(env._queue, (t, NORMAL, next(env._eid), ev))  # type: ignore[attr-defined]
        self._timer = ev

    def _step(self, now: float, rearm: bool = True) -> float:
        """Finish what is due, preempt if the cache is full, admit, report, re-arm (or, with
        ``rearm=False``, plan the next change and return its time without arming a timer)."""
        self._in_event = True
        try:
            done = self._finish_due(now)
            n = self.n
            over = self.kv_base + n * (self.v + 1.0) + self.held_total > self._budget + 1e-6
            if n and self._preempt and over:  # _preempt_if_full's loop condition, tested here first
                self._preempt_if_full()
            if self.paused_since is None:
                if self.waiting:
                    self._admit(now)
                else:
                    self._admit_v = self._admit_t = math.inf  # what _admit does with no one waiting
            if done:
                self.p.on_finished(done, now)  # may start episodes here (queued): admit them
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
    def _finish_due(self, now: float) -> list[Episode]:
        heap, v = self.heap, self.v
        lim = v + 1e-7 + 1e-12 * v
        done: list[Episode] = []
        if not heap or heap[0][0] > lim:
            return done
        n_upd = len(self.p.updates)
        generated = self.source.generated
        preempt = self._preempt
        free = self.free
        clock = (self.paused_since if self.paused_since is not None else now) - self.offset
        heappop, heappush = heapq.heappop, heapq.heappush
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
            ep = seq.ep
            heappush(free, ep.slot)
            ep.end_s = now
            ep.update_to = n_upd
            g = clock - (ep.start_s - ep.offset_start)  # generated_s(ep)
            ep.duration_s = ep.work_s = g if g > 0.0 else 0.0
            generated[eid] = float(seq.response)
            done.append(ep)
        if done:
            self.completions += len(done)
            self._since_finish = 0
            if len(done) > 1:
                done.sort(key=_episode_id)
        return done

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
        seq.turn += 1
        seq.obs += obs
        seq.fresh = obs
        seq.turn_end += turns[seq.turn][0]
        self.tooling[seq] = None
        self.tool_calls += 1
        if self.pool is None:  # a timeout carrying the sequence, so that _drive knows it as ours
            env = self.env
            ev = simpy.Event(env)
            ev._ok = True
            ev._value = seq
            ev.callbacks.append(self._on_tool_cb)  # type: ignore[union-attr]
            heapq.heappush(env._queue, (env.now + tool_s, NORMAL, next(env._eid), ev))  # type: ignore[attr-defined]
        else:
            self.pool.call(tool_s, lambda s=seq: self._tool_return(s))  # type: ignore[misc]

    def _on_tool(self, ev: simpy.Event) -> None:
        self._tool_return(ev._value)

    def _tool_return(self, seq: Seq) -> None:
        """The tool answered: ``seq`` queues for the GPU (its observation to prefill)."""
        if seq not in self.tooling:
            return  # taken off the replica (aborted) during the call
        del self.tooling[seq]
        self.waiting.append(seq)
        if not self._in_event and self.paused_since is None and not self._settle_pending:
            env = self.env
            now = env.now
            if self.handle_in_place and env.peek() > now:  # the settle event would be next: now
                self._advance(now)
                self._drive(now)
                return
            self._settle_pending = True
            ev = self.env.timeout(0.0)
            ev.callbacks.append(self._on_settle)  # type: ignore[union-attr]

    def _off_gpu(self) -> list[Seq]:
        """Sequences on this replica but not resident: waiting for the KV cache, or in a tool call."""
        return list(self.waiting) + list(self.tooling)

    # -- the EngineReplica protocol ----------------------------------------------------------------
    @property
    def n_running(self) -> int:
        """Episodes on this replica: resident or waiting for the KV cache."""
        return self.n_slots - len(self.free)

    @property
    def accepting(self) -> bool:
        return bool(self.free) and self.paused_since is None

    @property
    def paused(self) -> bool:
        return self.paused_since is not None

    def start(self, ep: Episode, now: float, work_s: float | None = None) -> None:
        """Queue ``ep`` for admission (its tokens are in the source's side table; ``work_s`` unused)."""
        ep.slot = heapq.heappop(self.free)
        ep.replica = self.index
        ep.start_s = now
        ep.update_from = len(self.p.updates)
        ep.offset_start = self.offset
        src = self.source
        i = ep.id
        prompt, response, max_tokens = src.tokens_of(i)
        turns = src.turns
        self.waiting.append(Seq(ep, prompt, response, max_tokens, turns.get(i) if turns else None))
        if not self._in_event and self.paused_since is None and not self._settle_pending:
            self._settle_pending = True
            ev = self.env.timeout(0.0)
            ev.callbacks.append(self._on_settle)  # type: ignore[union-attr]

    def generated_s(self, ep: Episode) -> float:
        now = self.paused_since if self.paused_since is not None else self.env.now
        return max((now - self.offset) - (ep.start_s - ep.offset_start), 0.0)

    def running_episodes(self) -> list[Episode]:
        return [s.ep for s in self._resident() + self._off_gpu()]

    def pause(self) -> None:
        """Stop generating; sequences due exactly now finish first, as the chapter's slots do."""
        if self.paused_since is not None:
            return
        now = self.env.now
        self._advance(now)
        self._snap(now)
        self._in_event = True
        try:
            done = self._finish_due(now)
            if done:
                self.p.on_finished(done, now)
        finally:
            self._in_event = False
        self.paused_since = now
        self._stall_left = max(self.t0 - now, 0.0)
        self._timer, self._timer_at = None, math.inf
        if self._drained is not None and len(self.free) == self.n_slots:
            ev, self._drained = self._drained, None
            ev.succeed()

    def resume(self) -> None:
        if self.paused_since is None:
            return
        now = self.env.now
        if self.series is not None:
            self._record_pause(now)
        self.offset += now - self.paused_since
        self.paused_since = None
        self.t0, self._t_acc = now + self._stall_left, now
        self._stall_left = 0.0
        self._rate()
        self._step(now)

    def drained(self) -> simpy.Event:
        ev = self.env.event()
        if len(self.free) == self.n_slots:
            ev.succeed()
        else:
            self._drained = ev
        return ev

    def abort_all(self) -> list[tuple[Episode, float]]:
        """Take every episode off the replica (resident first, in finishing order, then the others)."""
        now = self.env.now
        self._advance(now)
        n_upd, out = len(self.p.updates), []
        for seq in self._resident() + self._off_gpu():
            ep = seq.ep
            self.source.generated[ep.id] = self._generated_tokens(seq)
            seq.stamp = -1
            heapq.heappush(self.free, ep.slot)
            ep.end_s = now
            ep.update_to = n_upd
            ep.duration_s = ep.work_s = g = self.generated_s(ep)
            out.append((ep, g))
        self.heap, self.admitted, self.waiting = [], [], deque()
        self.tooling, self.held, self.held_total = {}, {}, 0.0  # a tool call still out is ignored
        self.n, self.kv_base, self.reserved = 0, 0.0, 0.0
        self._stall_left = 0.0
        if self.paused_since is None:
            self.t0 = now
        self._dirty = True
        self._rearm(now)
        if self._drained is not None:
            ev, self._drained = self._drained, None
            ev.succeed()
        return out

    def stretch_all(self, extra_s: Callable[[Episode, float], float]) -> None:
        """The KV of every resident sequence is dropped and recomputed: one prefill stall."""
        now = self.env.now
        self._advance(now)
        resident = self._resident()
        tokens, pairs = 0.0, 0.0
        for seq in resident:
            extra_s(seq.ep, self.generated_s(seq.ep))  # the policy's own accounting
            ctx = seq.prompt + seq.obs + self._generated_tokens(seq)
            tokens += ctx
            pairs += 0.5 * ctx * ctx
        for seq in self._off_gpu():
            extra_s(seq.ep, self.generated_s(seq.ep))
            seq.cached = 0.0  # the cached prefixes of tool calls go too
        self.held, self.held_total = {}, 0.0
        if resident:
            self.recompute_tokens += tokens
            self.prefill_tokens += tokens
            self._stall(now, self.cost.prefill_s(int(tokens), pairs, len(resident)))
            if self.paused_since is None:
                self._rearm(now)

    def catch_up(self, now: float, in_pass: bool = True) -> None:
        """Nothing to catch up: this replica never sleeps past completions."""

    def kick(self) -> None:
        """Nothing to do: a start schedules its own admission."""

    def release(self) -> None:
        self.heap, self.admitted, self.waiting = [], [], deque()
        self.tooling, self.held = {}, {}
        self._timer = None

    # -- results -----------------------------------------------------------------------------------
    def flush(self) -> None:
        """At the end of a run: write the tokens and seconds of the episodes still here."""
        if self.series is not None and self.paused_since is not None:
            self._record_pause(self.env.now)
        self._advance(self.env.now)
        for seq in self._resident() + self._off_gpu():
            self.source.generated[seq.ep.id] = self._generated_tokens(seq)
            seq.ep.duration_s = seq.ep.work_s = self.generated_s(seq.ep)

    def _record_pause(self, now: float) -> None:
        """Add the pause so far (from ``paused_since``, or the last pause recorded) to the series."""
        assert self.series is not None and self.paused_since is not None
        start = max(self.paused_since, self._pause_recorded)
        kv = self.kv_base + self.n * self.v + self.held_total
        self.series.add(start, now, False, self.n, self._queued, kv, kv, False, True)
        self._pause_recorded = now

    def timeline_frame(self) -> pd.DataFrame:
        """This replica over time, one row per bin of its series (see :func:`timeline_frame`)."""
        if self.series is None:
            raise ValueError(f"replica {self.index} keeps no series (built with series=False)")
        return timeline_frame(self.series, self._budget)

    def stats(self, sim_time_s: float) -> dict[str, Any]:
        """This replica's counters: tokens, prefill, preemptions, busy and compute-bound shares."""
        busy = self.busy_s
        return {
            "replica": self.index,
            "tokens_generated": self.tokens_generated,
            "prefill_tokens": self.prefill_tokens,
            "recompute_tokens": self.recompute_tokens,
            "prefill_s": self.prefill_s,
            "preemptions": self.preemptions,
            "tool_calls": self.tool_calls,
            "completions": self.completions,
            "busy_share": busy / sim_time_s if sim_time_s > 0 else math.nan,
            "decode_tokens_per_s": self.tokens_generated / busy if busy > 0 else 0.0,
            "mean_running": self.seq_time_integral / busy if busy > 0 else 0.0,
            "compute_bound_share": self.compute_bound_s / busy if busy > 0 else 0.0,
            "peak_kv_tokens": self.peak_kv_tokens,
            "kv_budget_tokens": self._budget,
        }


def _episode_id(ep: Episode) -> int:
    return ep.id


# -- results over time -----------------------------------------------------------------------------
def timeline_frame(series: ReplicaSeries, kv_budget_tokens: float) -> pd.DataFrame:
    """One replica's binned series as a DataFrame, one row per bin (see :class:`ReplicaSeries`).

    Columns: ``t_start_s``, ``t_end_s``; ``running`` (mean sequences decoding: resident and not
    paused), ``queued`` (mean waiting for the KV cache), ``kv_tokens`` (mean KV tokens held,
    cached prefixes of tool calls included, pauses too) and ``kv_occupancy`` (its share of the
    budget), ``tokens`` (decoded in the bin) and ``decode_tokens_per_s``, ``busy_share`` (a batch
    resident and not paused), ``compute_bound_share`` and ``memory_bound_share`` (its split by the
    roofline), ``paused_share``, and ``bound``: ``"compute"``, ``"memory"`` or ``"idle"``,
    whichever the bin spent most of its busy time as (idle: never busy).
    """
    a = series.arrays()
    w = series.width_s
    busy, cb = a["busy_s"], a["compute_bound_s"]
    mb = busy - cb
    bound = np.where(busy <= 0.0, "idle", np.where(cb > mb, "compute", "memory"))
    return pd.DataFrame(
        {
            "t_start_s": a["t_start_s"],
            "t_end_s": a["t_end_s"],
            "running": a["seq_s"] / w,
            "queued": a["queued_s"] / w,
            "kv_tokens": a["kv_s"] / w,
            "kv_occupancy": a["kv_s"] / w / kv_budget_tokens,
            "tokens": a["tokens"],
            "decode_tokens_per_s": a["tokens"] / w,
            "busy_share": busy / w,
            "compute_bound_share": cb / w,
            "memory_bound_share": mb / w,
            "paused_share": a["paused_s"] / w,
            "bound": pd.Categorical(bound, categories=["memory", "compute", "idle"]),
        }
    )


def replica_timeline(replicas: list[ComputeReplica]) -> pd.DataFrame:
    """Every replica's :meth:`ComputeReplica.timeline_frame`, stacked with a ``replica`` column."""
    frames = [r.timeline_frame().assign(replica=r.index) for r in replicas if r.series is not None]
    if not frames:
        return pd.DataFrame()
    out = pd.concat(frames, ignore_index=True)
    return out[["replica", *[c for c in out.columns if c != "replica"]]]


def step_breakdown(result: RunResult) -> pd.DataFrame:
    """Each training step's time split as verl logs it (``timing_s/*``, one row per step).

    A step runs from the end of the previous step's training (0 for the first) to the end of its
    own: ``timing_s/param_sync`` is the weight-sync time inside that span before the training
    starts, ``timing_s/gen`` the rest of the wait (the trainer waiting for data: verl's fully
    async trainer times its wait for samples under ``gen``), ``timing_s/update_actor`` the
    training, ``timing_s/step`` the sum. Names from verl's ``fully_async_policy``
    (``verl/experimental/fully_async_policy/fully_async_trainer.py`` and ``detach_utils.py``).
    """
    syncs = sorted((a, b) for a, b, _ in result.sync_log)
    rows = []
    prev = 0.0
    for step, start, end, _ in result.train_log:
        sync = sum(max(0.0, min(b, start) - max(a, prev)) for a, b in syncs)
        wait = max(start - prev, 0.0)
        rows.append(
            (step, prev, start, end, wait - min(sync, wait), min(sync, wait), end - start, end - prev)
        )
        prev = end
    return pd.DataFrame(
        rows,
        columns=[
            "step",
            "step_start_s",
            "train_start_s",
            "train_end_s",
            "timing_s/gen",
            "timing_s/param_sync",
            "timing_s/update_actor",
            "timing_s/step",
        ],
    )


def verl_metrics(result: RunResult, replica_stats: list[dict[str, Any]]) -> dict[str, float]:
    """The trainer's and the engines' idle ratios and the mean step breakdown, in verl's names.

    ``fully_async/trainer/idle_ratio`` is verl's ``timing_s/gen / timing_s/step`` (summed over the
    steps: the trainer's share of time waiting for data; ``MetricsAggregator`` in
    ``verl/experimental/fully_async_policy/detach_utils.py``, logged as ``trainer/idle_ratio`` in
    older versions). ``fully_async/rollouter/idle_ratio`` is verl's ``1 - active_time /
    version_time`` (``fully_async_rollouter.py``), here over the whole run and every replica: the
    mean share of time a replica had no batch resident or was paused (``ComputeReplica.stats``'
    ``busy_share``), so a replica holding slots whose sequences wait in tool calls is idle. Plus
    the per-step means of :func:`step_breakdown`'s columns.
    """
    steps = step_breakdown(result)
    total = float(steps["timing_s/step"].sum()) if len(steps) else 0.0
    out = {
        "fully_async/trainer/idle_ratio": float(steps["timing_s/gen"].sum()) / total
        if total > 0
        else math.nan,
        "fully_async/rollouter/idle_ratio": (
            1.0 - sum(s["busy_share"] for s in replica_stats) / len(replica_stats)
            if replica_stats
            else math.nan
        ),
    }
    for col in ("timing_s/gen", "timing_s/param_sync", "timing_s/update_actor", "timing_s/step"):
        out[col] = float(steps[col].mean()) if len(steps) else math.nan
    return out
