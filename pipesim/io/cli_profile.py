"""``pipesim profile`` and ``pipesim check-roofline``: measure this machine's GPU, and score the
roofline on such a measurement (``docs/decode.md``).

``profile`` is :mod:`pipesim.compute.profile` (which a machine with torch alone runs as a script,
``python pipesim/compute/profile.py``); ``check-roofline`` prints :func:`pipesim.compute.measured.
report` for a measurement CSV against a catalogued GPU's datasheet figures, with the engine's
default constants or (``--measured``) the attention constants checked against Vidur's profiles.
"""

from __future__ import annotations

import argparse


def cmd_profile(args: argparse.Namespace) -> int:
    from pipesim.compute import profile

    profile.run(args)
    return 0


def cmd_check_roofline(args: argparse.Namespace) -> int:
    from pipesim.compute.gpus import gpu
    from pipesim.compute.measured import report
    from pipesim.compute.roofline import DEFAULT_EFFICIENCY, MEASURED_EFFICIENCY

    efficiency = MEASURED_EFFICIENCY if args.measured else DEFAULT_EFFICIENCY
    print(report(args.csv, gpu(args.gpu), efficiency))
    return 0
