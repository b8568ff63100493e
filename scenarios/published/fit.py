"""The one place the published scenarios choose the trainer's constants, and fit them (transfer).

Under the **stated** protocol every trainer is the global default (the default framework
profile, no step overhead): :func:`trainer_config` with ``fit=None``. Under the **transfer** protocol a study
with a published phase breakdown has one calibration row (named in ``docs/published.md`` before
scoring: verl's 128-GPU 64:64 fully-async row with partial rollouts); :func:`fit_trainer` sets the
two constants of today's trainer from it in closed form, and :func:`trainer_config` with that
:class:`TrainerFit` builds every trainer of the study's other rows:

* ``mfu``: the predicted ``update_actor`` of one published step is ``6 N T / (G P mfu)`` (``N``
  active parameters, ``T`` tokens trained per published step as the stated run trained them,
  ``G`` trainer GPUs of peak ``P``); it equals the published ``update_actor`` ``U`` at
  ``mfu = 6 N T / (G P U)``;
* ``step_overhead_s``: the published step less its ``gen`` and ``update_actor``, over the trainer
  steps in one published step (``k``): ``(step - gen - update_actor) / k``. The predicted ``gen``
  is the step less the trainer's span (:func:`gen_s`), so on a row the model generated itself
  (no colocated switch, no old-log-prob recompute) the fit returns its constants exactly.

The phased trainer (issue 41 item 1) replaces these two constants by a framework profile; it
plugs in here, and nowhere else in :mod:`scenarios.published` names a trainer constant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pipesim.compute import EngineConfig, TrainerConfig


@dataclass(frozen=True)
class TrainerFit:
    """Trainer constants fitted on a calibration row (the transfer protocol)."""

    mfu: float
    step_overhead_s: float
    row: str
    """The calibration row they were fitted on."""


def trainer_config(
    engine: EngineConfig,
    n_gpus: int,
    *,
    old_logp: bool,
    reference: bool = False,
    fit: TrainerFit | None = None,
) -> TrainerConfig:
    """The trainer of ``engine``'s model on ``n_gpus`` GPUs: the global defaults (stated), or the
    constants of ``fit`` (transfer)."""
    if fit is None:
        return TrainerConfig(
            model=engine.model,
            gpu=engine.gpu,
            n_gpus=n_gpus,
            recompute_old_logp=old_logp,
            reference_model=reference,
        )
    return TrainerConfig(
        model=engine.model,
        gpu=engine.gpu,
        n_gpus=n_gpus,
        recompute_old_logp=old_logp,
        reference_model=reference,
        mfu=fit.mfu,
        step_overhead_s=fit.step_overhead_s,
        profile="ideal",  # the one-MFU trainer the two constants were fitted for
    )


def update_actor_s(trainer: TrainerConfig, tokens: float) -> float:
    """Seconds of the policy update over ``tokens`` tokens: forward and backward (6 FLOPs per
    active parameter and token) at the trainer's MFU; no old-log-prob recompute, no overhead
    (verl's ``timing_s/update_actor``)."""
    if trainer.mfu is None:  # a framework profile's trainer: its update_actor phase
        return trainer.phase_times_s(tokens)["update_actor"]
    peak = trainer.n_gpus * trainer.gpu.bf16_flops_per_s * trainer.mfu
    return 6.0 * trainer.model.n_active_params * tokens / peak


def fit_trainer(
    trainer: TrainerConfig,
    tokens_per_step: float,
    k: int,
    step_s: float,
    gen_s: float,
    update_s: float,
    row: str,
) -> TrainerFit:
    """The closed-form fit (module docstring): ``trainer`` is the stated run's, ``tokens_per_step``
    the tokens it trained per published step of ``k`` trainer steps; ``step_s``, ``gen_s`` and
    ``update_s`` are the calibration row's published step, ``gen`` and ``update_actor``."""
    for name, value in (("tokens_per_step", tokens_per_step), ("update_s", update_s), ("step_s", step_s)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    mfu = (
        6.0
        * trainer.model.n_active_params
        * tokens_per_step
        / (trainer.n_gpus * trainer.gpu.bf16_flops_per_s * update_s)
    )
    if not 0 < mfu <= 1:
        raise ValueError(
            f"{row}: the fitted mfu {mfu:.3f} is outside (0, 1]: the row's update_actor is too short"
        )
    return TrainerFit(mfu=mfu, step_overhead_s=max(step_s - gen_s - update_s, 0.0) / k, row=row)
