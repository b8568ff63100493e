"""The state of one replica's batch: the fluid token clock and the KV-cache scheduler.

:class:`BatchState` is the lowest layer of :class:`~pipesim.compute.engine.ComputeReplica`, the one
that knows nothing of SimPy or the kernel: the virtual token clock ``v`` and the curve ``t(v)`` that
maps it to real time, the heap of resident sequences (:class:`~pipesim.compute.seq.Seq`) keyed by
the token at which each finishes, the queue waiting for the KV cache, FIFO admission
(``max_num_seqs``, the KV policy, the watermark), preemption by recompute, and prefill stalls; with
``share_group_prefix``, the prompt KV a group shares on the replica (:mod:`pipesim.compute.prefix`).
``docs/compute.md`` and the engine module's docstring describe the model; the replica drives this
state at its events.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import TYPE_CHECKING

from mypy_extensions import mypyc_attr

from pipesim.compute import prefix
from pipesim.compute.cost import ReplicaCost
from pipesim.compute.seq import Seq  # re-exported (engine, pool, prefix, refill and tests import it here)
from pipesim.core.errors import PipelineError

if TYPE_CHECKING:
    from pipesim.compute.series import ReplicaSeries

_INF = math.inf


@mypyc_attr(allow_interpreted_subclasses=True)
class BatchState:
    """The fluid clock and the KV scheduler of one replica (see the module docstring)."""

    def __init__(self, cost: ReplicaCost, index: int) -> None:
        self.index = index
        self.cost = cost
        self.paused_since: float | None = None
        self._stall_left = 0.0
        self._t_acc = 0.0
        self.busy_s = 0.0
        self.compute_bound_s = 0.0
        self.seq_time_integral = 0.0  # integral of resident sequences over time
        self.completions = 0
        cfg = cost.config
        self._preempt = cfg.kv_policy == "preempt"
        self._budget = float(cost.budget)
        self._admit_cap = self._budget * (1.0 - cfg.watermark)
        self._max_seqs = cfg.max_num_seqs
        self._slope = cost.kv_slope_s
        self._fixed = cost._a  # A(b) by batch size, filled by cost.fixed_s
        self._flops_seq, self._flops_kv = cost._flops_per_seq, cost._attn_flops_all
        self._wbytes, self._bytes_kv = cost._weight_bytes, cost._attn_bytes_all
        self._peak, self._bw = cost._peak, cost._bw
        eff = cfg.efficiency  # what _prefill_time reads of cost.prefill_s
        self._lin, self._lm = cost._lin, cost._lm
        self._pf_flops, self._pf_bytes = cost._attn_flops_tok, cost._attn_bytes_tok
        self._p, self._inv_p = float(eff.combine_exponent), 1 / eff.combine_exponent
        self._k0, self._it0, self._layers = eff.kernel_overhead_s, cfg.iteration_overhead_s, cost.n_layers
        self._chunked = cfg.max_num_batched_tokens is not None  # chunked prefill: cost.chunked_prefill_s
        self.heap: list[tuple[float, int, int, Seq]] = []  # (v_finish, seq.id, stamp, seq)
        self.waiting: deque[Seq] = deque()
        self.admitted: list[tuple[int, Seq]] = []  # admission order, for preemption (lazy)
        self._stamp = 0
        self.n = 0  # resident sequences
        self.kv_base = 0.0  # KV tokens held = kv_base + n * v
        self.reserved = 0.0
        self.v, self.t0, self.a, self.c = 0.0, 0.0, 0.0, 0.0
        self._admit_v = math.inf  # the end of the iteration a fitting newcomer waits for
        self._admit_t = math.inf  # the end of the prefill step newcomers wait for
        self._vb = 0.0  # the token clock at the last iteration boundary the engine knows
        self._bound = False
        self._dirty = False  # the batch changed since the coefficients were computed
        self._since_finish = 0
        # statistics
        self.tokens_generated = 0.0
        self.prefill_tokens = 0.0
        self.recompute_tokens = 0.0
        self.prefill_s = 0.0
        self.preemptions = 0
        self.peak_kv_tokens = 0.0
        self.held: dict[Seq, float] = {}  # KV kept for sequences in a tool call, oldest first
        self.held_total = 0.0  # KV outside kv_base + n * v: held, less the prompt KV groups share
        self._share = cfg.share_group_prefix
        self.prefix_holders: dict[int, int] = {}  # group -> members holding its prompt's KV
        self.shared_prefix_tokens = 0.0  # prompt tokens not prefilled (nor cached again): shared
        self.series: ReplicaSeries | None = None  # the binned time series, where one is kept
        self._queued = 0  # sequences waiting since the last batch change (for the series)

    # -- the fluid clock -------------------------------------------------------------------------
    def _v_at(self, t: float) -> float:
        dt = t - self.t0
        if dt <= 0.0 or self.n == 0:
            return self.v
        a, c = self.a, self.c
        return self.v + 2.0 * dt / (a + math.sqrt(a * a + 4.0 * c * dt))

    def _advance(self, now: float) -> None:
        """Bring the token clock and the statistics up to ``now`` (not while paused); and the
        series, where one is kept (it only reads)."""
        if self.paused_since is not None:
            return
        n = self.n
        t_acc, bound = self._t_acc, self._bound
        if n:
            span = now - t_acc
            self.busy_s += span
            self.seq_time_integral += n * span
            if bound:
                self.compute_bound_s += span
        self._t_acc = now
        t0 = self.t0
        series = self.series
        if now > t0:
            if self._dirty:
                self._rate()  # the batch changed at the anchor: its coefficients first
            v0 = self.v
            tokens = 0.0
            if n:
                a, c = self.a, self.c
                dt = now - t0
                v = v0 + 2.0 * dt / (a + math.sqrt(a * a + 4.0 * c * dt))  # _v_at(now)
                dv = v - v0
                tokens = n * dv
                self.tokens_generated += tokens
                self.a = a + 2.0 * c * dv  # the same curve, re-anchored: t'(v) = a + 2 c (v - v0)
            else:
                v = v0
                self.tokens_generated += 0.0
                self.a += 0.0
            self.v, self.t0 = v, now
            kv = self.kv_base + n * v + self.held_total
            if kv > self.peak_kv_tokens:
                self.peak_kv_tokens = kv
            if series is not None:
                kv0 = self.kv_base + n * v0 + self.held_total
                series.add(t_acc, now, n > 0, n, self._queued, kv0, kv, bound, False, tokens, max(t0, t_acc))
        elif series is not None:  # a prefill stall all along: no tokens, the KV as it was
            kv = self.kv_base + n * self.v + self.held_total
            series.add(t_acc, now, n > 0, n, self._queued, kv, kv, bound, False)

    def _rate(self) -> None:
        """The coefficients of ``t(v)`` at the anchor ``(t0, v)`` for the current batch."""
        self._dirty = False
        n = self.n
        if n == 0:
            self.a = self.c = 0.0
            self._bound = False
            return
        kv = self.kv_base + n * self.v  # read by attention: resident sequences only
        held = self.held_total
        if kv + held > self.peak_kv_tokens:
            self.peak_kv_tokens = kv + held
        fixed = self._fixed
        slope = self._slope
        self.a = (fixed[n] if n < len(fixed) else self.cost.fixed_s(n)) + slope * (kv - 0.5 * n)
        self.c = 0.5 * slope * n
        # cost.compute_bound(n, kv), inlined: FLOP time above HBM time
        self._bound = (n * self._flops_seq + self._flops_kv * kv) * self._bw > (
            self._wbytes + self._bytes_kv * kv
        ) * self._peak

    def _full_v(self) -> float:
        """The first iteration boundary at which the next iteration's tokens would not fit."""
        n, vb = self.n, self._vb
        x = (self._budget - self.held_total - self.kv_base) / n - 1.0 - vb  # past this, KV + n > budget
        k = math.floor(x + 1e-9) + 1.0
        cur = self.v - vb
        if k <= cur + 1e-9:
            k = math.floor(cur + 1e-9) + 1.0
        return vb + k

    def _mid_iteration(self) -> bool:
        """Whether the token clock is inside a decode iteration (not at one of its boundaries).

        The engine schedules between iterations only: the check that preempts before an
        iteration whose tokens would overflow the cache (and admission) happens at a boundary,
        so an event inside an iteration (an arrival, a tool call's return) preempts no one, even
        when the cache would overflow one token later; :meth:`_full_v` aims the timer at the
        boundary where it does."""
        off = self.v - self._vb
        return off - math.floor(off + 1e-6) > 1e-6

    def _preempt_if_full(self) -> None:
        """Before an iteration: while its tokens would overflow the cache, preempt the newest."""
        while self.n > 0 and self.kv_base + self.n * (self.v + 1.0) + self.held_total > self._budget + 1e-6:
            if self.held:  # cached prefixes of tool calls go first (recomputed on return)
                self._evict_held()
                continue
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
            if self._share:
                prefix.leave(self, seq)
            self.waiting.appendleft(seq)
            self.preemptions += 1
            self._since_finish += 1
            if self._since_finish > 10_000 + 100 * self._max_seqs:
                raise PipelineError(
                    f"replica {self.index} preempted {self._since_finish} sequences without finishing "
                    "one: the KV budget cannot make progress (lower max_num_seqs or use kv_policy='reserve')"
                )
            self._dirty = True

    def _evict_held(self, but: Seq | None = None) -> bool:
        """Drop the oldest cached prefix of a sequence in a tool call, never ``but``'s (the one
        about to reuse its own); False if there is none to drop."""
        seq = next((s for s in self.held if s is not but), None)
        if seq is None:
            return False
        self.held_total -= self.held.pop(seq)
        seq.cached = 0.0
        if self._share:
            prefix.leave(self, seq)  # may free its group's prompt
        return True

    def _fits(self, seq: Seq) -> bool:
        """Whether ``seq`` may join now (cached prefixes of tool calls are evicted to make room).

        With ``share_group_prefix`` a prompt its group holds here is not counted again
        (:func:`pipesim.compute.prefix.shared`); an eviction can free that prompt, so the need is
        recomputed after each one."""
        if self.n >= self._max_seqs:
            return False
        if self.n == 0 and not self.held:
            return True
        share = self._share
        if self._preempt:
            while True:
                need = self.kv_base + self.n * (self.v + 1.0) + seq.prompt + seq.gen_before + seq.obs + 1.0
                # its own cached prefix is already counted
                need -= seq.cached + prefix.shared(self, seq) if share else seq.cached
                if need + self.held_total <= self._admit_cap:
                    return True
                if not self._evict_held(but=seq):
                    return self.n == 0  # alone, it runs whatever its length (the budget holds one)
        if self.n == 0:
            return True
        spare = prefix.shared(self, seq) if share else 0.0
        return self.reserved + seq.prompt + seq.max_tokens - spare <= self._budget

    def _admit(self, now: float) -> None:
        """Admit waiting sequences FIFO while they fit; mid-iteration they wait for its end."""
        waiting = self.waiting
        self._admit_v = self._admit_t = _INF
        if not waiting:
            return
        v = self.v
        if self.n:
            if now < self.t0:  # prefilling: newcomers form the next prefill step
                if self._fits(waiting[0]):
                    self._admit_t = self.t0
                return
            if self._mid_iteration():  # decoding: a newcomer joins at the end of this iteration
                if self._fits(waiting[0]):
                    self._admit_v = self._vb + math.floor(v - self._vb + 1e-6) + 1.0
                return
        new_tokens, pairs, k = 0.0, 0.0, 0
        heap, admitted, held = self.heap, self.admitted, self.held
        preempt, max_seqs, cap = self._preempt, self._max_seqs, self._admit_cap
        share = self._share
        inline = preempt and not share  # the inlined test below knows nothing of shared prompts
        heappush = heapq.heappush
        while waiting:
            seq = waiting[0]
            n = self.n
            if held or not inline:
                if not self._fits(seq):
                    break
            elif n:  # _fits without cached prefixes to evict, inlined
                if n >= max_seqs:
                    break
                need = self.kv_base + n * (v + 1.0) + seq.prompt + seq.gen_before + seq.obs + 1.0
                need -= seq.cached
                if not need + self.held_total <= cap:
                    break
            ctx = seq.prompt + seq.gen_before + seq.obs
            cached = seq.cached
            if cached:
                del held[seq]
                self.held_total -= cached
                seq.cached = 0.0
            waiting.popleft()
            self._stamp = stamp = self._stamp + 1
            seq.stamp = stamp
            seq.v_start = v
            seq.kv_off = kv_off = ctx - v
            self.kv_base += kv_off
            if not preempt:
                self.reserved += seq.prompt + seq.max_tokens
            self.n = n + 1
            heappush(heap, (v + (seq.turn_end - seq.gen_before), seq.id, stamp, seq))
            if preempt:  # only preemption reads the admission order
                admitted.append((stamp, seq))
            new = ctx - cached
            if share:  # a prompt another member holds is not prefilled again
                new = prefix.join(self, seq, new)
                cached = ctx - new
            new_tokens += new
            pairs += new * (cached + 0.5 * new)
            k += 1
            self.recompute_tokens += new - seq.fresh
            seq.fresh = 0
        if k:
            if len(admitted) > 2 * self.n + 64:
                self._compact_admitted()
            self._vb = v  # iterations restart here
            self._stall(now, self._prefill_time(int(new_tokens), pairs, k))
            self.prefill_tokens += new_tokens
            self._dirty = True

    def _compact_admitted(self) -> None:
        """Drop the entries of sequences no longer resident from the admission order.

        Preemption pops the newest entry and skips stale ones (a sequence that finished, was
        preempted or left for a tool call since), so the list only needs the resident sequences,
        in order; without this it kept one entry (and its sequence, and the sequence's episode)
        per admission for the whole run. Compacting when it holds more than twice the resident
        sequences (plus a constant) costs O(1) per admission, amortised."""
        self.admitted = [(stamp, seq) for stamp, seq in self.admitted if stamp == seq.stamp]

    def _prefill_time(self, new_tokens: int, pairs: float, n_seqs: int) -> float:
        """``cost.prefill_s(new_tokens, pairs, n_seqs)``, the same operations in the same order
        (``tests/test_compute_engine.py`` checks they agree bit for bit), on the cost's memos of
        the linear layers and the LM head: no call into the cost model, which stays Python in the
        compiled build (where that call was a tenth of an admission). Every prefill a replica
        pays (admission, and the recompute after a sync that drops the KV) goes through here."""
        if new_tokens <= 0:
            return 0.0
        if self._chunked:  # the prefill shares iterations with the n - n_seqs running decodes
            return self.cost.chunked_prefill_s(new_tokens, pairs, n_seqs, max(self.n - n_seqs, 0))
        lin = self._lin.get(new_tokens)
        if lin is None:
            lin = self.cost.linear_s(new_tokens)
        lm = self._lm
        head = lm[n_seqs] if n_seqs < len(lm) else self.cost.lm_head_s(n_seqs)
        # roofline.kernel_time_s of the attention, inlined
        t_c = self._pf_flops * pairs / self._peak
        t_m = self._pf_bytes * 2 * new_tokens / self._bw
        hi, lo = (t_c, t_m) if t_c >= t_m else (t_m, t_c)
        attn = self._k0 if hi == 0.0 else self._k0 + hi * (1.0 + (lo / hi) ** self._p) ** self._inv_p
        return self._layers * (lin + attn) + head + self._it0

    def _stall(self, now: float, seconds: float) -> None:
        self.prefill_s += seconds
        if self.paused_since is not None:
            self._stall_left += seconds
        else:
            self.t0 = max(self.t0, now) + seconds

    def _resident(self) -> list[Seq]:
        return [s for _, _, stamp, s in sorted(self.heap) if stamp == s.stamp]

    def _generated_tokens(self, seq: Seq) -> float:
        return seq.gen_before + (self.v - seq.v_start if seq.stamp > 0 else 0.0)
