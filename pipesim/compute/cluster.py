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

Weight sync (default): the weights (bf16) cross the slowest link on the way, one direction of
NVLink inside a node (at most 8 GPUs), the per-GPU network otherwise; colocated designs reshard in
place over NVLink. Offload and reload of a colocated engine's KV cache and weights are not
modelled. Pass ``sync_time_s`` to override.

:func:`run_compute` runs a :class:`pipesim.Scenario` (its admission, weight-update and batching
policies, batch size, eta and steps) on a cluster with a :class:`TokenWorkload`; the result's
:meth:`ComputeRun.summary` is the kernel's summary plus the token ledger, engine and trainer figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from pipesim.compute.cost import EngineConfig, ReplicaCost
from pipesim.compute.engine import ComputeReplica, EnvWorkers
from pipesim.compute.ledger import TokenLedger, token_ledger
from pipesim.compute.trainer import ComputeTrainer, TrainerConfig
from pipesim.compute.workload import TokenSource, TokenWorkload
from pipesim.config import Scenario
from pipesim.core.engine import Pipeline
from pipesim.policies.replicas import LeastLoaded, Replicas
from pipesim.results.run import RunResult


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """``n_gpus`` GPUs running ``engine`` replicas, and ``trainer_gpus`` of them training (0: colocated)."""

    engine: EngineConfig
    n_gpus: int
    trainer_gpus: int = 0
    env_workers: int | None = None
    """Environment workers (sandboxes) shared by all replicas' tool calls; None: unlimited."""

    def __post_init__(self) -> None:
        if not isinstance(self.engine, EngineConfig):
            raise ValueError(f"engine must be an EngineConfig, got {self.engine!r}")
        if isinstance(self.n_gpus, bool) or not isinstance(self.n_gpus, int) or self.n_gpus < 1:
            raise ValueError(f"n_gpus must be a positive int, got {self.n_gpus!r}")
        t = self.trainer_gpus
        if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < self.n_gpus:
            raise ValueError(
                f"trainer_gpus must be in [0, n_gpus) (0: colocated; n_gpus leaves no engine), got {t!r}"
            )
        w = self.env_workers
        if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w < 1):
            raise ValueError(f"env_workers must be a positive int or None, got {w!r}")
        rollout = self.n_gpus - t
        if rollout % self.engine.tp:
            raise ValueError(
                f"the {rollout} rollout GPUs must be a multiple of the engine's tp ({self.engine.tp})"
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

    def sync_time_s(self) -> float:
        """Seconds to move the bf16 weights to the engines (see the module docstring)."""
        gpu = self.engine.gpu
        link = (
            gpu.nvlink_bandwidth_per_direction_bytes_per_s
            if self.colocated or self.n_gpus <= 8
            else gpu.network_bandwidth_bytes_per_s
        )
        return self.engine.model.weight_bytes("bf16") / link


@dataclass
class ComputeRun:
    """One run on a cluster: the kernel's result, the ledger, and per-replica and trainer figures."""

    result: RunResult
    ledger: TokenLedger
    engines: list[dict[str, Any]]
    trainer_log: list[tuple[int, float, float]]
    cluster: Cluster
    timelines: list[list[tuple[float, int, int, float, float, bool]]] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        s = dict(self.result.summary())
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
            preemptions=float(sum(e["preemptions"] for e in self.engines)),
            tool_calls=float(sum(e["tool_calls"] for e in self.engines)),
            recompute_tokens=sum(e["recompute_tokens"] for e in self.engines),
            prefill_tokens=sum(e["prefill_tokens"] for e in self.engines),
            compute_bound_share=sum(e["compute_bound_share"] for e in self.engines) / len(self.engines),
            ledger_closes=float(self.ledger.closes()),
            n_replicas=float(c.n_replicas),
            kv_budget_tokens=float(c.engine.kv_budget_tokens),
        )
        return s


def run_compute(
    scenario: Scenario,
    cluster: Cluster,
    workload: TokenWorkload,
    *,
    seed: int = 0,
    trainer: TrainerConfig | None = None,
    slots_per_replica: int | None = None,
    sync_time_s: float | None = None,
    record: bool = False,
) -> ComputeRun:
    """Run ``scenario``'s policies on ``cluster`` with ``workload`` (see the module docstring).

    ``trainer`` defaults to the engine's model on the cluster's trainer GPUs at the default MFU.
    ``record`` keeps each replica's batch timeline (``ComputeRun.timelines``).
    """
    if not isinstance(scenario, Scenario):
        raise ValueError(f"scenario must be a pipesim.Scenario, got {scenario!r}")
    if not isinstance(cluster, Cluster):
        raise ValueError(f"cluster must be a Cluster, got {cluster!r}")
    eng = cluster.engine
    per = eng.max_num_seqs if slots_per_replica is None else slots_per_replica
    if isinstance(per, bool) or not isinstance(per, int) or per < 1:
        raise ValueError(f"slots_per_replica must be a positive int, got {per!r}")
    n_rep = cluster.n_replicas
    changes: dict[str, Any] = dict(
        n_slots=n_rep * per,
        colocated=cluster.colocated,
        sync_time_s=cluster.sync_time_s() if sync_time_s is None else sync_time_s,
        replicas=Replicas(n_rep, LeastLoaded()) if n_rep > 1 else None,
    )
    scenario = scenario.with_(**changes)
    source = TokenSource(workload, np.random.default_rng(seed), context_tokens=eng.context_len)
    tcfg = trainer or TrainerConfig(model=eng.model, gpu=eng.gpu, n_gpus=cluster.n_trainer_gpus)
    model_trainer = ComputeTrainer(tcfg, source)
    cost = ReplicaCost(eng)
    engines: list[ComputeReplica] = []
    pools: list[EnvWorkers] = []

    def factory(p: Pipeline, n_slots: int, index: int) -> ComputeReplica:
        if cluster.env_workers is not None and not pools:
            pools.append(EnvWorkers(p.env, cluster.env_workers))
        e = ComputeReplica(p, n_slots, index, cost, source, record, pools[0] if pools else None)
        engines.append(e)
        return e

    placeholder = [0.0] * (scenario.pool_size or scenario.default_pool_size)
    p = Pipeline(
        scenario, placeholder, source=source, trainer=model_trainer, engine_factory=cast(Any, factory)
    )
    p.run()
    for e in engines:
        e.flush()
    T = p.env.now
    result = RunResult(p.scenario, T, p.episodes, p.updates, p.train_log, p.sync_log)
    ledger = token_ledger(p.episodes, source, engines)
    stats = [e.stats(T) for e in engines]
    timelines = [e.timeline for e in engines] if record else []
    p.release()
    return ComputeRun(result, ledger, stats, model_trainer.log, cluster, timelines)
