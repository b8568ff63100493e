"""``pipesim profile``: measure the kernels the roofline predicts on the GPU this runs on.

A user who wants to know how far :mod:`pipesim.compute.roofline` is from *their* hardware runs::

    python pipesim/compute/profile.py --model qwen3-8b --out gpu.csv      # torch alone
    python -m pipesim.compute.profile --model qwen3-8b --out gpu.csv      # where pipesim installs
    pipesim check-roofline gpu.csv --gpu h100-sxm                         # the roofline's error on it

and gets one CSV row per measurement (:data:`COLUMNS`, seconds, the median of ``--repeats`` timed
runs after ``--warmup`` untimed ones; CUDA events on a GPU, ``time.perf_counter`` on a CPU):

* ``qkv``, ``attn_out``, ``gate_up``, ``down`` -- one transformer layer's four projections for
  ``n_tokens`` tokens on one of ``tp`` GPUs (the Megatron split :func:`~pipesim.compute.roofline.
  linear_times_s` models: QKV and gate/up column parallel, the output and down projections row
  parallel), each a ``torch.matmul`` of a ``(n_tokens, k)`` activation by a ``(k, m)`` weight
  shard; ``linear`` is their sum (the figure Vidur's MLP profiles give and the existing check
  scores). Mixture-of-experts layers are profiled as their attention projections only (a fused-MoE
  kernel is not a matmul), with a message.
* ``decode_attention`` -- ``batch_size`` sequences of ``kv_len`` cached tokens each, one new query
  token per sequence, through ``torch.nn.functional.scaled_dot_product_attention`` with this GPU's
  share of the query and KV heads (grouped-query attention through ``enable_gqa``). The KV cache is
  one contiguous tensor, not vLLM's paged blocks: a lower bound on a paged kernel's time.
* ``prefill_attention`` -- ``n_tokens`` new tokens of one sequence after ``kv_len`` cached ones,
  causal (bottom-right aligned), through the same SDPA call.
* ``all_reduce`` -- ``torch.distributed.all_reduce`` of ``size_bytes`` bf16 bytes over ``n_gpus``
  processes (NCCL, one per GPU; ``--allreduce-backend gloo`` runs it on CPU processes). Skipped
  with a message on a single GPU.

Design: the module imports only the standard library at the top and ``torch`` inside the functions
that measure, so the roofline check (:mod:`pipesim.compute.measured`) can read :data:`COLUMNS`
without torch, and the file runs as a script on a machine that has torch and nothing else (no
simpy, pandas or pyarrow, which ``import pipesim`` pulls in): run as a script it never imports the
``pipesim`` package. ``--model NAME`` reads the shipped catalog's ``config.json`` dicts
(:data:`pipesim.compute.catalog.HF_CONFIGS`) -- through the package where it imports, else by
evaluating only the catalog file's config-building code (:func:`catalog_configs`) -- and
``--config FILE`` reads any Hugging Face ``config.json``. Nothing here is random: every input
tensor is filled with a constant (timing does not depend on the values).
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

_HEADER = "op,tp,n_tokens,batch_size,kv_len,hidden_size,n_heads,n_kv_heads,head_dim,intermediate_size"
COLUMNS: tuple[str, ...] = (*_HEADER.split(","), "gated_mlp", "size_bytes", "n_gpus", "median_s")
"""The measurement CSV's header (the roofline check reads this format); a field an op does not use
is empty. Shapes are the whole model's (``n_heads`` of all GPUs), ``tp`` says how they are split."""

DESCRIPTION = (
    "Measure a model's GEMMs, SDPA attention with a KV cache and all-reduce on this GPU; write the "
    "CSV the roofline check reads (pipesim check-roofline)."
)
GEMM_OPS = ("qkv", "attn_out", "gate_up", "down")
OPS = (*GEMM_OPS, "linear", "decode_attention", "prefill_attention", "all_reduce")

