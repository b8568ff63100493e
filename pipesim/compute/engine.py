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
closed form. The scheduler acts only at iteration boundaries, as a real engine does: an event
inside an iteration (an arrival, a tool call's return) admits no one before the iteration ends,
and preempts no one even when the cache would overflow one token later (the preemption comes at
the boundary where the next iteration's tokens no longer fit). So, for every timing constant,
completion times agree with stepping the scheduler one iteration at a time to rounding
(``tests/test_compute_fluid_exact.py``). What stays approximate: a pause or a re-prefill may
come mid-iteration, and partial tokens are fluid there.

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
sequence is admitted only if its prompt plus ``max_tokens`` (and, for an agent, the observation
tokens of all its turns) fit beside the others' reservations;
none is ever preempted. A replica that preempts without ever finishing stops with ``PipelineError``.
With ``share_group_prefix`` the samples of a prompt group on one replica prefill and hold their
prompt's KV once, reference counted (:mod:`pipesim.compute.prefix`).

Three layers: the clock and the scheduler are :class:`~pipesim.compute.batch.BatchState`;
:class:`~pipesim.compute.driver.ReplicaDriver` adds the SimPy timer (one pending timeout,
superseded ones ignored, or the change handled in place), finishing and tool calls; this module's
class adds the kernel's calls (the :class:`pipesim.EngineReplica` port).

Interplay with the kernel: ``pause``/``resume`` freeze the token clock (a weight sync, or the
trainer of a colocated design); ``abort_all`` records the tokens each sequence generated;
``stretch_all`` (re-prefill after dropping the KV at a sync, e.g. ``AbortReprefill``) calls the
policy's function for its seconds but charges the real cost: one prefill stall of every
resident context; each resident episode's ``reprefill_tokens`` is the whole tokens of its
context recomputed there (with sharing, a group's prompt once), so the summary's total is the
part of ``recompute_tokens`` that the drops caused. Tokens come from the
:class:`~pipesim.compute.workload.TokenSource` side table;
an episode's ``duration_s`` / ``work_s`` become the seconds it generated (pauses excluded).

Over time: a replica built with ``series`` (or ``record``) keeps a
:class:`~pipesim.compute.series.ReplicaSeries`, fixed-width bins of integrals (running and queued
sequences, KV tokens, decoded tokens, busy, compute-bound and paused seconds) whose width doubles
as the run grows, so memory stays bounded (4,096 rows at most by default) at any length;
:meth:`ComputeReplica.timeline_frame` turns it into a DataFrame whose columns integrate to the
replica's totals. :func:`step_breakdown` and :func:`verl_metrics` split the trainer's steps and
give the idle ratios under verl's ``fully_async_policy`` names (all in :mod:`pipesim.compute.series`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

import pandas as pd
import simpy
from mypy_extensions import mypyc_attr

from pipesim.compute import prefix
from pipesim.compute.batch import Seq
from pipesim.compute.driver import ReplicaDriver
from pipesim.compute.pool import EnvWorkers
from pipesim.compute.series import replica_timeline, step_breakdown, timeline_frame, verl_metrics
from pipesim.core.episode import Episode
from pipesim.core.validate import refuse

__all__ = [
    "ComputeReplica",
    "EnvWorkers",
    "replica_timeline",
    "step_breakdown",
    "timeline_frame",
    "verl_metrics",
]


@mypyc_attr(allow_interpreted_subclasses=True)
class ComputeReplica(ReplicaDriver):
    """One continuous-batching replica (see the module docstring): the kernel's
    :class:`pipesim.EngineReplica` port on the :class:`~pipesim.compute.driver.ReplicaDriver`."""

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
        """Queue ``ep`` for admission (its tokens are in the source's side table; ``work_s`` unused).

        The episode is written here, where it starts (its slot, replica, start and update-log
        index), and again where it ends (:meth:`_finished`); its sequence carries what the turns
        in between need."""
        i = ep.id
        seq = self._launch(ep, i, now)
        ep.slot = seq.slot
        ep.replica = self.index
        ep.start_s = now + 0.0  # a float, as the compiled build makes it (SimPy's clock starts at int 0)
        ep.update_from = len(self._updates)
        ep.offset_start = self.offset  # marked truncated where it finishes at the cap (_finished)

    def _launch(self, ep: Episode | None, i: int, now: float) -> Seq:
        """The sequence of episode ``i`` (``ep``, or None in a closed loop), queued for admission
        on a free slot, with its admission settled at the end of this instant."""
        prompt, response, max_tokens = self._tokens_of(i)
        turns = self._turns  # its turns pass to the sequence (freed with it, not kept to the end)
        seq = Seq(ep, i, prompt, response, max_tokens, turns.pop(i, None) if turns else None)
        seq.slot = heappop(self.free)
        seq.origin = (now + 0.0) - self.offset
        if self._share:
            seq.group = self.source.group[i]
        self.waiting.append(seq)
        if not self._in_event and self.paused_since is None and not self._settle_pending:
            self._settle_later()
        return seq

    def generated_s(self, ep: Episode) -> float:
        now = self.paused_since if self.paused_since is not None else self.env.now
        return max((now - self.offset) - (ep.start_s - ep.offset_start), 0.0)

    def running_episodes(self) -> list[Episode]:
        return [_episode(s) for s in self._resident() + self._off_gpu()]

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
                self._finished(done, now)
        finally:
            self._in_event = False
        self.paused_since = now
        self._stall_left = max(self.t0 - now, 0.0)
        self._timer, self._timer_at = None, math.inf
        if self._drained is not None and len(self.free) == self.n_slots:
            ev, self._drained = self._drained, None
            ev.succeed()

    def resume(self) -> None:
        if self.version != self._weights_version:
            self._weights_changed()
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

    def _weights_changed(self) -> None:
        """The kernel gave this replica new weights (it sets ``version``, then resumes it): each
        sequence on it notes the tokens it generated under the old ones (``gen_at_update``, the
        episode's ``tokens_before_update`` when it finishes). Paused, the clock is where the pause
        left it; an atomic swap while generating reads it without moving it (no event changes)."""
        self._weights_version = self.version
        v = self.v
        if self.paused_since is None and self.n:
            if self._dirty:
                self._advance(self.env.now)
                v = self.v
            else:
                v = self._v_at(self.env.now)
        for seq in self._resident() + self._off_gpu():
            seq.gen_at_update = seq.gen_before + (v - seq.v_start if seq.stamp > 0 else 0.0)

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
        n_upd, out = len(self._updates), []
        for seq in self._resident() + self._off_gpu():
            ep = _episode(seq)
            self._generated[seq.id] = self._generated_tokens(seq)
            seq.stamp = -1
            heappush(self.free, seq.slot)
            ep.end_s = now + 0.0
            ep.update_to = n_upd
            ep.duration_s = ep.work_s = g = self.generated_s(ep)
            out.append((ep, g))
        self.heap, self.admitted, self.waiting = [], [], deque()
        self.tooling, self.held, self.held_total = {}, {}, 0.0  # a tool call still out is ignored
        self.n, self.kv_base, self.reserved = 0, 0.0, 0.0
        self.prefix_holders = {}
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
        contexts = []
        groups: set[int] = set()
        for seq in resident:
            ep = _episode(seq)
            before = ep.reprefill_tokens
            extra_s(ep, self.generated_s(ep))  # the policy's seconds (its tokens are replaced below)
            ctx = seq.prompt + seq.obs + self._generated_tokens(seq)
            contexts.append(ctx)
            tokens += ctx
            pairs += 0.5 * ctx * ctx
            # the tokens this re-prefill recomputes for it, whole (a partial token of the fluid
            # clock is not counted); with sharing, a group's prompt once (its first resident)
            own = ctx
            if self._share:
                if seq.group in groups:
                    own -= seq.prompt
                groups.add(seq.group)
            ep.reprefill_tokens = before + float(math.floor(own + 1e-6))
        for seq in self._off_gpu():
            ep = _episode(seq)
            before = ep.reprefill_tokens
            extra_s(ep, self.generated_s(ep))
            ep.reprefill_tokens = before  # nothing re-prefilled now: its return pays it (recompute)
            seq.cached = 0.0  # the cached prefixes of tool calls go too
            seq.ref = False
        self.held, self.held_total = {}, 0.0
        if self._share:  # each group's prompt recomputed once
            tokens, pairs = prefix.restretch(self, resident, contexts)
        if resident:
            self.recompute_tokens += tokens
            self.prefill_tokens += tokens
            self._stall(now, self._prefill_time(int(tokens), pairs, len(resident)))
            if self.paused_since is None:
                self._rearm(now)

    def catch_up(self, now: float, in_pass: bool = True) -> None:
        """Nothing to catch up: this replica never sleeps past completions."""

    def kick(self) -> None:
        """Nothing to do: a start schedules its own admission."""

    def release(self) -> None:
        self.heap, self.admitted, self.waiting = [], [], deque()
        self.tooling, self.held = {}, {}
        self.prefix_holders = {}
        self._timer = None

    # -- results -----------------------------------------------------------------------------------
    def flush(self) -> None:
        """At the end of a run: write the tokens and seconds of the episodes still here."""
        if self.series is not None and self.paused_since is not None:
            self._record_pause(self.env.now)
        self._advance(self.env.now)
        for seq in self._resident() + self._off_gpu():
            self._generated[seq.id] = self._generated_tokens(seq)
            if seq.ep is not None:
                seq.ep.duration_s = seq.ep.work_s = self.generated_s(seq.ep)
                seq.ep.tokens_before_update = seq.gen_at_update

    def timeline_frame(self, end_s: float | None = None) -> pd.DataFrame:
        """This replica over time, one row per bin of its series up to ``end_s`` (the run's end;
        see :func:`timeline_frame`)."""
        if self.series is None:
            raise refuse("series", f"is off: replica {self.index} keeps no series (built with series=False)")
        return timeline_frame(self.series, self._budget, end_s)

    def stats(self, sim_time_s: float) -> dict[str, Any]:
        """This replica's counters: tokens, prefill, preemptions, busy and compute-bound shares.

        ``decode_tokens_per_s`` is this replica's tokens over its *busy* seconds (a batch resident
        and not paused): its speed while it works, not the run's throughput (the summary's
        ``decode_tokens_per_s``, tokens over the run's time, is the sum over replicas of this
        times ``busy_share``)."""
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
            **({"shared_prefix_tokens": self.shared_prefix_tokens} if self._share else {}),
        }


def _episode(seq: Seq) -> Episode:
    """``seq``'s episode: the kernel's calls (abort, re-prefill, the running list) need one, which
    only a closed loop's sequences lack."""
    ep = seq.ep
    if ep is None:
        raise TypeError(f"sequence {seq.id} has no episode: a closed loop's replica serves no kernel")
    return ep
