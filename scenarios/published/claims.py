"""The claims of ``shared/reference/published_claims.md``: one :class:`Claim` per scored row (every
step time, every published phase: verl's ``gen`` and ``update_actor``; speedups and gains as
ratios; the trend as pass or fail), each with the function that predicts it for a
:class:`~scenarios.published.common.Variant` (a length band's end, a seed, the trainer constants)
and a diagnosis printed beside it. :func:`verl_fit` fits the transfer protocol's constants on the
study's calibration row (``docs/published.md``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scenarios.published import areal
from scenarios.published.april import APRIL_GAIN_README, APRIL_OFFPOLICY_README, april_run
from scenarios.published.areal import (
    AREAL_ETA,
    AREAL_STEPS,
    areal_run,
    areal_sync,
)
from scenarios.published.common import POINT, Measured, Variant, rollout_throughput
from scenarios.published.fit import TrainerFit, fit_trainer
from scenarios.published.roll import ROLL_DIAG_RATIOS, ROLL_DIAG_STEPS, roll_run
from scenarios.published.verl import (
    VERL_MINI,
    VERL_N,
    VERL_REQUIRE_BATCHES,
    VERL_SYNC_STEP,
    verl_async,
    verl_colocate,
    verl_diag,
    verl_step_s,
)


@dataclass(frozen=True)
class Claim:
    claim: str
    system: str
    source: str
    unit: str
    published: float
    predict: Callable[[Variant], float]
    diagnosis: Callable[[Variant], str] | None = None
    published_diagnosis: str = ""
    phase: str = "step"
    """What is scored: ``step`` (a step time or a total), ``gen`` or ``update_actor`` (verl's
    phases), ``speedup`` or ``gain`` (ratios), ``trend`` (pass or fail)."""
    study: str = ""
    """A study with a published phase breakdown (the transfer protocol applies to its rows)."""
    calibration: bool = False
    """Part of the study's calibration row: fitted on under transfer, never scored there."""
    reads_calibration: bool = False
    """A ratio whose one side is the study's calibration row (verl's 2.35x, over the 64:64 async
    step the transfer fit sets): shown under transfer, not scored there (not a prediction)."""
    profile_calibration: bool = False
    """Part of the row the default framework profile was set from
    (:data:`pipesim.compute.profiles.CALIBRATION_ROW`): shown under both protocols, never scored
    (its prediction is not independent of it; under transfer the fit keeps the profile's
    ``fwd_efficiency``, which that row's ``old_log_prob`` set). Its ``gen`` is not one: the engine
    predicts it, and no fit reads it but as the part of the step that is not the remainder."""


VERL_SRC = "volcengine/verl recipe/fully_async_policy/README.md"
AREAL_SRC = "inclusionAI/AReaL blog/AReaL_v0_3.md; arXiv 2505.24298"
VERL_STUDY = "verl fully_async_policy"
VERL_CALIBRATION = "verl 128 GPUs (64:64) async partial rollout 0.5"
"""The transfer protocol's calibration row (named in docs/published.md before any scoring)."""
VERL_PROFILE_ROW = "verl 64 GPUs colocate sync"
"""The row the default framework profile ``fsdp2-dense`` was set from
(:data:`pipesim.compute.profiles.CALIBRATION_ROW`): a calibration row under both protocols."""


def _areal_trend(v: Variant = POINT) -> float:
    """1.0 when the trend holds (:attr:`~scenarios.published.areal.Trend.holds`: no eta step of
    :func:`~scenarios.published.areal.areal_trend_verdict` falls, its paired 95% interval below 0,
    and the whole range rises), else 0.0 (``areal.areal_run`` is looked up on its module, so a
    test can replace it)."""
    return 1.0 if areal.areal_trend_verdict(v).holds else 0.0


def _areal_trend_diag(v: Variant = POINT) -> str:
    """The rule's verdict and the rule before's (every step rises), then each step."""
    seeds = ",".join(str(s) for s in areal.AREAL_TREND_SEEDS)
    return f"trained tokens/s paired over seeds {seeds}, 95% t: {areal.areal_trend_verdict(v)}"


def _areal_diag(m: Measured, eta: int) -> str:
    servers = m.summary.get("n_replicas", 0.0)
    return f"{servers:.0f} servers, eta {eta}: step {m.steady_step_s:.1f} s, train {m.steady_train_s:.1f} s"


def _april_gain(v: Variant) -> float:
    return rollout_throughput(april_run(True, 8, v)) / rollout_throughput(april_run(False, 8, v))


