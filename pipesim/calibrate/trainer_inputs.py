"""What the trainer's fit reads of a log and a spec, step by step: each step's tokens, the
remainder, the spec's trainer, and the samples dealt to its ranks.

:func:`tokens` is a step's ``T = batch * (prompt + response)``; :func:`config` the spec's trainer
with its old step overhead at 0; :func:`remainder` the step less ``gen``, the phases
(:data:`TRAINER_PHASES`), a colocated engine's offload and reload (:func:`switch_s`) and a sync the
step holds (:mod:`pipesim.calibrate.steptime`). A log keeps each step's mean, not its samples, so
a profile whose ranks wait for the busiest needs them dealt: :func:`dealt` takes them from the
spec's own run at its seed, :func:`spread` scales them to a step's tokens, and
:func:`row_members` splits a row that covers several trainer steps (verl's fully-async rows,
:mod:`pipesim.calibrate.rows`) into those steps.

These are the fit's inputs, derived from the log and the spec, and the residuals
(:mod:`pipesim.calibrate.residuals`) read them too; :mod:`pipesim.calibrate.trainer` keeps the
fit itself (the observations, the least squares, its fallbacks and notes). Apart, how a step is
read changes without touching how the constants are solved for, and the other way round.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pipesim.calibrate.frame import (
    check_batches,
    check_calibrate_args,
    check_series,
    check_spec,
    check_steps,
)
from pipesim.calibrate.log import LogError, TrainingLog
from pipesim.calibrate.simulated import report
from pipesim.calibrate.steptime import includes_sync, spec_sync_s, trainer_span_s
from pipesim.compute.phases import FrameworkProfile
from pipesim.compute.trainer import TrainerConfig
from pipesim.core.errors import shown
from pipesim.plan.build import engine_config, trainer_config
from pipesim.plan.runspec import RunSpec

__all__ = [
    "MAX_DEALT_STEPS",
    "TRAINER_PHASES",
    "Member",
    "config",
    "dealt",
    "remainder",
    "row_members",
    "spread",
    "switch_s",
    "tokens",
]

TRAINER_PHASES = ("timing_s/update_actor", "timing_s/old_log_prob", "timing_s/ref")


def switch_s(rs: RunSpec) -> float:
    """A colocated engine's offload and reload seconds per step (0 when disaggregated)."""
    from pipesim.compute.cluster import Cluster

    check_spec(rs)
    eng = engine_config(rs.plan, rs.design.tp)
    return float(
        Cluster(engine=eng, n_gpus=rs.plan.n_gpus, trainer_gpus=rs.design.trainer_gpus).switch_time_s()
    )


def tokens(log: TrainingLog, rs: RunSpec) -> np.ndarray | None:
    """Each step's tokens, ``batch * (prompt + response)``; None without the response mean."""
    check_calibrate_args(log, rs, min_steps=1)
    wl = rs.plan.workload
    if not log.has("response_length/mean"):
        return None
    if log.has("prompt_length/mean"):
        prompt = log.col("prompt_length/mean")
    elif isinstance(wl.prompt, int):
        prompt = np.full(len(log), float(wl.prompt))
    else:
        return None
    return rs.plan.batch_size * (prompt + log.col("response_length/mean"))


def config(rs: RunSpec, profile: FrameworkProfile | None = None) -> TrainerConfig:
    """The spec's trainer (its profile, or ``profile``), the old step overhead at 0."""
    check_spec(rs)
    tcfg = trainer_config(rs.plan, rs.design)
    prof = tcfg.framework if profile is None else profile
    return dataclasses.replace(tcfg, profile=prof, mfu=None, step_overhead_s=0.0)


def remainder(log: TrainingLog, rs: RunSpec) -> np.ndarray | None:
    """Each step's remainder (module docstring); None when the log cannot give it."""
    check_calibrate_args(log, rs, min_steps=1)
    tcfg = config(rs)
    need = ["timing_s/step", "timing_s/gen", "timing_s/update_actor"]
    need += ["timing_s/old_log_prob"] * tcfg.recompute_old_logp + ["timing_s/ref"] * tcfg.reference_model
    if not all(log.has(c) for c in need):
        return None
    holds = includes_sync(log, rs)  # the step's meaning: steptime
    rest = trainer_span_s(log, holds, switch_s(rs), spec_sync_s(log, rs))
    if rest is None:
        return None
    for c in TRAINER_PHASES:
        if log.has(c):
            rest = rest - log.col(c)
    return np.asarray(rest, float)


def _per_row(per_row: object) -> int:
    """``per_row`` as a count of trainer steps a row covers (an integer >= 1), or a LogError naming it."""
    if isinstance(per_row, bool) or not isinstance(per_row, int | np.integer) or per_row < 1:
        raise LogError(
            f"per_row must be an integer >= 1 (trainer steps a row covers), got {shown(per_row)}", "per_row"
        )
    return int(per_row)


