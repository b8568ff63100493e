"""What measured a measurement CSV's rows: the GPU to score them against, and what to warn of.

``pipesim check-roofline`` scores the roofline on one catalog GPU, and the rows say what measured
them (the :data:`~pipesim.compute.profile_shapes.PROVENANCE` columns ``pipesim profile`` writes:
device, dtype, complete). :func:`pick_gpu` takes ``--gpu NAME`` when given, else the one GPU the
``device`` column names; there is no default, because scoring against the wrong GPU's figures
gives wrong numbers without a sign (Vidur's A100 MLP rows: 3.0% median error on the A100, 55% on
the H100), so rows measured on a CPU, naming no device (Vidur's extracts), several GPUs or one the
catalog lacks are refused naming ``gpu``. :func:`caveats` then lists, one line each, what makes
the errors say less than they seem to: rows measured on a CPU or on another GPU than the one
scored, in a dtype other than the roofline's bf16, or by an interrupted profile.

Split from :mod:`pipesim.compute.measured` (reading and scoring the rows), which re-exports
:func:`pick_gpu` and :func:`caveats`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from pipesim.compute.gpus import GPUS, GPUSpec, normalize_gpu_name
from pipesim.compute.gpus import gpu as catalog_gpu
from pipesim.core.errors import FieldError

if TYPE_CHECKING:
    from pipesim.compute.measured import Measurement

__all__ = ["caveats", "pick_gpu"]


def _gpus_named(rows: Iterable[Measurement]) -> list[str]:
    """The distinct GPU names of the rows' ``device`` column (not ``cpu``, not empty), in order."""
    return list(dict.fromkeys(m.device for m in rows if m.device and m.device.lower() != "cpu"))


def pick_gpu(path: str | Path, rows: list[Measurement], name: str | None) -> tuple[GPUSpec, str]:
    """The catalog GPU to score ``rows`` against and a line saying why: ``--gpu name`` when given,
    else the one GPU the ``device`` column names. FieldError naming ``gpu`` when neither does:
    the rows were measured on a CPU, name no device (Vidur's extracts), name several GPUs, or one
    the catalog lacks. No default: scoring against the wrong GPU's figures gives wrong numbers
    (Vidur's A100 MLP rows: 3.0% median error on the A100, 55% on the H100)."""
    valid = f"--gpu NAME (one of {', '.join(sorted(GPUS))})"
    if name is not None:
        return catalog_gpu(name), ""
    named = _gpus_named(rows)
    if not named and any(m.device.lower() == "cpu" for m in rows):
        raise FieldError(
            f"{path}: measured on the CPU (its device column says cpu): a GPU's roofline against CPU "
            f"times checks nothing; profile on a GPU, or give {valid} to score it anyway",
            "gpu",
        )
    if not named:
        raise FieldError(
            f"{path}: no device column names the GPU that measured it (Vidur's extracts have none); "
            f"give {valid}",
            "gpu",
        )
    if len(named) > 1:
        raise FieldError(f"{path}: rows of several GPUs ({', '.join(named)}); give {valid}", "gpu")
    if normalize_gpu_name(named[0]) not in GPUS:
        raise FieldError(
            f"{path}: measured on {named[0]}, which the GPU catalog lacks; give {valid} to score "
            "it against that GPU's datasheet figures",
            "gpu",
        )
    spec = catalog_gpu(named[0])
    return (
        spec,
        f"GPU: {spec.name} (the CSV's device column: {named[0]}); --gpu NAME scores against another",
    )


def caveats(path: str | Path, rows: list[Measurement], gpu: GPUSpec) -> list[str]:
    """What makes ``rows``' errors against ``gpu`` say less than they seem to, one line each: rows
    measured on a CPU, on another GPU than ``gpu``, in a dtype other than the roofline's bf16, or
    by an interrupted profile (``complete`` 0)."""
    out = []
    cpu = [m for m in rows if m.device.lower() == "cpu"]
    if cpu:
        ops = ", ".join(dict.fromkeys(m.op for m in cpu))
        out.append(
            f"{len(cpu)} of {len(rows)} rows ({ops}) were measured on the CPU (device cpu): their "
            f"errors against {gpu.name}'s roofline say nothing about the roofline; profile on a GPU"
        )
    other = [d for d in _gpus_named(rows) if normalize_gpu_name(d) != gpu.name]
    if other:
        out.append(f"rows measured on {', '.join(other)} are scored against {gpu.name}'s datasheet figures")
    dtypes = [d for d in dict.fromkeys(m.dtype for m in rows) if d and d != "bfloat16"]
    if dtypes:
        n = sum(m.dtype in dtypes for m in rows)
        out.append(
            f"{n} rows were measured in {', '.join(dtypes)}; the roofline assumes bfloat16 (2-byte "
            "elements at the GPU's bf16 tensor-core peak), so their errors include the dtype's cost; "
            "profile with --dtype bfloat16"
        )
    if any(m.complete is False for m in rows):
        out.append(
            f"{path} is an interrupted profile (complete=0): the shapes it would have measured "
            "after the interruption are missing"
        )
    return out
