"""What ``pipesim profile`` measures and writes, without torch: the model's shapes (from a
``config.json`` dict, the catalog's or ``--config FILE``'s), the command's options and the
measurement CSV's format (:data:`COLUMNS`). The measuring, with torch, is :mod:`pipesim.compute.profile`.

Like ``profile.py``, this imports only the standard library, and never the ``pipesim`` package:
``python pipesim/compute/profile.py`` imports it as the top-level module ``profile_shapes`` on a
machine where only torch is installed (``profile.py``'s docstring says how), and
:mod:`pipesim.compute.measured` reads :data:`COLUMNS` here without torch.
``--model NAME`` reads the catalog's ``config.json`` dicts by evaluating only ``catalog.py``'s
config-building code (:func:`catalog_configs`); ``--config FILE`` reads any Hugging Face
``config.json``.
"""

from __future__ import annotations

import argparse
import ast
import csv
import importlib.util
import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

_HEADER = "op,tp,n_tokens,batch_size,kv_len,hidden_size,n_heads,n_kv_heads,head_dim,intermediate_size"
PROVENANCE = ("device", "dtype", "complete")
"""The columns that say what measured a row: ``device`` (torch's name for it: ``cpu``, or the GPU's,
e.g. ``NVIDIA H100 80GB HBM3``), ``dtype`` (the tensors', e.g. ``bfloat16``) and ``complete`` (1,
or 0 in every row of a profile that was interrupted). Vidur's extracts lack them (empty when read)."""
COLUMNS: tuple[str, ...] = (
    *_HEADER.split(","),
    "gated_mlp",
    "size_bytes",
    "n_gpus",
    "median_s",
    *PROVENANCE,
)
"""The measurement CSV's header (the roofline check reads this format); a field an op does not use
is empty. Shapes are the whole model's (``n_heads`` of all GPUs), ``tp`` says how they are split."""
DTYPES = ("bfloat16", "float16", "float32")
"""The ``--dtype`` values: those ``torch.matmul`` and SDPA run in on a GPU (the roofline assumes
bfloat16; the others are for comparison)."""

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
MAX_REPEATS = 10_000
"""The most ``--warmup`` or ``--repeats`` runs per measurement, for the script and ``pipesim
profile`` alike: a median of 10,000 is as steady as timing gets; a billion ran for days (each shape
is measured that many times)."""

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
        non-integer key); ``head_dim`` defaults to ``hidden_size / num_attention_heads``, which
        must then be whole; the MLP is
        gated (SwiGLU), as in every model type the catalog reads."""

        def key(name: str, default: int | None = None) -> int:
            value = d.get(name, default)
            if value is None:
                raise ValueError(f"config is missing required key {name!r}")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"config key {name!r} must be an integer >= 1, got {value!r}")
            return value

        hidden, heads = key("hidden_size"), key("num_attention_heads")
        if d.get("head_dim") is None and hidden % heads:  # as ModelSpec.from_hf_config refuses it
            raise ValueError(
                f"config key 'hidden_size' ({hidden}) is not a multiple of 'num_attention_heads' "
                f"({heads}) and the config gives no 'head_dim'"
            )
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

    def tp_refusal(self, tp: int) -> str | None:
        """Why the roofline refuses ``tp`` for these shapes (``None`` when it does not): as
        :func:`pipesim.compute.roofline.check_tp` and vLLM, ``tp`` divides the attention heads,
        and divides the KV heads or is a multiple of them. A profile skips such a degree, since
        ``pipesim check-roofline`` could not score its rows."""
        if self.n_heads % tp:
            return f"does not divide the model's {self.n_heads} attention heads"
        if self.n_kv_heads % tp and tp % self.n_kv_heads:
            return f"neither divides the model's {self.n_kv_heads} KV heads nor is a multiple of them"
        return None

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
    """The ``config.json`` dict of ``--model NAME`` (``tiny`` or a catalog name) or ``--config FILE``
    (ValueError when both are given: they name the model twice)."""
    if name is not None and config_path:
        raise ValueError(f"--model {name} and --config {config_path}: both name the model; give one")
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


# -- the command's options and its CSV ---------------------------------------------------------


def parse_ints(text: str, name: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ValueError(f"{name}: a comma list of integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"{name}: a comma list of integers >= 1, got {text!r}")
    return values


def parse_worlds(text: str) -> tuple[int, ...]:
    """``--allreduce-gpus``: process counts of two or more (one process has nothing to reduce
    with, and the roofline predicts 0 s for it)."""
    worlds = parse_ints(text, "--allreduce-gpus")
    if min(worlds) < 2:
        raise ValueError(
            f"--allreduce-gpus: process counts of 2 or more (an all-reduce over one process "
            f"exchanges nothing), got {text!r}"
        )
    return worlds


def check_dtype(text: str) -> str:
    """``--dtype``: one of :data:`DTYPES` (ValueError naming it otherwise), before torch runs."""
    if text not in DTYPES:
        raise ValueError(f"--dtype: one of {', '.join(DTYPES)}, got {text!r}")
    return text


def parse_pairs(text: str, name: str, least_second: int = 1) -> tuple[tuple[int, int], ...]:
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


@dataclass(frozen=True)
class Options:
    """The command's measurement options, parsed and checked (:func:`read_options`)."""

    tps: tuple[int, ...]
    """The ``--tp`` degrees measured (those the roofline accepts for the model)."""
    skipped: tuple[str, ...]
    """One line for each ``--tp`` degree left out, and why."""
    tokens: tuple[int, ...]
    decode: tuple[tuple[int, int], ...]
    prefill: tuple[tuple[int, int], ...]
    sizes: tuple[int, ...]
    worlds: tuple[int, ...] | None
    """``--allreduce-gpus``, or ``None`` for the default (2/4/8 up to the GPUs torch sees)."""


