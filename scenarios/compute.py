"""Designs on GPUs: one model, one cluster, the compute engine. ``python -m scenarios.compute [--json FILE]``.

Qwen3-8B served by vLLM-like replicas (TP 1, bf16, ``gpu_memory_utilization`` 0.9, up to 256
sequences each) on 8 H100-SXM GPUs, trained at the default MFU with ``old_logp`` recomputed. The
workload is GRPO-like: prompt groups of 8 samples, 512-token prompts, log-normal responses
(median 1,500 tokens, sigma 0.8, a per-group difficulty of sigma 0.5), truncated at 8,192 tokens;
a step trains 64 prompts (512 samples).

It prints

1. tokens/s of one replica against concurrency (a closed loop: each finished sequence replaced
   at once), with the realised running batch, per-sequence speed and preemptions: throughput
   rises with the batch until the KV cache is full, while each sequence slows down;
2. per design, the step time, staleness, GPU busy share and realised concurrency: colocated sync
   (every GPU generates, then trains; Drain), a disaggregated 4:4 split run synchronously (Drain,
   eta 0), and the same split asynchronous with partial rollouts at eta 1, 2 and 4
   (``CountThrottle`` + ``PartialRollout``), and eta 2 with the KV cache dropped at every sync
   (``AbortReprefill``: each sequence in flight re-prefills everything it holds, a real cost here);
   then group batching (``WholeGroups``: the trainer takes whole prompt groups, each complete
   when its last sample is) at eta 2, and dynamic filtering (30% of complete groups rejected,
   DAPO-style, with ``AReaLThrottle`` so rejected groups are replaced) at eta 2 and colocated.
   Colocated steps pay the offload/reload of the engine's weights and the trainer's state over
   PCIe (``Cluster.switch_time_s``, the "switch s" column);
3. the token ledger of each design: generated = trained + discarded (stale, filtered, aborted)
   + buffered + in flight.

``--json FILE`` writes a list of rows, one per design: ``{"design": name, "summary": {...}}``,
the summary being :meth:`pipesim.compute.cluster.ComputeRun.summary` (the kernel's summary plus
the ledger and the engine and trainer figures). ``--steps`` sets the steps per design.
``--lengths NAME`` draws the responses from an entry of the length registry
(:data:`pipesim.compute.LENGTHS`: absolute tokens per model and dataset kind, truncated at the
same 8,192-token cap) instead of the log-normal above.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import pipesim
from pipesim.compute import GPUS, LENGTHS, MODELS, length_spec
from pipesim.compute.closedloop import ClosedLoop
from pipesim.compute.cluster import Cluster, ComputeRun, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.workload import LogNormalLengths, TokenWorkload
from pipesim.policies.groups import WholeGroups
from scenarios.outputs import check_output

ENGINE = EngineConfig(model=MODELS["qwen3-8b"], gpu=GPUS["h100-sxm"], tp=1, max_model_len=16384)
WORKLOAD = TokenWorkload(
    response=LogNormalLengths(1500.0, 0.8),
    prompt=512,
    samples_per_prompt=8,
    max_response_tokens=8192,
    difficulty_sigma=0.5,
)
PROMPTS_PER_STEP = 64
CONCURRENCY = (1, 4, 16, 64, 128, 256)


FILTER_RATE = 0.3
"""The share of complete groups dynamic filtering rejects in the filtered designs."""


def workload(lengths: str | None = None) -> TokenWorkload:
    """:data:`WORKLOAD`, or its prompts, groups and cap with the registry entry ``lengths``."""
    if lengths is None:
        return WORKLOAD
    w = WORKLOAD
    return length_spec(lengths).workload(w.max_response_tokens, w.samples_per_prompt, int(w.prompt))  # type: ignore[arg-type]


def designs(steps: int) -> dict[str, tuple[pipesim.Scenario, Cluster, WholeGroups | bool]]:
    """The designs compared: name -> (scenario with its policies, cluster placement, group batching).

    The third item is ``run_compute``'s ``groups``: False batches samples in finishing order,
    True whole groups, a ``WholeGroups`` whole groups with its filter.
    """
    batch = PROMPTS_PER_STEP * WORKLOAD.samples_per_prompt
    n = WORKLOAD.samples_per_prompt

    def sc(eta: int, update: Any, admission: Any = None) -> pipesim.Scenario:
        cfg = pipesim.PipelineConfig(batch_size=batch, steps=steps, max_staleness=eta)
        adm = pipesim.CountThrottle() if admission is None else admission
        return pipesim.Scenario(pipeline=cfg, admission=adm, weight_update=update)

    coloc = Cluster(engine=ENGINE, n_gpus=8, trainer_gpus=0)
    split = Cluster(engine=ENGINE, n_gpus=8, trainer_gpus=4)
    out: dict[str, tuple[pipesim.Scenario, Cluster, WholeGroups | bool]] = {
        "colocated sync": (sc(0, pipesim.Drain()), coloc, False),
        "split 4:4 sync": (sc(0, pipesim.Drain()), split, False),
    }
    for eta in (1, 2, 4):
        out[f"split 4:4 async eta={eta}"] = (sc(eta, pipesim.PartialRollout()), split, False)
    # AReaL's interruptible rollout: the sync drops the KV cache, every sequence in flight re-prefills
    out["split 4:4 async eta=2, KV dropped"] = (sc(2, pipesim.AbortReprefill()), split, False)
    # the trainer takes whole prompt groups (GRPO): a group is ready when its last sample is
    out["split 4:4 async eta=2, whole groups"] = (sc(2, pipesim.PartialRollout()), split, True)
    # DAPO-style dynamic sampling: rejected groups cost generation, not a trainer place; the
    # admission rule must replace them (AReaL's throttle subtracts dropped samples)
    filt = WholeGroups(n, filter_rate=FILTER_RATE, seed=0)
    areal = pipesim.AReaLThrottle()
    out["split 4:4 async eta=2, groups, 30% filtered"] = (sc(2, pipesim.PartialRollout(), areal), split, filt)
    out["colocated sync, groups, 30% filtered"] = (sc(0, pipesim.Drain(), areal), coloc, filt)
    return out


def replica_throughput(samples_per_level: int = 4, wl: TokenWorkload = WORKLOAD) -> list[dict[str, float]]:
    """Tokens/s of one replica against concurrency (closed loop)."""
    return [ClosedLoop(ENGINE, wl, c).run(max(samples_per_level * c, 32)) for c in CONCURRENCY]


def run_designs(steps: int, wl: TokenWorkload = WORKLOAD) -> dict[str, ComputeRun]:
    return {name: run_compute(s, cl, wl, seed=0, groups=g) for name, (s, cl, g) in designs(steps).items()}


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(
        c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    )


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [_row(header, widths), _row(["-" * w for w in widths], widths)]
    return "\n".join(lines + [_row(r, widths) for r in rows])


def report(throughput: list[dict[str, float]], runs: dict[str, ComputeRun]) -> str:
    e = ENGINE
    out = [
        f"{e.model.name} on {e.gpu.name}, tp={e.tp}: KV budget {e.kv_budget_tokens:,} tokens per replica",
        "",
        "1. one replica, closed loop",
        _table(
            ["concurrency", "mean running", "tokens/s", "tokens/s/seq", "preemptions", "peak KV"],
            [
                [
                    f"{r['concurrency']:.0f}",
                    f"{r['mean_running']:.1f}",
                    f"{r['tokens_per_s']:,.0f}",
                    f"{r['tokens_per_s_per_seq']:.1f}",
                    f"{r['preemptions']:.0f}",
                    f"{r['peak_kv_share']:.0%}",
                ]
                for r in throughput
            ],
        ),
        "",
        "2. designs (Qwen3-8B, 8 x H100, 64 prompts x 8 samples per step)",
    ]
    sums = {name: r.summary() for name, r in runs.items()}
    out.append(
        _table(
            [
                "design",
                "step s",
                "train s",
                "switch s",
                "staleness",
                "GPU busy",
                "engine busy",
                "concurrency",
                "decode tok/s",
                "recompute Mtok",
            ],
            [
                [
                    name,
                    f"{s['step_time_s_mean']:.1f}",
                    f"{s['train_time_s_mean']:.1f}",
                    f"{s['switch_time_s']:.2f}",
                    f"{s['staleness_mean']:.2f}",
                    f"{s['gpu_busy_share']:.0%}",
                    f"{s['engine_busy_share']:.0%}",
                    f"{s['concurrency_mean']:.0f}",
                    f"{s['decode_tokens_per_s']:,.0f}",
                    f"{s['recompute_tokens'] / 1e6:.2f}",
                ]
                for name, s in sums.items()
            ],
        )
    )
    out += [
        "",
        "3. token ledger (millions): generated = trained + discarded + buffered + in flight;",
        "   discarded = stale + filtered + aborted (+ failed); groups trained / filtered",
    ]
    out.append(
        _table(
            [
                "design",
                "generated",
                "trained",
                "discarded",
                "stale",
                "filtered",
                "aborted",
                "buffered",
                "in flight",
                "groups",
                "closes",
            ],
            [
                [name]
                + [
                    f"{s[k] / 1e6:.3f}"
                    for k in (
                        "tokens_generated",
                        "tokens_trained",
                        "tokens_discarded",
                        "tokens_discarded_stale",
                        "tokens_discarded_filtered",
                        "tokens_discarded_aborted",
                        "tokens_buffered",
                        "tokens_in_flight",
                    )
                ]
                + [
                    "-"
                    if math.isnan(s["groups_trained"])
                    else f"{s['groups_trained']:.0f} / {s['groups_filtered']:.0f}"
                ]
                + ["yes" if s["ledger_closes"] else "NO"]
                for name, s in sums.items()
            ],
        )
    )
    return "\n".join(out)


def rows(runs: dict[str, ComputeRun]) -> list[dict[str, Any]]:
    """The JSON rows: one per design, its name and summary (NaN written as null)."""

    def clean(v: float) -> float | None:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    return [{"design": n, "summary": {k: clean(v) for k, v in r.summary().items()}} for n, r in runs.items()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scenarios.compute", description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="FILE", help="write one row per design (name and summary)")
    ap.add_argument("--steps", type=int, default=8, help="training steps per design (default 8)")
    ap.add_argument("--lengths", choices=sorted(LENGTHS), help="response lengths from the length registry")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    check_output(ap, "--json", args.json)  # before the runs
    wl = workload(args.lengths)
    try:
        runs = run_designs(args.steps, wl)
    except ValueError as exc:  # a run that cannot start (10^8 steps: the task pool): one line
        ap.error(f"--steps {args.steps:,}: {' '.join(str(exc).split())}")
    print(report(replica_throughput(wl=wl), runs))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows(runs), f, indent=1)
    return 0


if __name__ == "__main__":
    from pipesim.io.interrupts import reader_may_leave

    raise SystemExit(reader_may_leave(main))
