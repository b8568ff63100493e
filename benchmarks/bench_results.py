"""What the results of a big run cost against the run itself: ``summary()``, ``events``, ``trained``.

The workload: 1,024 slots, B = 1,024, 1,000 steps, eta = 2 with partial rollouts
(about 1.03M episodes, 3.07M event rows), a pool of ``agent_episode_durations`` (generator seed 0).
``--steps`` scales it down. Each implementation runs in a fresh process, one after the other:

* ``new``: ``pipesim.results.run`` of this checkout (columnar, vectorised);
* ``old``: ``pipesim/results.py`` (later ``pipesim/results/run.py``) as of ``--rev`` (default
  ``b43b067``, the per-episode code),
  read with ``git show`` (or from the file ``--rev`` names) and wrapped around the same records.

Printed per implementation: CPU seconds (``time.process_time``) of ``run``, of ``summary()``, of
the ``events`` and of the ``trained`` DataFrame, the ratio (the three together) / run, for ``new``
the part of that spent reading the episodes' columns (``reads/run``: attributes of the objects
still live, and the archived arrays; the engine reads each trained episode's attributes once,
inside ``run``, when it archives it), and memory.
Memory is resident set size from ``/proc/self/status``: the peak (``VmHWM``, reset through
``/proc/self/clear_refs`` just before ``run``) less the resident size just before ``run``, per
episode; split into what the run's records hold (resident growth across ``run``: mostly the
archived episodes' arrays, ``pipesim.core.records``) and the two DataFrames' own bytes
(``memory_usage(deep=True)``).

Usage: ``python benchmarks/bench_results.py [--steps 1000] [--slots 1024] [--impl new,old] [--rounds 3]``
(rounds: fresh processes per implementation, interleaved, and the median ratio; the machines this
runs on are shared, and the run's CPU time moves with the neighbours' load).
Goals: (summary + events + trained) / run <= 30%; peak growth <= 250 bytes per episode.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _old_result_class(rev: str) -> Any:
    if Path(rev).is_file():  # a copy of the old results.py
        src = Path(rev).read_text()
    else:
        for path in ("pipesim/results.py", "pipesim/results/run.py"):  # before and after the layers
            cmd = ["git", "show", f"{rev}:{path}"]
            got = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            if got.returncode == 0:
                src = got.stdout
                break
        else:
            raise SystemExit(f"--rev {rev}: no pipesim/results.py or pipesim/results/run.py there")
    for was, now in (("pipesim.episode", "pipesim.core.episode"), ("pipesim.config", "pipesim.core.config")):
        if importlib.util.find_spec(was) is None and importlib.util.find_spec(now) is not None:
            src = src.replace(f"from {was} import", f"from {now} import")  # a module that moved
    old_file = Path(tempfile.mkdtemp()) / "pipesim_results_old.py"
    old_file.write_text(src)
    spec = importlib.util.spec_from_file_location("pipesim_results_old", old_file)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses looks the module up
    spec.loader.exec_module(mod)
    return mod.RunResult


def child(impl: str, slots: int, steps: int, rev: str) -> dict[str, Any]:
    """Run the workload once in this process and measure; returns the row as a dict."""
    import torch

    from pipesim import PartialRollout, PipelineConfig, Scenario, run
    from pipesim.workload.durations import agent_episode_durations

    cls = _old_result_class(rev) if impl == "old" else None
    read_s = [0.0]
    if cls is None:  # time the reads of episode attributes (the rest is the vectorised work)
        from pipesim.results.columns import EpisodeColumns

        def timed(fn: Any) -> Any:
            def wrapper(*a: Any, **kw: Any) -> Any:
                t0 = time.process_time()
                try:
                    return fn(*a, **kw)
                finally:
                    read_s[0] += time.process_time() - t0

            return wrapper

        for name in ("_read", "_read_end_s"):
            setattr(EpisodeColumns, name, timed(getattr(EpisodeColumns, name)))
    cfg = PipelineConfig(
        n_slots=slots, batch_size=slots, train_time_s=60, sync_time_s=10, max_staleness=2, steps=steps
    )
    pool = agent_episode_durations((steps + 4) * slots + slots, torch.Generator().manual_seed(0))
    sc = Scenario(pipeline=cfg, pool_size=len(pool), weight_update=PartialRollout())
    gc.collect()
    exact_peak = _reset_peak()
    rss0 = _status_kb("VmRSS")
    peak0 = _status_kb("VmHWM") if exact_peak else rss0
    t = time.process_time()
    r = run(sc, pool)
    if cls is not None:
        r = cls(r.scenario, r.sim_time_s, r.episodes, r.updates, r.train_log, r.sync_log, r.extra)
    t_run = time.process_time() - t
    rss_run = _status_kb("VmRSS")
    times = {}
    for name in ("summary", "events", "trained"):
        t = time.process_time()
        if name == "summary":
            r.summary()
        else:
            getattr(r, name)
        times[name] = time.process_time() - t
    peak = _status_kb("VmHWM")
    n = len(r.episodes)
    df_bytes = int(r.events.memory_usage(deep=True).sum() + r.trained.memory_usage(deep=True).sum())
    return {
        "impl": impl,
        "episodes": n,
        "event_rows": len(r.events),
        "run_s": t_run,
        **{f"{k}_s": v for k, v in times.items()},
        "ratio": sum(times.values()) / t_run,
        "reads_s": read_s[0] if cls is None else float("nan"),
        "peak_growth_b_per_ep": (peak - min(peak0, rss0)) * 1024 / n,
        "records_b_per_ep": (rss_run - rss0) * 1024 / n,
        "frames_b_per_ep": df_bytes / n,
        "exact_peak": exact_peak,
    }


MAX_EPISODES = 10_000 * 1024
"""Steps x slots at most: ten times the default run, so a typo fills no memory."""


def parser() -> argparse.ArgumentParser:
    from pipesim.io.argtypes import int_in  # bounded flags (imports pipesim here, not at the top)

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--steps",
        type=int_in(1, 10_000),
        default=1000,
        help="training steps, 1 to 10,000 (1,000: about 1.03M episodes)",
    )
    ap.add_argument(
        "--slots",
        type=int_in(1, 10_240),
        default=1024,
        help=f"slots = batch size, 1 to 10,240; steps x slots at most {MAX_EPISODES:,}",
    )
    ap.add_argument("--impl", default="new,old", help="comma-separated: new, old")
    ap.add_argument("--rev", default="b43b067", help="git revision (or file) of the 'old' results.py")
    ap.add_argument(
        "--rounds",
        type=int_in(1, 100),
        default=1,
        help="fresh processes per implementation, interleaved, 1 to 100",
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return ap


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags, every one checked here (argparse's usage error, exit 2) before a process starts."""

    ap = parser()
    args = ap.parse_args(argv)
    if args.steps * args.slots > MAX_EPISODES:
        ap.error(
            f"--steps x --slots must be at most {MAX_EPISODES:,} episodes, got "
            f"{args.steps:,} x {args.slots:,} = {args.steps * args.slots:,}"
        )
    args.impls = [x.strip() for x in args.impl.split(",") if x.strip()]
    if not args.impls or set(args.impls) - {"new", "old"}:
        ap.error(f"--impl takes new and/or old, got {args.impl!r}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    impls: list[str] = args.impls
    if args.child:
        print(json.dumps(child(impls[0], args.slots, args.steps, args.rev)))
        return
    rows = []
    for impl in [i for _ in range(args.rounds) for i in impls]:
        cmd = [sys.executable, __file__, "--child", "--impl", impl, "--steps", str(args.steps)]
        cmd += ["--slots", str(args.slots), "--rev", args.rev]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
        if proc.returncode:  # the child's own message (a bad --rev, say), not CalledProcessError's
            said = proc.stderr.strip().splitlines()
            parser().error(said[-1] if said else f"the child run exited {proc.returncode}")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    first = rows[0]
    print(
        f"{args.slots} slots, {args.steps} steps, eta=2: {first['episodes']:,} episodes, "
        f"{first['event_rows']:,} event rows; CPU seconds (time.process_time)"
    )
    print(
        f"{'impl':<5} | {'run':>6} | {'summary':>7} | {'events':>6} | {'trained':>7} | {'(s+e+t)/run':>11} |"
        f" {'reads/run':>9} | {'peak B/ep':>9} | {'records B/ep':>12} | {'frames B/ep':>11}"
    )
    for r in rows:
        reads = "" if r["reads_s"] != r["reads_s"] else f"{r['reads_s'] / r['run_s']:.0%}"
        print(
            f"{r['impl']:<5} | {r['run_s']:>6.2f} | {r['summary_s']:>7.2f} | {r['events_s']:>6.2f} |"
            f" {r['trained_s']:>7.2f} | {r['ratio']:>10.0%} | {reads:>9} |"
            f" {r['peak_growth_b_per_ep']:>9.0f} | {r['records_b_per_ep']:>12.0f} |"
            f" {r['frames_b_per_ep']:>11.0f}"
        )
    if args.rounds > 1:
        for impl in impls:
            ratios = sorted(r["ratio"] for r in rows if r["impl"] == impl)
            print(f"{impl}: median (s+e+t)/run {ratios[len(ratios) // 2]:.0%} over {len(ratios)} rounds")
    if not all(r["exact_peak"] for r in rows):
        print("(peak RSS could not be reset: peak growth is an upper bound from the process's own peak)")
    print(
        "reads/run: the part of (s+e+t) spent reading the episodes' columns (live objects, archived "
        "arrays), over run; the rest is the vectorised work"
    )
    print(
        "peak B/ep: peak resident size (VmHWM) from just before run until both DataFrames exist, "
        "less the resident size before run; records: resident growth across run; "
        "frames: events + trained memory_usage(deep=True)"
    )


if __name__ == "__main__":
    from pipesim.core.collector import pause_collector_during_runs

    with pause_collector_during_runs():  # as the pipesim command runs them
        main()
