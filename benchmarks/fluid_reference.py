"""The fluid replica against the per-iteration reference: the table of ``docs/compute.md``.

``pipesim.compute.engine.ComputeReplica`` jumps over decode iterations in closed form (a
quadratic in a per-replica token clock); ``reference()`` in ``tests/test_compute_engine.py``
steps vLLM's prefill-first scheduler one prefill or decode iteration at a time. This script runs
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
``--quick`` runs a tenth of the cases).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipesim.compute import GPUS, MODELS  # noqa: E402
from pipesim.compute.cost import EngineConfig  # noqa: E402
from tests.test_compute_engine import config_with_budget, reference, run_replica  # noqa: E402

MODEL_NAMES = ("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b")
SEQUENCES_PER_CASE = 48


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--seed", type=int, default=0, help="seed of the lengths, arrivals and constants (default 0)"
    )
    ap.add_argument("--quick", action="store_true", help="a tenth of the cases (a smoke run)")
    args = ap.parse_args(argv)
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
