"""``pipesim profile``: measure the kernels the roofline predicts on the GPU this runs on.

::

    python pipesim/compute/profile.py --model qwen3-8b --out gpu.csv      # torch alone
    pipesim profile --model qwen3-8b --out gpu.csv                        # where pipesim installs
    pipesim check-roofline gpu.csv --gpu h100-sxm                         # the roofline's error on it

One CSV row per measurement (:data:`COLUMNS`; seconds, the median of ``--repeats`` timed runs after
``--warmup``, CUDA events on a GPU): a layer's four projections (``qkv``, ``attn_out``, ``gate_up``,
``down``, each a ``torch.matmul`` of the weight shard one of ``tp`` GPUs holds, as
:func:`~pipesim.compute.roofline.linear_times_s` splits them) and their sum ``linear``;
``decode_attention`` and ``prefill_attention`` through ``scaled_dot_product_attention`` with this
GPU's heads (a contiguous KV cache, not vLLM's paged blocks); ``all_reduce`` over one process per
GPU (``torch.distributed``; skipped with a message on one GPU). ``docs/decode.md`` has the details.

Design: one self-contained file, because it must run where only torch is installed. It imports the
standard library at the top and ``torch`` inside the functions that measure (so
:mod:`pipesim.compute.measured` reads :data:`COLUMNS` without torch), and run as a file it never
imports the ``pipesim`` package (which pulls in simpy, pandas and pyarrow): ``--model NAME`` reads
the catalog's ``config.json`` dicts by evaluating only ``catalog.py``'s config-building code
(:func:`catalog_configs`); ``--config FILE`` reads any Hugging Face ``config.json``. Inputs are
constant tensors: nothing here is random, and timing does not depend on the values.
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
        non-integer key); ``head_dim`` defaults to ``hidden_size / num_attention_heads``; the MLP is
        gated (SwiGLU), as in every model type the catalog reads."""

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
            head_dim=key("head_dim") if d.get("head_dim") is not None else hidden // heads,
            intermediate_size=inter,
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


@dataclass(frozen=True)
class Timer:
    """Where and how to measure: the torch device and dtype, untimed and timed runs per kernel."""

    device: Any
    dtype: Any
    warmup: int
    repeats: int

    def full(self, *shape: int) -> Any:
        """A constant tensor of ``shape`` (timing does not depend on the values)."""
        import torch

        return torch.full(shape, 0.01, device=self.device, dtype=self.dtype)

    def median_s(self, fn: Callable[[], object]) -> float:
        """Median seconds of ``fn()`` over the timed runs (CUDA events on a GPU)."""
        import torch

        for _ in range(self.warmup):
            fn()
        times: list[float] = []
        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(self.device)
        for _ in range(self.repeats):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e-3)
            else:
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        return statistics.median(times)


def measure_gemms(
    shapes: Shapes,
    tokens: Iterable[int],
    tps: Iterable[int],
    t: Timer,
    into: list[dict[str, object]] | None = None,
) -> list[dict[str, object]]:
    """The four projections (and their sum, ``linear``) at every token count and TP degree, each
    row appended to ``into`` (returned; a new list by default) as soon as it is measured."""
    import torch

    rows: list[dict[str, object]] = [] if into is None else into
    for tp in (tp for tp in tps if not shapes.n_heads % tp):
        for n in tokens:
            times = {
                op: t.median_s(partial(torch.matmul, t.full(n, k), t.full(k, m)))
                for op, (k, m) in shapes.gemms(tp).items()
            }
            rows += [shapes.row(op, tp, n_tokens=n, median_s=f"{sec:.6g}") for op, sec in times.items()]
            if len(times) == len(GEMM_OPS):
                rows.append(shapes.row("linear", tp, n_tokens=n, median_s=f"{sum(times.values()):.6g}"))
    return rows


