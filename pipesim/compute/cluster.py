"""A cluster and a run on it: GPUs, a placement, the compute engine, trainer and ledger together.

:class:`Cluster` is ``n_gpus`` GPUs and a placement: **colocated** (``trainer_gpus=0``: every GPU
serves an engine replica, and the replicas pause while the trainer trains on all of them, the
kernel's ``PipelineConfig.colocated``) or **disaggregated** (``trainer_gpus`` train, the rest
serve ``(n_gpus - trainer_gpus) / tp`` replicas). The replica is the :class:`EngineConfig` (GPU
type, TP degree, vLLM settings). Slots are no longer a knob: each replica takes up to
``slots_per_replica`` episodes (default ``max_num_seqs``) and the KV cache decides how many of
them run; the pipeline's ``n_slots`` is set to the total.

Multi-turn workloads (:class:`~pipesim.compute.workload.AgentTurns`): tool calls leave the GPU
and queue for ``env_workers`` environment workers shared by every replica
(:class:`~pipesim.compute.engine.EnvWorkers`, a counting semaphore; a busy sandbox fleet can be
the bottleneck), then the sequence queues for its replica again.

Weight sync (default): :class:`~pipesim.compute.sync.SyncModel` (``Cluster.sync``): the trainer's
gather or reshard, the bucketed broadcast to the rollout GPUs (none when colocated) and the
engines' weight load, for the run's trainer (its framework profile and GPUs). Pass
``sync_time_s`` to override.

**Colocated switching** (:class:`~pipesim.compute.offload.Offload`, its own module): on colocated
GPUs the engine gives the trainer its memory and takes it back at every step; the kernel adds the
switch time to the colocated training pause.

**Group batching and filtering**: pass ``groups=True`` (or a
:class:`~pipesim.policies.groups.WholeGroups`) to batch whole prompt groups of the workload's
``samples_per_prompt`` (the scenario's ``batch_size`` stays in samples, a multiple of it), with
dynamic filtering (``filter_rate``) and stale dropping as that policy documents; a scenario whose
batch policy is already a ``WholeGroups`` is checked against the workload. The ledger counts the
rejected groups' tokens as ``discarded_filtered``; the summary adds ``groups_trained``,
``groups_filtered`` and ``groups_expired`` (:data:`GROUP_METRICS`; a run without group batching
does not list them, and reads them as NaN: :class:`ComputeSummary`).

:func:`run_compute` runs a :class:`pipesim.Scenario` (its admission, weight-update and batching
policies, batch size, eta and steps) on a cluster with a :class:`TokenWorkload`; the result's
:meth:`ComputeRun.summary` is the kernel's summary plus the token ledger, engine and trainer figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from pipesim.compute.cost import EngineConfig, ReplicaCost
from pipesim.compute.engine import ComputeReplica
from pipesim.compute.ledger import TokenLedger, token_ledger
from pipesim.compute.offload import Offload
from pipesim.compute.overrides import check_overridden
from pipesim.compute.pool import EnvWorkers
from pipesim.compute.series import replica_timeline, verl_metrics
from pipesim.compute.source import TokenSource
from pipesim.compute.sync import SyncModel
from pipesim.compute.trainer import DEFAULT_PROFILE, ComputeTrainer, TrainerConfig
from pipesim.compute.workload import TokenWorkload
from pipesim.config import Scenario
from pipesim.core.engine import Pipeline
from pipesim.core.errors import MAX_SEED, MAX_SLOTS, FieldError, PipelineError, check_int, check_number, shown
from pipesim.core.seams import BatchObserver
from pipesim.core.validate import refuse
from pipesim.policies.batching import DropOverlong
from pipesim.policies.groups import GroupStats, WholeGroups
from pipesim.policies.missing import refuse_missing
from pipesim.policies.replicas import LeastLoaded, Replicas, Routing
from pipesim.results.columns import S_TRAINED
from pipesim.results.names import Summary
from pipesim.results.run import RunResult


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """``n_gpus`` GPUs running ``engine`` replicas, and ``trainer_gpus`` of them training (0: colocated)."""

    engine: EngineConfig
    n_gpus: int
    trainer_gpus: int = 0
    env_workers: int | None = None
    """Environment workers (sandboxes) shared by all replicas' tool calls; None: unlimited."""
    offload: Offload = field(default_factory=Offload)
    """The colocated switching cost (ignored when disaggregated)."""
    sync: SyncModel = field(default_factory=SyncModel)
    """The weight sync's model (:mod:`pipesim.compute.sync`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.offload, Offload):
            raise refuse("offload", f"must be an Offload, got {shown(self.offload)}")
        if not isinstance(self.sync, SyncModel):
            raise refuse("sync", f"must be a SyncModel, got {shown(self.sync)}")
        if not isinstance(self.engine, EngineConfig):
            raise refuse("engine", f"must be an EngineConfig, got {shown(self.engine)}")
        check_int("n_gpus", self.n_gpus, 1)
        t = self.trainer_gpus
        check_int("trainer_gpus", t, 0)
        if t >= self.n_gpus:
            raise FieldError(
                "trainer_gpus must be in [0, n_gpus) (0: colocated; n_gpus leaves no engine), "
                f"got {shown(t)}",
                "trainer_gpus",
            )
        w = self.env_workers
        if w is not None:
            check_int("env_workers", w, 1)  # None: unlimited
        rollout = self.n_gpus - t
        if rollout % self.engine.tp:
            raise FieldError(
                f"the {rollout} rollout GPUs must be a multiple of the engine's tp ({self.engine.tp})",
                "engine.tp",
            )
        slots = self.n_replicas * self.engine.max_num_seqs
        if slots > MAX_SLOTS:  # named here, not as the pipeline's n_slots the run would refuse
            raise FieldError(
                f"n_gpus {self.n_gpus:,} runs {self.n_replicas:,} replicas of max_num_seqs "
                f"{self.engine.max_num_seqs:,}: {slots:,} sequence slots, above the {MAX_SLOTS:,} one "
                "run holds (each is a Python object): fewer GPUs, a larger tp or a smaller max_num_seqs",
                "n_gpus",
            )

    @property
    def colocated(self) -> bool:
        return self.trainer_gpus == 0

    @property
    def n_replicas(self) -> int:
        return (self.n_gpus - self.trainer_gpus) // self.engine.tp

    @property
    def n_trainer_gpus(self) -> int:
        return self.n_gpus if self.colocated else self.trainer_gpus

    def sync_time_s(self, trainer: TrainerConfig | None = None) -> float:
        """Seconds of one weight sync from ``trainer`` (default: the default profile on the
        cluster's trainer GPUs) to the engines, by ``self.sync`` (see the module docstring)."""
        from pipesim.compute.profiles import profile

        prof = profile(DEFAULT_PROFILE) if trainer is None else trainer.framework
        return self.sync.sync_time_s(self.engine, prof, self.n_trainer_gpus, self.colocated, self.n_gpus)

    def switch_time_s(self) -> float:
        """Seconds of offload and reload per training step: colocated only (0 when disaggregated)."""
        return self.offload.switch_time_s(self.engine, self.n_gpus) if self.colocated else 0.0


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


def run_compute(
    scenario: Scenario,
    cluster: Cluster,
    workload: TokenWorkload,
    *,
    seed: int | None = None,
    trainer: TrainerConfig | None = None,
    slots_per_replica: int | None = None,
    sync_time_s: float | None = None,
    switch_time_s: float | None = None,
    groups: WholeGroups | bool = False,
    record: bool = False,
    routing: Routing | None = None,
    observer: BatchObserver | None = None,
) -> ComputeRun:
    """Run ``scenario``'s policies on ``cluster`` with ``workload`` (see the module docstring).

    ``seed`` (default: the scenario's) seeds the token lengths. A scenario field the cluster sets
    instead (``n_slots``, ``train_time_s``, ``sync_time_s``, ``colocated``, ``replicas``,
    ``durations``) must be left at its default (:mod:`pipesim.compute.overrides`).

    ``trainer`` defaults to the engine's model on the cluster's trainer GPUs at the default MFU;
    one given (to set its MFU, old-log-prob recompute or reference model) must train that model on
    those GPUs (``ValueError`` otherwise: the cluster places the trainer).
    ``switch_time_s`` overrides the colocated offload/reload seconds per step
    (:meth:`Cluster.switch_time_s`). ``groups``: ``True`` batches whole groups of the workload's
    ``samples_per_prompt`` (:class:`~pipesim.policies.groups.WholeGroups`), a ``WholeGroups``
    is used as given; either replaces the scenario's batch policy.
    ``record`` keeps each replica's batch timeline (``ComputeRun.timelines``) and its binned
    series (``ComputeRun.replica_timeline``). ``observer`` sees each batch the trainer takes
    (:class:`~pipesim.core.seams.BatchObserver`: ``pipesim run SPEC`` shows its progress so).
    ``routing`` picks the replica of each admitted
    sample (default :class:`~pipesim.policies.replicas.LeastLoaded`, which spreads a group over the
    replicas; ``GroupAffinity(workload.samples_per_prompt)`` keeps a prompt's samples together, so
    that ``EngineConfig.share_group_prefix`` can share their prompt).
    """
    if not isinstance(scenario, Scenario):
        raise refuse("scenario", f"must be a pipesim.Scenario, got {shown(scenario)}")
    refuse_missing(scenario)  # a saved run's policy not rebuilt here: refused before any work
    for name, instead in (
        ("timeout", "cap a sample's tokens with TokenWorkload.max_response_tokens"),
        ("failures", "run environment-worker failures on the chapter's slots (pipesim.run)"),
    ):
        if getattr(scenario, name) is not None:  # their draws compare against a duration up front
            raise FieldError(
                f"Scenario.{name} ({shown(getattr(scenario, name))}) is not modelled by the compute "
                f"engine, whose samples have tokens, not a duration drawn at launch: {instead}",
                name,
            )
    if not isinstance(cluster, Cluster):
        raise refuse("cluster", f"must be a Cluster, got {shown(cluster)}")
    if not isinstance(workload, TokenWorkload):
        raise refuse("workload", f"must be a TokenWorkload, got {shown(workload)}")
    if seed is not None:
        check_int("seed", seed, 0, MAX_SEED - 1)
    seed = check_overridden(scenario, cluster.colocated, seed)  # fields the cluster sets instead
    if not isinstance(record, bool):
        raise refuse("record", f"must be a bool, got {shown(record)}")
    eng = cluster.engine
    tcfg = _trainer_config(cluster, trainer)
    per = eng.max_num_seqs if slots_per_replica is None else slots_per_replica
    check_int("slots_per_replica", per, 1, MAX_SLOTS, "each slot is a Python object")
    if cluster.n_replicas * per > MAX_SLOTS:
        raise refuse(
            "slots_per_replica",
            f"{per:,} on {cluster.n_replicas:,} replicas is {cluster.n_replicas * per:,} slots, above "
            f"the {MAX_SLOTS:,} one run holds",
        )
    if switch_time_s is not None:
        check_number("switch_time_s", switch_time_s, 0.0)
    if routing is not None and not isinstance(routing, Routing):
        raise refuse("routing", f"must have a choose(engines) method, got {shown(routing)}")
    switch = cluster.switch_time_s() if switch_time_s is None else float(switch_time_s) * cluster.colocated
    batching = _group_policy(scenario, workload, groups)
    n_rep = cluster.n_replicas
    changes: dict[str, Any] = dict(
        n_slots=n_rep * per,
        colocated=cluster.colocated,
        sync_time_s=cluster.sync_time_s(tcfg) if sync_time_s is None else sync_time_s,
        replicas=Replicas(n_rep, LeastLoaded() if routing is None else routing) if n_rep > 1 else None,
    )
    if batching is not None:
        changes["batching"] = batching
    scenario = scenario.with_(**changes)
    source = TokenSource(workload, np.random.default_rng(seed), context_tokens=eng.context_len)
    tcfg.check_longest_sample(workload.max_sequence_tokens, "trainer.")  # after the context's check
    model_trainer = ComputeTrainer(tcfg, source, switch_s=switch)
    cost = ReplicaCost(eng)
    engines: list[ComputeReplica] = []
    pools: list[EnvWorkers] = []

    def factory(p: Pipeline, n_slots: int, index: int) -> ComputeReplica:
        if cluster.env_workers is not None and not pools:
            pools.append(EnvWorkers(p.env, cluster.env_workers))
        e = ComputeReplica(p, n_slots, index, cost, source, record, pools[0] if pools else None)
        engines.append(e)
        return e

    pool = scenario.pool_size or scenario.default_pool_size
    if batching is not None and batching.filter_rate > 0 and scenario.pool_size is None:
        # rejected groups are replaced: room for 1 / (1 - rate) times the tasks, and a margin
        pool = math.ceil(1.5 * pool / (1.0 - batching.filter_rate)) + scenario.pipeline.batch_size
    placeholder = [0.0] * pool
    p = Pipeline(
        scenario,
        placeholder,
        source=source,
        observer=observer,
        trainer=model_trainer,
        engine_factory=cast(Any, factory),
    )
    p.run()
    for e in engines:
        e.flush()
    T = p.env.now
    result = RunResult(scenario, T, p.episodes, p.updates, p.train_log, p.sync_log, engine="compute")
    group_stats = batching.stats(p) if batching is not None else None
    filtered = group_stats.filtered_ids if group_stats is not None else ()
    over_length = isinstance(p.scenario.batching, DropOverlong)
    ledger = token_ledger(p.episodes, source, engines, filtered, over_length, result.newest_versions)
    if not ledger.closes():  # a loss no summary would show: refused, not reported
        raise PipelineError(
            f"the token ledger does not close: {ledger.generated:,.0f} tokens generated, "
            f"{ledger.accounted:,.0f} trained, discarded, buffered or in flight (batch policy "
            f"{type(p.scenario.batching).__name__}, weight update {type(p.scenario.weight_update).__name__})"
        )
    stats = [e.stats(T) for e in engines]
    timelines = [e.timeline for e in engines] if record else []
    series = replica_timeline(engines, T) if record else None
    p.release()
    return ComputeRun(
        result,
        ledger,
        stats,
        model_trainer.log,
        cluster,
        timelines,
        group_stats,
        switch,
        series,
        model_trainer.phase_log,
        model_trainer.dealt_log,
        model_trainer.balanced_update_s,
    )


def _trainer_config(cluster: Cluster, trainer: TrainerConfig | None) -> TrainerConfig:
    """The trainer of a run on ``cluster``: ``trainer`` checked against the placement, or the default."""
    eng, n = cluster.engine, cluster.n_trainer_gpus
    where = "colocated on all n_gpus" if cluster.colocated else "on trainer_gpus"
    if trainer is None:
        try:
            return TrainerConfig(model=eng.model, gpu=eng.gpu, n_gpus=n)
        except ValueError as e:  # sized by the cluster: say which of its fields to change
            field = "n_gpus" if cluster.colocated else "trainer_gpus"
            raise FieldError(f"Cluster.{field} ({n}): {str(e).removeprefix('n_gpus: ')}", field) from None
    if not isinstance(trainer, TrainerConfig):
        raise refuse("trainer", f"must be a TrainerConfig or None, got {shown(trainer)}")
    for name, same, got, want in (
        ("n_gpus", trainer.n_gpus == n, trainer.n_gpus, n),
        ("model", trainer.model == eng.model, trainer.model.name, eng.model.name),
        ("gpu", trainer.gpu == eng.gpu, trainer.gpu.name, eng.gpu.name),
    ):
        if not same:
            raise FieldError(
                f"trainer.{name} ({got}) must be the cluster's ({want}): the trainer runs {where}, "
                "training the model the engines serve, on their GPU type",
                f"trainer.{name}",
            )
    return trainer


def _group_policy(
    scenario: Scenario, workload: TokenWorkload, groups: WholeGroups | bool
) -> WholeGroups | None:
    """The group batch policy of a run (None: the scenario's own, not group batching), checked."""
    if groups is True:
        policy: WholeGroups | None = WholeGroups(workload.samples_per_prompt)
    elif groups is False:
        policy = scenario.batching if isinstance(scenario.batching, WholeGroups) else None
    elif isinstance(groups, WholeGroups):
        policy = groups
    else:
        raise refuse("groups", f"must be a bool or a WholeGroups, got {shown(groups)}")
    if policy is None:
        return None
    if policy.samples_per_group != workload.samples_per_prompt:
        raise FieldError(
            f"samples_per_group ({policy.samples_per_group}) must equal the workload's samples_per_prompt "
            f"({workload.samples_per_prompt}): a group is one prompt's samples",
            "samples_per_group",
        )
    policy.check_batch_size(scenario.pipeline.batch_size)
    return policy
