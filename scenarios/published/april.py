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


APRIL_OFFPOLICY_README = 0.40
"""APRIL's README (FAQ): "the proportion of off-policy tokens in one round is about 40%", the
``partial_rollout/off_policy_ratio`` its code logs. Held out: shown beside the runs' own ratio,
never scored or fitted."""

SPREADS = ((0.6, 0.5), (0.3, 0.5), (0.9, 0.5), (0.6, 0.0), (0.6, 1.0))
"""(sigma, difficulty_sigma) pairs of the sensitivity table: the Qwen3 entry's first."""
SCALES = (1 / 1.3, 1.0, 1.3, 1.7, 2.2)
"""Length scales of the sensitivity table (the entry's mean times each)."""


def offpolicy_sensitivity() -> list[dict[str, float]]:
    """Whether the response lengths can reconcile APRIL's off-policy ratio with its README's.

    For each length scale (at the entry's spread) and each spread (at its mean: the median moved
    so the mean stays), the gain as the table scores it and the APRIL run's
    ``partial_rollout/off_policy_ratio`` and ``offpolicy_token_share``. A diagnosis, not a
    prediction: nothing here feeds the table."""
    base = length_spec(LENGTHS_QWEN3)
    cases = [(scale, base.sigma, base.difficulty_sigma) for scale in SCALES]
    cases += [(1.0, sig, dsig) for sig, dsig in SPREADS[1:]]
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
    """``rows`` (default: :func:`offpolicy_sensitivity`'s) as a table (``python -m
    scenarios.published --april-offpolicy``)."""
    lines = [
        f"APRIL's off-policy ratio against its README's about {APRIL_OFFPOLICY_README:.0%} "
        "(held out, not scored)",
        "scale  sigma  difficulty  gain  off_policy_ratio  offpolicy_token_share  sync truncated",
    ]
    for r in offpolicy_sensitivity() if rows is None else rows:
        lines.append(
            f"{r['scale']:5.2f}  {r['sigma']:5.2f}  {r['difficulty_sigma']:10.2f}  {r['gain']:4.2f}  "
            f"{r['off_policy_ratio']:16.3f}  {r['offpolicy_token_share']:21.3f}  "
            f"{r['sync_truncated_share']:14.3f}"
        )
    return "\n".join(lines)