def read_options(args: argparse.Namespace, shapes: Shapes) -> Options:
    """Every measurement option of ``args``, checked before anything is measured or said
    (ValueError naming the option): ``--warmup`` and ``--repeats`` within 0 (1) to
    :data:`MAX_REPEATS`, the lists, and at least one ``--tp`` degree :meth:`Shapes.tp_refusal`
    accepts."""
    for name, least in (("warmup", 0), ("repeats", 1)):
        value = getattr(args, name)
        if not least <= value <= MAX_REPEATS:
            raise ValueError(f"--{name} must be from {least} to {MAX_REPEATS:,}, got {value:,}")
    tps = parse_ints(args.tp, "--tp")
    why = {tp: shapes.tp_refusal(tp) for tp in dict.fromkeys(tps)}
    usable = tuple(tp for tp in tps if why[tp] is None)
    if not usable:
        raise ValueError(f"--tp: no degree of {args.tp!r} suits the model: {tps[0]} {why[tps[0]]}")
    return Options(
        tps=usable,
        skipped=tuple(
            f"--tp {tp}: skipped ({text}; pipesim check-roofline refuses it)"
            for tp, text in why.items()
            if text
        ),
        tokens=parse_ints(args.tokens, "--tokens"),
        decode=parse_pairs(args.decode, "--decode"),
        prefill=parse_pairs(args.prefill, "--prefill", least_second=0),
        sizes=parse_ints(args.allreduce_bytes, "--allreduce-bytes"),
        worlds=parse_worlds(args.allreduce_gpus) if args.allreduce_gpus else None,
    )


