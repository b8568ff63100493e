"""``pipesim profile`` and ``pipesim check-roofline``: measure this machine's GPU, and score the
roofline on such a measurement (``docs/decode.md``).

``profile`` is :mod:`pipesim.compute.profile` (which a machine with torch alone runs as a script,
``python pipesim/compute/profile.py``); ``check-roofline`` prints :func:`pipesim.compute.measured.
report` for a measurement CSV against a catalogued GPU's datasheet figures (``--gpu``, else the GPU
the CSV's ``device`` column names; :func:`~pipesim.compute.measured.pick_gpu`), after a
``warning:`` line for each of :func:`~pipesim.compute.measured.caveats` (CPU rows, a dtype other
than bf16, an interrupted profile), with the engine's default constants or (``--measured``) the
attention constants checked against Vidur's profiles.
"""

from __future__ import annotations

import argparse
import json
import os

from pipesim.compute.profile_shapes import MAX_REPEATS
from pipesim.core.errors import shown
from pipesim.io.cli_common import UsageError, check_output

BACKENDS = ("nccl", "gloo")


def check_profile_args(args: argparse.Namespace) -> None:
    """What :func:`pipesim.compute.profile.run` would refuse late, or never: UsageError naming the
    option, before torch measures anything. ``--out`` is written to by a probe (a root user's
    ``os.access`` says /proc is writable); ``--config`` must be a JSON object; ``--warmup`` and
    ``--repeats`` at most :data:`MAX_REPEATS`; ``--model`` and ``--config`` not both;
    ``--dtype`` one the kernels run in; ``--allreduce-backend`` nccl or gloo, and each
    ``--allreduce-gpus`` count at least 2 and no more than the processes that backend can run (one
    per GPU for nccl, four per CPU for gloo: 100,000 spawned that many processes)."""
    from pipesim.compute import profile_shapes

    check_output("out", args.out)
    if args.model is not None and args.config:
        raise UsageError(
            f"--model {shown(args.model)} and --config {shown(args.config)}: both name the model; give one"
        )
    try:
        profile_shapes.check_dtype(args.dtype)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.config:
        try:
            with open(args.config, encoding="utf-8") as f:
                loaded = json.load(f)
        except OSError as e:
            raise UsageError(f"--config {shown(args.config)}: cannot read it ({e.strerror or e})") from None
        except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise UsageError(f"--config {shown(args.config)}: not a JSON config.json ({e})") from None
        if not isinstance(loaded, dict):
            raise UsageError(f"--config {shown(args.config)}: a config.json holds a JSON object")
    for name in ("warmup", "repeats"):
        value = getattr(args, name)
        if value > MAX_REPEATS:
            raise UsageError(f"--{name} must be at most {MAX_REPEATS:,}, got {value:,}")
    if args.allreduce_backend not in BACKENDS:
        raise UsageError(f"--allreduce-backend: nccl or gloo, got {shown(args.allreduce_backend)}")
    if args.allreduce_gpus:
        try:
            worlds = profile_shapes.parse_worlds(args.allreduce_gpus)
        except ValueError as e:
            raise UsageError(str(e)) from None
        if args.allreduce_backend == "nccl":
            import torch

            most, what = torch.cuda.device_count(), "CUDA GPUs (nccl: one process per GPU)"
            if most == 0:
                raise UsageError(
                    f"--allreduce-gpus {shown(args.allreduce_gpus)}: nccl runs one process per CUDA GPU "
                    "and torch sees no CUDA GPU here; --allreduce-backend gloo runs CPU processes"
                )
        else:
            cpus = os.cpu_count() or 1
            most, what = 4 * cpus, f"processes gloo may spawn on {cpus} CPUs (4 each)"
        if max(worlds) > most:
            raise UsageError(
                f"--allreduce-gpus {shown(args.allreduce_gpus)}: at most {most:,}, the {what} of this machine"
            )


def cmd_profile(args: argparse.Namespace) -> int:
    from pipesim.compute import profile

    check_profile_args(args)
    # a shape too large for the device's memory raises profile.TooLarge (a ValueError naming the
    # option and the shape) after the rows measured before it are written
    profile.run(args)
    return 0


def cmd_check_roofline(args: argparse.Namespace) -> int:
    """The table on stdout, preceded by the GPU chosen (where the CSV chose it) and a ``warning:``
    line for each caveat: on stdout too, so that they travel with the numbers they qualify."""
    from pipesim.compute.measured import caveats, pick_gpu, read_measurements, report
    from pipesim.compute.roofline import DEFAULT_EFFICIENCY, MEASURED_EFFICIENCY

    efficiency = MEASURED_EFFICIENCY if args.measured else DEFAULT_EFFICIENCY
    rows = read_measurements(args.csv)
    spec, chosen = pick_gpu(args.csv, rows, args.gpu)
    lines = [chosen] if chosen else []
    lines += [f"warning: {w}" for w in caveats(args.csv, rows, spec)]
    print("\n".join([*lines, report(args.csv, spec, efficiency, rows)]))
    return 0