def _april_diag(v: Variant) -> str:
    """Rollout seconds per step, and (not scored) the gain in trained *tokens* per rollout second
    (the first groups to complete are the short ones, so samples per second favour APRIL more),
    and APRIL's own off-policy ratio (resumed prefixes over the tokens decoded plus those,
    ``partial_rollout/off_policy_ratio``) against the README's, over the run's 8 steps."""
    b, a = april_run(False, 8, v), april_run(True, 8, v)
    gb, ga = 1.0 / rollout_throughput(b), 1.0 / rollout_throughput(a)
    tokens = (a.tokens_trained / a.steps / ga) / (b.tokens_trained / b.steps / gb) - 1.0
    off = a.summary.get("partial_rollout/off_policy_ratio", math.nan)
    return (
        f"rollout per step: sync {gb:.1f} s, APRIL {ga:.1f} s; tokens/s gain {100 * tokens:+.0f}%; "
        f"off-policy ratio {100 * off:.0f}% (README: about {100 * APRIL_OFFPOLICY_README:.0f}%)"
    )


def _roll_diag(v: Variant) -> str:
    """The steps, and (not scored) the speedup at each ratio of :data:`ROLL_DIAG_RATIOS`: the
    paper puts most of the gain at a small ratio."""
    s, a = roll_run(False, 6, v), roll_run(True, 6, v)
    preemptions = a.summary.get("preemptions", 0.0)
    by_ratio = "/".join(
        f"{s.steady_step_s / roll_run(True, ROLL_DIAG_STEPS, v, r).steady_step_s:.2f}"
        for r in ROLL_DIAG_RATIOS
    )
    ratios = "/".join(str(r) for r in ROLL_DIAG_RATIOS)
    return (
        f"sync step {s.steady_step_s:.0f} s (train {s.steady_train_s:.0f}), async step "
        f"{a.steady_step_s:.0f} s (train {a.steady_train_s:.0f}, {preemptions:.0f} preemptions); "
        f"speedup at ratio {ratios}: {by_ratio}"
    )


def _verl_rows(
    label: str, run: Callable[[Variant], Measured], k: int, step: float, gen: float, update: float
) -> tuple[Claim, ...]:
    """One README row: its step time, ``gen`` and ``update_actor``, each scored on its own."""
    cal = label == VERL_CALIBRATION
    set_profile = label == VERL_PROFILE_ROW
    pub = f"gen {gen:g}, update_actor {update:g}"
    common = dict(
        system="verl", source=VERL_SRC, unit="s", study=VERL_STUDY, calibration=cal,
        profile_calibration=set_profile,
    )  # fmt: skip
    return (
        Claim(f"{label}, s/step", published=step, predict=lambda v: verl_step_s(run(v), k),
              diagnosis=lambda v: verl_diag(run(v), k), published_diagnosis=pub, **common),  # type: ignore[arg-type]
        # the profile row's gen is scored: the profile sets trainer phases only, and the published
        # gen enters it only as a subtrahend of its remainder (which the step row carries)
        Claim(f"{label}, gen", published=gen, predict=lambda v: run(v).gen_s(k), phase="gen",
              **{**common, "profile_calibration": False}),  # type: ignore[arg-type]
        Claim(f"{label}, update_actor", published=update, predict=lambda v: run(v).update_actor_s(k),
              phase="update_actor", **common),  # type: ignore[arg-type]
    )  # fmt: skip


VERL_ROWS: tuple[Claim, ...] = (
    *_verl_rows("verl 128 GPUs colocate sync", lambda v: verl_colocate(128, v), 1, 356.30, 177.85, 113.81),
    *_verl_rows(
        "verl 128 GPUs (64:64) stream off-policy",
        lambda v: verl_async(128, 0.0, False, v),
        VERL_SYNC_STEP,
        231.34,
        128.47,
        98.77,
    ),
    *_verl_rows(
        VERL_CALIBRATION, lambda v: verl_async(128, 0.5, True, v), VERL_SYNC_STEP, 150.63, 33.14, 113.16
    ),
    *_verl_rows(VERL_PROFILE_ROW, lambda v: verl_colocate(64, v), 1, 365.28, 150.72, 133.41),
    *_verl_rows(
        "verl 64 GPUs (32:32) async partial rollout 0.5",
        lambda v: verl_async(64, 0.5, True, v),
        VERL_SYNC_STEP,
        189.26,
        28.46,
        156.98,
    ),
)


