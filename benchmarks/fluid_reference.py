"""The fluid replica against the per-iteration reference: the table of ``docs/compute.md``.

``pipesim.compute.engine.ComputeReplica`` jumps over decode iterations in closed form (a
quadratic in a per-replica token clock); :func:`reference` steps vLLM's prefill-first scheduler
one prefill or decode iteration at a time. This script runs
three families of seeded cases through both and prints, per family, the completion times'
relative error (median, 99th percentile, max) as the docs' table shows it:

* **all start at once**: three models (Qwen3 0.6B, 1.7B, 4B), TP 1 and 2, ``max_num_seqs`` 8
  and 32 against 48 sequences, so most queue behind the batch limit;
* **staggered arrivals**: the same, arrivals drawn over the first half second;
* **tight KV budget**: 80 cases on budgets of 1,200 to 4,000 tokens (so the cache fills and the
  newest sequence is preempted and recomputed), iteration overhead drawn in 0 to 2 ms, eager
  mode or CUDA graphs, batch limit 64.

The sequences' prompt and response lengths are drawn from one ``numpy`` generator (``--seed``).
The tests hold the same agreement to 1e-9 on Hypothesis-drawn cases
(``tests/test_compute_fluid_exact.py``); this script is the table, not a test.

Usage: ``python benchmarks/fluid_reference.py [--seed 0] [--quick]`` (a few seconds;
``--quick`` runs a quarter of the batch-limit cases, all at once and staggered, and a tenth of the
tight-KV ones: 1 repeat of 4, 8 cases of 80).

:func:`config_with_budget`, :func:`run_replica` and :func:`reference` are copies of the helpers of
``tests/test_compute_engine.py`` (less the pause and multi-turn options this table does not use),
so that the script needs pipesim and numpy, not pytest and Hypothesis;
``tests/test_bench_args.py`` checks that the copies give the test module's numbers.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pipesim  # noqa: E402
from pipesim.compute import GPUS, MODELS  # noqa: E402
from pipesim.compute.cost import EngineConfig, ReplicaCost  # noqa: E402
from pipesim.compute.engine import ComputeReplica  # noqa: E402
from pipesim.core.clock import Clock  # noqa: E402

MODEL_NAMES = ("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b")
SEQUENCES_PER_CASE = 48


# -- the fluid replica and the per-iteration reference (copies of tests/test_compute_engine.py's) --
def config_with_budget(tokens: int, **kw: Any) -> EngineConfig:
    """An engine config of qwen3-0.6b whose KV budget is about ``tokens`` tokens."""
    base = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=1024, **kw)
    need = base.weight_bytes_per_gpu + (tokens + 0.5) * base.kv_bytes_per_token_per_gpu
    return EngineConfig(
        model=base.model,
        gpu=base.gpu,
        max_model_len=1024,
        gpu_memory_utilization=need / base.gpu.hbm_bytes,
        **kw,
    )


@dataclass
class FixedTokens:
    prompt: list[int]
    response: list[int]
    generated: list[float] = field(default_factory=list)
    turns: dict[int, list[tuple[int, float, int]]] = field(default_factory=dict)
    truncated: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.generated = [0.0] * len(self.prompt)
        self.truncated = [False] * len(self.prompt)

    def tokens_of(self, i: int) -> tuple[int, int, int]:
        return self.prompt[i], self.response[i], max(self.response)


class StubPipeline:
    """What a replica needs of the kernel: a clock, the update log, a completion callback."""

    def __init__(self) -> None:
        self.env = Clock()  # the engines' SimPy environment (pipesim.core.clock)
        self.updates: list[Any] = []
        self.finished: list[pipesim.Episode] = []

    def on_finished(self, episodes: list[pipesim.Episode], now: float, in_pass: bool = False) -> None:
        self.finished.extend(episodes)


def run_replica(cfg: EngineConfig, seqs: list[tuple[float, int, int]]) -> tuple[list[float], ComputeReplica]:
    """Completion times of ``(arrival_s, prompt, response)`` sequences on one replica."""
    p = StubPipeline()
    src = FixedTokens([s[1] for s in seqs], [s[2] for s in seqs], turns={})
    rep = ComputeReplica(p, len(seqs), 0, ReplicaCost(cfg), src)  # type: ignore[arg-type]
    eps = [pipesim.Episode(i, i, 0.0, 0) for i in range(len(seqs))]

    def arrivals() -> Any:
        for ep, (at, _, _) in sorted(zip(eps, seqs, strict=True), key=lambda x: x[1][0]):
            if at > p.env.now:  # starts at one instant go together, as the kernel's pass does
                # at the absolute time, as the kernel wakes: timeout(at - now) can miss it by an
                # ulp (from now 0.5106..., 1.9999999999999998 - now lands 2e-16 early), and the
                # second of two starts at that time then came 2e-16 after the first's prefill
                yield p.env.wake_at(p.env.wake_up(), at)
            rep.start(ep, p.env.now)

    p.env.process(arrivals())
    p.env.run()
    assert len(p.finished) == len(seqs)
    return [float(ep.end_s) for ep in eps], rep  # type: ignore[arg-type]


def reference(cfg: EngineConfig, seqs: list[tuple[float, int, int]]) -> list[float]:
    """One engine step at a time (vLLM's prefill-first scheduler): at each step boundary the
    arrivals join the queue; while the next iteration's tokens would overflow the KV budget the
    newest sequence is preempted (to the head of the queue, to be recomputed); if some fit (FIFO,
    up to max_num_seqs, the watermark kept free) the step prefills them all (a recomputed one its
    prompt and what it generated), else it is one decode iteration of every running sequence,
    reading the whole KV cache."""
    cost = ReplicaCost(cfg)
    order = sorted(range(len(seqs)), key=lambda i: seqs[i][0])
    queue: list[int] = []
    running: dict[int, int] = {}  # the sequences on the GPU
    end = [math.nan] * len(seqs)
    t, nxt = 0.0, 0
    gen = [0] * len(seqs)
    admitted: list[int] = []  # admission order, for preemption
    budget, cap = cost.budget, cost.budget * (1 - cfg.watermark)

    def kv() -> int:
        return sum(seqs[i][1] + gen[i] for i in running)

    while nxt < len(order) or queue or running:
        while nxt < len(order) and seqs[order[nxt]][0] <= t:
            queue.append(order[nxt])
            nxt += 1
        while len(running) > 1 and kv() + len(running) > budget:  # the next step's tokens overflow
            i = admitted.pop()
            if i in running:
                del running[i]
                queue.insert(0, i)
        new = []
        while queue and (
            not running
            or (
                len(running) < cfg.max_num_seqs
                and kv() + seqs[queue[0]][1] + gen[queue[0]] + len(running) + 1 <= cap
            )
        ):
            i = queue.pop(0)
            running[i] = gen[i]
            admitted.append(i)
            new.append(seqs[i][1] + gen[i])
        if new:  # a prefill step; the scheduler looks at the queue again before decoding
            t += cost.prefill_s(sum(new), sum(0.5 * n * n for n in new), len(new))
            continue
        if not running:
            t = seqs[order[nxt]][0]
            continue
        t += cost.iteration_s(len(running), kv())
        for i in list(running):
            gen[i] += 1
            if gen[i] == seqs[i][2]:
                end[i] = t
                del running[i]
    return end


@dataclass
class Family:
    """One row of the table: the relative errors of every completion time of its cases."""

    name: str
    errors: list[float]
    preemptions: int = 0

    def row(self) -> str:
        e = np.asarray(self.errors)
        med, p99, top = np.median(e), np.quantile(e, 0.99), e.max()
        extra = f" ({self.preemptions:,} preemptions)" if self.preemptions else ""
        return f"| {self.name}{extra} | {len(e):,} | {sci(med)} | {sci(p99)} | {sci(top)} |"


def sci(x: float) -> str:
    """``3e-16`` as the docs write it; an exact 0 as ``0``."""
    return "0" if x == 0 else f"{x:.0e}".replace("e-0", "e-")


def rel_errors(fluid: list[float], slow: list[float]) -> list[float]:
    return [abs(f / s - 1.0) for f, s in zip(fluid, slow, strict=True)]


def lengths(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.integers(20, 400, n), rng.integers(1, 700, n)


def batch_limit_cases(rng: np.random.Generator, staggered: bool, repeats: int) -> Family:
    fam = Family("staggered arrivals" if staggered else "all start at once", [])
    for _ in range(repeats):
        for name in MODEL_NAMES:
            for tp in (1, 2):
                for max_num_seqs in (8, 32):
                    cfg = EngineConfig(
                        model=MODELS[name],
                        gpu=GPUS["h100-sxm"],
                        tp=tp,
                        max_model_len=4096,
                        max_num_seqs=max_num_seqs,
                    )
                    prompt, response = lengths(rng, SEQUENCES_PER_CASE)
                    at = (
                        rng.uniform(0.0, 0.5, SEQUENCES_PER_CASE)
                        if staggered
                        else np.zeros(SEQUENCES_PER_CASE)
                    )
                    seqs = [(float(a), int(p), int(r)) for a, p, r in zip(at, prompt, response, strict=True)]
                    fluid, _ = run_replica(cfg, seqs)
                    fam.errors += rel_errors(fluid, reference(cfg, seqs))
    return fam


def tight_budget_cases(rng: np.random.Generator, cases: int) -> Family:
    fam = Family("tight KV budget", [])
    for _ in range(cases):
        n = int(rng.integers(8, 32))
        cfg = config_with_budget(
            int(rng.integers(1200, 4000)),
            iteration_overhead_s=float(rng.uniform(0.0, 2e-3)),
            enforce_eager=bool(rng.integers(0, 2)),
            max_num_seqs=64,
        )
        prompt, response = lengths(rng, n)
        at = rng.uniform(0.0, 0.3, n)
        seqs = [(float(a), int(p), int(r)) for a, p, r in zip(at, prompt, response, strict=True)]
        fluid, rep = run_replica(cfg, seqs)
        fam.errors += rel_errors(fluid, reference(cfg, seqs))
        fam.preemptions += rep.preemptions
    return fam


def seed(text: str) -> int:
    """An argparse ``type=``: a seed numpy takes (0 to 2**64 - 1); anything else is argparse's
    usage error naming the flag (exit 2), not numpy's traceback."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < 2**64:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to 2**64 - 1, got {text!r}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--seed",
        type=seed,
        default=0,
        help="seed of the lengths, arrivals and constants, 0 to 2**64 - 1 (default 0)",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: a quarter of the batch-limit cases and a tenth of the tight-KV ones",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    repeats, tight = (1, 8) if args.quick else (4, 80)
    t0 = time.process_time()
    families = [
        batch_limit_cases(rng, staggered=False, repeats=repeats),
        batch_limit_cases(rng, staggered=True, repeats=repeats),
        tight_budget_cases(rng, tight),
    ]
    print("| cases | sequences | median rel. error | p99 | max |")
    print("|-------|----------:|------------------:|----:|----:|")
    for fam in families:
        print(fam.row())
    print(f"\n{time.process_time() - t0:.1f} s CPU; seed {args.seed}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
