"""A cluster and a run on it: GPUs, a placement, the compute engine, trainer and ledger together.

:class:`Cluster` is ``n_gpus`` GPUs and a placement: **colocated** (``trainer_gpus=0``: every GPU
serves an engine replica, and the replicas pause while the trainer trains on all of them, the
kernel's ``PipelineConfig.colocated``) or **disaggregated** (``trainer_gpus`` train, the rest
serve ``(n_gpus - trainer_gpus) / tp`` replicas). The replica is the :class:`EngineConfig` (GPU
type, TP degree, vLLM settings). Slots are no longer a knob: each replica takes up to
``slots_per_replica`` episodes (``Cluster.slots_per_replica`` or ``run_compute``'s; default
``max_num_seqs``) and the KV cache and ``max_num_seqs`` decide how many of them run; the
pipeline's ``n_slots`` is set to the total.

Multi-turn workloads (:class:`~pipesim.compute.workload.AgentTurns`): tool calls leave the GPU
and queue for ``env_workers`` environment workers shared by every replica
(:class:`~pipesim.compute.engine.EnvWorkers`, a counting semaphore; a busy sandbox fleet can be
the bottleneck), then the sequence queues for its replica again. An episode keeps its slot through
its tool calls, though it is not resident (vLLM runs only what is on the engine), so with the
default ``max_num_seqs`` slots a replica whose episodes mostly wait on tools decodes a fraction of
``max_num_seqs``: raise ``slots_per_replica`` (a run spec's ``model.episodes_per_replica``).
:func:`tool_slot_note` says when a run looks so, and ``run_compute`` warns it
(:class:`ToolSlotWarning`).

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
``groups_filtered`` and ``groups_expired`` (:data:`~pipesim.compute.compute_run.GROUP_METRICS`; a
run without group batching does not list them, and reads them as NaN:
:class:`~pipesim.compute.compute_run.ComputeSummary`).

:func:`run_compute` runs a :class:`pipesim.Scenario` (its admission, weight-update and batching
policies, batch size, eta and steps) on a cluster with a :class:`TokenWorkload`; the result, a
:class:`~pipesim.compute.compute_run.ComputeRun` (its own module: the run's accounting, apart from
its composition here), has a summary that is the kernel's plus the token ledger, engine and trainer
figures. What it accepts (the scenario, the placed trainer, the group batch policy) is checked in
:mod:`pipesim.compute.run_inputs`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from pipesim.compute.compute_run import GROUP_METRICS as GROUP_METRICS  # re-exported
from pipesim.compute.compute_run import ComputeRun
from pipesim.compute.compute_run import ComputeSummary as ComputeSummary  # re-exported
from pipesim.compute.cost import EngineConfig, ReplicaCost
from pipesim.compute.engine import ComputeReplica
from pipesim.compute.ledger import token_ledger
from pipesim.compute.offload import Offload
from pipesim.compute.overrides import check_overridden
from pipesim.compute.pool import EnvWorkers
from pipesim.compute.run_inputs import check_scenario, group_policy, placed_trainer
from pipesim.compute.series import replica_timeline
from pipesim.compute.source import TokenSource
from pipesim.compute.sync import SyncModel
from pipesim.compute.tool_slots import ToolSlotWarning as ToolSlotWarning  # re-exported
from pipesim.compute.tool_slots import tool_slot_note as tool_slot_note  # re-exported
from pipesim.compute.trainer import DEFAULT_PROFILE, ComputeTrainer, TrainerConfig
from pipesim.compute.workload import TokenWorkload
from pipesim.config import Scenario
from pipesim.core.engine import Pipeline
from pipesim.core.errors import MAX_SEED, MAX_SLOTS, FieldError, PipelineError, check_int, check_number, shown
from pipesim.core.seams import BatchObserver, EngineOptions
from pipesim.core.validate import check_seam, refuse
from pipesim.policies.batching import DropOverlong
from pipesim.policies.groups import WholeGroups
from pipesim.policies.replicas import LeastLoaded, Replicas, Routing, check_routing
from pipesim.results.run import RunResult
from pipesim.workload.chapter_torch import CHAPTER_SEEDS
from pipesim.workload.durations import AgentDurations


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
    slots_per_replica: int | None = None
    """Episodes each replica takes at once (the kernel's slots; ``run_compute``'s
    ``slots_per_replica`` overrides it); None: ``engine.max_num_seqs``. An episode holds its slot
    through its tool calls while ``max_num_seqs`` caps the resident ones, so a multi-turn run
    whose tools dominate needs more slots than ``max_num_seqs`` to keep the batch full."""

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
        per = self.slots_per_replica
        if per is not None:
            check_int("slots_per_replica", per, 1, MAX_SLOTS, "each slot is a Python object")
        slots = self.n_slots
        if per is not None and slots > MAX_SLOTS:
            raise refuse(
                "slots_per_replica",
                f"{per:,} on {self.n_replicas:,} replicas is {slots:,} slots, above the {MAX_SLOTS:,} "
                "one run holds",
            )
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
    def replica_slots(self) -> int:
        """The episodes each replica takes at once: ``slots_per_replica``, else ``max_num_seqs``."""
        return self.engine.max_num_seqs if self.slots_per_replica is None else self.slots_per_replica

    @property
    def n_slots(self) -> int:
        """Every replica's slots: the pipeline's ``n_slots`` of a run on this cluster."""
        return self.n_replicas * self.replica_slots

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
    options: EngineOptions | None = None,
) -> ComputeRun:
    """Run ``scenario``'s policies on ``cluster`` with ``workload`` (see the module docstring).

    ``seed`` (default: the scenario's) seeds the token lengths and a ``"shuffled"`` trainer's
    batch order (its ``run_seed``). A scenario field the cluster sets instead (``n_slots``,
    ``train_time_s``, ``sync_time_s``, ``colocated``, ``replicas``, ``durations``) must be left
    at its default (:mod:`pipesim.compute.overrides`).

    ``trainer`` defaults to the engine's model on the cluster's trainer GPUs at the default MFU;
    one given (to set its MFU, old-log-prob recompute or reference model) must train that model on
    those GPUs (``ValueError`` otherwise: the cluster places the trainer).
    ``switch_time_s`` overrides the colocated offload/reload seconds per step
    (:meth:`Cluster.switch_time_s`; refused on a disaggregated cluster, which never switches).
    A trainer's ``ppo_mini_batch_samples`` may not exceed the scenario's ``batch_size``.
    ``groups``: ``True`` batches whole groups of the workload's ``samples_per_prompt``
    (:class:`~pipesim.policies.groups.WholeGroups`), a ``WholeGroups`` is used as given; either
    replaces the scenario's batch policy.
    ``slots_per_replica`` (default ``cluster.replica_slots``: ``Cluster.slots_per_replica``, else
    ``max_num_seqs``) is the episodes each replica takes at once; a multi-turn episode holds its
    slot through its tool calls (:class:`ToolSlotWarning` when that looks like the limit).
    ``record`` keeps each replica's batch timeline (``ComputeRun.timelines``) and its binned series
    (``ComputeRun.replica_timeline``). ``observer`` sees each batch the trainer takes
    (:class:`~pipesim.core.seams.BatchObserver`: ``pipesim run SPEC`` shows its progress so). ``routing``
    picks the replica of each admitted sample (default :class:`~pipesim.policies.replicas.LeastLoaded`,
    which spreads a group over the replicas; ``GroupAffinity(workload.samples_per_prompt)`` keeps a
    prompt's samples together, so that ``EngineConfig.share_group_prefix`` can share their prompt).
    ``options`` (:class:`~pipesim.core.seams.EngineOptions`, default ``EngineOptions()``) is passed
    to the kernel's pipeline, as a slot run's ``Pipeline(options=...)``: ``EngineOptions.plain()``
    runs with every shortcut off, which must give the same run (``tests/test_small_compute_options.py``).
    """
    check_scenario(scenario)
    if not isinstance(cluster, Cluster):
        raise refuse("cluster", f"must be a Cluster, got {shown(cluster)}")
    if not isinstance(workload, TokenWorkload):
        raise refuse("workload", f"must be a TokenWorkload, got {shown(workload)}")
    if seed is not None:
        check_int("seed", seed, 0, MAX_SEED - 1)
    seed = check_overridden(scenario, cluster.colocated, seed)  # fields the cluster sets instead
    if not isinstance(record, bool):
        raise refuse("record", f"must be a bool, got {shown(record)}")
    if options is not None and not isinstance(options, EngineOptions):
        raise refuse("options", f"must be a pipesim.EngineOptions or None, got {shown(options)}")
    if observer is not None:  # before the cluster's setup, not at the first batch
        check_seam("observer", observer, BatchObserver, "a batch observer")
    eng = cluster.engine
    tcfg = placed_trainer(cluster, trainer)
    per = cluster.replica_slots if slots_per_replica is None else slots_per_replica
    check_int("slots_per_replica", per, 1, MAX_SLOTS, "each slot is a Python object")
    if cluster.n_replicas * per > MAX_SLOTS:
        raise refuse(
            "slots_per_replica",
            f"{per:,} on {cluster.n_replicas:,} replicas is {cluster.n_replicas * per:,} slots, above "
            f"the {MAX_SLOTS:,} one run holds",
        )
    mini, batch = tcfg.ppo_mini_batch_samples, scenario.pipeline.batch_size
    if mini is not None and mini > batch:  # verl asserts train_batch_size >= ppo_mini_batch_size
        raise FieldError(
            f"trainer.ppo_mini_batch_samples ({mini:,}) exceeds the batch (PipelineConfig.batch_size "
            f"{batch:,}), which verl refuses (a mini-batch is a part of the step's batch)",
            "ppo_mini_batch_samples",
        )
    if switch_time_s is not None:
        check_number("switch_time_s", switch_time_s, 0.0)
        if not cluster.colocated:  # it was multiplied by 0: a disaggregated cluster never switches
            raise refuse(
                "switch_time_s",
                "applies to a colocated cluster only (trainer_gpus=0); this one is disaggregated",
            )
    if routing is not None:  # refused here even where one replica never routes (a numpy value has .choose)
        check_routing("routing", routing)
    switch = cluster.switch_time_s() if switch_time_s is None else float(switch_time_s)
    batching = group_policy(scenario, workload, groups)
    n_rep = cluster.n_replicas
    changes: dict[str, Any] = dict(
        n_slots=n_rep * per,
        colocated=cluster.colocated,
        sync_time_s=cluster.sync_time_s(tcfg) if sync_time_s is None else sync_time_s,
        replicas=Replicas(n_rep, LeastLoaded() if routing is None else routing) if n_rep > 1 else None,
    )
    if batching is not None:
        changes["batching"] = batching
    if seed != scenario.seed:  # the run's seed is what its policies read (WholeGroups' filter stream)
        changes["seed"] = seed
        if seed >= CHAPTER_SEEDS:  # the placeholder durations (never drawn here) take any seed
            changes["durations"] = AgentDurations(draws="numpy")
    scenario = scenario.with_(**changes)
    source = TokenSource(workload, np.random.default_rng(seed), context_tokens=eng.context_len)
    tcfg.check_longest_sample(workload.max_sequence_tokens, "trainer.")  # after the context's check
    model_trainer = ComputeTrainer(tcfg, source, switch_s=switch, run_seed=seed)
    cost = ReplicaCost(eng)
    engines: list[ComputeReplica] = []
    pools: list[EnvWorkers] = []

    def factory(p: Pipeline, n_slots: int, index: int) -> ComputeReplica:
        if cluster.env_workers is not None and not pools:
            pools.append(EnvWorkers(p.env, cluster.env_workers))
        e = ComputeReplica(p, n_slots, index, cost, source, record, pools[0] if pools else None)
        engines.append(e)
        return e

    # a filter's rejected groups are replaced: the default pool has room for them (Scenario.pool_for)
    pool = scenario.pool_size or scenario.pool_for(batching if batching is not None else scenario.batching)
    placeholder = [0.0] * pool
    p = Pipeline(
        scenario,
        placeholder,
        source=source,
        observer=observer,
        trainer=model_trainer,
        engine_factory=cast(Any, factory),
        options=EngineOptions() if options is None else options,
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
    run = ComputeRun(
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
    if workload.agent is not None and (note := run.slot_note) is not None:
        warnings.warn(note, ToolSlotWarning, stacklevel=2)
    return run
