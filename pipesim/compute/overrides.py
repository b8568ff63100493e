"""What :func:`~pipesim.compute.cluster.run_compute` takes from a :class:`~pipesim.Scenario`,
and what it refuses because the cluster, the trainer or the workload sets it.

The compute engine keeps a scenario's policies, batch size, steps and staleness bound, but its
slots are the sequences the engines hold, its step time comes from the tokens trained, its sync
from the model and the interconnect, and its samples have tokens, not durations drawn up front.
A scenario that set one of those used to run as if it had not (``sync_time_s=100`` and
``train_time_s=500`` gave the same summary as the defaults), so a field that differs from its
default is a ``ValueError`` naming it and saying what sets it instead.
"""

from __future__ import annotations

from pipesim.config import PipelineConfig, Scenario
from pipesim.core.errors import shown
from pipesim.core.validate import FieldError
from pipesim.workload.durations import AgentDurations

_SET_BY_CLUSTER = (
    ("n_slots", "the sequences the engines hold: Cluster and run_compute(slots_per_replica=...) set it"),
    ("train_time_s", "the trainer's time comes from the tokens trained (run_compute(trainer=TrainerConfig))"),
    ("sync_time_s", "the cluster sizes the sync from the model; run_compute(sync_time_s=...) overrides it"),
)


def check_overridden(scenario: Scenario, cluster_colocated: bool, seed: int | None) -> int:
    """ValueError naming a scenario field the compute engine would ignore; returns the seed
    (``seed``, or the scenario's where ``seed`` is None; both given and different is an error)."""
    defaults = PipelineConfig()
    cfg = scenario.pipeline
    for name, instead in _SET_BY_CLUSTER:
        value = getattr(cfg, name)
        if value != getattr(defaults, name):
            raise FieldError(
                f"PipelineConfig.{name} ({shown(value)}) is not used by the compute engine: {instead}",
                f"pipeline.{name}",
            )
    if cfg.colocated and not cluster_colocated:
        raise FieldError(
            "PipelineConfig.colocated is True but the cluster is split (trainer_gpus given): "
            "the Cluster's placement decides colocation",
            "pipeline.colocated",
        )
    if scenario.replicas is not None:
        raise FieldError(
            "Scenario.replicas is set by the cluster (one per engine replica): pass the routing "
            "as run_compute(routing=...)",
            "replicas",
        )
    if scenario.durations != AgentDurations():
        raise FieldError(
            f"Scenario.durations ({shown(scenario.durations)}) is not used by the compute engine, whose "
            "samples have tokens: give the lengths in the TokenWorkload",
            "durations",
        )
    if seed is None:
        return scenario.seed
    if scenario.seed not in (0, seed):
        raise FieldError(f"seed {seed} and Scenario.seed {scenario.seed} differ: give one of them", "seed")
    return seed
