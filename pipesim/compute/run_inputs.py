"""What :func:`~pipesim.compute.cluster.run_compute` accepts: its scenario checked, and the
trainer and batch policy its arguments imply, each refused by the field's name.

* :func:`check_scenario`: a :class:`pipesim.Scenario` whose policies are all rebuilt (a saved
  run's placeholder is refused before any work), without a ``timeout`` or ``failures``: their draws
  compare against a duration drawn at launch, and a compute sample has tokens instead.
* :func:`placed_trainer`: the cluster places the trainer, so one given must train the engines'
  model on their GPU type and on the placement's GPUs (all of them colocated, ``trainer_gpus``
  otherwise); the default is that trainer at the default MFU.
* :func:`group_policy`: ``groups=True`` batches whole groups of the workload's
  ``samples_per_prompt``, a :class:`~pipesim.policies.groups.WholeGroups` is used as given, and
  ``False`` keeps a scenario's own ``WholeGroups`` (checked against the workload) or none.

Split from :mod:`pipesim.compute.cluster`, which composes the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipesim.compute.trainer import TrainerConfig
from pipesim.compute.workload import TokenWorkload
from pipesim.config import Scenario
from pipesim.core.errors import FieldError, shown
from pipesim.core.validate import refuse
from pipesim.policies.groups import WholeGroups
from pipesim.policies.missing import refuse_missing

if TYPE_CHECKING:
    from pipesim.compute.cluster import Cluster

__all__ = ["check_scenario", "group_policy", "placed_trainer"]


def check_scenario(scenario: Scenario) -> None:
    """Refuse a scenario the compute engine cannot run (see the module docstring), naming the field."""
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


def placed_trainer(cluster: Cluster, trainer: TrainerConfig | None) -> TrainerConfig:
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


def group_policy(
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
