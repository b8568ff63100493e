"""A compute replica over time, and a run's steps in verl's names.

:class:`ReplicaSeries` keeps one replica's state in fixed-width bins of integrals whose width
doubles as the run grows, so memory stays bounded at any run length; :func:`timeline_frame` and
:func:`replica_timeline` turn the bins into DataFrames whose columns integrate to the replica's
totals. :func:`step_breakdown` and :func:`verl_metrics` split the trainer's steps and give the
idle ratios under verl's ``fully_async_policy`` names. Nothing here runs the simulation.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pipesim.core.errors import check_int, shown
from pipesim.core.validate import refuse

if TYPE_CHECKING:
    from pipesim.compute.engine import ComputeReplica
    from pipesim.results.run import RunResult


class ReplicaSeries:
    """One replica's state over time in fixed-width bins: bounded memory at any run length.

    Each bin holds integrals over its time span (seconds with a resident batch, resident
    sequences x seconds, queued sequences x seconds, KV tokens x seconds, decoded tokens,
    compute-bound seconds, paused seconds), so a column divided by the bin width is that quantity's
    mean over the bin and the bins sum to the run's totals exactly (up to float rounding). The
    width starts at ``width_s`` and doubles, merging neighbouring bins, whenever the run outgrows
    ``max_bins`` bins: at most ``max_bins`` rows, whatever the number of events. An interval that
    straddles bins is split in proportion to time (tokens too: within one interval the decode
    rate is taken as constant; KV grows linearly, split by the trapezoid rule).
    """

    COLUMNS = ("busy_s", "seq_s", "queued_s", "kv_s", "tokens", "compute_bound_s", "paused_s")

    def __init__(self, width_s: float = 2.0**-10, max_bins: int = 4096) -> None:
        if not (isinstance(width_s, int | float) and 0 < width_s < math.inf):
            raise refuse("width_s", f"must be a positive finite number, got {shown(width_s)}")
        check_int("max_bins", max_bins, 2)
        self.width_s = float(width_s)
        self.max_bins = max_bins
        self.cols: list[list[float]] = [[] for _ in self.COLUMNS]

    def _grow(self, i: int) -> None:
        """Make bin ``i`` exist, coarsening (doubling the width) while it would exceed ``max_bins``."""
        cols = self.cols
        while i >= self.max_bins:
            for k, col in enumerate(cols):
                cols[k] = [sum(col[j : j + 2]) for j in range(0, len(col), 2)]
            self.width_s *= 2.0
            i //= 2
        short = i + 1 - len(cols[0])
        if short > 0:
            for col in cols:
                col.extend([0.0] * short)

    def add(
        self,
        t_from: float,
        t_to: float,
        busy: bool,
        n: int,
        queued: int,
        kv0: float,
        kv1: float,
        bound: bool,
        paused: bool,
        tokens: float = 0.0,
        tokens_from: float | None = None,
    ) -> None:
        """Integrate one interval of fixed batch: ``n`` resident sequences (decoding when ``busy``),
        ``queued`` waiting, KV from ``kv0`` to ``kv1`` tokens, ``tokens`` decoded from
        ``tokens_from`` (default ``t_from``) to ``t_to``; ``paused``: the replica was paused."""
        w = self.width_s
        i = int(t_from / w)
        if i == int(t_to / w) and i < len(self.cols[0]):  # the common case: inside one bin
            d = t_to - t_from
            busy_c, seq_c, q_c, kv_c, tok_c, cb_c, p_c = self.cols
            if d > 0.0:
                if busy:
                    busy_c[i] += d
                    seq_c[i] += n * d
                    if bound:
                        cb_c[i] += d
                if paused:
                    p_c[i] += d
                if queued:
                    q_c[i] += queued * d
                kv_c[i] += 0.5 * (kv0 + kv1) * d
            if tokens:
                tok_c[i] += tokens
            return
        if t_to > t_from:
            self._spread(t_from, t_to, busy, n, queued, kv0, kv1, bound, paused)
        if tokens:
            a = t_from if tokens_from is None else tokens_from
            self._spread_tokens(a, t_to, tokens)

    def add_tokens(self, t: float, tokens: float) -> None:
        """``tokens`` decoded at the instant ``t``."""
        i = int(t / self.width_s)
        if i >= len(self.cols[0]):
            self._grow(i)
            i = int(t / self.width_s)
        self.cols[4][i] += tokens

    def _spread(
        self,
        t_from: float,
        t_to: float,
        busy: bool,
        n: int,
        queued: int,
        kv0: float,
        kv1: float,
        bound: bool,
        paused: bool,
    ) -> None:
        w = self.width_s
        i1 = int(t_to / w)
        if i1 >= len(self.cols[0]):
            self._grow(i1)
            w = self.width_s
            i1 = int(t_to / w)
        i = min(int(t_from / w), i1)
        busy_c, seq_c, q_c, kv_c, _, cb_c, p_c = self.cols
        span = t_to - t_from
        slope = (kv1 - kv0) / span
        a = t_from
        while True:
            b = t_to if i >= i1 else min((i + 1) * w, t_to)
            d = b - a
            if d > 0.0:
                if busy:
                    busy_c[i] += d
                    seq_c[i] += n * d
                    if bound:
                        cb_c[i] += d
                if paused:
                    p_c[i] += d
                q_c[i] += queued * d
                kv_c[i] += (kv0 + slope * (0.5 * (a + b) - t_from)) * d
            if b >= t_to:
                return
            a, i = b, i + 1

    def _spread_tokens(self, t_from: float, t_to: float, tokens: float) -> None:
        w = self.width_s
        i1 = int(t_to / w)
        if i1 >= len(self.cols[0]):
            self._grow(i1)
            w = self.width_s
            i1 = int(t_to / w)
        col = self.cols[4]
        i = min(int(t_from / w), i1)
        if i == i1 or t_to <= t_from:
            col[i1] += tokens
            return
        rate = tokens / (t_to - t_from)
        a, left = t_from, tokens
        while i < i1:
            b = (i + 1) * w
            part = rate * (b - a)
            col[i] += part
            left -= part
            a, i = b, i + 1
        col[i1] += left

    def arrays(self) -> dict[str, np.ndarray]:
        """The bins' integrals as numpy arrays, and ``t_start_s`` / ``t_end_s``."""
        n = len(self.cols[0])
        out = {"t_start_s": np.arange(n) * self.width_s, "t_end_s": (np.arange(n) + 1.0) * self.width_s}
        for name, col in zip(self.COLUMNS, self.cols, strict=True):
            out[name] = np.asarray(col, dtype=float)
        return out


