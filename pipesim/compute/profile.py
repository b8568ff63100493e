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
GPU (``torch.distributed``; skipped with a message on one GPU). Every row also says what measured
it (:data:`~pipesim.compute.profile_shapes.PROVENANCE`: the device's name, the dtype, and whether
the profile completed or was interrupted), which ``pipesim check-roofline`` reads to pick the GPU
and to warn. Ctrl-C or SIGTERM (``timeout``'s default signal), or a shape too large for the
device's memory, writes the rows measured so far, marked incomplete, and never over a file already
at ``--out`` (beside it instead). ``docs/decode.md`` has the details.

Design: it must run where only torch is installed. Three files, this one (the measuring and the
command), :mod:`pipesim.compute.profile_shapes` (what is measured and written: the shapes, the
catalog read, the options and the CSV format, which the roofline check reads without torch) and
:mod:`pipesim.compute.profile_stop` (stopping early on a signal or a shape too large, keeping the
rows). All import only the standard library at the top, ``torch`` only inside this file's
measuring functions (so :mod:`pipesim.compute.measured` reads :data:`COLUMNS` without torch), and
run as a file none imports the ``pipesim`` package (which pulls in simpy, pandas and pyarrow).
Inputs are constant tensors: nothing here is random, and timing does not depend on the values.

How this file imports its siblings (the two branches below the imports): imported as
``pipesim.compute.profile`` (``__package__`` is ``pipesim.compute``), through the package; run as a
file (``__package__`` empty), as the top-level modules ``profile_shapes`` and ``profile_stop``,
with this folder first on ``sys.path`` for those imports only. Only then, because on ``sys.path``
this folder lets this very file shadow the standard library's ``profile`` (which ``cProfile``
imports, for torch): the ``__main__`` block removes the folder Python put there. And put there
explicitly, not left to Python, because a process the all-reduce spawns (``torch.multiprocessing``)
re-runs this file as ``__mp_main__`` with the parent's ``sys.path``, which by then lacks the
folder, before it unpickles :func:`_allreduce_worker`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

if __package__:  # imported as pipesim.compute.profile: the siblings through the package
    from pipesim.compute import profile_shapes as ps
    from pipesim.compute.profile_stop import STOP_SIGNALS as STOP_SIGNALS  # re-exported
    from pipesim.compute.profile_stop import TooLarge, shape_guard, stop_once
else:  # run as a file, or re-run by a process the all-reduce spawned (see the docstring)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import profile_shapes as ps  # type: ignore[no-redef]
        from profile_stop import STOP_SIGNALS as STOP_SIGNALS  # type: ignore[no-redef]
        from profile_stop import TooLarge, shape_guard, stop_once  # type: ignore[no-redef]
    finally:
        del sys.path[0]


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
    shapes: ps.Shapes,
    tokens: Iterable[int],
    tps: Iterable[int],
    t: Timer,
    into: list[dict[str, object]] | None = None,
) -> list[dict[str, object]]:
    """The four projections (and their sum, ``linear``) at every token count and TP degree, each
    row appended to ``into`` (returned; a new list by default) as soon as it is measured."""
    import torch

    rows: list[dict[str, object]] = [] if into is None else into
    for tp in (tp for tp in tps if shapes.tp_refusal(tp) is None):
        for n in tokens:
            with shape_guard("--tokens", str(n), tp):
                times = {
                    op: t.median_s(partial(torch.matmul, t.full(n, k), t.full(k, m)))
                    for op, (k, m) in shapes.gemms(tp).items()
                }
            rows += [shapes.row(op, tp, n_tokens=n, median_s=f"{sec:.6g}") for op, sec in times.items()]
            if len(times) == len(ps.GEMM_OPS):
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
    shapes: ps.Shapes,
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
    for tp in (tp for tp in tps if shapes.tp_refusal(tp) is None):
        hq, hkv = shapes.n_heads // tp, -(-shapes.n_kv_heads // tp)
        for b, kv in decode:
            with shape_guard("--decode", f"{b}x{kv}", tp):
                k = t.full(b, hkv, kv, d)
                sec = t.median_s(partial(_sdpa, t.full(b, hq, 1, d), k, k, None))
            rows.append(shapes.row("decode_attention", tp, batch_size=b, kv_len=kv, median_s=f"{sec:.6g}"))
        for n, kv in prefill:
            with shape_guard("--prefill", f"{n}x{kv}", tp):
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
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
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
                    "device": name,
                    "dtype": "bfloat16",
                }
            )
            if rank == 0:  # after each size, whole (renamed): an interrupt keeps the sizes done
                Path(f"{out}.part").write_text(json.dumps(rows))
                os.replace(f"{out}.part", out)
    finally:
        dist.destroy_process_group()


