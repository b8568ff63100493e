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

Interplay with the kernel: ``pause``/``resume`` freeze the token clock (a weight sync, or the
trainer of a colocated design); ``abort_all`` records the tokens each sequence generated;
``stretch_all`` (re-prefill after dropping the KV at a sync, e.g. ``AbortReprefill``) calls the
policy's function for its accounting but charges the real cost: one prefill stall of every
resident context. Tokens come from the :class:`~pipesim.compute.workload.TokenSource` side table;
an episode's ``duration_s`` / ``work_s`` become the seconds it generated (pauses excluded).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import simpy

from pipesim import Episode, PipelineError
from pipesim.compute.cost import ReplicaCost
from pipesim.compute.workload import TokenSource

if TYPE_CHECKING:
    from pipesim import Pipeline


class _Seq:
    """One sequence on a replica."""

    __slots__ = ("ep", "prompt", "response", "max_tokens", "gen_before", "v_start", "kv_off", "stamp")

    def __init__(self, ep: Episode, prompt: int, response: int, max_tokens: int) -> None:
        self.ep = ep
        self.prompt, self.response, self.max_tokens = prompt, response, max_tokens
        self.gen_before = 0.0  # tokens generated before its current residency
        self.v_start = 0.0
        self.kv_off = 0.0  # its KV is kv_off + v
        self.stamp = -1  # > 0 while resident: matches its heap entry


