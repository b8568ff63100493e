"""Rebuild this folder's MLP and all-reduce extracts from a checkout of microsoft/vidur.

Provenance, not part of the test suite: ``python tests/data/vidur/extract.py VIDUR_CHECKOUT``
(a git directory is read with ``git show HEAD:path``; commit 7d47513 was used). The attention
extract is not rebuilt here: see README.md beside this file.
"""

from __future__ import annotations

import csv
import io
import math
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLUMNS = [
    "op",
    "tp",
    "n_tokens",
    "batch_size",
    "kv_len",
    "hidden_size",
    "n_heads",
    "n_kv_heads",
    "head_dim",
    "intermediate_size",
    "gated_mlp",
    "size_bytes",
    "n_gpus",
    "median_s",
]
TOKENS = {1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096}
PROJECTIONS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
MODELS = (
    "Qwen/Qwen-72B",
    "codellama/CodeLlama-34b-Instruct-hf",
    "internlm/internlm-20b",
    "meta-llama/Llama-2-70b-hf",
    "meta-llama/Llama-2-7b-hf",
    "meta-llama/Meta-Llama-3-70B",
    "meta-llama/Meta-Llama-3-8B",
    "microsoft/phi-2",
)


def show(repo: str, path: str) -> list[dict[str, str]]:
    text = subprocess.run(
        ["git", "--git-dir", repo, "show", f"HEAD:{path}"], capture_output=True, text=True, check=True
    ).stdout
    return list(csv.DictReader(io.StringIO(text)))


def write(name: str, rows: list[dict[str, object]]) -> None:
    with (HERE / name).open("w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def mlp(repo: str, gpu: str) -> None:
    out: list[dict[str, object]] = []
    for model in MODELS:
        try:
            rows = show(repo, f"data/profiling/compute/{gpu}/{model}/mlp.csv")
        except subprocess.CalledProcessError:
            continue
        for r in rows:
            if int(r["num_tokens"]) not in TOKENS:
                continue
            heads, embd = int(r["n_head"]), int(r["n_embd"])
            ms = sum(float(r[f"time_stats.{op}.median"]) for op in PROJECTIONS)
            out.append(
                {
                    "op": "linear",
                    "tp": r["num_tensor_parallel_workers"],
                    "n_tokens": r["num_tokens"],
                    "hidden_size": embd,
                    "n_heads": heads,
                    "n_kv_heads": r["n_kv_head"],
                    "head_dim": embd // heads,
                    "intermediate_size": r["n_expanded_embd"],
                    "gated_mlp": int(r["use_gated_mlp"] == "True"),
                    "median_s": f"{ms * 1e-3:.6g}",
                }
            )
    write(f"mlp_{gpu}.csv", out)


def all_reduce(repo: str, system: str) -> None:
    out: list[dict[str, object]] = []
    # one node only (NVLink); per GPU count, the size nearest each power of two from 2 KiB to 64 MiB
    rows = [r for r in show(repo, f"data/profiling/network/{system}/all_reduce.csv")]
    rows = [r for r in rows if int(r["devices_per_node"]) == int(r["num_workers"])]
    for n in sorted({int(r["num_workers"]) for r in rows}):
        mine = [r for r in rows if int(r["num_workers"]) == n]
        for k in range(11, 27):
            r = min(mine, key=lambda r: abs(math.log2(int(r["size"])) - k))
            ms = float(r["time_stats.all_reduce.median"])
            row = {
                "op": "all_reduce",
                "tp": n,
                "n_gpus": n,
                "size_bytes": r["size"],
                "median_s": f"{ms * 1e-3:.6g}",
            }
            if row not in out:
                out.append(row)
    out.sort(key=lambda row: (int(row["n_gpus"]), int(row["size_bytes"])))  # type: ignore[call-overload]
    write(f"all_reduce_{system}.csv", out)


if __name__ == "__main__":
    repo = sys.argv[1]
    for gpu in ("a100", "a40", "h100"):
        mlp(repo, gpu)
    for system in ("a100_dgx", "h100_dgx"):
        all_reduce(repo, system)
