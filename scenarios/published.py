"""Predict published results of real systems. ``python -m scenarios.published [--json FILE]``.

One scenario per row of ``shared/reference/published_claims.md`` (verl, AReaL, APRIL, ROLL), each
built **from the setup its source states** on the compute-grounded engine (:mod:`pipesim.compute`):
the model, the GPU type and count, the placement and split, the batch and group size, the length
limits and the staleness knobs, run through the system's preset (:mod:`scenarios.systems`). The
hardware-efficiency constants are the engine's global ones (:data:`pipesim.compute.DEFAULT_EFFICIENCY`,
:data:`pipesim.compute.DEFAULT_TRAINER_MFU`, ``EngineConfig``'s defaults); no scenario sets one.

Where a source leaves a value out it is chosen **once**, below (``UNSTATED``; the length profiles
``ZERO_RL`` and ``LONG_COT``, one per kind of model), with the reason in a comment, and the same
choice is used for every claim. Each setup value's source is in the comment next to it.

Steady state and extrapolation: a run simulates a few steps (``steps`` in each experiment), long
enough for the pipeline to fill; the steady step time is the mean over the steps after the first
``warmup`` ones, and a headline over the published step count ``N`` is the first ``warmup`` steps
as simulated plus ``N - warmup`` steady steps. The response-length distribution is stationary
here (the sources' lengths drift during training; see ``docs/published.md``).

The printed table has the claim, source, published and predicted values and their ratio; verl's
rows also print the predicted generation wait and training seconds per step beside the published
``gen`` and ``update_actor`` columns (diagnosis only, not scored). ``--json FILE`` writes the
scored rows as a list of ``{"claim", "system", "source", "unit", "published", "predicted"}``.
AReaL's "throughput grows with eta" is a trend row: ``predicted`` is 1.0 when predicted throughput
does not fall (by more than :data:`TREND_TOLERANCE`) as eta grows, else 0.0.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from statistics import NormalDist
from typing import Any

import pipesim
from pipesim.compute import (
    GPUS,
    MODELS,
    EngineConfig,
    LogNormalLengths,
    ModelSpec,
    TokenWorkload,
    TrainerConfig,
)
from scenarios import systems

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
    """Setup values a claim's source does not give: the one default used for all of them."""

    prompts_per_step: int = 512
    """verl's and AReaL's batch: 512 prompts (verl's ``train_batch_size``; AReaL's
    ``train_bs_n_seqs``)."""
    samples_per_prompt: int = 16
    """GRPO group size of verl (``rollout.n``) and AReaL (16 responses per question)."""
    max_response_tokens: int = 28 * 1024
    """The long-CoT cap of verl (28K) and AReaL (27K)."""
    gpu: str = "h800"
    """ROLL Flash is from Alibaba, AReaL's results are on H800: the H800 for an unstated GPU."""
    trainer_share: float = 0.25
    """A disaggregated split whose ratio is not stated: a quarter of the GPUs train. AReaL's 3:1
    (inference:training) is the one split stated for a long-CoT asynchronous run; verl's even
    64:64 is for a base model's short answers, where training weighs more against generation."""


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


# --------------------------------------------------------------------------------------------
# verl recipe/fully_async_policy (README "Experiments"; exp/qwen2-7B-math_128/*/*.sh)
# --------------------------------------------------------------------------------------------

VERL_MODEL: ModelSpec = dataclasses.replace(MODELS["qwen2.5-math-7b"], max_context_len=32768)
"""Qwen2.5-Math-7B with ``max_position_embeddings`` 32,768: the recipe's scripts say "modify the
max_position_embeddings in config.json to 32768" and pass
``override_config.max_position_embeddings=32768``."""
VERL_PROMPTS, VERL_N, VERL_MINI = 512, 16, 32  # train_batch_size, rollout.n, ppo_mini_batch_size (README)
VERL_REQUIRE_BATCHES, VERL_SYNC_STEP = 4, 4  # require_batches, trigger_parameter_sync_step (README)
VERL_STEPS = 400  # the README's step count (total time over 400 steps)


