"""How long a run's HTML page takes to write, against the number of training steps.

Workload: ``async-eta1`` with 16 slots, B = 16 and N steps (16 N episodes, N syncs and N policy
versions), N = 100, 200, 400, 1,000, 4,000 (``--steps``). For each N, a fresh process simulates the
run (not timed), then times, wall clock (``time.perf_counter``):

* ``run --html``: :func:`pipesim.io.viz.run_page` of the run, what ``pipesim run ... --html`` writes
  (the timeline and the aggregate view; above ``AGGREGATE_EPISODES`` episodes the aggregate alone);
* ``report``: the run saved (:func:`pipesim.io.saved.save`, not timed), then, in a fresh process,
  loaded back (:func:`pipesim.load`) and its page written, what ``pipesim report DIR`` does;
* ``timeline``: :func:`pipesim.io.viz.timeline` alone, figure and HTML, forced whatever the size.

and prints peak resident memory of that process (``ru_maxrss``, MB: with the simulation for ``run
--html`` and ``timeline``; for ``report`` a fresh process loads the run another one saved, and its
seconds are the load and the page, what ``pipesim report DIR`` does). ``--big`` adds the saved
run of 256 slots x 8,000 steps (about 2M episodes, ``pool_size=None``) through ``report`` only. A
case past ``--timeout`` seconds is killed and printed as ``>T``; the same path at larger N is then
skipped (``-``).

Goal: time and memory linear in the run's size: the ratio of seconds at 4,000 steps to seconds at
400 steps stays near 10 or below (it was quadratic), and the 8,000-step run writes in seconds.
Each process also checks that building the same page twice gives the same bytes.

Before (the code that called ``fig.add_shape`` once per sync, one ``add_trace`` per version with
every version's ``n_bins`` points in the aggregate view, and counted no episodes of a saved run, so
``report`` drew a timeline of every episode), html seconds measured once with this script on the
same machine (2 cores, shared; ``report`` then timed the page only, not the load):

=====  ==========  ==========  ==========
steps  run --html  report      timeline
=====  ==========  ==========  ==========
100         2.4         2.9         1.8
200         5.5         6.0         4.8
400        19.0        20.5        26.0
1000       >150        >150        >150
4000        5.3 [a]     -           -
=====  ==========  ==========  ==========

[a] above ``AGGREGATE_EPISODES``: the aggregate view alone, a 27 MB page (6.5 MB now).
``pipesim report`` of the 256-slot, 8,000-step saved run (``--big``) was unfinished after 500 s at
1.6 GB resident.

Usage: ``python benchmarks/bench_timeline_html.py [--steps 100,200,400,1000,4000] [--big]
[--timeout 300]``. Each flag is checked before anything runs: steps 1 to 128,000, slots 1 to 256,
and no case larger than the ``--big`` run (steps x slots at most 2,048,000 episodes); timeout
above 0 and at most 86,400 s. Ctrl-C (or SIGTERM) stops it with one line on stderr and exit
status 130: the case under way is killed, and the rows printed by then are complete.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PATHS = ("run --html", "report", "timeline")


def _scenario(steps: int, slots: int) -> Any:
    from pipesim.io.cli_common import build_scenario

    given = [f"n_slots={slots}", f"batch_size={slots}", f"steps={steps}"]
    if steps * slots > 65_536:  # past the default pool of tasks: draw as many as the run needs
        given.append("pool_size=None")
    scen, _ = build_scenario("async-eta1", given, None)
    return scen


def one(path: str, steps: int, slots: int, saved: str) -> dict[str, Any]:
    """Simulate (or, for ``report``, load the run ``save`` left in ``saved``), then time ``path``
    twice over (the second for the bytes check only)."""
    from pipesim import run
    from pipesim.io.saved import load, save
    from pipesim.io.viz import figures_to_html, run_page, timeline

    t0 = time.perf_counter()
    result: Any = load(saved) if path == "report" else run(_scenario(steps, slots))
    prep_s = time.perf_counter() - t0
    if path == "save":
        save(result, saved)
        return {"sim_s": prep_s}

    def build() -> str:
        if path == "timeline":
            return figures_to_html([timeline(result)])
        return str(run_page(result, title="bench"))

    t0 = time.perf_counter()
    page = build()
    seconds = time.perf_counter() - t0
    if path == "report":  # pipesim report DIR loads the run, then writes its page
        seconds += prep_s
    same = build() == page
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"sim_s": prep_s, "seconds": seconds, "rss_mb": rss_mb, "mb": len(page) / 1e6, "same": same}


def _child(path: str, steps: int, slots: int, saved: str, timeout: float) -> dict[str, Any] | None:
    cmd = [sys.executable, __file__, "--one", path, "--steps", str(steps), "--slots", str(slots)]
    try:
        out = subprocess.run(
            cmd + ["--saved", saved], capture_output=True, text=True, timeout=timeout, check=True
        )
    except subprocess.TimeoutExpired:
        return None
    except subprocess.CalledProcessError as exc:
        if exc.returncode in (-signal.SIGINT, -signal.SIGTERM):  # Ctrl-C to the group: the case's too
            raise KeyboardInterrupt from None
        sys.exit(f"{path} at {steps} steps failed:\n{exc.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def measure(path: str, steps: int, slots: int, timeout: float) -> dict[str, Any] | None:
    """``path`` in a fresh process; ``report`` reads a run that another process simulated and saved,
    so its peak memory is what ``pipesim report`` holds, the simulation's not included."""
    with tempfile.TemporaryDirectory() as tmp:
        saved = str(Path(tmp) / "run")
        if path != "report":
            return _child(path, steps, slots, saved, timeout)
        made = _child("save", steps, slots, saved, timeout)
        r = _child("report", steps, slots, saved, timeout) if made else None
        return None if r is None or made is None else {**r, "sim_s": made["sim_s"]}