MAX_DEALT_STEPS: int | None = None
"""No cap: :func:`dealt` runs the spec through the log's last step, so each step is dealt as that
run dealt it. It was 20, and a longer log reused those 20 dealings in turn: its step ``s`` was
fitted with step ``s mod 20``'s samples, an error in the regressor that read a noiseless 100-step
log of the spec's own run at ``fwd_bwd_efficiency`` 0.858 for 0.40 and ``micro_batch_s`` 0 for
0.2, with intervals that missed (a user's walkthrough). Kept (None) for the name's importers."""


def dealt(rs: RunSpec, steps: int, per_row: int = 1) -> list[tuple[int, ...]] | None:
    """The tokens of each sample as the spec's own run deals its batches to the ranks, step by step
    (``ComputeRun.dealt_log``; its first ``steps`` rows of ``per_row`` trainer steps, every one:
    each of the log's rows is matched to its own, :func:`spread`): a log gives a step's mean, not
    its samples, and the spec's run at its seed has the design's batch order, its warm-up and the
    workload's spread (the scale comes from the log: :func:`spread`). None for an exactly balanced
    profile (nothing to deal). A synchronous colocated design's step trains its own draws, so they
    are drawn without the engines (:mod:`pipesim.calibrate.dealing`: the same samples, 0.2 s of CPU
    for a 1,000-step dealing of the sample spec where its run took 2.9 s); any other design runs the
    log's steps (docs/calibrate.md, Time)."""
    if config(rs).framework.balance == "exact":
        return None
    from pipesim.calibrate.dealing import drawn, draws_alone
    from pipesim.plan.runspec import run

    _per_row(per_row)
    n = max(1, int(check_steps(steps, None)[0]))  # trainer steps (``per_row`` rows of them)
    if draws_alone(rs):
        report(
            f"simulating the draws of {n:,} steps to deal their samples to the trainer's ranks "
            "(a synchronous colocated step trains its own draws: no engine runs)"
        )
        return drawn(rs, n)
    report(f"simulating {n:,} steps to deal their samples to the trainer's ranks")
    out = [per for _, per in run(dataclasses.replace(rs, steps=n)).dealt_log]
    return out or None


def spread(
    rs: RunSpec,
    t: np.ndarray,
    batches: list[tuple[int, ...]] | None = None,
    steps: np.ndarray | None = None,
) -> list[tuple[float, ...] | None]:
    """Each step's tokens per sample, for a profile whose ranks wait for the busiest
    (:mod:`pipesim.compute.balance`): the row of step ``s`` (``steps``; default 0, 1, ...) takes
    ``batches[s]`` (default :func:`dealt` of the spec, through the log's last step; batches given
    shorter than that are taken in turn past their end) scaled to its tokens
    ``t``. None per step for an exactly balanced profile."""
    t = check_series("t", t, positive=True)
    if config(rs).framework.balance == "exact":
        return [None] * len(t)
    at = np.arange(len(t)) if steps is None else check_steps(steps, len(t))
    batches = dealt(rs, int(at.max()) + 1 if len(at) else 1) if batches is None else check_batches(batches)
    if not batches:
        return [None] * len(t)
    out: list[tuple[float, ...] | None] = []
    for step, total in zip(at, t, strict=True):
        per = np.asarray(batches[int(step) % len(batches)], float)
        out.append(tuple(per * (float(total) / per.sum())) if per.sum() > 0 else None)
    return out


Member = tuple[float, tuple[float, ...] | None]
"""One trainer step of a log row: its tokens and each sample's (None: every rank holds the mean)."""


def row_members(
    rs: RunSpec,
    t: np.ndarray,
    batches: list[tuple[int, ...]] | None = None,
    steps: np.ndarray | None = None,
    per_row: int = 1,
) -> list[list[Member]]:
    """The trainer steps of each row of ``t`` tokens (a step's mean over the row): a row per step is
    that step, dealt as :func:`spread` deals it; a row of ``per_row`` steps ``K`` (verl's
    fully-async rows, :mod:`pipesim.calibrate.rows`) numbered ``s`` is the spec's run's steps
    ``s K .. s K + K - 1`` as it dealt them (:func:`dealt`, in turn past their end), scaled
    together to the row's mean tokens ``t`` (each step keeps its share of the row's tokens). An
    exactly balanced profile's row is one step at ``t`` (no step's own tokens are known)."""
    k = _per_row(per_row)
    if k == 1:
        return [[(float(x), s)] for x, s in zip(t, spread(rs, t, batches, steps), strict=True)]
    t = check_series("t", t, positive=True)
    at = np.arange(len(t)) if steps is None else check_steps(steps, len(t))
    if config(rs).framework.balance == "exact":
        return [[(float(x), None)] for x in t]
    last = (int(at.max()) + 1) * k if len(at) else 1
    batches = dealt(rs, last, k) if batches is None else check_batches(batches)
    if not batches:
        return [[(float(x), None)] for x in t]
    out: list[list[Member]] = []
    for step, total in zip(at, t, strict=True):
        per = [np.asarray(batches[(int(step) * k + j) % len(batches)], float) for j in range(k)]
        f = float(total) / float(np.mean([b.sum() for b in per]))
        out.append([(float(b.sum()) * f, tuple(b * f)) for b in per])
    return out