# -- results over time -----------------------------------------------------------------------------
def timeline_frame(
    series: ReplicaSeries, kv_budget_tokens: float, end_s: float | None = None
) -> pd.DataFrame:
    """One replica's binned series as a DataFrame, one row per bin (see :class:`ReplicaSeries`).

    ``end_s``: the run's end. The bins after it are left out and the last one ends there, its
    means taken over the part it covers: averaged over its full width, a run ending 0.06 s into
    a 1 s bin showed its KV occupancy at 0.075 for a true 0.93.

    Columns: ``t_start_s``, ``t_end_s``; ``running`` (mean sequences decoding: resident and not
    paused), ``queued`` (mean waiting for the KV cache), ``kv_tokens`` (mean KV tokens held,
    cached prefixes of tool calls included, pauses too) and ``kv_occupancy`` (its share of the
    budget), ``tokens`` (decoded in the bin) and ``decode_tokens_per_s``, ``busy_share`` (a batch
    resident and not paused), ``compute_bound_share`` and ``memory_bound_share`` (its split by the
    roofline), ``paused_share``, and ``bound``: ``"compute"``, ``"memory"`` or ``"idle"``,
    whichever the bin spent most of its busy time as (idle: never busy).
    """
    a = series.arrays()
    if end_s is not None:  # the bins from end_s on fold into the last (an instant's tokens at end_s)
        keep = max(int(np.searchsorted(a["t_start_s"], end_s, side="left")), 1)
        cut = {k: v[:keep].copy() for k, v in a.items()}
        for k in ReplicaSeries.COLUMNS:
            cut[k][-1] += a[k][keep:].sum()
        cut["t_end_s"][-1] = max(min(cut["t_end_s"][-1], end_s), cut["t_start_s"][-1])
        a = cut
    w = a["t_end_s"] - a["t_start_s"]
    w = np.where(w > 0.0, w, series.width_s)  # a run ending at 0: its (empty) first bin whole
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


def replica_timeline(replicas: list[ComputeReplica], end_s: float | None = None) -> pd.DataFrame:
    """Every replica's :meth:`ComputeReplica.timeline_frame` up to ``end_s``, stacked with a
    ``replica`` column."""
    frames = [r.timeline_frame(end_s).assign(replica=r.index) for r in replicas if r.series is not None]
    if not frames:
        return pd.DataFrame()
    out = pd.concat(frames, ignore_index=True)
    return out[["replica", *[c for c in out.columns if c != "replica"]]]


PhaseLog = Sequence[tuple[int, float, Mapping[str, float]]]
"""A trainer's ``(step, tokens, {phase: seconds})`` per step (``ComputeTrainer.phase_log``)."""

BREAKDOWN_COLUMNS = (
    "timing_s/gen",
    "timing_s/param_sync",
    "timing_s/old_log_prob",
    "timing_s/ref",
    "timing_s/update_actor",
    "timing_s/offload",
    "timing_s/remainder",
    "timing_s/step",
)
"""The step's parts in verl's names (``offload`` and ``remainder`` are pipesim's): the parts
before ``timing_s/step`` sum to it."""


