"""APRIL (active partial rollouts in slime): the rollout-throughput gain over slime's sync loop.

Sources: the paper arXiv 2509.18521 and RLsys-Foundation/APRIL
``scripts/partial_rollout/qwen/grpo/run-qwen3-4B-dapo-partial.sh`` and ``README.md`` (named beside
each value). The preset is :func:`scenarios.systems.april`: over-sampled groups, the first
``--rollout-batch-size`` *whole* groups trained (``WholeGroups``), the rest aborted and carried
over with a re-prefill of their prefix.
"""

from __future__ import annotations

import pipesim
from pipesim.compute import GPUS, MODELS, EngineConfig
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
    wl = math_workload(LENGTHS_QWEN3, 16384, APRIL_N, v)  # Qwen3-4B thinks (--apply-chat-template)
    return common.measure(sc, cl, wl, tr, warmup=2, seed=v.seed)