def verl_engine() -> EngineConfig:
    return EngineConfig(
        model=VERL_MODEL,
        gpu=GPUS["h20"],  # README: "Machine: H20"
        tp=4,  # scripts: gen_tp=4 (rollout.tensor_model_parallel_size)
        gpu_memory_utilization=0.80,  # scripts: rollout.gpu_memory_utilization=0.80
        max_num_seqs=1024,  # verl's rollout config default (max_num_seqs: 1024)
        max_model_len=2048 + 28 * 1024,  # max_prompt_length 2K + max_response_length 28K (scripts)
    )


def verl_workload() -> TokenWorkload:
    return math_workload(ZERO_RL, 28 * 1024, VERL_N)  # README: max_response_length 28K, rollout.n 16


@cache
def verl_colocate(n_gpus: int) -> Measured:
    """Colocated sync (``verl.trainer.main_ppo``, hybrid engine): every GPU generates the 512 x 16
    samples, then every GPU trains them; old log-probs recomputed (the README's old_log_prob column)."""
    eng = verl_engine()
    batch = VERL_PROMPTS * VERL_N
    cfg = pipesim.PipelineConfig(batch_size=batch, steps=3, max_staleness=0)
    sc = pipesim.Scenario(
        pipeline=cfg,
        name=f"verl colocate {n_gpus}",
        admission=pipesim.CountThrottle(),
        weight_update=pipesim.Drain(),
    )
    cl = _cluster(eng, n_gpus, 0)
    return measure(sc, cl, verl_workload(), _trainer(eng, n_gpus, old_logp=True), warmup=1)


@cache
def verl_async(n_gpus: int, staleness_threshold: float, partial_rollout: bool) -> Measured:
    """verl fully async on an even split (README: 64:64 of 128, 32:32 of 64). One kernel step is one
    trainer step of require_batches x ppo_mini_batch_size = 128 prompts; the README's "step" is
    trigger_parameter_sync_step = 4 of them (512 prompts). old_log_prob comes from the rollout
    (``use_rollout_log_probs``; the README's old_log_prob column is empty), so it is not recomputed."""
    eng = verl_engine()
    train_gpus = n_gpus // 2
    cl = _cluster(eng, n_gpus, train_gpus)
    # fully_async_rollouter: max_concurrent_samples = servers * 16 prompts, each of rollout.n samples
    concurrent = cl.n_replicas * 16 * VERL_N
    published_steps = 4
    sc = systems.verl_fully_async(
        staleness_threshold=staleness_threshold,
        trigger_parameter_sync_step=VERL_SYNC_STEP,
        partial_rollout=partial_rollout,
        require_batches=VERL_REQUIRE_BATCHES,
        ppo_mini_batch_size=VERL_MINI * VERL_N,
        max_concurrent_samples=concurrent,
        steps=published_steps * VERL_SYNC_STEP,
    )
    return measure(sc, cl, verl_workload(), _trainer(eng, train_gpus, old_logp=False), warmup=VERL_SYNC_STEP)


def verl_step_s(m: Measured, kernel_steps_per_step: int) -> float:
    """The README's seconds per step: the 400-step total (extrapolated) over 400."""
    return m.total_s(VERL_STEPS * kernel_steps_per_step) / VERL_STEPS


def verl_diag(m: Measured, k: int) -> str:
    train = m.steady_train_s * k
    step = m.steady_step_s * k
    return f"wait {step - train:.1f} s, train {train:.1f} s"


# --------------------------------------------------------------------------------------------
# AReaL (blog/AReaL_v0_3.md; paper arXiv 2505.24298)
# --------------------------------------------------------------------------------------------

