"""The named framework profiles of :mod:`pipesim.compute.phases`, and the one row they were set from.

**Calibration set, chosen once:** verl's ``fully_async_policy`` README (volcengine/verl,
``verl/experimental/fully_async_policy/README.md``, "Experiments"), the *colocate sync, 64 GPUs*
row: step 365.28 s, ``old_log_prob`` 70.26 s, ``update_actor`` 133.41 s, ``gen`` 150.72 s; the
remainder, ``step - gen - old_log_prob - update_actor``, is 10.89 s. Setup (README and
``shell/dapo_7b_math_fsdp2_32_32.sh``): Qwen2.5-Math-7B, 64 H20, FSDP2, 512 prompts x 16 samples,
``ppo_mini_batch_size`` 32 prompts (512 samples), ``use_dynamic_bsz`` with
``ppo_max_token_len_per_gpu`` 60K and the log-prob budget 90K (2x and 3x of 2K + 28K),
``ulysses_sequence_parallel_size`` 4, one PPO epoch, no KL loss (so no reference forward). No other
row of that README (nor any other published number) sets a constant here; they are scored.

One row gives three equations, so it sets three constants of ``fsdp2-dense``: ``fwd_bwd_efficiency``
from ``update_actor``, ``fwd_efficiency`` from ``old_log_prob`` and ``sample_s`` from the remainder
(per sample: reward scoring and advantages scale with the samples, not the GPUs). The rest are
stated priors, not fitted (:data:`PRIOR`): ``micro_batch_s``, ``optimizer_step_s`` and
``comm_overlap``. The row's tokens per sample are not published; :data:`CALIBRATION_TOKENS_PER_SAMPLE`
is what the stated setup gives (see there), so the efficiencies are only as right as that length.
:func:`pipesim.compute.phasefit.fit_profile` refits every constant once phase times at several
token counts or GPU counts are at hand.

``megatron-dense`` and ``megatron-moe`` have no published phase breakdown in the calibration set:
they take ``fsdp2-dense``'s efficiencies (the same GEMMs on the same GPUs) and differ in their
communication (per optimizer step, plus tensor and expert parallelism) and, for MoE, in the
grouped-GEMM factor :data:`MOE_GEMM_FACTOR` (a stated prior). ``ideal`` is the model of before
the trainer was split into phases: one efficiency (:data:`~pipesim.compute.trainer.DEFAULT_TRAINER_MFU`),
no fixed costs, communication fully hidden.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from pipesim.compute.phases import FrameworkProfile
from pipesim.core.errors import FieldError, shown

if TYPE_CHECKING:
    import numpy as np

    from pipesim.compute.models import ModelSpec
    from pipesim.compute.trainer import TrainerConfig
    from pipesim.compute.workload import TokenWorkload

CALIBRATION_ROW = "volcengine/verl fully_async_policy README, colocate sync, 64 GPUs"
CALIBRATION_SECONDS: Mapping[str, float] = MappingProxyType(
    {"old_log_prob": 70.26, "update_actor": 133.41, "remainder": 365.28 - 150.72 - 70.26 - 133.41}
)
"""The calibration row's phases (seconds per step, the README's means over 400 steps)."""
CALIBRATION_SAMPLES = 512 * 16
"""train_batch_size 512 prompts x rollout.n 16 (README)."""
CALIBRATION_LENGTHS = "math-reasoning-7b"
"""The length registry entry of the stated setup (:mod:`pipesim.compute.lengths`: Qwen2.5-Math-7B
base under DAPO), the one ``scenarios.published.verl.verl_workload`` draws from."""
CALIBRATION_PROMPT_TOKENS = 256
"""Prompt tokens of a math problem with its chat template (no source states it; verl's
``max_prompt_length`` 2,048 is a cap)."""
CALIBRATION_MAX_RESPONSE_TOKENS = 28 * 1024
"""``max_response_length`` 28K (the row's scripts)."""


def calibration_workload(scale: float = 1.0) -> TokenWorkload:
    """The stated verl workload: :data:`CALIBRATION_LENGTHS` (times ``scale``) under the 28K cap,
    groups of ``rollout.n`` 16, prompts of :data:`CALIBRATION_PROMPT_TOKENS`. The one definition:
    the profile's calibration reads its tokens per sample from it, and the published verl scenarios
    run it (``scenarios.published.verl.verl_workload``)."""
    from pipesim.compute.lengths import length_spec

    return length_spec(CALIBRATION_LENGTHS).workload(
        CALIBRATION_MAX_RESPONSE_TOKENS, 16, CALIBRATION_PROMPT_TOKENS, scale=scale
    )


def mean_sample_tokens(workload: TokenWorkload) -> float:
    """Mean prompt + response tokens per sample of a log-normal ``workload`` under its cap, in
    closed form: the response is log-normal with ``mu = ln(median)`` and spread
    ``s = hypot(sigma, difficulty_sigma)`` (a group's difficulty multiplies it), and
    ``E[min(X, c)] = e^(mu + s^2/2) Phi((ln c - mu - s^2) / s) + c (1 - Phi((ln c - mu) / s))``."""
    from statistics import NormalDist

    from pipesim.compute.workload import LogNormalLengths

    r, prompt = workload.response, workload.prompt
    if not isinstance(r, LogNormalLengths) or not isinstance(prompt, int):
        raise ValueError("workload: the closed-form mean needs log-normal responses and a fixed prompt")
    phi = NormalDist().cdf
    median = r.median_tokens
    s = math.hypot(r.sigma, workload.difficulty_sigma)
    mu, c = math.log(median), float(workload.max_response_tokens)
    z = (math.log(c) - mu) / s
    mean = math.exp(mu + s * s / 2) * phi(z - s) + c * (1 - phi(z))
    return float(prompt) + mean


CALIBRATION_TOKENS_PER_SAMPLE = mean_sample_tokens(calibration_workload())
"""Mean prompt + response tokens per sample of the stated setup: :func:`mean_sample_tokens` of
:func:`calibration_workload` (about 1,943; it was a 64,000-sample draw, 1,922, before lengths moved
to absolute tokens). Not published; the efficiencies are only as right as this length."""

PRIOR = FrameworkProfile(
    name="fsdp2-dense",
    backend="fsdp",
    balance="step",
    fwd_bwd_efficiency=0.5,  # replaced by the calibration
    fwd_efficiency=0.5,  # replaced by the calibration
    micro_batch_s=0.05,
    optimizer_step_s=0.5,
    step_s=0.0,
    comm_overlap=0.5,
    grad_reduce_bytes=4.0,
)
"""The stated priors of ``fsdp2-dense`` (round guesses, not fitted to any row):
``micro_batch_s`` 0.05 s (a micro-batch's launches, sequence packing and host-side Python),
``optimizer_step_s`` 0.5 s (gradient-norm clipping and its host sync, the optimizer over the shard,
the barrier), ``comm_overlap`` 0.5 (FSDP2 prefetches
the next layer's all-gather and overlaps the reduce-scatter with the backward, but the first gather,
the last reduce-scatter and link contention stay exposed), ``grad_reduce_bytes`` 4 (verl's FSDP
``mixed_precision.reduce_dtype`` fp32), ``balance`` ``"step"`` (not a guess: verl's dealing of
samples to ranks at the calibration row's commit, :mod:`pipesim.compute.balance`)."""

CALIBRATION_DRAWS = 4
"""Seeded draws of the calibration row's stated workload (seeds 0-3) whose mean the calibration
reads: with ``balance = "step"`` a mini-batch lasts as long as its busiest rank, which depends on
the lengths drawn, not only on their mean."""


def drawn_sample_tokens(workload: TokenWorkload, samples: int, seed: int) -> list[int]:
    """Tokens (prompt, response, observation) of ``samples`` samples of ``workload`` drawn with
    ``seed``, in prompt order with a prompt's samples adjacent (a synchronous batch's order): what
    a :class:`~pipesim.compute.source.TokenSource` draws for episodes ``0 .. samples - 1``
    (:func:`_drawn_by_source`). A single-turn workload with a fixed prompt and no drift (the
    calibration's) is drawn a block at a time instead (:func:`_drawn_in_blocks`), the same numbers
    bit for bit: the sample-by-sample loop was most of :func:`calibration_draws`, once a process."""
    w = workload
    if isinstance(w.prompt, int) and w.agent is None and not w.drift_per_version and w.trajectory is None:
        return _drawn_in_blocks(w, samples, seed)
    return _drawn_by_source(w, samples, seed)


def _drawn_by_source(workload: TokenWorkload, samples: int, seed: int) -> list[int]:
    """:func:`drawn_sample_tokens` by the source itself, sample by sample (any workload)."""
    import numpy as np

    from pipesim.compute.source import TokenSource

    src = TokenSource(workload, np.random.default_rng(seed))
    for i in range(samples):
        src.work_s(i, i, 0, -1)
    return [src.prompt[i] + src.response[i] + src.observation[i] for i in range(samples)]


def _drawn_in_blocks(workload: TokenWorkload, samples: int, seed: int) -> list[int]:
    """:func:`drawn_sample_tokens` for a fixed prompt, one turn and no drift, with the source's
    arithmetic on arrays. The generator is read as the source reads it: a block of
    :data:`~pipesim.compute.source.BLOCK` difficulties when the group that needs one starts (before
    that sample's response block, at a tie), a block of responses every ``BLOCK`` samples; a
    difficulty is ``exp(z) ** difficulty_sigma`` in Python (``workload._power``: numpy's power
    need not round as ``**`` does), a length ``int(x + 0.5)`` of ``x = draw x difficulty``, at
    least 1, past ``cap + 0.5`` (inf, NaN too) truncated to ``cap``."""
    import numpy as np

    from pipesim.compute.source import BLOCK
    from pipesim.compute.workload import LogNormalLengths, _power

    w, prompt = workload, workload.prompt
    assert isinstance(prompt, int)
    if samples <= 0:
        return []
    rng = np.random.default_rng(seed)
    per, cap, sigma = w.samples_per_prompt, w.max_response_tokens, w.difficulty_sigma
    groups = -(-samples // per)
    responses: list[np.ndarray] = []
    normals: list[np.ndarray] = []
    unit = LogNormalLengths(1.0, 1.0)
    for start in range(0, samples, BLOCK):  # the response block read at sample `start`
        # a difficulty block read by a group starting before or at `start` comes first
        while sigma and len(normals) * BLOCK < groups and len(normals) * BLOCK * per <= start:
            normals.append(_checked(unit.draw(rng, BLOCK), BLOCK))
        responses.append(_checked(w.response.draw(rng, BLOCK), BLOCK))
    while sigma and len(normals) * BLOCK < groups:  # groups starting after the last response block
        normals.append(_checked(unit.draw(rng, BLOCK), BLOCK))
    x = np.concatenate(responses)[:samples]
    if sigma:
        z = np.concatenate(normals)[:groups].tolist()
        difficulty = np.array([_power(v, sigma) for v in z], dtype=np.float64)
        x = x * np.repeat(difficulty, per)[:samples]
    with np.errstate(invalid="ignore"):
        y = np.where(x < cap + 0.5, x + 0.5, cap + 1.0)
    n = np.minimum(np.maximum(y.astype(np.int64), 1), cap)
    return [t + prompt for t in n.tolist()]


def _checked(block: object, n: int) -> np.ndarray:
    """A block of draws as the source checks it (``PipelineError`` unless ``n`` finite values)."""
    import numpy as np

    from pipesim.core.errors import PipelineError

    arr = np.asarray(block, dtype=np.float64)
    if arr.shape != (n,) or not np.isfinite(arr).all():
        raise PipelineError(f"a length model drew {arr.shape} values, not {n} finite token counts")
    return arr


MOE_GEMM_FACTOR = 0.5
"""Efficiency of grouped expert GEMMs relative to a dense layer's (small per-expert batches, the
router and permutation kernels); a stated prior for ``megatron-moe``, not fitted."""


def _calibration_config(profile: FrameworkProfile) -> TrainerConfig:
    from pipesim.compute.catalog import MODELS
    from pipesim.compute.gpus import GPUS
    from pipesim.compute.trainer import TrainerConfig

    return TrainerConfig(
        model=MODELS["qwen2.5-math-7b"],
        gpu=GPUS["h20"],
        n_gpus=64,
        profile=profile,
        recompute_old_logp=True,
        reference_model=False,
        ppo_mini_batch_samples=32 * 16,
        micro_batch_tokens=2 * (2048 + 28 * 1024),
        log_prob_micro_batch_tokens=3 * (2048 + 28 * 1024),
        sequence_parallel=4,
    )


@functools.cache
def calibration_draws() -> tuple[tuple[float, ...], ...]:
    """The calibration row's tokens per sample, :data:`CALIBRATION_DRAWS` seeded draws of
    :func:`calibration_workload` in prompt order, each scaled to the closed-form mean
    :data:`CALIBRATION_TOKENS_PER_SAMPLE` (the seeds move the ranks' spread, not the mean)."""
    out = []
    for seed in range(CALIBRATION_DRAWS):
        per = drawn_sample_tokens(calibration_workload(), CALIBRATION_SAMPLES, seed)
        scale = CALIBRATION_TOKENS_PER_SAMPLE * CALIBRATION_SAMPLES / sum(per)
        out.append(tuple(t * scale for t in per))
    return tuple(out)


def calibrated_fsdp2_dense() -> FrameworkProfile:
    """``fsdp2-dense``: :data:`PRIOR` with the three constants the calibration row sets, on the
    mean of the row's phases over :func:`calibration_draws` (each mini-batch at its busiest rank)."""
    from pipesim.compute.phases import phase_parts

    config = _calibration_config(PRIOR)
    samples = CALIBRATION_SAMPLES
    scale = CALIBRATION_TOKENS_PER_SAMPLE * samples
    effs = {}
    # each draw's parts once, both phases read from them (the partition of 8,192 samples over 16
    # ranks is the calibration's cost, once a process)
    drawn = [phase_parts(config, scale, samples, per) for per in calibration_draws()]
    for phase in ("update_actor", "old_log_prob"):
        parts = [d[phase] for d in drawn]
        p = {k: sum(d[k] for d in parts) / len(parts) for k in ("compute_flop_s", "micro", "opt", "comm_s")}
        fixed = p["micro"] * PRIOR.micro_batch_s + p["opt"] * PRIOR.optimizer_step_s + p["comm_s"]
        effs[phase] = p["compute_flop_s"] / (CALIBRATION_SECONDS[phase] - fixed)
    return dataclasses.replace(
        PRIOR,
        fwd_bwd_efficiency=effs["update_actor"],
        fwd_efficiency=effs["old_log_prob"],
        sample_s=(CALIBRATION_SECONDS["remainder"] - PRIOR.step_s) / samples,
        source=f"{CALIBRATION_ROW} (docs/compute.md, 'The trainer in phases')",
    )


@functools.cache
def profiles() -> Mapping[str, FrameworkProfile]:
    """The registry: every named profile (computed once; see the module docstring)."""
    from pipesim.compute.trainer import DEFAULT_TRAINER_MFU

    fsdp = calibrated_fsdp2_dense()
    borrowed = f"efficiencies borrowed from fsdp2-dense ({CALIBRATION_ROW}); no Megatron row calibrates them"
    megatron = dataclasses.replace(
        fsdp, name="megatron-dense", backend="megatron", tp=4, pp=1, ep=1, source=borrowed
    )
    moe = dataclasses.replace(
        megatron,
        name="megatron-moe",
        tp=1,
        ep=8,
        fwd_bwd_efficiency=fsdp.fwd_bwd_efficiency * MOE_GEMM_FACTOR,
        fwd_efficiency=fsdp.fwd_efficiency * MOE_GEMM_FACTOR,
        source=f"{borrowed}; times MOE_GEMM_FACTOR {MOE_GEMM_FACTOR}",
    )
    ideal = FrameworkProfile(
        name="ideal",
        backend="fsdp",
        fwd_bwd_efficiency=DEFAULT_TRAINER_MFU,
        fwd_efficiency=DEFAULT_TRAINER_MFU,
        comm_overlap=1.0,
        source="the one-MFU model from before the phased trainer (DEFAULT_TRAINER_MFU, no fixed costs)",
    )
    return MappingProxyType({p.name: p for p in (fsdp, megatron, moe, ideal)})


def profile(name: str, field: str = "profile") -> FrameworkProfile:
    """The profile registered as ``name``; ``ValueError`` naming ``field`` for an unknown one."""
    table = profiles()
    if not isinstance(name, str) or name not in table:
        raise FieldError(
            f"{field}: unknown framework profile {shown(name)}; known: {', '.join(table)}", field
        )
    return table[name]


def check_layout(model: ModelSpec, prof: FrameworkProfile | None, sequence_parallel: int = 1) -> None:
    """Refuse a split of ``model`` that its framework refuses, before any phase is timed:

    * ``tp`` must divide the attention heads and the KV heads (Megatron-Core's ``TransformerConfig``
      asserts ``num_attention_heads`` and ``num_query_groups % tensor_model_parallel_size == 0``);
    * ``pp`` must divide the layers, so at most their count (Megatron splits them evenly over the
      stages unless an uneven first or last stage is configured, which no profile describes);
    * ``sequence_parallel`` (Ulysses) must divide the heads, and the KV heads must divide it or be
      divisible by it (verl's ``apply_monkey_patch``, ``verl/models/transformers/monkey_patch.py``).

    ``ValueError`` naming ``profile`` for ``tp`` and ``pp`` (the profile holds them, as for
    :func:`~pipesim.compute.trainer.check_expert_parallel`) and ``sequence_parallel`` for it;
    ``prof`` None: ``sequence_parallel`` alone (a plan spec's one-MFU trainer)."""
    m = model
    tp, pp = (1, 1) if prof is None else (prof.tp, prof.pp)
    for name, value, holds, of in (
        ("tp", tp, m.n_heads % tp == 0 and m.n_kv_heads % tp == 0, "n_heads and n_kv_heads"),
        ("pp", pp, m.n_layers % pp == 0, "n_layers"),
    ):
        if not holds:
            counts = f"{m.n_heads} and {m.n_kv_heads}" if name == "tp" else f"{m.n_layers}"
            raise FieldError(
                f"profile: {getattr(prof, 'name', '')}'s {name} ({value}) must divide {m.name}'s {of} "
                f"({counts}), as Megatron requires",
                "profile",
            )
    sp, kv = sequence_parallel, m.n_kv_heads
    if m.n_heads % sp or (kv % sp and sp % kv):
        raise FieldError(
            f"sequence_parallel ({sp}) must divide {m.name}'s n_heads ({m.n_heads}), and its n_kv_heads "
            f"({kv}) must divide it or be divisible by it, as verl's Ulysses requires",
            "sequence_parallel",
        )
