"""The roofline against measurements: read a measurement CSV, predict every row, score the errors.

The CSV is the format :mod:`pipesim.compute.profile` writes (:data:`~pipesim.compute.profile.
COLUMNS`), and the format of the Vidur extracts under ``tests/data/vidur/`` (``docs/decode.md``).
Each row is one measured kernel (or, for ``linear``, the sum of a layer's four projections) with
its shapes; :func:`predict_s` gives the roofline's seconds for it from those shapes alone, on a
:class:`~pipesim.compute.gpus.GPUSpec`, with one :class:`~pipesim.compute.roofline.Efficiency`
and one all-reduce latency for every row (the global constants; nothing is fitted per table):

* ``qkv`` / ``attn_out`` / ``gate_up`` / ``down`` / ``linear`` --
  :func:`~pipesim.compute.roofline.linear_times_s` of a one-layer dense model of these shapes;
* ``decode_attention`` -- :func:`~pipesim.compute.roofline.decode_attention_time_s` of
  ``batch_size`` sequences holding ``kv_len`` tokens each (``batch_size * kv_len`` in all);
* ``prefill_attention`` -- :func:`~pipesim.compute.roofline.prefill_attention_time_s` of
  ``n_tokens`` new tokens after ``kv_len`` cached ones (one sequence);
* ``all_reduce`` -- the ring :func:`~pipesim.compute.roofline.allreduce_time_s` of
  ``size_bytes`` over ``n_gpus`` NVLink GPUs.

:func:`score` reports, per op, the count, the median and 90th percentile of ``|predicted /
measured - 1|``, the signed median (bias) and the share within 25%. ``pipesim check-roofline
FILE --gpu NAME`` prints it (:func:`report`).
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pipesim.compute.gpus import GPUSpec
from pipesim.compute.models import ModelSpec
from pipesim.compute.profile_shapes import COLUMNS, OPS
from pipesim.compute.roofline import (
    DEFAULT_ALLREDUCE_LATENCY_S,
    Efficiency,
    allreduce_time_s,
    decode_attention_time_s,
    linear_times_s,
    prefill_attention_time_s,
)
from pipesim.core.errors import FieldError

_NEEDS: Mapping[str, tuple[str, ...]] = {
    **dict.fromkeys(
        ("qkv", "attn_out", "gate_up", "down", "linear"),
        ("tp", "n_tokens", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "intermediate_size"),
    ),
    "decode_attention": ("tp", "batch_size", "kv_len", "n_heads", "n_kv_heads", "head_dim"),
    "prefill_attention": ("tp", "n_tokens", "kv_len", "n_heads", "n_kv_heads", "head_dim"),
    "all_reduce": ("n_gpus", "size_bytes"),
}
"""The integer fields each op's prediction reads (``ValueError`` naming one that is empty)."""


MIN_KERNEL_S = 1e-9
"""The shortest median a measurement row may give: a nanosecond, below any GPU kernel's launch
(a smaller one is a unit slip, and the error ratio against it overflows)."""
MAX_KERNEL_S = 3600.0
"""The longest median a measurement row may give: an hour. One kernel (a GEMM, an attention, a
decode step) takes milliseconds; 1e308 s is a slip, and read as-is it scores every prediction -100%."""


@dataclass(frozen=True)
class Measurement:
    """One CSV row: ``op``, the integer fields it uses (0 where empty), ``median_s`` and where it
    came from (``file:line``)."""

    op: str
    ints: Mapping[str, int]
    gated_mlp: bool
    median_s: float
    where: str


def read_measurements(path: str | Path) -> list[Measurement]:
    """The rows of a measurement CSV; ``ValueError`` naming the file, line and column of the first
    bad cell (a missing column, an unknown op, a field the op needs left empty or not a positive
    integer, a time that is not a positive number), or that it is not UTF-8 or holds no rows."""
    path = Path(path)
    if not path.is_file():
        raise FieldError(f"{path}: no such file (a measurement CSV, e.g. pipesim profile's --out)", "csv")
    try:
        return _read_rows(path)
    except UnicodeDecodeError:
        raise FieldError(f"{path}: not UTF-8 text (a measurement CSV)", "csv", str(path)) from None


