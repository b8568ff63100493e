"""The one place the published scenarios choose the trainer's constants, and fit them (transfer).

Under the **stated** protocol every trainer is the global default (the default framework
profile, ``fsdp2-dense``, no step overhead): :func:`trainer_config` with ``fit=None``. Under the
**transfer** protocol a study with a published phase breakdown has one calibration row (named in
``docs/published.md`` before scoring: verl's 128-GPU 64:64 fully-async row with partial rollouts);
:func:`fit_trainer` refits the stated run's framework profile on it with
:func:`pipesim.compute.phasefit.fit_profile`, and :func:`trainer_config` with that
:class:`TrainerFit` builds every trainer of the study's other rows on the fitted profile.

The row publishes a step time, ``gen`` and ``update_actor`` for a published step of ``k`` trainer
steps (no ``old_log_prob``: the async runs take the rollout's log-probs). That is two phase
observations of one trainer step, trained as the stated run trained it (its GPUs, batch knobs,
tokens and samples per trainer step):

* ``update_actor``: ``U / k`` seconds; it sets ``fwd_bwd_efficiency``;
* ``remainder``: ``(step - gen - U) / k`` seconds (the trainer's span less its update: the
  predicted ``gen`` is the step less the trainer's span, :meth:`Measured.gen_s`); it sets
  ``sample_s``.

Two equations, two constants: the others (``fwd_efficiency``, ``micro_batch_s``,
``optimizer_step_s``, ``step_s``) stay the profile's (:data:`FIXED`). So on a row the model
generated itself on a profile that differs only in those two constants the fit returns that
profile (``tests/test_published.py``). No number is named here: the row's values come from the
claims, the profile from the stated trainer.

The table's transfer rows take this profile through the user's path:
:func:`scenarios.published.claims.verl_fit` is ``pipesim calibrate`` of a log written from the
row's published means and the row's run spec (:mod:`scenarios.published.calpath`,
``examples/published/``), which forms the same two observations and fits the same two constants;
:func:`fit_trainer` stays as its reference (``claims.verl_direct_fit``; the two are equal to 1e-9,
``tests/test_published_calpath.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipesim.compute import EngineConfig, TrainerConfig
from pipesim.compute.phasefit import PhaseObservation, ProfileFit, fit_profile
from pipesim.compute.phases import FrameworkProfile
from pipesim.core.validate import FieldError

FIXED = ("fwd_efficiency", "micro_batch_s", "optimizer_step_s", "step_s")
"""The profile constants the transfer fit keeps (one row of two phases cannot set them)."""


@dataclass(frozen=True)
class TrainerFit:
    """A framework profile fitted on a calibration row (the transfer protocol)."""

    profile: FrameworkProfile
    row: str
    """The calibration row it was fitted on."""


def trainer_config(
    engine: EngineConfig,
    n_gpus: int,
    *,
    old_logp: bool,
    reference: bool = False,
    fit: TrainerFit | None = None,
    batch: Mapping[str, Any] | None = None,
) -> TrainerConfig:
    """The trainer of ``engine``'s model on ``n_gpus`` GPUs: the global default profile (stated),
    or the profile of ``fit`` (transfer); ``batch``: the run's stated batch knobs
    (:class:`~pipesim.compute.TrainerConfig`'s ``ppo_mini_batch_samples``, ``micro_batch_tokens``,
    ``log_prob_micro_batch_tokens``, ``sequence_parallel``, ``batch_order``), never a constant."""
    return TrainerConfig(
        model=engine.model,
        gpu=engine.gpu,
        n_gpus=n_gpus,
        recompute_old_logp=old_logp,
        reference_model=reference,
        profile=None if fit is None else fit.profile,
        **dict(batch or {}),
    )


def update_actor_s(trainer: TrainerConfig, tokens: float) -> float:
    """Seconds of the policy update over ``tokens`` tokens (verl's ``timing_s/update_actor``): the
    trainer's ``update_actor`` phase, or with a one-MFU ``mfu`` the forward and backward (6 FLOPs
    per active parameter and token) at that MFU."""
    if trainer.mfu is None:
        return trainer.phase_times_s(tokens)["update_actor"]
    peak = trainer.n_gpus * trainer.gpu.bf16_flops_per_s * trainer.mfu
    return 6.0 * trainer.model.n_active_params * tokens / peak


def observations(
    trainer: TrainerConfig,
    tokens_per_step: float,
    samples_per_step: int,
    k: int,
    step_s: float,
    gen_s: float,
    update_s: float,
    spreads: Sequence[tuple[float, ...] | None] = (None,),
) -> list[PhaseObservation]:
    """The calibration row as two phase observations of one trainer step (module docstring), one
    pair per entry of ``spreads`` (each a draw of the step's tokens per sample, for a profile whose
    ranks wait for the busiest; None: the mean)."""
    remainder = max(step_s - gen_s - update_s, 0.0) / k
    upd = [
        PhaseObservation(trainer, "update_actor", tokens_per_step, samples_per_step, update_s / k, s)
        for s in spreads
    ]
    return [
        *upd,
        *(
            PhaseObservation(trainer, "remainder", tokens_per_step, samples_per_step, remainder)
            for _ in spreads
        ),
    ]


def fit_trainer(
    trainer: TrainerConfig,
    tokens_per_step: float,
    samples_per_step: int,
    k: int,
    step_s: float,
    gen_s: float,
    update_s: float,
    row: str,
    spreads: Sequence[tuple[float, ...] | None] = (None,),
) -> TrainerFit:
    """The fit of the module docstring: ``trainer`` is the stated run's (its profile is the one
    refitted), ``tokens_per_step`` and ``samples_per_step`` what it trained per trainer step;
    ``step_s``, ``gen_s`` and ``update_s`` the row's published step, ``gen`` and ``update_actor``
    over ``k`` trainer steps; ``spreads`` as in :func:`observations`. ``FieldError`` naming ``row``
    when the fit leaves a constant out of range (an ``update_actor`` too short for any efficiency in
    (0, 1])."""
    obs = observations(trainer, tokens_per_step, samples_per_step, k, step_s, gen_s, update_s, spreads)
    base = trainer.framework
    try:
        fitted: ProfileFit = fit_profile(base, obs, fix=FIXED)
    except ValueError as e:  # a FieldError keeps its field (observations), the row in front
        raise FieldError(f"{row}: {e}", getattr(e, "field", "")) from None
    name = f"{base.name} (fitted)"
    return TrainerFit(dataclasses.replace(fitted.profile, name=name, source=f"fitted on {row}"), row)