def measure_allreduce(
    n_gpus: Sequence[int],
    sizes: Sequence[int],
    backend: str,
    t: Timer,
    into: list[dict[str, object]] | None = None,
) -> list[dict[str, object]]:
    """All-reduce rows for each process count in ``n_gpus`` (one process per GPU, spawned),
    appended to ``into`` (returned) as each group finishes, and those of the sizes a group
    finished when it is interrupted (its rank 0 writes them after each size)."""
    import tempfile

    import torch.multiprocessing as mp

    rows: list[dict[str, object]] = [] if into is None else into
    for i, world in enumerate(n_gpus):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rows.json")
            timer = Timer(None, None, t.warmup, t.repeats)  # the device is each process's own
            try:
                mp.spawn(
                    _allreduce_worker,
                    args=(world, backend, 29517 + i, tuple(sizes), timer, out),
                    nprocs=world,
                )
            finally:  # interrupted too: the sizes this group finished
                with contextlib.suppress(OSError, ValueError):
                    rows += json.loads(Path(out).read_text())
    return rows


# -- the command --------------------------------------------------------------------------------


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


def run(args: argparse.Namespace, say: Callable[[str], object] = print) -> list[dict[str, object]]:
    """Measure what ``args`` asks for and write ``args.out``; returns the rows. Every option is
    checked before anything is measured or said. Stopped early (Ctrl-C, SIGTERM, or a shape too
    large for the device's memory: :class:`TooLarge`), the rows measured so far are written, marked
    ``complete`` 0, to :func:`~pipesim.compute.profile_shapes.partial_path` (``--out``, or beside a
    file already there: a partial profile never replaces one), and the exception goes on."""
    import torch

    shapes = ps.Shapes.from_hf_config(ps.model_config(args.model, args.config))
    ps.check_out(args.out)
    device = _device(args.device)
    dtype = getattr(torch, ps.check_dtype(args.dtype))
    opts = ps.read_options(args, shapes)
    if device.type == "cpu":
        torch.set_num_threads(1)  # tiny CPU kernels: threads only add scheduling noise
    for line in opts.skipped:
        say(line)
    if opts.worlds is not None:
        worlds = opts.worlds
    else:
        count = torch.cuda.device_count() if args.allreduce_backend == "nccl" else 0
        worlds = tuple(n for n in (2, 4, 8) if n <= count)
    gpu_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    say(f"profiling on {gpu_name} ({device}), torch {torch.__version__}, {args.dtype}")
    meta = {"device": gpu_name, "dtype": args.dtype}
    if device.type == "cpu" and args.device is None:  # chosen for the user: say what it means
        say(
            "no CUDA GPU here: these are the CPU's times, not a GPU's (pipesim check-roofline "
            "scores a GPU's), and full-size shapes take minutes on a CPU; --device cpu says it on purpose"
        )
    if shapes.moe:
        say(
            "mixture of experts: the routed experts' fused kernel is not profiled "
            "(attention projections only)"
        )
    timer = Timer(device, dtype, args.warmup, args.repeats)
    rows: list[dict[str, object]] = []
    with stop_once():  # SIGTERM too: `timeout` stops a profile with it, and no row was kept
        try:
            measure_gemms(shapes, opts.tokens, opts.tps, timer, into=rows)
            measure_attention(shapes, opts.decode, opts.prefill, opts.tps, timer, into=rows)
            if worlds:
                measure_allreduce(worlds, opts.sizes, args.allreduce_backend, timer, into=rows)
            elif device.type == "cpu":
                say(
                    "all-reduce: skipped (profiling the CPU; --allreduce-backend gloo "
                    "--allreduce-gpus 2 times it over CPU processes)"
                )
            else:
                say("all-reduce: skipped (one GPU; needs two or more)")
        except (KeyboardInterrupt, TooLarge) as stop:  # keep what was measured: minutes of a GPU's time
            _write_partial(
                rows, args.out, meta, "interrupted" if isinstance(stop, KeyboardInterrupt) else "stopped", say
            )
            raise
        ps.write_csv(rows, args.out, {**meta, "complete": 1})
    say(f"wrote {len(rows)} rows to {args.out}")
    return rows


def _write_partial(
    rows: list[dict[str, object]], out: str, meta: dict[str, str], what: str, say: Callable[[str], object]
) -> None:
    """Write the rows of a profile stopped early, marked complete=0, and say where."""
    if not rows:
        return
    path = ps.partial_path(out)
    ps.write_csv(rows, path, {**meta, "complete": 0})
    kept = "" if path == out else f"; {out} was left as it was (a partial profile never replaces a file)"
    say(
        f"{what}: wrote the {len(rows)} rows measured so far to {path} "
        f"(marked complete=0: pipesim check-roofline warns of it){kept}"
    )


def main(argv: Sequence[str] | None = None, prog: str = "python pipesim/compute/profile.py") -> int:
    args = ps.parser(prog).parse_args(argv)
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
