"""How long ``pipesim calibrate`` takes against the log's length, and how much it simulates.

For each length it writes the sample log of ``examples/run_verl_8gpu.toml`` with the constants
``examples/make_verl_sample_log.py`` makes the shipped sample with (that many steps, 3% noise,
noise seed 11), calibrates the spec to it as the command does (:func:`pipesim.calibrate.calibrate`,
seed 0) and prints one row: CPU seconds of this process (``time.process_time``, which other jobs
on a shared machine disturb less), wall seconds, the simulations run and the steps they covered
(read from the progress lines: a run the calibration reuses is not one). Where the seconds go
inside is for ``cProfile`` (``docs/calibrate.md``, "Time").

    .venv/bin/python benchmarks/bench_calibrate.py                    # 20, 500 and 2,000 steps
    .venv/bin/python benchmarks/bench_calibrate.py --steps 20 5000    # any lengths
    PYTHONPATH=/tmp/old .venv/bin/python benchmarks/bench_calibrate.py   # another tree's code

Writing each log runs the spec once (not timed).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def true_values() -> dict[str, float]:
    """The constants ``examples/make_verl_sample_log.py`` makes the shipped sample with (read from
    the script, not copied: the sample and these logs stay the same setup)."""
    spec = importlib.util.spec_from_file_location(
        "_make_verl_sample_log", ROOT / "examples" / "make_verl_sample_log.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.TRUE_VALUES)


def sample_calibration(steps: int) -> tuple[Any, Any]:
    """The sample spec (``examples/run_verl_8gpu.toml``) and its ``steps``-long sample log, written
    with :func:`true_values` (3% noise, noise seed 11; the run at seed 0), as a ``TrainingLog``."""
    import pandas as pd

    from pipesim.calibrate import TrainingLog
    from pipesim.calibrate.sample import sample_log
    from pipesim.plan.runspec import from_dict, read

    data = read(ROOT / "examples" / "run_verl_8gpu.toml")
    spec = from_dict(dict(data), ROOT / "examples")
    made = {**data, "calibration": {"values": true_values()}, "run": {"steps": steps, "seed": 0}}
    frame = sample_log(from_dict(made, ROOT / "examples"), np.random.default_rng(11)).round(6)
    return TrainingLog(f"sample_{steps}.csv", "0" * 64, pd.DataFrame(frame)), spec


def _row(steps: int) -> tuple[int, float, float, int, int]:
    """(steps, CPU s, wall s, simulations, simulated steps) of one calibration."""
    from pipesim.calibrate import calibrate

    log, spec = sample_calibration(steps)
    lines: list[str] = []
    cpu, wall = time.process_time(), time.perf_counter()
    calibrate(log, spec, progress=lines.append)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    said = (re.match(r"simulating ([\d,]+) steps", ln) for ln in lines)
    runs = [int(m.group(1).replace(",", "")) for m in said if m is not None]
    return steps, cpu, wall, len(runs), sum(runs)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from pipesim.io.argtypes import int_in  # bounded flags (imports pipesim here, not at the top)

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument(
        "--steps",
        type=int_in(1, 20_000),
        nargs="+",
        default=[20, 500, 2000],
        help="log lengths, each 1 to 20,000 (default 20 500 2000)",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import pipesim

    print(f"pipesim from {Path(pipesim.__file__).parent}")
    print(f"{'log steps':>10} {'cpu s':>9} {'wall s':>9} {'runs':>5} {'simulated steps':>16}")
    for n in args.steps:
        steps, cpu, wall, runs, simulated = _row(n)
        print(f"{steps:>10,} {cpu:>9.1f} {wall:>9.1f} {runs:>5} {simulated:>16,}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