def check_out(path: str) -> None:
    """ValueError naming ``--out`` when the CSV cannot be written there (checked before measuring,
    so minutes of measurement are not lost to a typo in the folder)."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"--out {path}: a folder; give a file name, e.g. {p / 'gpu.csv'}")
    if not p.parent.is_dir():
        raise ValueError(f"--out {path}: the folder {str(p.parent)!r} does not exist")
    if not os.access(p.parent, os.W_OK):
        raise ValueError(f"--out {path}: the folder {str(p.parent)!r} is not writable")


_OPTIONS: tuple[tuple[str, str | None, str, str], ...] = (  # flag, default (None: as said), what, e.g.
    ("--model", None, "a catalog model (docs/compute.md) or 'tiny' (no default; else --config)", "qwen3-8b"),
    ("--config", None, "a Hugging Face config.json instead of --model (default none)", "./config.json"),
    ("--device", None, "cuda or cpu (default cuda when available, else cpu)", "cpu"),
    ("--tokens", ",".join(map(str, DEFAULT_TOKENS)), "GEMM token counts", "1,64,4096"),
    ("--tp", ",".join(map(str, DEFAULT_TP)), "TP degrees to shard for", "1,2"),
    ("--decode", ",".join(f"{b}x{k}" for b, k in DEFAULT_DECODE), "decode BATCHxKV_LEN pairs", "64x4096"),
    ("--prefill", ",".join(f"{n}x{k}" for n, k in DEFAULT_PREFILL), "prefill NEWxCACHED pairs", "2048x0"),
    ("--allreduce-bytes", ",".join(map(str, DEFAULT_ALLREDUCE_BYTES)), "all-reduce sizes", "4096,1048576"),
    ("--allreduce-gpus", None, "all-reduce process counts (default 2,4,8 up to the GPUs)", "2,4"),
    ("--allreduce-backend", "nccl", "nccl (GPUs) or gloo (CPU processes, for tests)", "gloo"),
    ("--dtype", "bfloat16", "the tensors' dtype: bfloat16 (the roofline's), float16, float32", "float32"),
    ("--warmup", "5", "untimed runs before each measurement", "3"),
    ("--repeats", "20", "timed runs per measurement, their median kept", "50"),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The profiler's options on ``p`` (this file's parser and ``pipesim profile``'s); each help
    states the option's default (a list's with spaces after its commas, so that it wraps)."""
    p.add_argument("--out", required=True, help="the CSV to write (required); e.g. gpu.csv")
    for flag, default, text, example in _OPTIONS:
        said = "" if default is None else f" (default {default.replace(',', ', ')})"
        kind: Any = int if flag in ("--warmup", "--repeats") else str
        value = None if default is None else kind(default)
        p.add_argument(flag, type=kind, default=value, help=f"{text}{said}; e.g. {example}")


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


def _atomic() -> ModuleType:
    """:mod:`pipesim.core.atomic` (standard library only): through the package where this file was
    imported through it, else read from its file beside this folder, without the package."""
    if __package__:
        from pipesim.core import atomic

        return atomic
    name = "_pipesim_core_atomic"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "core" / "atomic.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its classes look their module up while they are made
        spec.loader.exec_module(module)
    return sys.modules[name]


def partial_path(path: str) -> str:
    """Where an incomplete profile (interrupted, or stopped by a shape too large) is written:
    ``path``, unless a file with content is already there (a complete profile of before, which a
    partial one must not replace): then ``NAME.partial.csv`` beside it. A pipe or ``/dev/stdout``
    is written in place."""
    p = Path(path)
    if _atomic().writes_in_place(p) or not p.is_file() or p.stat().st_size == 0:
        return path
    return str(p.with_name(f"{p.stem}.partial{p.suffix or '.csv'}"))


def write_csv(
    rows: Iterable[Mapping[str, object]],
    path: str | os.PathLike[str],
    meta: Mapping[str, object] | None = None,
) -> None:
    """Write measurement rows in the :data:`COLUMNS` format, whole or not at all
    (:func:`pipesim.io.interrupts.write_atomic`: a temporary file beside ``path``, then renamed;
    a FIFO or ``/dev/stdout`` is written in place, a link's file rather than the link); ``meta``
    fills the columns a row leaves out (its :data:`PROVENANCE`: the device, the dtype, whether
    the profile completed)."""

    def write(target: Path) -> None:
        with open(target, "w", newline="") as f:
            w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
            w.writeheader()
            for row in rows:
                w.writerow({**(meta or {}), **row})

    _atomic().write_atomic(path, write)