DEFAULT_TOKENS = (1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096)
DEFAULT_TP = (1, 2, 4, 8)
DEFAULT_DECODE = ((1, 1024), (16, 1024), (64, 1024), (128, 1024), (32, 4096), (64, 4096), (16, 16384))
"""(batch_size, kv_len) of the decode-attention rows: batch sizes and context lengths of RL rollouts."""
DEFAULT_PREFILL = ((512, 0), (2048, 0), (2048, 2048), (8192, 0))
"""(n_tokens, kv_len) of the prefill-attention rows: whole prompts and a chunk after a prefix."""
DEFAULT_ALLREDUCE_BYTES = tuple(2**k for k in range(12, 28, 2))
"""4 KiB to 64 MiB: a decode step's activations to a large prefill's."""

TINY_CONFIG: Mapping[str, Any] = {
    "model_type": "llama",
    "num_hidden_layers": 1,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 128,
    "max_position_embeddings": 256,
}
"""``--model tiny``: shapes small enough for a CPU test to measure in seconds."""


@dataclass(frozen=True)
class Shapes:
    """What the profiled kernels' shapes depend on, read from a ``config.json`` dict."""

    hidden_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate_size: int
    gated_mlp: bool = True
    moe: bool = False

    @classmethod
    def from_hf_config(cls, d: Mapping[str, Any]) -> Shapes:
        """The shapes of a Hugging Face ``config.json`` dict (``ValueError`` naming a missing or
        non-integer key); ``head_dim`` defaults to ``hidden_size / num_attention_heads``."""

        def key(name: str, default: int | None = None) -> int:
            value = d.get(name, default)
            if value is None:
                raise ValueError(f"config is missing required key {name!r}")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"config key {name!r} must be an integer >= 1, got {value!r}")
            return value

        hidden, heads = key("hidden_size"), key("num_attention_heads")
        moe = bool(d.get("num_experts") or d.get("n_routed_experts"))
        inter = key("moe_intermediate_size") if moe else key("intermediate_size")
        return cls(
            hidden_size=hidden,
            n_heads=heads,
            n_kv_heads=key("num_key_value_heads", heads),
            head_dim=key("head_dim", hidden // heads) if d.get("head_dim") is not None else hidden // heads,
            intermediate_size=inter,
            gated_mlp=d.get("hidden_act", "silu") != "gelu_new",
            moe=moe,
        )

    def gemms(self, tp: int) -> dict[str, tuple[int, int]]:
        """``op -> (k, m)``: the weight shard of each projection on one of ``tp`` GPUs, as
        :func:`pipesim.compute.roofline.linear_times_s` splits them (KV heads replicated when
        ``tp`` exceeds them; MLP width rounded up). MoE layers: the attention projections only."""
        q = -(-self.n_heads // tp) * self.head_dim
        kv = -(-self.n_kv_heads // tp) * self.head_dim
        out = {"qkv": (self.hidden_size, q + 2 * kv), "attn_out": (q, self.hidden_size)}
        if not self.moe:
            width = -(-self.intermediate_size // tp)
            out["gate_up"] = (self.hidden_size, (2 if self.gated_mlp else 1) * width)
            out["down"] = (width, self.hidden_size)
        return out

    def row(self, op: str, tp: int, **fields: object) -> dict[str, object]:
        """A CSV row of ``op`` with these shapes."""
        return {
            "op": op,
            "tp": tp,
            "hidden_size": self.hidden_size,
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
            "head_dim": self.head_dim,
            "intermediate_size": self.intermediate_size,
            "gated_mlp": int(self.gated_mlp),
            **fields,
        }


def catalog_configs(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """The shipped ``config.json`` dicts by model name, read from ``catalog.py`` beside this file
    without importing ``pipesim``: only the catalog's module-level constants, its ``_*`` config
    builders and its ``HF_CONFIGS`` assignment are evaluated (the part that needs no import but
    ``typing.Any`` and ``MappingProxyType``). ``tests/test_profile.py`` checks it equals the
    package's :data:`~pipesim.compute.catalog.HF_CONFIGS`."""
    from types import MappingProxyType

    source = (path or Path(__file__).with_name("catalog.py")).read_text()
    keep: list[ast.stmt] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("_"):
            keep.append(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and (target.id.startswith("_") or target.id == "HF_CONFIGS"):
                keep.append(node)
    namespace: dict[str, Any] = {"Any": Any, "MappingProxyType": MappingProxyType, "Mapping": Mapping}
    code = compile(ast.Module(body=keep, type_ignores=[]), "catalog.py", "exec")
    exec(code, namespace)  # noqa: S102 -- this repository's own catalog, reduced to literal-building code
    return {name: dict(cfg) for name, cfg in namespace["HF_CONFIGS"].items()}


def model_config(name: str | None, config_path: str | None) -> dict[str, Any]:
    """The ``config.json`` dict of ``--model NAME`` (``tiny`` or a catalog name) or ``--config FILE``."""
    if config_path:
        with open(config_path) as f:
            loaded = json.load(f)
        if not isinstance(loaded, dict):
            raise ValueError(f"--config {config_path}: a config.json holds a JSON object")
        return loaded
    if name is None:
        raise ValueError("give --model NAME or --config FILE")
    key = name.strip().lower()
    if key == "tiny":
        return dict(TINY_CONFIG)
    configs = catalog_configs()
    if key not in configs:
        raise ValueError(f"--model: unknown model {name!r}; valid: tiny, {', '.join(sorted(configs))}")
    return configs[key]


# -- timing -------------------------------------------------------------------------------------


def _median_s(fn: Callable[[], object], device: Any, warmup: int, repeats: int) -> float:
    """Median seconds of ``fn()`` over ``repeats`` runs after ``warmup`` (CUDA events on a GPU)."""
    import torch

    for _ in range(warmup):
        fn()
    times: list[float] = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
    else:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_gemms(
    shapes: Shapes,
    tokens: Iterable[int],
    tps: Iterable[int],
    device: Any,
    dtype: Any,
    warmup: int,
    repeats: int,
) -> list[dict[str, object]]:
    """The four projections (and their sum, ``linear``) at every token count and TP degree."""
    import torch

    rows: list[dict[str, object]] = []
    for tp in tps:
        if shapes.n_heads % tp:
            continue
        for n in tokens:
            total, times = 0.0, {}
            for op, (k, m) in shapes.gemms(tp).items():
                x = torch.full((n, k), 0.01, device=device, dtype=dtype)
                w = torch.full((k, m), 0.01, device=device, dtype=dtype)
                times[op] = _median_s(partial(torch.matmul, x, w), device, warmup, repeats)
                total += times[op]
                del x, w
            for op, seconds in times.items():
                rows.append(shapes.row(op, tp, n_tokens=n, median_s=f"{seconds:.6g}"))
            if len(times) == len(GEMM_OPS):
                rows.append(shapes.row("linear", tp, n_tokens=n, median_s=f"{total:.6g}"))
    return rows


def _sdpa(q: Any, k: Any, v: Any, causal_from: int | None) -> Any:
    """SDPA with grouped-query heads; ``causal_from`` = the cached prefix length for a causal
    (bottom-right aligned) prefill, ``None`` for decode (one query sees every key)."""
    import torch.nn.functional as F  # noqa: N812

    gqa = q.shape[1] != k.shape[1]
    kwargs: dict[str, Any] = {"enable_gqa": True} if gqa else {}
    if causal_from is None:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    if causal_from == 0:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, **kwargs)
    from torch.nn.attention.bias import causal_lower_right

    mask = causal_lower_right(q.shape[2], k.shape[2])
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)


def measure_attention(
    shapes: Shapes,
    decode: Iterable[tuple[int, int]],
    prefill: Iterable[tuple[int, int]],
    tps: Iterable[int],
    device: Any,
    dtype: Any,
    warmup: int,
    repeats: int,
) -> list[dict[str, object]]:
    """Decode and prefill attention through SDPA with this GPU's heads, for each TP degree."""
    import torch

    rows: list[dict[str, object]] = []
    d = shapes.head_dim
    for tp in tps:
        if shapes.n_heads % tp:
            continue
        hq, hkv = shapes.n_heads // tp, -(-shapes.n_kv_heads // tp)
        for b, kv in decode:
            q = torch.full((b, hq, 1, d), 0.01, device=device, dtype=dtype)
            k = torch.full((b, hkv, kv, d), 0.01, device=device, dtype=dtype)
            t = _median_s(partial(_sdpa, q, k, k, None), device, warmup, repeats)
            rows.append(shapes.row("decode_attention", tp, batch_size=b, kv_len=kv, median_s=f"{t:.6g}"))
            del q, k
        for n, kv in prefill:
            q = torch.full((1, hq, n, d), 0.01, device=device, dtype=dtype)
            k = torch.full((1, hkv, kv + n, d), 0.01, device=device, dtype=dtype)
            t = _median_s(partial(_sdpa, q, k, k, kv), device, warmup, repeats)
            rows.append(shapes.row("prefill_attention", tp, n_tokens=n, kv_len=kv, median_s=f"{t:.6g}"))
            del q, k
    return rows


def _allreduce_worker(
    rank: int, world: int, backend: str, port: int, sizes: Sequence[int], warmup: int, repeats: int, out: str
) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        rows = []
        for size in sizes:
            buf = torch.full((max(size // 2, 1),), 0.01, device=device, dtype=torch.bfloat16)
            dist.barrier()
            t = _median_s(partial(dist.all_reduce, buf), device, warmup, repeats)
            rows.append(
                {"op": "all_reduce", "tp": world, "n_gpus": world, "size_bytes": size, "median_s": f"{t:.6g}"}
            )
        if rank == 0:
            Path(out).write_text(json.dumps(rows))
    finally:
        dist.destroy_process_group()


def measure_allreduce(
    n_gpus: Sequence[int], sizes: Sequence[int], backend: str, warmup: int, repeats: int, port: int = 29517
) -> list[dict[str, object]]:
    """All-reduce rows for each process count in ``n_gpus`` (one process per GPU, spawned)."""
    import tempfile

    import torch.multiprocessing as mp

    rows: list[dict[str, object]] = []
    for i, world in enumerate(n_gpus):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rows.json")
            args = (world, backend, port + i, tuple(sizes), warmup, repeats, out)
            mp.spawn(_allreduce_worker, args=args, nprocs=world, join=True)
            rows += json.loads(Path(out).read_text())
    return rows


# -- the command --------------------------------------------------------------------------------


def _ints(text: str, name: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ValueError(f"{name}: a comma list of integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"{name}: a comma list of integers >= 1, got {text!r}")
    return values


def _pairs(text: str, name: str) -> tuple[tuple[int, int], ...]:
    out = []
    for item in text.split(","):
        parts = item.split("x")
        try:
            a, b = (int(p) for p in parts)
        except ValueError:
            raise ValueError(f"{name}: a comma list of AxB pairs (e.g. 16x1024), got {text!r}") from None
        out.append((a, b))
    return tuple(out)


_OPTIONS: tuple[tuple[str, str | None, str], ...] = (
    ("--model", None, "a catalog model (pipesim list-models) or 'tiny', e.g. qwen3-8b"),
    ("--config", None, "a Hugging Face config.json instead of --model, e.g. ./config.json"),
    ("--device", None, "cuda or cpu, default cuda when available; e.g. cpu"),
    ("--tokens", ",".join(map(str, DEFAULT_TOKENS)), "GEMM token counts, e.g. 1,64,4096"),
    ("--tp", ",".join(map(str, DEFAULT_TP)), "TP degrees to shard for, e.g. 1,2"),
    ("--decode", ",".join(f"{b}x{k}" for b, k in DEFAULT_DECODE), "decode BATCHxKV_LEN pairs, e.g. 64x4096"),
    ("--prefill", ",".join(f"{n}x{k}" for n, k in DEFAULT_PREFILL), "prefill NEWxCACHED pairs, e.g. 2048x0"),
    ("--allreduce-bytes", ",".join(map(str, DEFAULT_ALLREDUCE_BYTES)), "all-reduce sizes, e.g. 4096,1048576"),
    ("--allreduce-gpus", None, "all-reduce process counts, default 2/4/8 up to the GPUs; e.g. 2,4"),
    ("--allreduce-backend", "nccl", "nccl (GPUs) or gloo (CPU processes, for tests); e.g. gloo"),
    ("--dtype", "bfloat16", "the tensors' dtype, bfloat16 (the roofline's) by default; e.g. float32"),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The profiler's options on ``p`` (this file's parser and ``pipesim profile``'s)."""
    p.add_argument("--out", required=True, help="the CSV to write, e.g. gpu.csv")
    for flag, default, text in _OPTIONS:
        p.add_argument(flag, default=default, help=text)
    p.add_argument("--warmup", type=int, default=5, help="untimed runs before each measurement, e.g. 5")
    p.add_argument("--repeats", type=int, default=20, help="timed runs per measurement (median), e.g. 20")


def parser(prog: str = "python pipesim/compute/profile.py") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        epilog="examples:\n  python pipesim/compute/profile.py --model qwen3-8b --out gpu.csv\n"
        "  python pipesim/compute/profile.py --model tiny --device cpu --out cpu.csv",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    return p


def run(args: argparse.Namespace, say: Callable[[str], object] = print) -> list[dict[str, object]]:
    """Measure what ``args`` asks for and write ``args.out``; returns the rows."""
    import torch

    shapes = Shapes.from_hf_config(model_config(args.model, args.config))
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cpu":
        torch.set_num_threads(1)  # tiny CPU kernels: threads only add scheduling noise
    dtype = getattr(torch, args.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"--dtype: a torch dtype name (bfloat16, float32), got {args.dtype!r}")
    for name in ("warmup", "repeats"):
        if getattr(args, name) < (0 if name == "warmup" else 1):
            raise ValueError(f"--{name} must be at least {0 if name == 'warmup' else 1}")
    tps = _ints(args.tp, "--tp")
    gpu_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    say(f"profiling on {gpu_name} ({device}), torch {torch.__version__}, {args.dtype}")
    if shapes.moe:
        say(
            "mixture of experts: the routed experts' fused kernel is not profiled "
            "(attention projections only)"
        )
    rows = measure_gemms(
        shapes, _ints(args.tokens, "--tokens"), tps, device, dtype, args.warmup, args.repeats
    )
    rows += measure_attention(
        shapes,
        _pairs(args.decode, "--decode"),
        _pairs(args.prefill, "--prefill"),
        tps,
        device,
        dtype,
        args.warmup,
        args.repeats,
    )
    if args.allreduce_gpus:
        worlds = _ints(args.allreduce_gpus, "--allreduce-gpus")
    else:
        count = torch.cuda.device_count() if args.allreduce_backend == "nccl" else 0
        worlds = tuple(n for n in (2, 4, 8) if n <= count)
    if worlds:
        sizes = _ints(args.allreduce_bytes, "--allreduce-bytes")
        rows += measure_allreduce(worlds, sizes, args.allreduce_backend, args.warmup, args.repeats)
    else:
        say("all-reduce: skipped (one GPU; needs two or more)")
    write_csv(rows, args.out)
    say(f"wrote {len(rows)} rows to {args.out}")
    return rows


def write_csv(rows: Iterable[Mapping[str, object]], path: str | os.PathLike[str]) -> None:
    """Write measurement rows in the :data:`COLUMNS` format."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        for row in rows:
            w.writerow(row)


def main(argv: Sequence[str] | None = None, prog: str = "python pipesim/compute/profile.py") -> int:
    args = parser(prog).parse_args(argv)
    try:
        run(args)
    except ValueError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    # Run as a file, this folder is sys.path[0]: this very file would shadow the standard library's
    # `profile` module (which cProfile imports) for torch, so the folder goes.
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    sys.exit(main())
