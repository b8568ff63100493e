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
    return _on_8_gpus(sc, v, wl)


def _on_8_gpus(sc: pipesim.Scenario, v: Variant, wl: TokenWorkload) -> Measured:
    """``sc`` on the script's 8 H100s, colocated, with the reference model's forward counted."""
    eng = april_engine()
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


DAPO_FILTER_RATES = (0.0, 0.25, 0.4)
"""Shares of prompt groups DAPO's dynamic-sampling filter rejects, tried for the DAPO arm. No
source gives the rate: the paper and README report only the gains."""
APRIL_README_ROWS = {"DAPO-Math-17k": 1.17, "DeepScaleR": 1.21, "DeepMath-103K": 1.35}
"""APRIL's README, its three Qwen3-4B rollout-throughput rows, by dataset (+17%, +21%, +35%; mean
24.3%). The abstract's 22.5% is an average "across ... GRPO, DAPO, GSPO" (arXiv 2509.18521 v3);
no source read here gives each arm's gain. Shown beside the diagnosis, never scored."""


def dapo_run(partial: bool, filter_rate: float, steps: int = 8, v: Variant = POINT) -> Measured:
    """The DAPO arm's pair at ``filter_rate``: both arms run slime's dynamic-sampling filter
    (``--dynamic-sampling-filter-path``). The baseline is ``slime("sync")``: chunks of 32 groups
    (``--over-sampling-batch-size`` defaults to the rollout batch) until 32 are accepted, then
    ``abort`` drops the unfinished ones; APRIL submits chunks of 64 and carries them
    (:class:`~pipesim.policies.slime_submit.SlimeSubmit`). At 0 the baseline is the scored row's."""
    batch = APRIL_PROMPTS * APRIL_N
    if partial:
        sc = systems.april(APRIL_OVERSAMPLE, True, APRIL_N, filter_rate, batch_size=batch, steps=steps)
    else:
        sc = systems.slime(
            "sync", filter_rate=filter_rate, n_samples_per_prompt=APRIL_N, batch_size=batch, steps=steps
        )
    return _on_8_gpus(sc, v, math_workload(LENGTHS_QWEN3, 16384, APRIL_N, v))


def dapo_filter_gains(
    rates: tuple[float, ...] = DAPO_FILTER_RATES, seeds: tuple[int, ...] = (0,)
) -> list[dict[str, float]]:
    """The DAPO arm's gain (rollout throughput, as the table scores the GRPO arm) at each filter
    rate and seed, with the baseline's aborted and filtered token shares. A diagnosis, not a
    prediction: nothing here is scored or fitted (``python -m scenarios.published --april-dapo``)."""
    rows = []
    for f in rates:
        for seed in seeds:
            v = dataclasses.replace(POINT, seed=seed)
            a, b = dapo_run(True, f, v=v), dapo_run(False, f, v=v)
            gen = b.summary["tokens_generated"]
            rows.append(
                {
                    "filter_rate": f,
                    "seed": seed,
                    "gain": rollout_throughput(a) / rollout_throughput(b),
                    "sync_aborted_token_share": b.summary["tokens_discarded_aborted"] / gen,
                    "sync_filtered_token_share": b.summary["tokens_discarded_filtered"] / gen,
                }
            )
    return rows


def dapo_report(rows: list[dict[str, float]] | None = None) -> str:
    """``rows`` (default: :func:`dapo_filter_gains`'s) beside the scored GRPO arm and the README's rows."""
    rows = dapo_filter_gains() if rows is None else rows
    grpo = rollout_throughput(april_run(True)) / rollout_throughput(april_run(False))
    readme = ", ".join(f"{k} {v:.2f}" for k, v in APRIL_README_ROWS.items())
    lines = [
        f"APRIL, published: gain {APRIL_GAIN_README:.3f} (abstract: mean over GRPO, DAPO, GSPO); "
        f"README Qwen3-4B: {readme}",
        f"model, scored GRPO arm (no filter, seed 0): {grpo:.2f}",
        "model, DAPO arm (filter in both arms; rate given by no source): diagnosis, not scored",
        "filter_rate  seed   gain  sync aborted tokens  sync filtered tokens",
    ]
    for r in rows:
        lines.append(
            f"{r['filter_rate']:11.2f}  {r['seed']:4d}  {r['gain']:5.2f}  "
            f"{r['sync_aborted_token_share']:19.1%}  {r['sync_filtered_token_share']:20.1%}"
        )
    return "\n".join(lines)


def dapo_main(argv: list[str]) -> int:
    """``python -m scenarios.published --april-dapo [--seeds N] [--json FILE]``: :func:`dapo_report`
    over seeds 0 .. N - 1 (default 1), its rows as JSON with ``--json``; an interrupt is one line."""
    import argparse
    import sys

    from pipesim.io.interrupts import sigterm_as_interrupt
    from scenarios.outputs import check_output
    from scenarios.published.table import _dump_json  # table imports this module

    ap = argparse.ArgumentParser(
        prog="python -m scenarios.published --april-dapo", description=dapo_report.__doc__
    )
    ap.add_argument("--april-dapo", action="store_true", help="this report (the flag that chose it)")
    ap.add_argument("--seeds", type=int, default=1, metavar="N", help="seeds 0 .. N - 1 (default 1)")
    ap.add_argument("--json", metavar="FILE", help="write the rows as a JSON list")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error(f"--seeds must be at least 1, got {args.seeds}")
    check_output(ap, "--json", args.json)
    try:
        with sigterm_as_interrupt():
            rows = dapo_filter_gains(seeds=tuple(range(args.seeds)))
            print(dapo_report(rows))
            if args.json:
                _dump_json(rows, args.json)
    except KeyboardInterrupt:
        kept = f"; {args.json} was not written" if args.json else ""
        print(f"{ap.prog}: interrupted{kept}", file=sys.stderr)
        return 130
    return 0