AREAL_STEPS = 1000  # blog, Table 2: 1,000 PPO steps
AREAL_ETA = 4
"""max_head_offpolicyness for the 1.5B math run: the blog's "moderate staleness (eta <= 4) has
minimal impact", and AReaL's async-PPO examples use ``max_head_offpolicyness=4``."""


def areal_engine() -> EngineConfig:
    # actor.bf16=False in the nightly runner: AReaL trains in fp32 there; the trainer model
    # counts bf16 peak FLOPs at the global MFU (not modelled, see docs/published.md)
    return EngineConfig(
        model=MODELS["deepseek-r1-distill-qwen-1.5b"],  # blog: R1-Distill-Qwen-1.5B
        gpu=GPUS["h800"],  # AReaL's README: "16 nodes, each equipped with 8 H800 GPUs"
        tp=1,  # one GPU per SGLang server (allocation_mode sglang.d96p1t1)
        max_model_len=PROMPT_TOKENS + 27 * 1024,
    )


def areal_workload() -> TokenWorkload:
    # 16 responses per question, 27K maximum generation length (blog; 27 x 1024 = the runner's 27,648)
    return math_workload(LONG_COT, 27 * 1024, 16)


AREAL_GPUS = 128  # 16 nodes x 8
AREAL_TRAIN_GPUS = AREAL_GPUS // 4
"""AReaL's quickstart for 16 nodes: "12 nodes for generation, 4 nodes for training",
``allocation_mode=sglang.d96p1t1+d32p1t1`` (96 SGLang servers at TP 1, 32 trainer GPUs)."""


AREAL_PROMPTS = 512
"""Prompts per step (``dataset.train_bs_n_seqs=512``, with ``group_size=16`` and
``ppo.gen.max_new_tokens=27648``, in AReaL's nightly runner of the 1.5B 16-node run)."""
AREAL_SYNC_TRAIN_GPUS = 64
"""The synchronous 1.5B 16-node run (AReaL's nightly runner, realhf ``ppo-math``):
``allocation_mode=sglang.d64m1p1+d64p1m1``, 64 GPUs generate and 64 train, one phase at a time."""


@cache
def areal_run(eta: int, steps: int = 8, train_gpus: int = AREAL_TRAIN_GPUS) -> Measured:
    """AReaL on 128 H800s (``train_gpus`` training, the rest SGLang servers) at staleness bound
    ``eta``: interruptible rollouts under its staleness throttle (:func:`scenarios.systems.areal`).
    eta = 0 runs one phase at a time (AReaL's docs: ``max_head_offpolicyness=0`` "will essentially
    replicate the behavior of synchronous PPO"). Decoupled PPO recomputes the proximal log-probs."""
    eng = areal_engine()
    batch = AREAL_PROMPTS * 16
    sc = systems.areal(max_head_offpolicyness=eta, batch_size=batch, steps=steps)
    cl = _cluster(eng, AREAL_GPUS, train_gpus)
    tr = _trainer(eng, train_gpus, old_logp=True)
    return measure(sc, cl, areal_workload(), tr, warmup=min(2, steps - 1))


def areal_sync() -> Measured:
    """Synchronous AReaL of the blog's Table 2: eta 0 on the synchronous run's 64:64 allocation."""
    return areal_run(0, train_gpus=AREAL_SYNC_TRAIN_GPUS)


def areal_throughput(m: Measured) -> float:
    """Trained samples per hour at steady state (one step is 512 x 16 samples)."""
    return 3600.0 / m.steady_step_s


AREAL_TREND_ETAS = (0, 1, 2, 4, 8)


# --------------------------------------------------------------------------------------------
# APRIL (arXiv 2509.18521; RLsys-Foundation/APRIL,
# scripts/partial_rollout/qwen/grpo/run-qwen3-4B-dapo-partial.sh)
# --------------------------------------------------------------------------------------------