def verl_fit() -> TrainerFit:
    """The transfer profile: ``pipesim calibrate`` of the log written from :data:`VERL_CALIBRATION`
    and the run spec of its setup (:func:`scenarios.published.calpath.transfer_fit`, memoised)."""
    from scenarios.published.calpath import transfer_fit

    return transfer_fit()


def verl_direct_fit() -> TrainerFit:
    """The transfer profile fitted directly on :data:`VERL_CALIBRATION` (its stated run at the
    point: its trainer, the tokens and samples it trained per trainer step; the row's published
    step, ``gen`` and ``update_actor``): what :func:`verl_fit` was before it went through
    ``pipesim calibrate``, kept as the reference it equals (``tests/test_published_calpath.py``)."""
    rows = {c.phase: c.published for c in VERL_ROWS if c.calibration}
    m = verl_async(128, 0.5, True, POINT)
    assert m.trainer is not None
    samples = VERL_REQUIRE_BATCHES * VERL_MINI * VERL_N  # one trainer step: require_batches mini-batches
    # the tokens per sample calibrate deals the log's rows: the spec's run at the lengths it fitted
    # (a simulation input shared with calibrate; the trainer's fit below is this function's own)
    from pipesim.calibrate import with_lengths
    from pipesim.calibrate.trainer import spread
    from scenarios.published.calpath import FIRST_STEP, REPEAT, calibrated

    rs, cal = calibrated()
    at = np.arange(FIRST_STEP, FIRST_STEP + REPEAT)
    spreads = spread(with_lengths(rs, cal.values), np.full(REPEAT, m.steady_tokens), steps=at)
    return fit_trainer(
        m.trainer,
        m.steady_tokens,
        samples,
        VERL_SYNC_STEP,
        rows["step"],
        rows["gen"],
        rows["update_actor"],
        VERL_CALIBRATION,
        spreads,
    )


CLAIMS: tuple[Claim, ...] = (
    *VERL_ROWS,
    Claim(
        "verl 128 GPUs async over colocate, 400 steps",
        "verl",
        VERL_SRC,
        "x",
        2.35,
        lambda v: (
            verl_step_s(verl_colocate(128, v), 1) / verl_step_s(verl_async(128, 0.5, True, v), VERL_SYNC_STEP)
        ),
        phase="speedup",
        study=VERL_STUDY,
        reads_calibration=True,
    ),
    Claim(
        "AReaL 1.5B synchronous, 1,000 steps",
        "AReaL",
        AREAL_SRC,
        "h",
        41.0,
        lambda v: areal_sync(v).total_s(AREAL_STEPS) / 3600,
        lambda v: _areal_diag(areal_sync(v), 0),
    ),
    Claim(
        "AReaL 1.5B asynchronous, 1,000 steps",
        "AReaL",
        AREAL_SRC,
        "h",
        14.8,
        lambda v: areal_run(AREAL_ETA, 8, areal.AREAL_TRAIN_GPUS, v).total_s(AREAL_STEPS) / 3600,
        lambda v: _areal_diag(areal_run(AREAL_ETA, 8, areal.AREAL_TRAIN_GPUS, v), AREAL_ETA),
    ),
    Claim(
        "AReaL 1.5B async over sync speedup",
        "AReaL",
        AREAL_SRC,
        "x",
        2.77,
        lambda v: (
            areal_sync(v).total_s(AREAL_STEPS)
            / areal_run(AREAL_ETA, 8, areal.AREAL_TRAIN_GPUS, v).total_s(AREAL_STEPS)
        ),
        phase="speedup",
    ),
    Claim(
        "AReaL throughput grows with eta",
        "AReaL",
        "inclusionAI/AReaL blog/AReaL_v0_3.md Fig. 7",
        "trend (1 = holds)",
        1.0,
        _areal_trend,
        _areal_trend_diag,
        phase="trend",
    ),
    Claim(
        "APRIL rollout throughput gain (+22.5% as a ratio)",
        "APRIL",
        "arXiv 2509.18521; RLsys-Foundation/APRIL",
        "x",
        APRIL_GAIN_README,
        _april_gain,
        _april_diag,
        phase="gain",
    ),
    Claim(
        "ROLL Flash async over sync speedup (RLVR)",
        "ROLL",
        "arXiv 2510.11345",
        "x",
        2.24,
        lambda v: roll_run(False, 6, v).steady_step_s / roll_run(True, 6, v).steady_step_s,
        _roll_diag,
        phase="speedup",
    ),
)


RUNS = (verl_colocate, verl_async, areal_run, april_run, roll_run)
"""The memoised experiments the claims share (``cache_clear`` each to rerun)."""
