"""What a run on a cluster returns: :class:`ComputeRun`, and the summary it computes.

:func:`~pipesim.compute.cluster.run_compute` composes a cluster, runs it and hands back data: the
kernel's :class:`~pipesim.results.run.RunResult`, the token ledger, each replica's statistics and
the trainer's logs. :meth:`ComputeRun.summary` turns those into the cluster's metrics: the kernel's
summary plus the ledger, the cluster's throughput and GPU shares, verl's idle ratios and
``timing_s/*`` names, the off-policy shares and, where the run batched whole prompt groups, the
:data:`GROUP_METRICS` (:class:`ComputeSummary` reads them as NaN where it did not).

This is the accounting side of a compute run, kept apart from its composition
(:mod:`pipesim.compute.cluster`: placement, the engine, the trainer, the kernel): reading a
finished run needs only the figures it recorded, none of the machinery that made them, so a
metric can change here without touching how a run is built, and the other way round.
:class:`~pipesim.compute.cluster.Cluster` is named here for its type only.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pipesim.compute.ledger import TokenLedger
from pipesim.compute.series import verl_metrics
from pipesim.policies.groups import GroupStats
from pipesim.results.columns import S_TRAINED
from pipesim.results.names import Summary
from pipesim.results.run import RunResult

if TYPE_CHECKING:
    from pipesim.compute.cluster import Cluster

__all__ = ["GROUP_METRICS", "ComputeRun", "ComputeSummary"]


GROUP_METRICS = ("groups_trained", "groups_filtered", "groups_expired")
"""The summary's counts of prompt groups (:class:`~pipesim.policies.groups.GroupStats`): listed
only when the run batches whole groups."""


class ComputeSummary(Summary):
    """A compute run's summary: a :class:`~pipesim.results.names.Summary` in which the
    :data:`GROUP_METRICS` of a run without group batching are not listed (not printed, not in
    ``--json``, a saved run or a DataFrame: there are no groups to count) and read as NaN, so code
    that reads them from every run (``math.isnan(s["groups_trained"])``) keeps working."""

    def __missing__(self, key: str) -> Any:
        if key in GROUP_METRICS:
            return math.nan
        return super().__missing__(key)


@dataclass
class ComputeRun:
    """One run on a cluster: the kernel's result, the ledger, and per-replica and trainer figures."""

    result: RunResult
    ledger: TokenLedger
    engines: list[dict[str, Any]]
    trainer_log: list[tuple[int, float, float]]
    cluster: Cluster
    timelines: list[list[tuple[float, int, int, float, float, bool]]] = field(default_factory=list)
    groups: GroupStats | None = None
    """What group batching did (None: samples were batched one by one)."""
    switch_time_s: float = 0.0
    """The colocated offload and reload seconds added to each training step."""
    replica_timeline: pd.DataFrame | None = None
    """Every replica over time, binned (:func:`~pipesim.compute.series.replica_timeline`; kept with
    ``record=True``, else None): running and queued sequences, KV occupancy, tokens/s, bound."""
    phase_log: list[tuple[int, float, dict[str, float]]] = field(default_factory=list)
    """The trainer's ``(step, tokens, {phase: seconds})`` (``ComputeTrainer.phase_log``)."""
    dealt_log: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    """The trainer's ``(step, tokens of each sample as dealt to the ranks)``
    (``ComputeTrainer.dealt_log``; empty for an exactly balanced profile)."""
    balanced_update_s: list[float] = field(default_factory=list)
    """``update_actor`` seconds per dealt step had the ranks been exactly balanced
    (``ComputeTrainer.balanced_update_s``)."""

    @functools.cached_property
    def slot_note(self) -> str | None:
        """Why the run looks held back by its slots rather than its engines, or None
        (:func:`~pipesim.compute.tool_slots.tool_slot_note`), worked out once: ``run_compute``
        warns it and a plan records it (:func:`pipesim.plan.slots.slot_limited`) from this one
        answer."""
        from pipesim.compute.tool_slots import tool_slot_note

        return tool_slot_note(self)

    def summary(self) -> dict[str, float]:
        """The kernel's summary plus the ledger, engine and trainer figures (``docs/compute.md``).

        ``decode_tokens_per_s`` here is the cluster's throughput: every replica's decoded tokens
        over the run's simulated time, pauses and idle replicas included. A replica's own
        ``decode_tokens_per_s`` (``self.engines[i]``) is its tokens over its *busy* seconds; this
        one is the sum of those times each replica's ``busy_share``."""
        s = ComputeSummary(self.result.summary())  # old metric names read through (names.RENAMED)
        T = self.result.sim_time_s
        c = self.cluster
        s.update(self.ledger.as_dict())
        busy = sum(e["busy_share"] for e in self.engines) * c.engine.tp * T
        train_s = sum(b - a for _, a, b, _ in self.result.train_log)
        engine_busy = sum(e["busy_share"] for e in self.engines) / len(self.engines)
        tokens = sum(e["tokens_generated"] for e in self.engines)
        steps = max(len(self.result.train_log), 1)
        s.update(
            decode_tokens_per_s=tokens / T if T > 0 else math.nan,
            gpu_busy_share=(busy + train_s * c.n_trainer_gpus) / (c.n_gpus * T) if T > 0 else math.nan,
            engine_busy_share=engine_busy,
            step_time_s_mean=T / steps,
            train_time_s_mean=train_s / steps,
            concurrency_mean=sum(e["mean_running"] * e["busy_share"] for e in self.engines),
            preemptions=int(sum(e["preemptions"] for e in self.engines)),
            tool_calls=int(sum(e["tool_calls"] for e in self.engines)),
            recompute_tokens=sum(e["recompute_tokens"] for e in self.engines),
            prefill_tokens=sum(e["prefill_tokens"] for e in self.engines),
            compute_bound_share=sum(e["compute_bound_share"] for e in self.engines) / len(self.engines),
            ledger_closes=int(self.ledger.closes()),
            n_replicas=int(c.n_replicas),
            kv_budget_tokens=int(c.engine.kv_budget_tokens),
            switch_time_s=self.switch_time_s,
        )
        # idle ratios, timing_s/* and perf/throughput in verl's names
        s.update(verl_metrics(self.result, self.engines, self.phase_log, c.n_gpus))
        # verl's trainer/idle_ratio (fully_async/trainer/idle_ratio since it moved) is one figure,
        # gen / step: the kernel's 1 - train / T also counts every weight sync as idle (the one
        # after the last step, which ends the run, too), so the two rows disagreed (0.2387 against
        # 0.2328 on the calibrated sample at 4:4, eta 1, partial); a run with no step keeps it
        if math.isfinite(s["fully_async/trainer/idle_ratio"]):
            s["trainer/idle_ratio"] = s["fully_async/trainer/idle_ratio"]
        # the kernel's rollouter/idle_ratio is the share of idle slots, and a replica's slots are
        # its max_num_seqs places, not its GPUs (a replica decoding 30 of 256 is busy, not 88%
        # idle): verl's meaning is the engines' idle time, which fully_async/rollouter/ holds
        s["slot_idle_ratio"] = s["rollouter/idle_ratio"]
        s["rollouter/idle_ratio"] = min(max(s["fully_async/rollouter/idle_ratio"], 0.0), 1.0)
        # the share of the actor update spent waiting for the busiest rank (0: exactly balanced)
        dealt = {step for step, _ in self.dealt_log}
        actual = sum(p["update_actor"] for step, _, p in self.phase_log if step in dealt)
        s["trainer/rank_wait_share"] = 1.0 - sum(self.balanced_update_s) / actual if actual > 0 else 0.0
        # per token, the share of trained samples an older policy generated (ledger.py); per
        # sample, the share generated under more than one version (a partial rollout's)
        led = self.ledger
        s["offpolicy_token_share"] = led.offpolicy_trained / led.trained if led.trained > 0 else 0.0
        cols, n_trained = self.result.columns, s["episodes_trained"]
        before = cols.tokens_before_update
        mixed = int(np.count_nonzero(before[cols.status == S_TRAINED] > 0))
        s["mixed_version_share"] = mixed / n_trained if n_trained else 0.0
        # slime/APRIL's own ratio (its megatron_utils/data.py): the prefixes of resumed samples
        # over the tokens decoded plus those prefixes (each prefix counted once, when it resumes)
        resumed = cols.total("tokens_before_update")
        denom = led.generated + resumed
        s["partial_rollout/off_policy_ratio"] = resumed / denom if denom > 0 else 0.0
        g = self.groups
        if g is not None:  # without group batching there are no groups to count (ComputeSummary)
            s.update({k: int(getattr(g, k)) for k in GROUP_METRICS})
        return s
