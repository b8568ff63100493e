"""The claims of ``shared/reference/published_claims.md``: one :class:`Claim` per row, each with
the function that predicts it from its system's scenarios and a diagnosis printed beside it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from scenarios.published import areal
from scenarios.published.april import april_run
from scenarios.published.areal import (
    AREAL_ETA,
    AREAL_STEPS,
    AREAL_TREND_ETAS,
    areal_run,
    areal_sync,
    areal_throughput,
)
from scenarios.published.common import Measured, does_not_fall, rollout_throughput
from scenarios.published.roll import roll_run
from scenarios.published.verl import VERL_SYNC_STEP, verl_async, verl_colocate, verl_diag, verl_step_s


@dataclass(frozen=True)
class Claim:
    claim: str
    system: str
    source: str
    unit: str
    published: float
    predict: Callable[[], float]
    diagnosis: Callable[[], str] | None = None
    published_diagnosis: str = ""


VERL_SRC = "volcengine/verl recipe/fully_async_policy/README.md"
AREAL_SRC = "inclusionAI/AReaL blog/AReaL_v0_3.md; arXiv 2505.24298"


def _areal_trend() -> float:
    """1.0 when predicted throughput does not fall as eta grows (``areal.areal_run`` is looked up
    on its module, so a test can replace it)."""
    runs = [areal.areal_run(eta) for eta in AREAL_TREND_ETAS]
    return 1.0 if does_not_fall([areal_throughput(m) for m in runs]) else 0.0


def _areal_trend_diag() -> str:
    runs = {e: areal.areal_run(e) for e in AREAL_TREND_ETAS}
    return "steps/h: " + ", ".join(f"eta {e} {areal_throughput(m):.1f}" for e, m in runs.items())


def _areal_diag(m: Measured, eta: int) -> str:
    servers = m.summary.get("n_replicas", 0.0)
    return f"{servers:.0f} servers, eta {eta}: step {m.steady_step_s:.1f} s, train {m.steady_train_s:.1f} s"


def _april_diag() -> str:
    """Rollout seconds per step, and (not scored) the gain in trained *tokens* per rollout second:
    the first groups to complete are the short ones, so samples per second favour APRIL more."""
    b, a = april_run(False), april_run(True)
    gb, ga = 1.0 / rollout_throughput(b), 1.0 / rollout_throughput(a)
    tokens = (a.tokens_trained / a.steps / ga) / (b.tokens_trained / b.steps / gb) - 1.0
    return f"rollout per step: sync {gb:.1f} s, APRIL {ga:.1f} s; tokens/s gain {100 * tokens:+.0f}%"


def _roll_diag() -> str:
    s, a = roll_run(False), roll_run(True)
    preemptions = a.summary.get("preemptions", 0.0)
    return (
        f"sync step {s.steady_step_s:.0f} s (train {s.steady_train_s:.0f}), async step "
        f"{a.steady_step_s:.0f} s (train {a.steady_train_s:.0f}, {preemptions:.0f} preemptions)"
    )


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "verl 128 GPUs colocate sync, s/step",
        "verl",
        VERL_SRC,
        "s",
        356.30,
        lambda: verl_step_s(verl_colocate(128), 1),
        lambda: verl_diag(verl_colocate(128), 1),
        "gen 177.85, update_actor 113.81",
    ),
    Claim(
        "verl 128 GPUs (64:64) stream off-policy, s/step",
        "verl",
        VERL_SRC,
        "s",
        231.34,
        lambda: verl_step_s(verl_async(128, 0.0, False), VERL_SYNC_STEP),
        lambda: verl_diag(verl_async(128, 0.0, False), VERL_SYNC_STEP),
        "gen 128.47, update_actor 98.77",
    ),
    Claim(
        "verl 128 GPUs (64:64) async partial rollout 0.5, s/step",
        "verl",
        VERL_SRC,
        "s",
        150.63,
        lambda: verl_step_s(verl_async(128, 0.5, True), VERL_SYNC_STEP),
        lambda: verl_diag(verl_async(128, 0.5, True), VERL_SYNC_STEP),
        "gen 33.14, update_actor 113.16",
    ),
    Claim(
        "verl 64 GPUs colocate sync, s/step",
        "verl",
        VERL_SRC,
        "s",
        365.28,
        lambda: verl_step_s(verl_colocate(64), 1),
        lambda: verl_diag(verl_colocate(64), 1),
        "gen 150.72, update_actor 133.41",
    ),
    Claim(
        "verl 64 GPUs (32:32) async partial rollout 0.5, s/step",
        "verl",
        VERL_SRC,
        "s",
        189.26,
        lambda: verl_step_s(verl_async(64, 0.5, True), VERL_SYNC_STEP),
        lambda: verl_diag(verl_async(64, 0.5, True), VERL_SYNC_STEP),
        "gen 28.46, update_actor 156.98",
    ),
    Claim(
        "verl 128 GPUs async over colocate, 400 steps",
        "verl",
        VERL_SRC,
        "x",
        2.35,
        lambda: verl_step_s(verl_colocate(128), 1) / verl_step_s(verl_async(128, 0.5, True), VERL_SYNC_STEP),
    ),
    Claim(
        "AReaL 1.5B synchronous, 1,000 steps",
        "AReaL",
        AREAL_SRC,
        "h",
        41.0,
        lambda: areal_sync().total_s(AREAL_STEPS) / 3600,
        lambda: _areal_diag(areal_sync(), 0),
    ),
    Claim(
        "AReaL 1.5B asynchronous, 1,000 steps",
        "AReaL",
        AREAL_SRC,
        "h",
        14.8,
        lambda: areal_run(AREAL_ETA).total_s(AREAL_STEPS) / 3600,
        lambda: _areal_diag(areal_run(AREAL_ETA), AREAL_ETA),
    ),
    Claim(
        "AReaL 1.5B async over sync speedup",
        "AReaL",
        AREAL_SRC,
        "x",
        2.77,
        lambda: areal_sync().total_s(AREAL_STEPS) / areal_run(AREAL_ETA).total_s(AREAL_STEPS),
    ),
    Claim(
        "AReaL throughput does not fall as eta grows",
        "AReaL",
        "inclusionAI/AReaL blog/AReaL_v0_3.md Fig. 7",
        "trend (1 = holds)",
        1.0,
        _areal_trend,
        _areal_trend_diag,
    ),
    Claim(
        "APRIL rollout throughput gain",
        "APRIL",
        "arXiv 2509.18521; RLsys-Foundation/APRIL",
        "%",
        22.5,
        lambda: 100.0 * (rollout_throughput(april_run(True)) / rollout_throughput(april_run(False)) - 1.0),
        _april_diag,
    ),
    Claim(
        "ROLL Flash async over sync speedup (RLVR)",
        "ROLL",
        "arXiv 2510.11345",
        "x",
        2.24,
        lambda: roll_run(False).steady_step_s / roll_run(True).steady_step_s,
        _roll_diag,
    ),
)


RUNS = (verl_colocate, verl_async, areal_run, april_run, roll_run)
"""The cached experiments the claims share (``cache_clear`` each to rerun)."""