class ComputeReplica:
    """One continuous-batching replica (see the module docstring)."""

    def __init__(
        self,
        pipeline: Pipeline,
        n_slots: int,
        index: int,
        cost: ReplicaCost,
        source: TokenSource,
        record: bool = False,
    ) -> None:
        self.p, self.env = pipeline, pipeline.env
        self.index, self.n_slots = index, n_slots
        self.version = 0
        self.behind = False  # no quiet completions here
        self.cost, self.source = cost, source
        cfg = cost.config
        self._preempt = cfg.kv_policy == "preempt"
        self._budget = float(cost.budget)
        self._admit_cap = self._budget * (1.0 - cfg.watermark)
        self._max_seqs = cfg.max_num_seqs
        self._slope = cost.kv_slope_s
        self.free = list(range(n_slots))
        self.heap: list[tuple[float, int, int, _Seq]] = []  # (v_finish, episode id, stamp, seq)
        self.waiting: deque[_Seq] = deque()
        self.admitted: list[tuple[int, _Seq]] = []  # admission order, for preemption (lazy)
        self._stamp = 0
        self.n = 0  # resident sequences
        self.kv_base = 0.0  # KV tokens held = kv_base + n * v
        self.reserved = 0.0
        self.v, self.t0, self.a, self.c = 0.0, 0.0, 0.0, 0.0
        self.paused_since: float | None = None
        self.offset = 0.0
        self._stall_left = 0.0
        self._timer: simpy.Event | None = None
        self._timer_at = math.inf
        self._target_v = math.inf
        self._admit_v = math.inf  # the end of the iteration a fitting newcomer waits for
        self._admit_t = math.inf  # the end of the prefill step newcomers wait for
        self._vb = 0.0  # the token clock at the last iteration boundary the engine knows
        self._in_event = False
        self._settle_pending = False
        self._drained: simpy.Event | None = None
        self._bound = False
        self._dirty = False  # the batch changed since the coefficients were computed
        self._t_acc = 0.0
        self._since_finish = 0
        # statistics
        self.tokens_generated = 0.0
        self.prefill_tokens = 0.0
        self.recompute_tokens = 0.0
        self.prefill_s = 0.0
        self.preemptions = 0
        self.completions = 0
        self.busy_s = 0.0
        self.compute_bound_s = 0.0
        self.peak_kv_tokens = 0.0
        self.seq_time_integral = 0.0  # integral of resident sequences over time
        self.record = record
        self.timeline: list[tuple[float, int, int, float, float, bool]] = []
        """With ``record``: (time, resident, waiting, KV tokens, batch tokens/s, compute bound)."""

    # -- the fluid clock -------------------------------------------------------------------------
    def _v_at(self, t: float) -> float:
        dt = t - self.t0
        if dt <= 0.0 or self.n == 0:
            return self.v
        a, c = self.a, self.c
        return self.v + 2.0 * dt / (a + math.sqrt(a * a + 4.0 * c * dt))

    def _advance(self, now: float) -> None:
        """Bring the token clock and the statistics up to ``now`` (not while paused)."""
        if self.paused_since is not None:
            return
        n = self.n
        if n:
            span = now - self._t_acc
            self.busy_s += span
            self.seq_time_integral += n * span
            if self._bound:
                self.compute_bound_s += span
        self._t_acc = now
        if now > self.t0:
            if self._dirty:
                self._rate()  # the batch changed at the anchor: its coefficients first
            v = self._v_at(now)
            dv = v - self.v
            self.tokens_generated += n * dv
            self.v, self.t0 = v, now
            self.a += 2.0 * self.c * dv  # the same curve, re-anchored: t'(v) = a + 2 c (v - v0)
            kv = self.kv_base + n * v
            if kv > self.peak_kv_tokens:
                self.peak_kv_tokens = kv

    def _rate(self) -> None:
        """The coefficients of ``t(v)`` at the anchor ``(t0, v)`` for the current batch."""
        self._dirty = False
        n = self.n
        if n == 0:
            self.a = self.c = 0.0
            self._bound = False
            return
        kv = self.kv_base + n * self.v
        if kv > self.peak_kv_tokens:
            self.peak_kv_tokens = kv
        self.a = self.cost.fixed_s(n) + self._slope * (kv - 0.5 * n)
        self.c = 0.5 * self._slope * n
        self._bound = self.cost.compute_bound(n, kv)

    def _snap(self, now: float, force: bool = False) -> None:
        """At the timer's instant, the clock is exactly at the target (no float shortfall)."""
        due = force or self._timer_at <= now + 1e-9 * max(1.0, now)
        if due and self.v < self._target_v < math.inf:
            self.tokens_generated += self.n * (self._target_v - self.v)
            self.v = self._target_v
            self._dirty = True

    def _rearm(self, now: float) -> None:
        self._timer = None
        if self._dirty:
            self._rate()
        if self.paused_since is not None or self.n == 0:
            self._timer_at = math.inf
            return
        heap = self.heap
        while heap and heap[0][2] != heap[0][3].stamp:
            heapq.heappop(heap)
        v_next = heap[0][0] if heap else math.inf
        if self._preempt:
            v_next = min(v_next, self._full_v())
        if self.waiting and self.v < self._admit_v < v_next:
            v_next = self._admit_v
        dv = v_next - self.v
        if dv < 0.0:
            dv = 0.0
        at = max(self.t0, now) + dv * (self.a + self.c * dv)
        if self.waiting and self._admit_t < at:  # the end of the prefill step in progress
            at, v_next = self._admit_t, self.v
        self._target_v, self._timer_at = v_next, at
        ev = self.env.timeout(at - now if at > now else 0.0)
        ev.callbacks.append(self._on_timer)  # type: ignore[union-attr]
        self._timer = ev
        if self.record:
            kv = self.kv_base + self.n * self.v
            rate = self.cost.tokens_per_s(self.n, kv)
            self.timeline.append((now, self.n, len(self.waiting), kv, rate, self._bound))

    def _on_timer(self, ev: simpy.Event) -> None:
        if ev is not self._timer:
            return  # superseded by a later change of the batch
        now = self.env.now
        self._advance(now)
        self._snap(now, force=True)
        self._step(now)

    def _on_settle(self, _ev: simpy.Event) -> None:
        self._settle_pending = False
        if self.paused_since is None:
            now = self.env.now
            self._advance(now)
            self._step(now)

    def _step(self, now: float) -> None:
        """Finish what is due, preempt if the cache is full, admit, report, re-arm."""
        self._in_event = True
        try:
            done = self._finish_due(now)
            if self._preempt:
                self._preempt_if_full()
            if self.paused_since is None:
                self._admit(now)
            if done:
                self.p.on_finished(done, now)  # may start episodes here (queued): admit them
                if self.waiting and self.paused_since is None:
                    self._admit(now)
            if self._drained is not None and len(self.free) == self.n_slots:
                ev, self._drained = self._drained, None
                ev.succeed()
        finally:
            self._in_event = False
        self._rearm(now)

    # -- batch changes -----------------------------------------------------------------------------
    def _finish_due(self, now: float) -> list[Episode]:
        heap, v = self.heap, self.v
        lim = v + 1e-7 + 1e-12 * v
        done: list[Episode] = []
        n_upd = len(self.p.updates)
        generated = self.source.generated
        while heap and heap[0][0] <= lim:
            _, eid, stamp, seq = heapq.heappop(heap)
            if stamp != seq.stamp:
                continue
            seq.stamp = -1
            self.n -= 1
            self.kv_base -= seq.kv_off
            if not self._preempt:
                self.reserved -= seq.prompt + seq.max_tokens
            ep = seq.ep
            heapq.heappush(self.free, ep.slot)
            ep.end_s = now
            ep.update_to = n_upd
            ep.duration_s = ep.work_s = self.generated_s(ep)
            generated[eid] = float(seq.response)
            done.append(ep)
        if done:
            self.completions += len(done)
            self._since_finish = 0
            self._dirty = True
            if len(done) > 1:
                done.sort(key=_episode_id)
        return done

    def _full_v(self) -> float:
        """The first iteration boundary at which the next iteration's tokens would not fit."""
        n, vb = self.n, self._vb
        x = (self._budget - self.kv_base) / n - 1.0 - vb  # past this, KV + n > budget
        k = math.floor(x + 1e-9) + 1.0
        cur = self.v - vb
        if k <= cur + 1e-9:
            k = math.floor(cur + 1e-9) + 1.0
        return vb + k

    def _preempt_if_full(self) -> None:
        """Before an iteration: while its tokens would overflow the cache, preempt the newest."""
        while self.n > 0 and self.kv_base + self.n * (self.v + 1.0) > self._budget + 1e-6:
            if self.n == 1:
                raise PipelineError(
                    f"replica {self.index}: one sequence fills the KV cache ({self._budget:.0f} tokens)"
                )
            stamp, seq = self.admitted.pop()
            if stamp != seq.stamp:
                continue
            seq.stamp = -1
            seq.gen_before += self.v - seq.v_start
            self.kv_base -= seq.kv_off
            self.n -= 1
            self.waiting.appendleft(seq)
            self.preemptions += 1
            self._since_finish += 1
            if self._since_finish > 10_000 + 100 * self._max_seqs:
                raise PipelineError(
                    f"replica {self.index} preempted {self._since_finish} sequences without finishing "
                    "one: the KV budget cannot make progress (lower max_num_seqs or use kv_policy='reserve')"
                )
            self._dirty = True

    def _fits(self, seq: _Seq) -> bool:
        if self.n == 0:
            return True
        if self.n >= self._max_seqs:
            return False
        if self._preempt:
            ctx = seq.prompt + seq.gen_before
            return self.kv_base + self.n * (self.v + 1.0) + ctx + 1.0 <= self._admit_cap
        return self.reserved + seq.prompt + seq.max_tokens <= self._budget

    def _admit(self, now: float) -> None:
        """Admit waiting sequences FIFO while they fit; mid-iteration they wait for its end."""
        waiting = self.waiting
        self._admit_v = self._admit_t = math.inf
        if not waiting:
            return
        v = self.v
        if self.n and now < self.t0:  # prefilling: newcomers form the next prefill step
            if self._fits(waiting[0]):
                self._admit_t = self.t0
            return
        if self.n:  # decoding: a newcomer joins at the end of this iteration
            off = v - self._vb
            whole = math.floor(off + 1e-6)
            if off - whole > 1e-6:
                if self._fits(waiting[0]):
                    self._admit_v = self._vb + whole + 1.0
                return
        new_tokens, pairs, k = 0.0, 0.0, 0
        while waiting and self._fits(waiting[0]):
            seq = waiting[0]
            ctx = seq.prompt + seq.gen_before
            waiting.popleft()
            self._stamp += 1
            seq.stamp = stamp = self._stamp
            seq.v_start = v
            seq.kv_off = ctx - v
            self.kv_base += seq.kv_off
            if not self._preempt:
                self.reserved += seq.prompt + seq.max_tokens
            self.n += 1
            heapq.heappush(self.heap, (v + (seq.response - seq.gen_before), seq.ep.id, stamp, seq))
            self.admitted.append((stamp, seq))
            new_tokens += ctx
            pairs += 0.5 * ctx * ctx
            k += 1
            if seq.gen_before:
                self.recompute_tokens += ctx
        if k:
            self._vb = v  # iterations restart here
            self._stall(now, self.cost.prefill_s(int(new_tokens), pairs, k))
            self.prefill_tokens += new_tokens
            self._dirty = True

    def _stall(self, now: float, seconds: float) -> None:
        self.prefill_s += seconds
        if self.paused_since is not None:
            self._stall_left += seconds
        else:
            self.t0 = max(self.t0, now) + seconds

    def _resident(self) -> list[_Seq]:
        return [s for _, _, stamp, s in sorted(self.heap) if stamp == s.stamp]

    def _generated_tokens(self, seq: _Seq) -> float:
        return seq.gen_before + (self.v - seq.v_start if seq.stamp > 0 else 0.0)

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
        prompt, response, max_tokens = self.source.tokens_of(ep.id)
        self.waiting.append(_Seq(ep, prompt, response, max_tokens))
        if not self._in_event and self.paused_since is None and not self._settle_pending:
            self._settle_pending = True
            ev = self.env.timeout(0.0)
            ev.callbacks.append(self._on_settle)  # type: ignore[union-attr]

    def generated_s(self, ep: Episode) -> float:
        now = self.paused_since if self.paused_since is not None else self.env.now
        return max((now - self.offset) - (ep.start_s - ep.offset_start), 0.0)

    def running_episodes(self) -> list[Episode]:
        return [s.ep for s in self._resident()] + [s.ep for s in self.waiting]

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
        """Take every episode off the replica (resident first, in finishing order, then waiting)."""
        now = self.env.now
        self._advance(now)
        n_upd, out = len(self.p.updates), []
        for seq in self._resident() + list(self.waiting):
            ep = seq.ep
            self.source.generated[ep.id] = self._generated_tokens(seq)
            seq.stamp = -1
            heapq.heappush(self.free, ep.slot)
            ep.end_s = now
            ep.update_to = n_upd
            ep.duration_s = ep.work_s = g = self.generated_s(ep)
            out.append((ep, g))
        self.heap, self.admitted, self.waiting = [], [], deque()
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
            ctx = seq.prompt + self._generated_tokens(seq)
            tokens += ctx
            pairs += 0.5 * ctx * ctx
        for seq in self.waiting:
            extra_s(seq.ep, self.generated_s(seq.ep))
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
        self._timer = None

    # -- results -----------------------------------------------------------------------------------
    def flush(self) -> None:
        """At the end of a run: write the tokens and seconds of the episodes still here."""
        self._advance(self.env.now)
        for seq in self._resident() + list(self.waiting):
            self.source.generated[seq.ep.id] = self._generated_tokens(seq)
            seq.ep.duration_s = seq.ep.work_s = self.generated_s(seq.ep)

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
