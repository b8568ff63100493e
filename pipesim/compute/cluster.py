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

**Colocated switching** (:class:`Offload`): on colocated GPUs the engine must give the trainer its
memory and take it back at every step, as verl does it -- ``verl/workers/sharding_manager/
fsdp_vllm.py``: leaving generation calls vLLM's ``sleep(level=1)`` (weights copied to host
memory, KV cache discarded); entering it calls ``wake_up(tags=["weights"])``, loads the new
weights, offloads the FSDP model and then ``wake_up(tags=["kv_cache"])``; ``verl/workers/
fsdp_workers.py`` with ``param_offload`` / ``optimizer_offload`` loads the actor's parameters
and optimizer state to the GPU before ``update_actor`` and offloads them after. Each GPU moves
its own shard over its own host link, all in parallel, so one step's switching cost is::

    switch_s = fixed_s + 2 * (engine weights per GPU   [sleep level 1; level 2 discards them,
                                                        and the weight sync refills them]
                              + trainer state per GPU  [trainer_offload: fp32 master weights and
                                                        Adam moments, 12 bytes/param, sharded]
                             ) / host_bandwidth

(2: out and back). The KV cache is discarded, not copied. The host bandwidth is one direction of
the GPU's PCIe x16 link (Gen5 63 GB/s, Gen4 31.5 GB/s: 32 or 16 GT/s per lane, 128b/130b) times
``host_link_efficiency`` (0.8, what pinned ``cudaMemcpy`` reaches; a guess, override it), or
``host_bandwidth_bytes_per_s``. The kernel adds it to the colocated training pause, so a
synchronous colocated step grows by exactly ``switch_s``; ``run_compute(switch_time_s=...)``
overrides it (0 turns it off). Not modelled: GPUs sharing a PCIe switch or the CPU's lanes, the
allocator's and CUDA graphs' own costs (put them in ``fixed_s``), and the KV cache of sequences
left in flight across a colocated training step (an asynchronous colocated design keeps them
paused with their cache; copying it out and back is not charged).

