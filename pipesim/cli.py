"""The ``pipesim`` command line: list, run, sweep, report, trace.

Design: every subcommand is a thin layer over the library (registry, ``run``, ``sweep``,
``report.build_report``, ``trace``), so anything the CLI does is also one call in Python. User
errors (unknown scenario or key, ill-typed value, unreadable file) exit with status 2 and one
message naming what was wrong and listing the valid choices; no traceback. ``main(argv)`` returns
the exit status, which keeps it testable in-process.

A ``--json`` run file stores the summary, the scenario (as text) and the *recipe* (registry name,
``--set`` overrides and seed). ``pipesim trace RUN.json`` rebuilds the run from the recipe: a run
is deterministic given its seed, so the file stays small and the trace is exact.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class UsageError(Exception):
    """A user error: printed as ``pipesim: error: ...`` with exit status 2."""


def _scenario(name: str, sets: Sequence[str], seed: int | None) -> tuple[Any, dict[str, str]]:
    from pipesim.registry import apply_overrides, get_scenario

    try:
        scen = get_scenario(name)
        scen, given = apply_overrides(scen, list(sets))
        if seed is not None:
            scen = scen.with_(seed=seed)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return scen, given


def _summary_table(summary: dict[str, float]) -> str:
    w = max(len(k) for k in summary)
    return "\n".join(
        f"{k:<{w}}  {v:>14,.4g}" if abs(v) < 1e4 else f"{k:<{w}}  {v:>14,.1f}" for k, v in summary.items()
    )


def _scenario_dict(scen: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": scen.name, "seed": scen.seed, "pool_size": scen.pool_size}
    out["pipeline"] = dataclasses.asdict(scen.pipeline)
    for f in ("durations", "admission", "weight_update", "batching"):
        out[f] = repr(getattr(scen, f))
    return out


def _write_events(result: Any, path: Path) -> None:
    ev = result.events
    if path.suffix == ".parquet":
        ev.to_parquet(path, index=False)
    elif path.suffix == ".csv":
        ev.to_csv(path, index=False)
    else:
        raise UsageError(f"--events: file must end in .parquet or .csv, got {path.name!r}")


def cmd_list(args: argparse.Namespace) -> int:
    from pipesim.registry import policy_classes, registry, valid_keys

    reg = registry()
    w = max(len(n) for n in reg)
    for name, e in reg.items():
        print(f"{name:<{w}}  {e.description}")
    if args.keys:
        print("\nkeys for --set / --over:", ", ".join(valid_keys(reg["synchronous"].build())))
        print("policies:", ", ".join(policy_classes()))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from pipesim.api import run

    scen, given = _scenario(args.scenario, args.set, args.seed)
    for opt in ("html", "json", "events", "trace"):
        p = getattr(args, opt)
        if p is not None and not Path(p).parent.exists():
            raise UsageError(f"--{opt}: directory {str(Path(p).parent)!r} does not exist")
    result = run(scen)
    summary = result.summary()
    print(f"{args.scenario} (seed {scen.seed})" + (f" with {given}" if given else ""))
    print(_summary_table(summary))
    if args.json:
        payload = {
            "summary": summary,
            "scenario": _scenario_dict(scen),
            "recipe": {"scenario": args.scenario, "set": list(args.set), "seed": scen.seed},
        }
        Path(args.json).write_text(json.dumps(payload, indent=2))
        print(f"wrote {args.json}")
    if args.events:
        _write_events(result, Path(args.events))
        print(f"wrote {args.events}")
    if args.trace:
        from pipesim.trace import write_trace

        write_trace(result, args.trace)
        print(f"wrote {args.trace}")
    if args.html:
        from pipesim.viz import figures_to_html, timeline

        Path(args.html).write_text(figures_to_html([timeline(result, args.scenario)], title=args.scenario))
        print(f"wrote {args.html}")
    return 0


def _parse_over(scen: Any, items: Sequence[str]) -> dict[str, list[Any]]:
    from pipesim.registry import parse_value

    over: dict[str, list[Any]] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--over {item!r} is not key=v1,v2,...")
        key, values = (s.strip() for s in item.split("=", 1))
        try:
            over[key] = [parse_value(scen, key, v) for v in values.split(",") if v.strip()]
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if not over[key]:
            raise UsageError(f"--over {key}: no values given")
        if key.startswith("durations."):
            raise UsageError("--over does not take durations.FIELD keys yet; use --set")
    return over


def cmd_sweep(args: argparse.Namespace) -> int:
    from pipesim.sweeps import sweep

    scen, _ = _scenario(args.scenario, args.set, None)
    over = _parse_over(scen, args.over)
    if args.seeds < 1:
        raise UsageError(f"--seeds must be >= 1, got {args.seeds}")
    try:
        from pipesim.sweeps import grid

        grid(scen, over, args.seeds)  # validates every cell before any worker starts
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    client = cluster = None
    executor = None
    if args.dask is not None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise UsageError("--dask needs dask[distributed]: pip install 'pipesim[dask]'") from None
        if args.dask == "local":
            cluster = LocalCluster(
                n_workers=args.workers or 2, threads_per_worker=1, processes=True, dashboard_address=None
            )
            client = Client(cluster)
        else:
            client = Client(args.dask, timeout="20s")
        executor = client.get_executor()
    try:
        res = sweep(scen, over, args.seeds, executor=executor, workers=args.workers, progress=not args.quiet)
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    agg = res.aggregate
    cols = [*res.keys, "n_seeds"] + [
        c
        for m in ("throughput_per_hour", "gen_util", "staleness_mean", "staleness_max")
        for c in (f"{m}_mean", f"{m}_lo", f"{m}_hi")
        if c in agg
    ]
    with __import__("pandas").option_context("display.width", 200, "display.max_columns", 30):
        print(agg[cols].to_string(index=False, float_format=lambda x: f"{x:,.3g}"))
    if len(res.failures):
        print(f"\n{len(res.failures)} cell(s) failed:", file=sys.stderr)
        print(res.failures.to_string(index=False), file=sys.stderr)
    if args.csv:
        res.runs.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    if args.html:
        from pipesim import viz

        figs = []
        for k in over:
            others = [o for o in res.keys if o not in (k, "design")]
            by = others[0] if others else "design"
            figs.append(
                viz.lines_figure(agg, k, "throughput_per_hour", by=by, title=f"throughput against {k}")
            )
            figs.append(
                viz.lines_figure(agg, k, "staleness_mean", by=by, title=f"mean staleness against {k}")
            )
        Path(args.html).write_text(viz.figures_to_html(figs, title=f"pipesim sweep {args.scenario}"))
        print(f"wrote {args.html}")
    return 1 if len(res.failures) == len(res.runs) else 0


def cmd_report(args: argparse.Namespace) -> int:
    from pipesim.report import build_report

    path = build_report(args.out, seeds=args.seeds, workers=args.workers, progress=not args.quiet)
    print(f"wrote {path.resolve()}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from pipesim.trace import write_trace

    src = Path(args.run)
    if not src.exists():
        raise UsageError(f"{src}: no such file")
    if src.suffix in (".parquet", ".csv"):
        import pandas as pd

        events = pd.read_parquet(src) if src.suffix == ".parquet" else pd.read_csv(src)
        try:
            write_trace(events, args.out)
        except ValueError as exc:
            raise UsageError(f"{src}: {exc}") from None
    else:
        from pipesim.api import run

        try:
            recipe = json.loads(src.read_text())["recipe"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise UsageError(f"{src}: not a run file written by `pipesim run --json` (no 'recipe')") from None
        scen, _ = _scenario(recipe["scenario"], recipe.get("set", []), recipe.get("seed"))
        write_trace(run(scen), args.out)
    print(f"wrote {args.out} (open it in https://ui.perfetto.dev or chrome://tracing)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pipesim", description="Simulate RL rollout pipelines (chapter 13).")
    sub = p.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", help="list scenarios and presets")
    ls.add_argument("--keys", action="store_true", help="also list the keys --set accepts")
    ls.set_defaults(func=cmd_list)

    r = sub.add_parser("run", help="run one scenario and print its summary")
    r.add_argument("scenario")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a field")
    r.add_argument("--seed", type=int)
    r.add_argument("--html", help="write an interactive timeline")
    r.add_argument("--json", help="write summary + scenario (+ recipe for `pipesim trace`)")
    r.add_argument("--events", help="write the event table (.parquet or .csv)")
    r.add_argument("--trace", help="write a Chrome/Perfetto trace-event JSON")
    r.set_defaults(func=cmd_run)

    s = sub.add_parser("sweep", help="run a grid of values x seeds")
    s.add_argument("scenario")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    s.add_argument("--over", action="append", default=[], metavar="KEY=V1,V2,...")
    s.add_argument("--seeds", type=int, default=1)
    g = s.add_mutually_exclusive_group()
    g.add_argument("--workers", type=int, help="local process pool size (default: CPUs)")
    g.add_argument("--dask", metavar="local|tcp://HOST:PORT", help="run on a Dask cluster")
    s.add_argument("--csv", help="write one row per run")
    s.add_argument("--html", help="write sweep figures")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_sweep)

    rep = sub.add_parser("report", help="write the offline HTML report of the chapter's figures")
    rep.add_argument("--out", default="report.html")
    rep.add_argument("--seeds", type=int, default=3)
    rep.add_argument("--workers", type=int)
    rep.add_argument("--quiet", action="store_true")
    rep.set_defaults(func=cmd_report)

    t = sub.add_parser("trace", help="export a run as Chrome/Perfetto trace-event JSON")
    t.add_argument("run", help="RUN.json from `pipesim run --json`, or an events .parquet/.csv")
    t.add_argument("--out", required=True)
    t.set_defaults(func=cmd_trace)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for usage errors)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as exc:
        print(f"pipesim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