def _sdpa(q: Any, k: Any, v: Any, causal_from: int | None) -> Any:
    """SDPA with grouped-query heads; ``causal_from`` = the cached prefix length for a causal
    (bottom-right aligned) prefill, ``None`` for decode (one query sees every key)."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    kwargs: dict[str, Any] = {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}
    if causal_from is None:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    if causal_from == 0:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, **kwargs)
    from torch.nn.attention.bias import causal_lower_right

    try:  # lets SDPA pick its flash kernel
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=causal_lower_right(q.shape[2], k.shape[2]), **kwargs
        )
    except (TypeError, RuntimeError):  # a torch whose causal bias refuses enable_gqa: an explicit mask
        n, total = q.shape[2], k.shape[2]
        mask = torch.ones(n, total, dtype=torch.bool, device=q.device).tril(diagonal=total - n)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)


def measure_attention(
    shapes: Shapes,
    decode: Iterable[tuple[int, int]],
    prefill: Iterable[tuple[int, int]],
    tps: Iterable[int],
    t: Timer,
    into: list[dict[str, object]] | None = None,
) -> list[dict[str, object]]:
    """Decode and prefill attention through SDPA with this GPU's heads, for each TP degree (rows
    appended to ``into`` as they are measured, as :func:`measure_gemms` does)."""
    rows: list[dict[str, object]] = [] if into is None else into
    d = shapes.head_dim
    for tp in (tp for tp in tps if not shapes.n_heads % tp):
        hq, hkv = shapes.n_heads // tp, -(-shapes.n_kv_heads // tp)
        for b, kv in decode:
            k = t.full(b, hkv, kv, d)
            sec = t.median_s(partial(_sdpa, t.full(b, hq, 1, d), k, k, None))
            rows.append(shapes.row("decode_attention", tp, batch_size=b, kv_len=kv, median_s=f"{sec:.6g}"))
        for n, kv in prefill:
            k = t.full(1, hkv, kv + n, d)
            sec = t.median_s(partial(_sdpa, t.full(1, hq, n, d), k, k, kv))
            rows.append(shapes.row("prefill_attention", tp, n_tokens=n, kv_len=kv, median_s=f"{sec:.6g}"))
    return rows


def _allreduce_worker(
    rank: int, world: int, backend: str, port: int, sizes: Sequence[int], t: Timer, out: str
) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        mine = Timer(device, torch.bfloat16, t.warmup, t.repeats)
        rows = []
        for size in sizes:
            buf = mine.full(max(size // 2, 1))
            dist.barrier()
            sec = mine.median_s(partial(dist.all_reduce, buf))
            rows.append(
                {
                    "op": "all_reduce",
                    "tp": world,
                    "n_gpus": world,
                    "size_bytes": size,
                    "median_s": f"{sec:.6g}",
                }
            )
        if rank == 0:
            Path(out).write_text(json.dumps(rows))
    finally:
        dist.destroy_process_group()


def measure_allreduce(
    n_gpus: Sequence[int], sizes: Sequence[int], backend: str, t: Timer
) -> list[dict[str, object]]:
    """All-reduce rows for each process count in ``n_gpus`` (one process per GPU, spawned)."""
    import tempfile

    import torch.multiprocessing as mp

    rows: list[dict[str, object]] = []
    for i, world in enumerate(n_gpus):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rows.json")
            timer = Timer(None, None, t.warmup, t.repeats)  # the device is each process's own
            mp.spawn(
                _allreduce_worker, args=(world, backend, 29517 + i, tuple(sizes), timer, out), nprocs=world
            )
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


def _pairs(text: str, name: str, least_second: int = 1) -> tuple[tuple[int, int], ...]:
    """``AxB,...`` as pairs, ``A >= 1`` and ``B >= least_second`` (a prefill's cached tokens may be 0)."""
    out = []
    for item in text.split(","):
        parts = item.split("x")
        try:
            a, b = (int(p) for p in parts)
        except ValueError:
            raise ValueError(f"{name}: a comma list of AxB pairs (e.g. 16x1024), got {text!r}") from None
        if a < 1 or b < least_second:
            raise ValueError(f"{name}: AxB with A >= 1 and B >= {least_second} (e.g. 16x1024), got {item!r}")
        out.append((a, b))
    return tuple(out)


def _device(text: str | None) -> Any:
    """The torch device ``--device`` names (default: cuda when torch sees a GPU, else cpu);
    ValueError naming ``--device`` for a device this machine lacks or one timing cannot use."""
    import torch

    try:
        device = torch.device(text or ("cuda" if torch.cuda.is_available() else "cpu"))
    except (RuntimeError, ValueError):
        raise ValueError(f"--device: cuda, cuda:N or cpu, got {text!r}") from None
    if device.type not in ("cuda", "cpu"):
        raise ValueError(
            f"--device: cuda, cuda:N or cpu (timing uses CUDA events or the CPU clock), got {text!r}"
        )
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"--device {text}: torch {torch.__version__} sees no CUDA GPU on this machine; "
                "use --device cpu"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"--device {text}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    return device


def _check_out(path: str) -> None:
    """ValueError naming ``--out`` when the CSV cannot be written there (checked before measuring,
    so minutes of measurement are not lost to a typo in the folder)."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"--out {path}: a folder; give a file name, e.g. {p / 'gpu.csv'}")
    if not p.parent.is_dir():
        raise ValueError(f"--out {path}: the folder {str(p.parent)!r} does not exist")
    if not os.access(p.parent, os.W_OK):
        raise ValueError(f"--out {path}: the folder {str(p.parent)!r} is not writable")


_OPTIONS: tuple[tuple[str, str | None, str], ...] = (
    ("--model", None, "a catalog model name (docs/compute.md) or 'tiny', e.g. qwen3-8b"),
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
    _check_out(args.out)
    device = _device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)  # tiny CPU kernels: threads only add scheduling noise
    dtype = getattr(torch, args.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"--dtype: a torch dtype name (bfloat16, float32), got {args.dtype!r}")
    for name in ("warmup", "repeats"):
        if getattr(args, name) < (0 if name == "warmup" else 1):
            raise ValueError(f"--{name} must be at least {0 if name == 'warmup' else 1}")
    tps = _ints(args.tp, "--tp")
    tokens = _ints(args.tokens, "--tokens")
    decode, prefill = _pairs(args.decode, "--decode"), _pairs(args.prefill, "--prefill", least_second=0)
    usable = tuple(tp for tp in tps if not shapes.n_heads % tp)
    if not usable:
        raise ValueError(f"--tp: none of {args.tp} divides the model's {shapes.n_heads} attention heads")
    if usable != tps:
        skipped = ", ".join(str(tp) for tp in tps if tp not in usable)
        say(f"--tp {skipped}: skipped (does not divide the model's {shapes.n_heads} attention heads)")
    if args.allreduce_gpus:
        worlds = _ints(args.allreduce_gpus, "--allreduce-gpus")
    else:
        count = torch.cuda.device_count() if args.allreduce_backend == "nccl" else 0
        worlds = tuple(n for n in (2, 4, 8) if n <= count)
    sizes = _ints(args.allreduce_bytes, "--allreduce-bytes")
    gpu_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    say(f"profiling on {gpu_name} ({device}), torch {torch.__version__}, {args.dtype}")
    if shapes.moe:
        say(
            "mixture of experts: the routed experts' fused kernel is not profiled "
            "(attention projections only)"
        )
    timer = Timer(device, dtype, args.warmup, args.repeats)
    rows: list[dict[str, object]] = []
    try:
        measure_gemms(shapes, tokens, usable, timer, into=rows)
        measure_attention(shapes, decode, prefill, usable, timer, into=rows)
        if worlds:
            rows += measure_allreduce(worlds, sizes, args.allreduce_backend, timer)
        else:
            say("all-reduce: skipped (one GPU; needs two or more)")
    except KeyboardInterrupt:  # keep what was measured: minutes of a GPU's time
        if rows:
            write_csv(rows, args.out)
            say(f"interrupted: wrote the {len(rows)} rows measured so far to {args.out}")
        raise
    write_csv(rows, args.out)
    say(f"wrote {len(rows)} rows to {args.out}")
    return rows


def write_csv(rows: Iterable[Mapping[str, object]], path: str | os.PathLike[str]) -> None:
    """Write measurement rows in the :data:`COLUMNS` format (whole or not at all: a temporary file
    beside ``path``, then renamed)."""
    tmp = Path(f"{os.fspath(path)}.part")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        w.writeheader()
        for row in rows:
            w.writerow(row)
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None, prog: str = "python pipesim/compute/profile.py") -> int:
    args = parser(prog).parse_args(argv)
    try:
        run(args)
    except ValueError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    # Run as a file, this folder is sys.path[0]: this very file would shadow the standard library's
    # `profile` module (which cProfile imports) for torch, so the folder goes.
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    sys.exit(main())
