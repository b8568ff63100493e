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
measured - 1|``, the signed median (bias) and the share within 25%; a row the roofline predicts
as 0 s (an all-reduce over one GPU, a decode over no cached tokens) is left out, since any
measurement scores -100% against it, and :func:`report` says so; so is a row at a ``tp`` the
roofline refuses for its shapes (:func:`refused_tp`: not dividing the KV heads nor a multiple of
them, which older profiles measured), rather than refusing the whole file. ``pipesim check-roofline FILE``
prints :func:`report` on the GPU :func:`pick_gpu` chooses, after :func:`caveats`: both read what
measured the rows (:mod:`pipesim.compute.measured_gpu`, re-exported here).
"""

from __future__ import annotations

import csv
import io
import os
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pipesim.compute.gpus import GPUSpec
from pipesim.compute.measured_gpu import caveats as caveats  # re-exported
from pipesim.compute.measured_gpu import pick_gpu as pick_gpu  # re-exported
from pipesim.compute.models import ModelSpec
from pipesim.compute.profile_shapes import COLUMNS, OPS, PROVENANCE
from pipesim.compute.roofline import (
    DEFAULT_ALLREDUCE_LATENCY_S,
    Efficiency,
    allreduce_time_s,
    decode_attention_time_s,
    linear_times_s,
    prefill_attention_time_s,
)
from pipesim.core.errors import FieldError
from pipesim.core.readfile import LOG_MAX_BYTES, read_text

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
    """One CSV row: ``op``, the integer fields it uses (0 where empty), ``median_s``, where it
    came from (``file:line``) and what measured it (the :data:`~pipesim.compute.profile_shapes.
    PROVENANCE` columns: ``""`` and ``None`` where the CSV lacks them, as Vidur's extracts do)."""

    op: str
    ints: Mapping[str, int]
    gated_mlp: bool
    median_s: float
    where: str
    device: str = ""
    dtype: str = ""
    complete: bool | None = None


def read_measurements(path: str | Path) -> list[Measurement]:
    """The rows of a measurement CSV; ``ValueError`` naming the file, line and column of the first
    bad cell (a missing column, an unknown op, a field the op needs left empty or not a positive
    integer, a time that is not a positive number), or that it is not UTF-8, holds no rows or is
    no regular file (a FIFO, a device link: named as such, field ``csv``)."""
    path = Path(path)
    if path.is_dir():
        raise FieldError(f"{path}: a directory; give a measurement CSV in it, e.g. {path / 'gpu.csv'}", "csv")
    if not os.path.lexists(path):  # a FIFO or a device link: read_text says which, below
        raise FieldError(f"{path}: no such file (a measurement CSV, e.g. pipesim profile's --out)", "csv")
    try:
        return _read_rows(path)
    except UnicodeDecodeError:
        raise FieldError(f"{path}: not UTF-8 text (a measurement CSV)", "csv", str(path)) from None
    except OSError as exc:  # a FIFO, a device link, a loop, past the cap: said as the other readers say it
        raise FieldError(f"{path}: cannot read: {exc.strerror or exc}", "csv", str(path)) from None


def _read_rows(path: Path) -> list[Measurement]:
    rows: list[Measurement] = []
    with io.StringIO(read_text(path, "measurement CSVs", LOG_MAX_BYTES), newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("op", "median_s") if c not in (reader.fieldnames or ())]
        if missing:
            raise FieldError(
                f"{path}: no {missing[0]!r} column (a measurement CSV has {', '.join(COLUMNS)})",
                missing[0],
                str(path),
            )
        header = list(reader.fieldnames or ())
        for row in reader:
            where = f"{path}:{reader.line_num}"
            _check_field_count(row, header, where, path)
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
            device, dtype, complete = ((row.get(c) or "").strip() for c in PROVENANCE)
            if complete not in ("", "0", "1"):
                raise FieldError(
                    f"{where}: complete: 1 (a whole profile) or 0 (an interrupted one), got {complete!r}",
                    "complete",
                    str(path),
                )
            done = None if not complete else complete == "1"
            rows.append(Measurement(op, ints, gated, seconds, where, device, dtype, done))
    if not rows:
        raise FieldError(f"{path}: no measurement rows below the header", "csv", str(path))
    return rows


def _check_field_count(row: Mapping[str | None, object], header: list[str], where: str, path: Path) -> None:
    """FieldError naming the line of a row with fewer or more fields than the header has columns
    (:class:`csv.DictReader` reads the missing ones as ``None``, the extra ones under ``None``).
    A row may stop before the provenance columns (a row of the format before them): they read as
    unknown."""
    extra = row.get(None)
    missing = [c for c in header if row.get(c) is None]
    if isinstance(extra, list):
        n, field = len(header) + len(extra), "csv"
    elif missing and not set(missing) <= set(PROVENANCE):
        n, field = len(header) - len(missing), missing[0]
    else:
        return
    raise FieldError(
        f"{where}: {n} fields where the header has {len(header)} columns (each row has one per column, "
        "empty where an op does not use it)",
        field,
        str(path),
    )


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
    """One :class:`Score` per op present in ``rows``, in :data:`~pipesim.compute.profile_shapes.OPS`
    order; rows the roofline predicts as 0 s are left out (:func:`unscored` lists them)."""
    return _score(rows, gpu, efficiency, allreduce_latency_s)[0]


def unscored(
    rows: Iterable[Measurement], gpu: GPUSpec, efficiency: Efficiency | None = None
) -> list[Measurement]:
    """The rows :func:`score` leaves out: those the roofline predicts as 0 s."""
    return _score(rows, gpu, efficiency)[1]


def refused_tp(rows: Iterable[Measurement], gpu: GPUSpec) -> list[tuple[Measurement, str]]:
    """The rows :func:`score` skips, each with why: a ``tp`` the roofline refuses for the row's
    shapes (:func:`~pipesim.compute.roofline.check_tp`, as vLLM: one not dividing the KV heads
    nor a multiple of them), which ``pipesim profile`` measured before it applied that rule."""
    return _score(rows, gpu)[2]


def _score(
    rows: Iterable[Measurement],
    gpu: GPUSpec,
    efficiency: Efficiency | None = None,
    allreduce_latency_s: float = DEFAULT_ALLREDUCE_LATENCY_S,
) -> tuple[dict[str, Score], list[Measurement], list[tuple[Measurement, str]]]:
    errors: dict[str, list[float]] = {}
    zero: list[Measurement] = []
    refused: list[tuple[Measurement, str]] = []
    for m in rows:
        try:
            predicted = predict_s(m, gpu, efficiency, allreduce_latency_s)
        except ValueError as e:
            if getattr(e, "field", "") == "tp":  # valid shapes at a tp vLLM refuses: skip the row
                refused.append((m, str(e)))
                continue
            # shapes no model has (4e12 heads): a bad row, refused naming it
            file = m.where.rpartition(":")[0]
            raise FieldError(f"{m.where}: {e}", getattr(e, "field", "") or "op", file) from None
        if predicted > 0:
            errors.setdefault(m.op, []).append(predicted / m.median_s - 1)
        else:  # -100% whatever was measured: says nothing of the roofline
            zero.append(m)
    out = {}
    for op in OPS:
        if op not in errors:
            continue
        signed = errors[op]
        size = sorted(abs(e) for e in signed)
        p90 = size[min(len(size) - 1, int(0.9 * len(size)))]
        within = sum(e <= 0.25 for e in size) / len(size)
        out[op] = Score(op, len(size), statistics.median(size), p90, statistics.median(signed), within)
    return out, zero, refused


def report(
    path: str | Path,
    gpu: GPUSpec,
    efficiency: Efficiency | None = None,
    rows: list[Measurement] | None = None,
) -> str:
    """The table ``pipesim check-roofline`` prints: one line per op of ``path``'s rows (``rows``
    where already read), and a note naming the rows left out (predicted as 0 s)."""
    measured = read_measurements(path) if rows is None else rows
    scores, zero, refused = _score(measured, gpu, efficiency)
    lines = [
        f"roofline vs {path} on {gpu.name} (|predicted/measured - 1|)",
        f"{'op':<18} {'rows':>5} {'median':>7} {'p90':>7} {'bias':>7} {'<=25%':>6}",
    ]
    for s in scores.values():
        lines.append(
            f"{s.op:<18} {s.rows:>5} {s.median:>7.1%} {s.p90:>7.1%} "
            f"{s.signed_median:>+7.1%} {s.within_25:>6.0%}"
        )
    if zero:
        why = "an all-reduce over one GPU" if zero[0].op == "all_reduce" else "no cached tokens"
        lines.append(
            f"note: {len(zero)} row(s) left out: the roofline predicts 0 s for them, so any measurement "
            f"would score -100% (first: {zero[0].where}, {zero[0].op}, {why})"
        )
    if refused:
        first, why = refused[0]
        tps = ", ".join(str(t) for t in sorted({m.ints["tp"] for m, _ in refused}))
        lines.append(
            f"note: {len(refused)} row(s) at tp {tps} skipped: the roofline refuses that degree for "
            f"their shapes, as vLLM does (first: {first.where}, {first.op}: {why})"
        )
    return "\n".join(lines)