**Group batching and filtering**: pass ``groups=True`` (or a
:class:`~pipesim.policies.groups.WholeGroups`) to batch whole prompt groups of the workload's
``samples_per_prompt`` (the scenario's ``batch_size`` stays in samples, a multiple of it), with
dynamic filtering (``filter_rate``) and stale dropping as that policy documents; a scenario whose
batch policy is already a ``WholeGroups`` is checked against the workload. The ledger counts the
rejected groups' tokens as ``discarded_filtered``; the summary adds ``groups_trained``,
``groups_filtered`` and ``groups_expired``.

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
from pipesim.compute.gpus import GPUSpec
from pipesim.compute.ledger import TokenLedger, token_ledger
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
from pipesim.core.validate import refuse
from pipesim.policies.batching import DropOverlong
from pipesim.policies.groups import GroupStats, WholeGroups
from pipesim.policies.replicas import LeastLoaded, Replicas, Routing
from pipesim.results.names import Summary
from pipesim.results.run import RunResult

PCIE_X16_BYTES_PER_S: dict[int, float] = {4: 16e9 * 16 * 128 / 130 / 8, 5: 32e9 * 16 * 128 / 130 / 8}
"""One direction of a PCIe x16 link by generation (line rate after 128b/130b encoding)."""

HOST_PCIE_GEN: dict[str, int] = {
    "h100-sxm": 5,
    "h100-pcie": 5,
    "h800": 5,
    "h200": 5,
    "h20": 5,
    "a100-80gb": 4,
    "b200": 5,  # the GPU speaks Gen6, but HGX B200 hosts (x86) link at Gen5
    "l40s": 4,
}
"""The host link's PCIe generation per catalog GPU (the datasheets); an unknown GPU gets Gen4."""

DEFAULT_HOST_LINK_EFFICIENCY = 0.8
"""Pinned host-device copies reach about this share of the PCIe line rate (a guess; override it)."""


@dataclass(frozen=True, kw_only=True)
class Offload:
    """The switching cost of a colocated step (see the module docstring): offload and reload."""

    sleep_level: int = 1
    """vLLM's sleep level: 1 copies the weights to host memory and back, 2 discards them."""
    trainer_offload: bool = True
    """verl's FSDP ``param_offload`` and ``optimizer_offload``: the trainer's state leaves the GPU."""
    trainer_offload_bytes_per_param: float = 12.0
    """fp32 master weights (4) and Adam's two moments (8); gradients are freed, not moved."""
    host_bandwidth_bytes_per_s: float | None = None
    """One direction of one GPU's host link; None: from the GPU's PCIe generation."""
    host_link_efficiency: float = DEFAULT_HOST_LINK_EFFICIENCY
    fixed_s: float = 0.0
    """Seconds added per step (allocator, CUDA graphs, process coordination)."""

    def __post_init__(self) -> None:
        if type(self.sleep_level) is not int or self.sleep_level not in (1, 2):
            raise refuse(
                "sleep_level", f"must be 1 or 2 (vLLM's sleep levels), got {shown(self.sleep_level)}"
            )
        if not isinstance(self.trainer_offload, bool):
            raise refuse("trainer_offload", f"must be a bool, got {shown(self.trainer_offload)}")
        check_number("trainer_offload_bytes_per_param", self.trainer_offload_bytes_per_param, 0.0)
        if self.host_bandwidth_bytes_per_s is not None:
            check_number("host_bandwidth_bytes_per_s", self.host_bandwidth_bytes_per_s, 0.0, strict=True)
        check_number("host_link_efficiency", self.host_link_efficiency, 0.0, strict=True)
        if self.host_link_efficiency > 1:
            raise refuse("host_link_efficiency", f"must be in (0, 1], got {shown(self.host_link_efficiency)}")
        check_number("fixed_s", self.fixed_s, 0.0)

    def host_bandwidth(self, gpu: GPUSpec) -> float:
        """Bytes per second one GPU moves to or from host memory."""
        if self.host_bandwidth_bytes_per_s is not None:
            return float(self.host_bandwidth_bytes_per_s)
        gen = HOST_PCIE_GEN.get(gpu.name.lower(), 4)
        return PCIE_X16_BYTES_PER_S[gen] * self.host_link_efficiency

    def bytes_per_gpu(self, engine: EngineConfig, trainer_gpus: int) -> float:
        """Bytes one GPU moves one way: its engine weight shard and its trainer state shard."""
        engine_bytes = engine.weight_bytes_per_gpu if self.sleep_level == 1 else 0.0
        trainer = engine.model.n_params * self.trainer_offload_bytes_per_param / trainer_gpus
        return engine_bytes + (trainer if self.trainer_offload else 0.0)

    def switch_time_s(self, engine: EngineConfig, trainer_gpus: int) -> float:
        """Seconds per colocated step: every byte out and back, plus ``fixed_s``."""
        t = self.fixed_s + 2.0 * self.bytes_per_gpu(engine, trainer_gpus) / self.host_bandwidth(engine.gpu)
        if not t < math.inf:
            raise FieldError(
                f"the offload's switch time is not finite ({shown(t)} s): check host_bandwidth_bytes_per_s "
                f"({shown(self.host_bandwidth(engine.gpu))}) and fixed_s ({shown(self.fixed_s)})",
                "host_bandwidth_bytes_per_s",
            )
        return t


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
        s = Summary(self.result.summary())  # old metric names read through (issue 43)
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
        # the share of the actor update spent waiting for the busiest rank (0: exactly balanced)
        dealt = {step for step, _ in self.dealt_log}
        actual = sum(p["update_actor"] for step, _, p in self.phase_log if step in dealt)
        s["trainer/rank_wait_share"] = 1.0 - sum(self.balanced_update_s) / actual if actual > 0 else 0.0
        g = self.groups
        s.update(
            groups_trained=float(g.groups_trained) if g else math.nan,
            groups_filtered=float(g.groups_filtered) if g else math.nan,
            groups_expired=float(g.groups_expired) if g else math.nan,
        )
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
    series (``ComputeRun.replica_timeline``). ``routing`` picks the replica of each admitted
    sample (default :class:`~pipesim.policies.replicas.LeastLoaded`, which spreads a group over the
    replicas; ``GroupAffinity(workload.samples_per_prompt)`` keeps a prompt's samples together, so
    that ``EngineConfig.share_group_prefix`` can share their prompt).
    """
    if not isinstance(scenario, Scenario):
        raise refuse("scenario", f"must be a pipesim.Scenario, got {shown(scenario)}")
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
        scenario, placeholder, source=source, trainer=model_trainer, engine_factory=cast(Any, factory)
    )
    p.run()
    for e in engines:
        e.flush()
    T = p.env.now
    result = RunResult(scenario, T, p.episodes, p.updates, p.train_log, p.sync_log, engine="compute")
    group_stats = batching.stats(p) if batching is not None else None
    filtered = group_stats.filtered_ids if group_stats is not None else ()
    over_length = isinstance(p.scenario.batching, DropOverlong)
    ledger = token_ledger(p.episodes, source, engines, filtered, over_length)
    if not ledger.closes():  # a loss no summary would show: refused, not reported
        raise PipelineError(
            f"the token ledger does not close: {ledger.generated:,.0f} tokens generated, "
            f"{ledger.accounted:,.0f} trained, discarded, buffered or in flight (batch policy "
            f"{type(p.scenario.batching).__name__}, weight update {type(p.scenario.weight_update).__name__})"
        )
    stats = [e.stats(T) for e in engines]
    timelines = [e.timeline for e in engines] if record else []
    series = replica_timeline(engines) if record else None
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