def step_breakdown(
    result: RunResult, phases: PhaseLog | None = None, n_gpus: int | None = None
) -> pd.DataFrame:
    """Each training step's time split as verl logs it (``timing_s/*``, one row per step).

    A step runs from the end of the previous step's training (0 for the first) to the end of its
    own: ``timing_s/param_sync`` is the weight-sync time inside that span before the training
    starts, ``timing_s/gen`` the rest of the wait (the trainer waiting for data: verl's fully
    async trainer times its wait for samples under ``gen``), then the training span. With the
    trainer's ``phases`` (:mod:`pipesim.compute.phases`) the span splits into
    ``timing_s/old_log_prob``, ``timing_s/ref``, ``timing_s/update_actor``, ``timing_s/remainder``
    and ``timing_s/offload`` (what the span holds beyond them: the colocated offload and reload);
    without, ``timing_s/update_actor`` is the whole span and the others 0. ``timing_s/step`` is
    the sum. ``perf/total_num_tokens`` is the step's trained tokens (NaN without ``phases``) and
    ``perf/throughput`` verl's ``total_num_tokens / (step seconds x n_gpus)``
    (``verl/trainer/ppo/metric_utils.py``, ``compute_throughout_metrics``; the fully-async trainer
    passes every GPU, trainer and rollout: ``MetricsAggregator(total_gpus=...)`` in
    ``fully_async_trainer.py``), NaN without ``n_gpus``. Names from verl's ``fully_async_policy``
    (``verl/experimental/fully_async_policy/fully_async_trainer.py`` and ``detach_utils.py``).
    """
    if n_gpus is not None:
        check_int("n_gpus", n_gpus, 1)
    by_step = {step: (tokens, parts) for step, tokens, parts in phases or ()}
    syncs = sorted((a, b) for a, b, _ in result.sync_log)
    starts = [a for a, _ in syncs]
    reach = list(itertools.accumulate((b for _, b in syncs), max))  # the latest end so far
    rows = []
    prev = 0.0
    for step, start, end, _ in result.train_log:
        # only the syncs that start before the step's training and whose prefix reaches past the
        # previous step's end can overlap [prev, start]: the sum over all of them, the others
        # adding exactly 0 (O(steps log syncs), not O(steps x syncs))
        first, last = bisect.bisect_right(reach, prev), bisect.bisect_left(starts, start)
        sync = sum((max(0.0, min(b, start) - max(a, prev)) for a, b in syncs[first:last]), 0.0)
        wait = max(start - prev, 0.0)
        span = end - start
        tokens, parts = by_step.get(step, (math.nan, None))
        if parts is None:
            split = (0.0, 0.0, span, 0.0, 0.0)
        else:
            olp, ref, upd, rest = (
                float(parts.get(k, 0.0)) for k in ("old_log_prob", "ref", "update_actor", "remainder")
            )
            off = span - olp - ref - upd - rest  # what the span holds beyond the phases
            split = (olp, ref, upd, off if off > OFFLOAD_ROUNDING * span else 0.0, rest)
        total = end - prev
        rate = tokens / (total * n_gpus) if n_gpus is not None and total > 0 else math.nan
        rows.append(
            (step, prev, start, end, wait - min(sync, wait), min(sync, wait), *split, total, tokens, rate)
        )
        prev = end
    return pd.DataFrame(
        rows,
        columns=[
            "step",
            "step_start_s",
            "train_start_s",
            "train_end_s",
            *BREAKDOWN_COLUMNS,
            "perf/total_num_tokens",
            "perf/throughput",
        ],
    )


OFFLOAD_ROUNDING = 1e-9
"""A step's offload below this share of its training span is the phases' rounding (the span is an
end less a start, the phases a sum), shown as 0 rather than as 1e-14 s."""


def verl_metrics(
    result: RunResult,
    replica_stats: list[dict[str, Any]],
    phases: PhaseLog | None = None,
    n_gpus: int | None = None,
) -> dict[str, float]:
    """The trainer's and the engines' idle ratios and the mean step breakdown, in verl's names.

    ``fully_async/trainer/idle_ratio`` is verl's ``timing_s/gen / timing_s/step`` (summed over the
    steps: the trainer's share of time waiting for data; ``MetricsAggregator`` in
    ``verl/experimental/fully_async_policy/detach_utils.py``, logged as ``trainer/idle_ratio`` in
    older versions; the compute summary's ``trainer/idle_ratio`` is this same figure). The weight
    sync is not idle time here: it is ``timing_s/param_sync``, inside ``timing_s/step`` and not in
    ``gen``. verl times its sync after its ``step`` timer closes, leaving it out of both, so a long
    sync makes this read a little below verl's ``gen / (step - param_sync)``. verl logs one ratio
    per parameter version (sums over its ``trigger_parameter_sync_step`` steps); this is the ratio
    of the sums over the whole run, not a mean of per-version ratios.

    ``fully_async/rollouter/idle_ratio`` is verl's ``1 - active_time / version_time``
    (``fully_async_rollouter.py``), here over the whole run and every replica: the mean share of
    time a replica had no batch resident or was paused (``ComputeReplica.stats``' ``busy_share``),
    so a replica holding slots whose sequences wait in tool calls is idle.

    Plus the per-step means of :func:`step_breakdown`'s columns (``phases`` and ``n_gpus`` passed
    on), ``perf/throughput`` included.
    """
    steps = step_breakdown(result, phases, n_gpus)
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
    for col in (*BREAKDOWN_COLUMNS, "perf/total_num_tokens", "perf/throughput"):
        out[col] = float(steps[col].mean()) if len(steps) else math.nan
    return out
