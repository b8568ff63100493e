"""APRIL (active partial rollouts in slime): the rollout-throughput gain over slime's sync loop.

Sources: the paper arXiv 2509.18521 and RLsys-Foundation/APRIL
``scripts/partial_rollout/qwen/grpo/run-qwen3-4B-dapo-partial.sh`` and ``README.md`` (named beside
each value). The preset is :func:`scenarios.systems.april`: over-sampled groups, the first
``--rollout-batch-size`` *whole* groups trained (``WholeGroups``), the rest aborted and carried
over with a re-prefill of their prefix.
"""

from __future__ import annotations

import dataclasses
import math

import pipesim
from pipesim.compute import GPUS, MODELS, EngineConfig, TokenWorkload, length_spec
from scenarios import systems
from scenarios.published import common
from scenarios.published.common import (
    LENGTHS_QWEN3,
    POINT,
    PROMPT_TOKENS,
    Measured,
    RunCache,
    Variant,
    _cluster,
    _trainer,
    math_workload,
    rollout_throughput,
)


def april_engine() -> EngineConfig:
    return EngineConfig(
        model=MODELS["qwen3-4b"],  # script: Qwen3-4B (README's results table)
        gpu=GPUS["h100-sxm"],  # README: "we reproduced gains on 8xH100 and 8xMI300"
        tp=2,  # --rollout-num-gpus-per-engine 2
        gpu_memory_utilization=0.6,  # --sglang-mem-fraction-static 0.6
        max_model_len=PROMPT_TOKENS + 16384,  # --rollout-max-response-len 16384
    )


APRIL_PROMPTS = 32  # --rollout-batch-size (groups per step)
APRIL_N = 8  # --n-samples-per-prompt
APRIL_OVERSAMPLE = 64  # --over-sampling-batch-size (groups submitted per rollout)


@RunCache
def april_run(partial: bool, steps: int = 8, v: Variant = POINT) -> Measured:
    """slime colocated on 8 GPUs (``--colocate``): the baseline generates the 32 x 8 samples and
    trains (train.py, Drain, eta 0); APRIL submits 64 groups, trains the first 32 to complete,
    whole, and carries the rest over (re-prefilled, :func:`scenarios.systems.april`). slime's
    ``--use-kl-loss`` loads the reference model (``--ref-load``), so its forward is counted."""
    return _april(partial, steps, v, math_workload(LENGTHS_QWEN3, 16384, APRIL_N, v))


def _april(partial: bool, steps: int, v: Variant, wl: TokenWorkload) -> Measured:
    eng = april_engine()
    batch = APRIL_PROMPTS * APRIL_N
    if partial:
        sc = systems.april(
            over_sampling_batch_size=APRIL_OVERSAMPLE,
            n_samples_per_prompt=APRIL_N,
            batch_size=batch,
            steps=steps,
        )
    else:
        cfg = pipesim.PipelineConfig(batch_size=batch, steps=steps, max_staleness=0, colocated=True)
        sc = pipesim.Scenario(
            pipeline=cfg, name="slime sync", admission=pipesim.CountThrottle(), weight_update=pipesim.Drain()
        )
    cl = _cluster(eng, 8, 0)
    tr = _trainer(eng, 8, old_logp=True, reference=True, v=v)
    return common.measure(sc, cl, wl, tr, warmup=2, seed=v.seed)


APRIL_GAIN_README = 1.225
"""The claim's gain (+22.5%, scored as this ratio by ``claims``), shown beside the grid."""
APRIL_OFFPOLICY_README = 0.40
"""APRIL's README (FAQ): "the proportion of off-policy tokens in one round is about 40%", the
``partial_rollout/off_policy_ratio`` its code logs. Held out: shown beside the runs' own ratio,
never scored or fitted."""

SCALES = (1 / 1.3, 1.0, 1.3, 1.7, 2.2, 3.0)
"""Length scales of the sensitivity grid (the Qwen3 entry's mean times each)."""
DIFFICULTIES = (0.0, 0.5, 1.0, 1.5, 2.0)
"""Prompt heterogeneity of the grid (``difficulty_sigma``; the entry's is 0.5), each at the
entry's mean (the median moved so the mean stays) and its within-group ``sigma``."""
SIGMAS = (0.3, 0.9)
"""Within-group spreads tried at the entry's mean and heterogeneity (the entry's is 0.6)."""


def offpolicy_sensitivity() -> list[dict[str, float]]:
    """Whether the response lengths can reconcile APRIL's gain and off-policy ratio with its
    README's: over a grid of length scales and prompt heterogeneities (and two within-group
    spreads), the gain as the table scores it and the APRIL run's
    ``partial_rollout/off_policy_ratio`` and ``offpolicy_token_share``. A diagnosis, not a
    prediction: nothing here feeds the table (about 3 s)."""
    base = length_spec(LENGTHS_QWEN3)
    cases = [(scale, base.sigma, d) for scale in SCALES for d in DIFFICULTIES]
    cases += [(1.0, sig, base.difficulty_sigma) for sig in SIGMAS]
    rows = []
    for scale, sig, dsig in cases:
        median = base.mean_tokens / math.exp((sig**2 + dsig**2) / 2)
        spec = dataclasses.replace(base, median_tokens=median, sigma=sig, difficulty_sigma=dsig)
        wl = spec.workload(16384, APRIL_N, PROMPT_TOKENS, scale=scale)
        a, b = _april(True, 8, POINT, wl), _april(False, 8, POINT, wl)
        rows.append(
            {
                "scale": scale,
                "sigma": sig,
                "difficulty_sigma": dsig,
                "gain": rollout_throughput(a) / rollout_throughput(b),
                "off_policy_ratio": a.summary["partial_rollout/off_policy_ratio"],
                "offpolicy_token_share": a.summary["offpolicy_token_share"],
                "sync_truncated_share": b.summary["truncated_share"],
            }
        )
    return rows


def offpolicy_report(rows: list[dict[str, float]] | None = None) -> str:
    """``rows`` (default: :func:`offpolicy_sensitivity`'s) as a grid of gain / off-policy ratio
    (``python -m scenarios.published --april-offpolicy``)."""
    rows = offpolicy_sensitivity() if rows is None else rows
    sigma = length_spec(LENGTHS_QWEN3).sigma
    lines = [
        f"APRIL, published: gain {APRIL_GAIN_README:.3f} (within 25%: {0.75 * APRIL_GAIN_README:.2f}-"
        f"{1.25 * APRIL_GAIN_README:.2f}), off-policy ratio about {APRIL_OFFPOLICY_README:.0%} (held out)",
        "model: gain / off_policy_ratio by length scale (rows) and difficulty_sigma (columns), "
        f"sigma {sigma:g}",
        "scale  " + "  ".join(f"{d:>11g}" for d in DIFFICULTIES),
    ]
    grid = {(r["scale"], r["difficulty_sigma"]): r for r in rows if r["sigma"] == sigma}
    for scale in SCALES:
        cells = [grid.get((scale, d)) for d in DIFFICULTIES]
        lines.append(
            f"{scale:5.2f}  "
            + "  ".join(f"{c['gain']:5.2f}/{c['off_policy_ratio']:.2f}" if c else f"{'-':>11}" for c in cells)
        )
    for r in rows:
        if r["sigma"] != sigma:
            lines.append(
                f"sigma {r['sigma']:g} (scale {r['scale']:g}, difficulty {r['difficulty_sigma']:g}): "
                f"{r['gain']:.2f}/{r['off_policy_ratio']:.2f}"
            )
    return "\n".join(lines)