def april_engine() -> EngineConfig:
    return EngineConfig(
        model=MODELS["qwen3-4b"],  # script: Qwen3-4B (README's results table)
        gpu=GPUS["h100-sxm"],  # README: "we reproduced gains on 8xH100 and 8xMI300"
        tp=2,  # --rollout-num-gpus-per-engine 2
        gpu_memory_utilization=0.6,  # --sglang-mem-fraction-static 0.6
        max_model_len=PROMPT_TOKENS + 16384,  # --rollout-max-response-len 16384
    )


APRIL_PROMPTS, APRIL_N, APRIL_OVERSAMPLE = (
    32,
    8,
    64,
)  # --rollout-batch-size, --n-samples-per-prompt, --over-sampling-batch-size


@cache
def april_run(partial: bool, steps: int = 8) -> Measured:
    """slime colocated on 8 GPUs (``--colocate``): the baseline generates the 32 x 8 samples and
    trains (train.py, Drain, eta 0); APRIL over-samples 64 prompts' worth, trains the first 256 to
    finish and carries the rest over (re-prefilled, :func:`scenarios.systems.april`). slime's
    ``--use-kl-loss`` loads the reference model (``--ref-load``), so its forward is counted."""
    eng = april_engine()
    batch = APRIL_PROMPTS * APRIL_N
    if partial:
        sc = systems.april(oversample_factor=APRIL_OVERSAMPLE / APRIL_PROMPTS, batch_size=batch, steps=steps)
    else:
        cfg = pipesim.PipelineConfig(batch_size=batch, steps=steps, max_staleness=0, colocated=True)
        sc = pipesim.Scenario(
            pipeline=cfg, name="slime sync", admission=pipesim.CountThrottle(), weight_update=pipesim.Drain()
        )
    cl = _cluster(eng, 8, 0)
    tr = _trainer(eng, 8, old_logp=True, reference=True)
    wl = math_workload(LONG_COT, 16384, APRIL_N)  # Qwen3-4B thinks (--apply-chat-template)
    return measure(sc, cl, wl, tr, warmup=2)


def rollout_throughput(m: Measured) -> float:
    """Samples delivered per second of rollout (the step minus training and the weight sync)."""
    gen = m.steady_step_s - m.steady_train_s - m.sync_s * m.syncs / m.steps
    return 1.0 / gen


# --------------------------------------------------------------------------------------------
# ROLL Flash (arXiv 2510.11345): Qwen3-8B, sync vs async on the same GPUs
# --------------------------------------------------------------------------------------------

ROLL_GPUS = 128  # paper Fig. 1b: throughput scaling with GPU count, up to 128 GPUs
ROLL_RATIO = 2  # "most of the gain at a small async_generation_ratio": a ratio of 2


def roll_engine() -> EngineConfig:
    return EngineConfig(
        model=MODELS["qwen3-8b"],  # paper Fig. 1b: Qwen3-8B (Base and Think)
        gpu=GPUS[UNSTATED.gpu],
        tp=1,
        max_model_len=PROMPT_TOKENS + UNSTATED.max_response_tokens,
    )


@cache
def roll_run(asynchronous: bool, steps: int = 6) -> Measured:
    """ROLL-Sync colocated (every GPU generates, then trains) against ROLL Flash asynchronous on a
    split of the same GPUs (:func:`scenarios.systems.roll` with the ratio above)."""
    eng = roll_engine()
    batch = UNSTATED.prompts_per_step * UNSTATED.samples_per_prompt
    wl = math_workload(LONG_COT, UNSTATED.max_response_tokens, UNSTATED.samples_per_prompt)
    if asynchronous:
        train_gpus = int(ROLL_GPUS * UNSTATED.trainer_share)
        sc = systems.roll(async_generation_ratio=ROLL_RATIO, batch_size=batch, steps=steps)
        cl = _cluster(eng, ROLL_GPUS, train_gpus)
        return measure(sc, cl, wl, _trainer(eng, train_gpus, old_logp=True), warmup=2)
    cfg = pipesim.PipelineConfig(batch_size=batch, steps=min(steps, 3), max_staleness=0)
    sc = pipesim.Scenario(
        pipeline=cfg, name="ROLL sync", admission=pipesim.CountThrottle(), weight_update=pipesim.Drain()
    )
    return measure(sc, _cluster(eng, ROLL_GPUS, 0), wl, _trainer(eng, ROLL_GPUS, old_logp=True), warmup=1)