def seconds(text: str) -> float:
    """An argparse ``type=``: seconds above 0, at most a day (not nan or inf)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 86_400:  # nan fails it too
        raise argparse.ArgumentTypeError(f"must be seconds above 0 and at most 86,400, got {text!r}")
    return value


BIG = (8000, 256)
"""``--big``: steps and slots; no case may be larger (steps x slots, 2,048,000 episodes)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags, every one checked here (argparse's usage error, exit 2) before a process starts."""
    from pipesim.io.argtypes import int_in, int_list  # bounded flags (imports pipesim here, not at the top)

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--steps",
        type=int_list(1, 128_000),
        default=[100, 200, 400, 1000, 4000],
        help="comma-separated step counts, each 1 to 128,000 (default 100,200,400,1000,4000)",
    )
    ap.add_argument("--slots", type=int_in(1, BIG[1]), default=16, help=f"slots, 1 to {BIG[1]} (default 16)")
    ap.add_argument(
        "--timeout",
        type=seconds,
        default=300.0,
        help="seconds per case before it is killed, above 0 and at most 86,400 (default 300)",
    )
    ap.add_argument("--big", action="store_true", help="also 256 slots x 8,000 steps, saved, through report")
    ap.add_argument("--one", choices=(*PATHS, "save"), help=argparse.SUPPRESS)
    ap.add_argument("--saved", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    largest = max(args.steps)
    if largest * args.slots > BIG[0] * BIG[1]:
        ap.error(
            f"--steps x --slots must be at most {BIG[0] * BIG[1]:,} episodes (the --big run), got "
            f"{largest:,} x {args.slots:,} = {largest * args.slots:,}"
        )
    if args.one and (len(args.steps) != 1 or not args.saved):
        ap.error("--one takes one --steps value and --saved")
    return args


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, 2 for a usage error, 130 when Ctrl-C or SIGTERM stopped it (one line on
    stderr naming the case under way; the rows printed by then are complete)."""
    args = parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.steps[0], args.slots, args.saved)))
        return 0
    from pipesim.io.interrupts import interrupt_once

    doing = ["the first case"]
    with interrupt_once():  # SIGTERM as Ctrl-C: the case's process is killed, its folder removed
        try:
            _table(args, doing)
        except KeyboardInterrupt:
            print(
                f"bench_timeline_html: interrupted during {doing[0]}; the rows printed above are complete",
                file=sys.stderr,
            )
            return 130
    return 0


def _table(args: argparse.Namespace, doing: list[str]) -> None:
    """Every case, a row each as it ends; ``doing[0]`` names the case under way."""
    cases: list[tuple[int, int, tuple[str, ...]]] = [(n, args.slots, PATHS) for n in args.steps]
    if args.big:
        cases.append((*BIG, ("report",)))
    head = ("steps", "slots", "path", "sim s", "html s", "peak MB", "page MB")
    print("{:>6} {:>5} {:<11} {:>7} {:>8} {:>8} {:>8} same".format(*head))
    timed_out: set[str] = set()
    for steps, slots, paths in cases:
        for path in paths:
            if path in timed_out and slots == args.slots:
                print(f"{steps:>6} {slots:>5} {path:<11} {'-':>7} {'-':>8}", flush=True)
                continue
            doing[0] = f"{path} at {steps:,} steps x {slots} slots"
            r = measure(path, steps, slots, args.timeout)
            if r is None:
                timed_out.add(path)
                print(
                    f"{steps:>6} {slots:>5} {path:<11} {'':>7} {'>' + format(args.timeout, '.0f'):>8}",
                    flush=True,
                )
                continue
            print(
                f"{steps:>6} {slots:>5} {path:<11} {r['sim_s']:>7.1f} {r['seconds']:>8.2f} "
                f"{r['rss_mb']:>8.0f} {r['mb']:>8.1f} {'yes' if r['same'] else 'NO'}",
                flush=True,
            )


if __name__ == "__main__":
    if "--one" in sys.argv:  # a case's own process: its parent says what an interrupt stopped
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    raise SystemExit(main())
