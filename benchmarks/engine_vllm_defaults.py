"""How far the compute engine's defaults sit from vLLM V1's, on one rollout setting.

pipesim's ``EngineConfig`` defaults are vLLM V0-like in three places (``docs/compute.md``, "Where
the engine departs from vLLM"): a KV watermark of 0.01 (V1 keeps none), prefix caching off (V1
turns it on) and no chunked prefill (V1 always chunks); and ``max_num_seqs`` is 256 where vLLM
takes 1,024 on an H100 or H200. This script runs one setting with each changed alone and prints
the step time, concurrency and preemptions, so the sensitivity each default carries is a number
anyone can re-run, not a claim.

The setting: Qwen3-8B on H100s, TP 1, ``max_model_len`` 16,384; 2,048-token prompts x 16 samples,
log-normal responses (median 1,500, sigma 0.8, cap 8,192); 512 samples a step at eta 1 with
partial rollout, one rollout replica and 4 trainer GPUs, 4 steps, seed 0. ``max_num_seqs`` binds
only where more than 256 sequences could be resident, so it is shown on a closed loop of 1,024
concurrent sequences of Qwen2.5-7B (a small KV per token) and Qwen3-8B.

Run: ``.venv/bin/python benchmarks/engine_vllm_defaults.py`` (a few seconds). It takes no flags
but ``--help``: anything else is a usage error (exit 2); Ctrl-C or SIGTERM stops it with one line
and exit 130.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute.closedloop import ClosedLoop
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.workload import LogNormalLengths, TokenWorkload

WORK = TokenWorkload(
    response=LogNormalLengths(1500, 0.8),
    prompt=2048,
    samples_per_prompt=16,
    max_response_tokens=8192,
    difficulty_sigma=0.5,
)
VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("pipesim defaults", {}),
    ("watermark 0 (V1)", {"watermark": 0.0}),
    ("prefix sharing on (V1)", {"share_group_prefix": True}),
    ("chunked prefill 8,192 (V1)", {"max_num_batched_tokens": 8192}),
    ("all three (V1)", {"watermark": 0.0, "share_group_prefix": True, "max_num_batched_tokens": 8192}),
)


def step_row(label: str, **engine: Any) -> tuple[str, float, float, int, float]:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=512, steps=4, max_staleness=1),
        weight_update=pipesim.PartialRollout(),
    )
    eng = EngineConfig(model=MODELS["qwen3-8b"], gpu=GPUS["h100-sxm"], max_model_len=16384, **engine)
    t = time.perf_counter()
    s = run_compute(sc, Cluster(engine=eng, n_gpus=5, trainer_gpus=4), WORK, seed=0).summary()
    return label, s["step_time_s_mean"], s["concurrency_mean"], int(s["preemptions"]), time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, 2 for a usage error (any flag but ``--help``), 130 when Ctrl-C or SIGTERM
    stopped it (it writes no file)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.parse_args(argv)
    from pipesim.io.interrupts import interrupt_once

    with interrupt_once():  # SIGTERM as Ctrl-C
        try:
            _tables()
        except KeyboardInterrupt:
            print("engine_vllm_defaults: interrupted (it writes no file)", file=sys.stderr)
            return 130
    return 0


def _tables() -> None:
    rows = [step_row(label, **kw) for label, kw in VARIANTS]
    base = rows[0][1]
    print("engine setting                  step s   vs default  concurrency  preemptions  wall s")
    for label, step, conc, pre, wall in rows:
        print(f"{label:30s} {step:7.1f}   {step / base - 1:+9.1%}  {conc:11.1f}  {pre:11,d}  {wall:6.1f}")
    print()
    print("closed loop, 1,024 concurrent, prompt 512, chunked 8,192: tokens/s by max_num_seqs")
    for model in ("qwen2.5-7b", "qwen3-8b"):
        work = TokenWorkload(
            response=LogNormalLengths(1500, 0.8), prompt=512, samples_per_prompt=8, max_response_tokens=8192
        )
        got = {}
        for mns in (256, 1024):
            eng = EngineConfig(
                model=MODELS[model],
                gpu=GPUS["h100-sxm"],
                max_model_len=16384,
                max_num_seqs=mns,
                max_num_batched_tokens=8192,
            )
            got[mns] = ClosedLoop(eng, work, concurrency=1024, seed=0).run(4000)["tokens_per_s"]
        gain = got[1024] / got[256] - 1
        print(f"{model:12s} 256: {got[256]:8,.0f}  1,024: {got[1024]:8,.0f}  ({gain:+.1%})")


if __name__ == "__main__":
    sys.exit(main())