# --------------------------------------------------------------------------------------------
# The claims
# --------------------------------------------------------------------------------------------


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


def does_not_fall(values: list[float], tolerance: float = TREND_TOLERANCE) -> bool:
    """Each value at least ``(1 - tolerance)`` times the one before it."""
    return all(b >= a * (1 - tolerance) for a, b in zip(values, values[1:], strict=False))


def _areal_trend() -> float:
    return 1.0 if does_not_fall([areal_throughput(areal_run(eta)) for eta in AREAL_TREND_ETAS]) else 0.0


def _areal_trend_diag() -> str:
    return "steps/h: " + ", ".join(f"eta {e} {areal_throughput(areal_run(e)):.1f}" for e in AREAL_TREND_ETAS)


def _areal_diag(m: Measured, eta: int) -> str:
    servers = m.summary.get("n_replicas", 0.0)
    return f"{servers:.0f} servers, eta {eta}: step {m.steady_step_s:.1f} s, train {m.steady_train_s:.1f} s"


def _april_diag() -> str:
    b, a = april_run(False), april_run(True)
    gb, ga = 1.0 / rollout_throughput(b), 1.0 / rollout_throughput(a)
    return f"rollout per step: sync {gb:.1f} s, APRIL {ga:.1f} s"


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


def predict(claims: tuple[Claim, ...] = CLAIMS) -> list[dict[str, Any]]:
    """The rows: each claim's published and predicted value (and the diagnosis text)."""
    out = []
    for c in claims:
        pred = float(c.predict())
        out.append(
            {
                "claim": c.claim,
                "system": c.system,
                "source": c.source,
                "unit": c.unit,
                "published": c.published,
                "predicted": pred,
                "_diagnosis": c.diagnosis() if c.diagnosis else "",
                "_published_diagnosis": c.published_diagnosis,
            }
        )
    return out


def within(row: dict[str, Any], tolerance: float = 0.25) -> bool:
    return abs(row["predicted"] / row["published"] - 1.0) <= tolerance


def table(rows: list[dict[str, Any]]) -> str:
    header = ["claim", "source", "unit", "published", "predicted", "ratio", "within 25%", "diagnosis"]
    body = []
    for r in rows:
        diag = r["_diagnosis"]
        if r["_published_diagnosis"]:
            diag = f"published {r['_published_diagnosis']}; predicted {diag}"
        body.append(
            [
                r["claim"],
                r["source"].split(";")[0],
                r["unit"],
                f"{r['published']:g}",
                f"{r['predicted']:.2f}",
                f"{r['predicted'] / r['published']:.2f}",
                "yes" if within(r) else "no",
                diag,
            ]
        )
    widths = [max(len(x[i]) for x in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(b) for b in body])


def json_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = ("claim", "system", "source", "unit", "published", "predicted")
    return [{k: r[k] for k in keys} for r in rows]


def write_json(rows: list[dict[str, Any]], path: str) -> None:
    with open(path, "w") as f:
        json.dump(json_rows(rows), f, indent=1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scenarios.published", description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="FILE", help="write the rows as a JSON list")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    t0 = time.perf_counter()
    rows = predict()
    print(table(rows))
    n_ok = sum(within(r) for r in rows)
    print(f"\n{n_ok} of {len(rows)} rows within 25%; {time.perf_counter() - t0:.0f} s wall")
    if args.json:
        write_json(rows, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
