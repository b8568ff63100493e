"""What every published-claim scenario shares: the choices made once, and measuring a run.

Where a source leaves a value out it is chosen **once**, here (``UNSTATED``; the length profiles
``ZERO_RL`` and ``LONG_COT``, one per kind of model), with the reason in a comment, and the same
choice is used for every claim. :func:`measure` runs a scenario on the compute-grounded engine
and keeps what the claims read (:class:`Measured`: steady step, training seconds, the headline
extrapolated over a published step count).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import pipesim
from pipesim.compute import EngineConfig, LogNormalLengths, TokenWorkload, TrainerConfig

# --------------------------------------------------------------------------------------------
# Choices made once, for every claim, where a source leaves a value out.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LengthProfile:
    """A response-length distribution relative to the cap: log-normal inside a prompt group
    (``sigma``) times a per-group difficulty (``difficulty_sigma``), the cap at the
    ``1 - truncated_share`` quantile of the two together."""

    name: str
    truncated_share: float
    sigma: float
    difficulty_sigma: float = 0.5
    """Log-space spread of the per-group (per-prompt) length multiplier: some prompts are harder."""

    def median_tokens(self, max_response_tokens: int) -> float:
        z = NormalDist().inv_cdf(1.0 - self.truncated_share)
        return max_response_tokens * math.exp(-z * math.hypot(self.sigma, self.difficulty_sigma))


# No source gives its length distribution (verl's README says only that it changes during
# training), so two profiles are chosen, by the kind of model, and each model below uses the one of
# its kind -- never per claim:
ZERO_RL = LengthProfile("base model, R1-Zero-style RL", truncated_share=0.001, sigma=1.0)
"""A base model (Qwen2.5-Math-7B) under DAPO: short answers with a long tail; the cap far out
(28K for answers of a thousand or two: 0.1% truncate; DAPO's 4K overlong buffer penalises only the
last stretch before it). Spread 1.0: the longest of a batch are tens of times the median (ROLL
Flash's introduction). Check on it: with 1% truncating instead, verl's published update_actor
(113 s for 512 x 16 samples on 64 H20s) would need more FLOP/s than the H20's peak."""
LONG_COT = LengthProfile("long-CoT reasoning model", truncated_share=0.04, sigma=0.6)
"""A distilled or thinking model (R1-Distill-Qwen, Qwen3 in thinking mode): responses of about a
third of the cap, a few percent truncated -- these models think up to their budget, and the cap is
raised "to minimize output truncation" (AReaL's v0.3 blog), not set far beyond the typical length."""

PROMPT_TOKENS = 256
"""Prompt length of a math problem with its chat template: none of the sources states the mean
(verl's ``max_prompt_length`` is 2,048, a cap); a competition math problem is a few hundred tokens."""

TREND_TOLERANCE = 0.02
"""A trend "does not fall": each eta's throughput at least (1 - tolerance) times the previous one's
(the runs are short, so a 2% dip is noise, not a trend)."""


@dataclass(frozen=True)
class Unstated:
    """Setup values a claim's sources do not give: the one default used for all of them.

    Earlier versions also chose ROLL's batch, group size, response cap and trainer share here;
    ROLL's own documentation gives them now (``scenarios.published.roll``)."""

    gpu: str = "h800"
    """ROLL Flash is from Alibaba, AReaL's results are on H800, ROLL's Qwen3-8B example names
    "8xH800": the H800 for an unstated GPU."""


UNSTATED = Unstated()


def math_workload(profile: LengthProfile, max_response_tokens: int, samples_per_prompt: int) -> TokenWorkload:
    """A math-RL workload: ``profile``'s lengths under a cap, prompts of :data:`PROMPT_TOKENS`."""
    return TokenWorkload(
        response=LogNormalLengths(profile.median_tokens(max_response_tokens), profile.sigma),
        prompt=PROMPT_TOKENS,
        samples_per_prompt=samples_per_prompt,
        max_response_tokens=max_response_tokens,
        max_prompt_tokens=max(PROMPT_TOKENS, 4096),
        difficulty_sigma=profile.difficulty_sigma,
    )


# --------------------------------------------------------------------------------------------
# Measuring a run: the steady step and the extrapolated headline
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """What one simulated run gives: per kernel step, steady state after ``warmup`` steps."""

    steps: int
    warmup: int
    ends: tuple[float, ...]
    """Simulated time at the end of each training step."""
    train_s: tuple[float, ...]
    sync_s: float
    """Mean seconds of one weight sync."""
    syncs: int
    tokens_trained: float
    wall_s: float
    summary: dict[str, float] = field(repr=False, default_factory=dict)

    @property
    def steady_step_s(self) -> float:
        e, w = self.ends, self.warmup
        return (e[-1] - e[w - 1]) / (len(e) - w) if w else e[-1] / len(e)

    @property
    def steady_train_s(self) -> float:
        t = self.train_s[self.warmup :]
        return sum(t) / len(t)

    def total_s(self, n_steps: int) -> float:
        """Seconds for ``n_steps`` kernel steps: the warm-up as simulated, then steady steps."""
        head = self.ends[self.warmup - 1] if self.warmup else 0.0
        return head + (n_steps - self.warmup) * self.steady_step_s


def _lazy(name: str) -> Any:
    """A name :mod:`pipesim.compute` exports lazily (its ``__getattr__``; typed ``object``)."""
    import pipesim.compute

    return getattr(pipesim.compute, name)


def measure(
    scenario: pipesim.Scenario,
    cluster: Any,
    workload: TokenWorkload,
    trainer: TrainerConfig | None,
    warmup: int,
    seed: int = 0,
) -> Measured:
    run_compute: Any = _lazy("run_compute")
    t0 = time.perf_counter()
    run = run_compute(scenario, cluster, workload, seed=seed, trainer=trainer)
    wall = time.perf_counter() - t0
    log = run.result.train_log
    steps = len(log)
    if steps <= warmup:
        raise RuntimeError(f"{scenario.name}: {steps} steps trained, need more than warmup={warmup}")
    syncs = run.result.sync_log
    sync_s = sum(b - a for a, b, _ in syncs) / len(syncs) if syncs else 0.0
    s = run.summary()
    return Measured(
        steps=steps,
        warmup=warmup,
        ends=tuple(end for _, _, end, _ in log),
        train_s=tuple(end - start for _, start, end, _ in log),
        sync_s=sync_s,
        syncs=len(syncs),
        tokens_trained=float(s["tokens_trained"]),
        wall_s=wall,
        summary=s,
    )


def _cluster(engine: EngineConfig, n_gpus: int, trainer_gpus: int) -> Any:
    cluster: Any = _lazy("Cluster")
    return cluster(engine=engine, n_gpus=n_gpus, trainer_gpus=trainer_gpus)


def _trainer(engine: EngineConfig, n_gpus: int, *, old_logp: bool, reference: bool = False) -> TrainerConfig:
    # mfu is the global DEFAULT_TRAINER_MFU: never passed here
    return TrainerConfig(
        model=engine.model,
        gpu=engine.gpu,
        n_gpus=n_gpus,
        recompute_old_logp=old_logp,
        reference_model=reference,
    )


def does_not_fall(values: list[float], tolerance: float = TREND_TOLERANCE) -> bool:
    """Each value at least ``(1 - tolerance)`` times the one before it."""
    return all(b >= a * (1 - tolerance) for a, b in zip(values, values[1:], strict=False))


def rollout_throughput(m: Measured) -> float:
    """Samples delivered per second of rollout (the step minus training and the weight sync)."""
    gen = m.steady_step_s - m.steady_train_s - m.sync_s * m.syncs / m.steps
    return 1.0 / gen
