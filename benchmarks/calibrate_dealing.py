"""What the ranks' dealing costs ``pipesim calibrate``: this checkout against another tree's code.

The trainer's fit reads which samples the spec's run dealt to each rank per step, and the dealing
note (``pipesim.calibrate.trainer.dealing_spread``) refits the trainer on four more seeds'
dealings. Each dealing was a whole run of the spec through the log's last step; a synchronous
colocated design's is now drawn without the engines (``pipesim.calibrate.dealing``). This script
calibrates the sample spec ``examples/run_verl_8gpu.toml`` to its sample log of each length (the
constants ``examples/make_verl_sample_log.py`` makes the shipped sample with: 3% noise, noise seed
11; calibration seed 0, as ``bench_calibrate.py`` does), with this checkout's code and, given
``--before TREE``, with that tree's, each calibration in a fresh process, the sides interleaved
round by round (the machine is shared: take the least of the rounds). One row per length and side:
CPU seconds of the calibration (``time.process_time`` in that process), each round's and their
least; wall seconds; the engine runs and the steps they simulated (read from the progress
lines: a drawn dealing runs none); whether the calibration is the first side's to the bit (its
values, intervals, notes and residuals); and, once per length, the dealing note.

    git worktree add /tmp/before HEAD~1        # the code before (any commit or tree)
    .venv/bin/python benchmarks/calibrate_dealing.py --before /tmp/before            # 100 and 1,000 steps
    .venv/bin/python benchmarks/calibrate_dealing.py --before /tmp/before --steps 20 2000 --rounds 3
    .venv/bin/python benchmarks/calibrate_dealing.py               # this checkout alone

Writing each log runs the spec once (not timed). Ctrl-C (or SIGTERM) stops it with one line on
stderr and exit status 130; the rows printed by then are complete.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def one(steps: int) -> dict[str, object]:
    """One calibration of the ``steps``-long sample log by the ``pipesim`` this process imports:
    its CPU and wall seconds, engine runs, simulated steps, dealing note and a digest of the result."""
    from pipesim.calibrate import calibrate

    log, spec = _bench_calibrate().sample_calibration(steps)  # the log bench_calibrate.py times
    lines: list[str] = []
    cpu, wall = time.process_time(), time.perf_counter()
    cal = calibrate(log, spec, progress=lines.append)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    said = (re.match(r"simulating ([\d,]+) steps", ln) for ln in lines)  # a drawn dealing is not a run
    runs = [int(m.group(1).replace(",", "")) for m in said if m is not None]
    result = repr((sorted(cal.values.items()), cal.not_identified, sorted(cal.residuals.items())))
    note = next((n for n in cal.not_identified if "over the dealings" in n), "(no dealing note)")
    return {
        "cpu": cpu,
        "wall": wall,
        "runs": len(runs),
        "simulated": sum(runs),
        "note": note,
        "digest": hashlib.sha256(result.encode()).hexdigest()[:12],
    }


def _bench_calibrate() -> Any:
    """``benchmarks/bench_calibrate.py`` beside this script, imported under a name of its own (this
    script may itself be imported from elsewhere, as tests/test_bench_args.py does)."""
    spec = importlib.util.spec_from_file_location(
        "_bench_calibrate", Path(__file__).with_name("bench_calibrate.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _measure(tree: Path, steps: int) -> dict[str, object]:
    """:func:`one` in a fresh process importing ``pipesim`` from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    got = subprocess.run(
        [sys.executable, __file__, "--one", str(steps)], env=env, capture_output=True, text=True, check=False
    )
    if got.returncode != 0:
        raise SystemExit(f"calibrate_dealing: {tree} failed at {steps} steps:\n{got.stderr[-2000:]}")
    out: dict[str, object] = json.loads(got.stdout.strip().splitlines()[-1])
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from pipesim.io.argtypes import int_in  # bounded flags (imports pipesim here, not at the top)

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument(
        "--steps",
        type=int_in(3, 20_000),
        nargs="+",
        default=[100, 1000],
        help="log lengths, each 3 to 20,000 (default 100 1000)",
    )
    ap.add_argument(
        "--rounds", type=int_in(1, 20), default=2, help="calibrations per side and length (default 2)"
    )
    ap.add_argument(
        "--before", type=Path, default=None, help="a tree with the code to compare against (its pipesim/)"
    )
    ap.add_argument("--one", type=int_in(3, 20_000), default=None, help=argparse.SUPPRESS)  # a side's process
    args = ap.parse_args(argv)
    if args.before is not None and not (args.before / "pipesim" / "__init__.py").is_file():
        ap.error(f"--before {args.before}: no pipesim/__init__.py there")
    return args


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, 2 for a usage error, 130 when Ctrl-C or SIGTERM stopped it."""
    args = parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(args.one)))
        return 0
    from pipesim.io.interrupts import interrupt_once

    sides = ([("before", args.before.resolve())] if args.before is not None else []) + [("this", ROOT)]
    for name, tree in sides:
        print(f"{name}: pipesim from {tree / 'pipesim'}")
    print(
        f"{'log steps':>10} {'side':>7} {'cpu s (rounds)':>22} {'least':>7} {'wall s':>7} {'runs':>5} "
        f"{'simulated':>10} {'same':>5}"
    )
    with interrupt_once():  # SIGTERM as Ctrl-C
        try:
            for n in args.steps:
                got: dict[str, list[dict[str, object]]] = {name: [] for name, _ in sides}
                for _ in range(args.rounds):  # interleaved: the sides see the same load
                    for name, tree in sides:
                        got[name].append(_measure(tree, n))
                first = got[sides[0][0]][0]["digest"]
                for name, _ in sides:
                    rows = got[name]
                    cpus = [float(str(r["cpu"])) for r in rows]
                    each = ", ".join(f"{c:.1f}" for c in cpus)
                    same = "yes" if all(r["digest"] == first for r in rows) else "NO"
                    r0 = rows[0]
                    print(
                        f"{n:>10,} {name:>7} {each:>22} {min(cpus):>7.1f} {float(str(r0['wall'])):>7.1f} "
                        f"{r0['runs']:>5} {int(str(r0['simulated'])):>10,} {same:>5}",
                        flush=True,
                    )
                print(f"{'':>10} note: {got[sides[-1][0]][0]['note']}", flush=True)
        except KeyboardInterrupt:
            print("calibrate_dealing: interrupted; the rows printed above are complete", file=sys.stderr)
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