def _read_rows(path: Path) -> list[Measurement]:
    rows: list[Measurement] = []
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("op", "median_s") if c not in (reader.fieldnames or ())]
        if missing:
            raise FieldError(
                f"{path}: no {missing[0]!r} column (a measurement CSV has {', '.join(COLUMNS)})",
                missing[0],
                str(path),
            )
        for line, row in enumerate(reader, start=2):
            where = f"{path}:{line}"
            op = (row.get("op") or "").strip()
            if op not in OPS:
                raise FieldError(f"{where}: op: unknown {op!r}; valid: {', '.join(OPS)}", "op", str(path))
            ints: dict[str, int] = {}
            for name in _NEEDS[op]:
                text = (row.get(name) or "").strip()
                try:
                    value = int(text)
                except ValueError:
                    raise FieldError(
                        f"{where}: {name}: an integer >= 0 is needed for op {op}, got {text!r}",
                        name,
                        str(path),
                    ) from None
                if value < (0 if name == "kv_len" else 1):
                    raise FieldError(
                        f"{where}: {name}: must be >= {0 if name == 'kv_len' else 1}, got {value}",
                        name,
                        str(path),
                    )
                ints[name] = value
            text = (row.get("median_s") or "").strip()
            try:
                seconds = float(text)
            except ValueError:
                seconds = float("nan")
            if not MIN_KERNEL_S <= seconds <= MAX_KERNEL_S:
                raise FieldError(
                    f"{where}: median_s: seconds of one kernel, from {MIN_KERNEL_S:g} to {MAX_KERNEL_S:g}, "
                    f"got {text!r}",
                    "median_s",
                    str(path),
                )
            gated = (row.get("gated_mlp") or "1").strip() not in ("0", "False", "false")
            rows.append(Measurement(op, ints, gated, seconds, where))
    if not rows:
        raise FieldError(f"{path}: no measurement rows below the header", "csv", str(path))
    return rows


def _model(m: Measurement) -> ModelSpec:
    """A one-layer dense model with the row's shapes (what the roofline's kernels read)."""
    i = m.ints
    hidden = i.get("hidden_size") or i["n_heads"] * i["head_dim"]
    return ModelSpec(
        name="measured",
        n_layers=1,
        hidden_size=hidden,
        n_heads=i["n_heads"],
        n_kv_heads=i["n_kv_heads"],
        head_dim=i["head_dim"],
        intermediate_size=i.get("intermediate_size") or 1,
        vocab_size=1,
        max_context_len=2**31 - 1,
        gated_mlp=m.gated_mlp,
    )


def predict_s(
    m: Measurement,
    gpu: GPUSpec,
    efficiency: Efficiency | None = None,
    allreduce_latency_s: float = DEFAULT_ALLREDUCE_LATENCY_S,
) -> float:
    """The roofline's seconds for measurement ``m`` on ``gpu`` (see the module docstring)."""
    i = m.ints
    if m.op == "all_reduce":
        return allreduce_time_s(gpu, i["size_bytes"], i["n_gpus"], allreduce_latency_s)
    model, tp = _model(m), i["tp"]
    if m.op == "decode_attention":
        return decode_attention_time_s(
            model, gpu, i["batch_size"] * i["kv_len"], tp, efficiency, i["batch_size"]
        )
    if m.op == "prefill_attention":
        n = i["n_tokens"]
        return prefill_attention_time_s(model, gpu, n, n * (i["kv_len"] + n / 2), tp, efficiency)
    times = linear_times_s(model, gpu, i["n_tokens"], tp, efficiency)
    return sum(times.values()) if m.op == "linear" else times[m.op]


@dataclass(frozen=True)
class Score:
    """The errors of one op's rows: ``|predicted / measured - 1|`` median and 90th percentile,
    the signed median (positive: the roofline is slow), and the share within 25%."""

    op: str
    rows: int
    median: float
    p90: float
    signed_median: float
    within_25: float


def score(
    rows: Iterable[Measurement],
    gpu: GPUSpec,
    efficiency: Efficiency | None = None,
    allreduce_latency_s: float = DEFAULT_ALLREDUCE_LATENCY_S,
) -> dict[str, Score]:
    """One :class:`Score` per op present in ``rows``, in :data:`~pipesim.compute.profile_shapes.OPS` order."""
    errors: dict[str, list[float]] = {}
    for m in rows:
        try:
            predicted = predict_s(m, gpu, efficiency, allreduce_latency_s)
        except ValueError as e:  # shapes no model has (tp not dividing the heads, 4e12 heads): the row
            file = m.where.rpartition(":")[0]
            raise FieldError(f"{m.where}: {e}", getattr(e, "field", "") or "op", file) from None
        errors.setdefault(m.op, []).append(predicted / m.median_s - 1)
    out = {}
    for op in OPS:
        if op not in errors:
            continue
        signed = errors[op]
        size = sorted(abs(e) for e in signed)
        p90 = size[min(len(size) - 1, int(0.9 * len(size)))]
        within = sum(e <= 0.25 for e in size) / len(size)
        out[op] = Score(op, len(size), statistics.median(size), p90, statistics.median(signed), within)
    return out


def report(path: str | Path, gpu: GPUSpec, efficiency: Efficiency | None = None) -> str:
    """The table ``pipesim check-roofline`` prints: one line per op of ``path``'s rows."""
    scores = score(read_measurements(path), gpu, efficiency)
    lines = [
        f"roofline vs {path} on {gpu.name} (|predicted/measured - 1|)",
        f"{'op':<18} {'rows':>5} {'median':>7} {'p90':>7} {'bias':>7} {'<=25%':>6}",
    ]
    for s in scores.values():
        lines.append(
            f"{s.op:<18} {s.rows:>5} {s.median:>7.1%} {s.p90:>7.1%} "
            f"{s.signed_median:>+7.1%} {s.within_25:>6.0%}"
        )
    return "\n".join(lines)
