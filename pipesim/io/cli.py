"""The ``pipesim`` command line: list, run, sweep, report, trace, fit, export.

Design: every subcommand is a thin layer over the library (registry, ``run``, ``sweep``,
``report.build_report``, ``trace``, ``scenario_files``), so anything the CLI does is also one call
in Python. A scenario is named the same way everywhere (:func:`pipesim.io.registry.resolve`): a
registered name (``systems:areal``), a scenario file (``my.toml``, ``my.yaml``), or
``package.module:factory`` / ``path/to/file.py:factory``.

User errors (unknown scenario, key or policy, ill-typed value, unreadable file, a bad output path,
a run that cannot finish, a sweep whose every cell fails) exit with status 2 and print at most a
usage line and one ``pipesim: error: ...`` line; never a traceback (``PIPESIM_TRACEBACK=1`` shows
it for an unexpected error). Output paths are checked before anything runs. ``main(argv)`` returns
the exit status, which keeps it testable in-process.

A ``--json`` run file stores the summary, the scenario (as text and as scenario-file data) and the
*recipe* (scenario, ``--set`` overrides and seed). ``pipesim trace RUN.json`` rebuilds the run from
the recipe: a run is deterministic given its seed, so the file stays small and the trace is exact.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

MAX_SEED = 2**64
"""Seeds are integers in [0, 2**64): what both numpy's and the chapter's torch generator accept."""


class UsageError(Exception):
    """A user error: printed as ``pipesim: error: ...`` with exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line usage on errors (the full usage is in ``--help``)."""

    def error(self, message: str) -> NoReturn:
        usage = " ".join(self.format_usage().split())
        self.exit(2, f"{usage}\n{self.prog}: error: {message}\n")


# -- helpers ---------------------------------------------------------------------------------------
def fmt_number(v: Any) -> str:
    """A number as people read it: integers (and integer-valued floats) with thousands separators,
    others with about four significant digits and no exponent (1,850 not 1.85e+03)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if not math.isfinite(v):
        return str(v)
    if v.is_integer() and abs(v) < 1e18:
        return f"{int(v):,}"
    a = abs(v)
    if a < 1e-9:
        return f"{v:.3g}"
    decimals = min(max(0, 3 - math.floor(math.log10(a))), 10)
    return f"{v:,.{decimals}f}"


def _summary_table(summary: dict[str, float]) -> str:
    w = max(len(k) for k in summary)
    return "\n".join(f"{k:<{w}}  {fmt_number(v):>14}" for k, v in summary.items())


def _one_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return "; ".join(lines) or type(exc).__name__


def _check_seed(seed: int | None) -> None:
    if seed is not None and not 0 <= seed < MAX_SEED:
        raise UsageError(f"--seed must be an integer in [0, 2**64), got {seed}")


def _scenario(spec: str, sets: Sequence[str], seed: int | None) -> tuple[Any, dict[str, str]]:
    from pipesim.io.registry import build, resolve

    _check_seed(seed)
    try:
        entry = resolve(spec)
        scen, given = build(entry, list(sets))
        if seed is not None:
            scen = scen.with_(seed=seed)
    except ValueError as exc:
        raise UsageError(_one_line(exc)) from None
    return scen, given


def _check_output(opt: str, path: str | None, suffixes: Sequence[str] = (), stdout: bool = False) -> None:
    """Fail before any work when ``path`` cannot be written: a directory, a missing or non-directory
    parent, or a wrong suffix. ``-`` (standard output) is allowed where ``stdout``."""
    if path is None or (stdout and path == "-"):
        return
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"--{opt}: {path!r} is a directory; give a file name")
    parent = p.parent
    for anc in (parent, *parent.parents):
        if anc.exists() and not anc.is_dir():
            raise UsageError(f"--{opt}: {str(anc)!r} is a file, not a directory")
    if not parent.exists():
        raise UsageError(f"--{opt}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"--{opt}: directory {str(parent)!r} is not writable")
    if suffixes and p.suffix.lower() not in suffixes:
        raise UsageError(f"--{opt}: file must end in {' or '.join(suffixes)}, got {p.name!r}")


def _scenario_dict(scen: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": scen.name, "seed": scen.seed, "pool_size": scen.pool_size}
    out["pipeline"] = dataclasses.asdict(scen.pipeline)
    for f in ("durations", "admission", "weight_update", "batching", "timeout", "failures", "replicas"):
        out[f] = repr(getattr(scen, f))
    return out


def _recipe_source(spec: str) -> str:
    """The scenario source as the run file stores it: file paths made absolute."""
    from pipesim.io.registry import SCENARIO_FILE_SUFFIXES, registry

    if spec in registry():
        return spec
    if spec.lower().endswith(SCENARIO_FILE_SUFFIXES):
        return str(Path(spec).resolve())
    where, _, attr = spec.rpartition(":")
    if where.endswith(".py"):
        return f"{Path(where).resolve()}:{attr}"
    return spec


# -- subcommands -----------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    from pipesim.io.registry import build, registry, resolve, valid_keys
    from pipesim.policies.catalog import KINDS, catalog

    if args.scenario is not None:
        from pipesim.io.scenario_files import dumps

        try:
            entry = resolve(args.scenario)
            scen, _ = build(entry, [])
        except ValueError as exc:
            raise UsageError(_one_line(exc)) from None
        print(f"{entry.name}  {entry.description}")
        params = entry.parameters()
        if params:
            print("parameters (--set NAME=VALUE):")
            for n, p in params.items():
                default = "" if p.default is p.empty else f" (default {p.default!r})"
                print(f"  {n}{default}")
        print("keys for --set / --over:", ", ".join(valid_keys(scen)))
        print()
        try:
            print(dumps(scen, "toml"), end="")
        except ValueError as exc:
            print(f"(not writable as a scenario file: {_one_line(exc)})")
        return 0
    reg = registry()
    w = max(len(n) for n in reg)
    for name, e in reg.items():
        print(f"{name:<{w}}  {e.description}")
    if args.keys:
        print("\nkeys for --set / --over:", ", ".join(valid_keys(reg["synchronous"].build())))
        print("\npolicies and duration models, by field (--set FIELD='Name(arg=value)'):")
        cat = catalog()
        for kind in KINDS:
            sigs = [c.signature() for c in cat.values() if kind in c.kinds]
            if sigs:
                print(f"  {kind}:")
                print("\n".join(f"    {sig}" for sig in sigs))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from pipesim.io.api import run

    _check_output("json", args.json, stdout=True)
    _check_output("html", args.html)
    _check_output("events", args.events, (".parquet", ".csv"))
    _check_output("trace", args.trace)
    _check_save_dir(args.save)
    scen, given = _scenario(args.scenario, args.set, args.seed)
    out: IO[str] = sys.stderr if args.json == "-" else sys.stdout
    result = run(scen)
    summary = result.summary()
    shown = ", ".join(f"{k}={v}" for k, v in given.items())
    print(f"{args.scenario} (seed {scen.seed})" + (f" with {shown}" if given else ""), file=out)
    print(_summary_table(summary), file=out)
    if args.json:
        payload: dict[str, Any] = {
            "summary": summary,
            "scenario": _scenario_dict(scen),
            "recipe": {"scenario": _recipe_source(args.scenario), "set": list(args.set), "seed": scen.seed},
        }
        try:
            from pipesim.io.scenario_files import scenario_to_dict

            payload["scenario_file"] = scenario_to_dict(scen)
        except ValueError:
            pass  # a policy outside the catalog: the recipe alone rebuilds the run
        text = json.dumps(payload, indent=2)
        if args.json == "-":
            sys.stdout.write(text + "\n")
        else:
            Path(args.json).write_text(text)
            print(f"wrote {args.json}", file=out)
    if args.events:
        ev = result.events
        if Path(args.events).suffix.lower() == ".parquet":
            ev.to_parquet(args.events, index=False)
        else:
            ev.to_csv(args.events, index=False)
        print(f"wrote {args.events}", file=out)
    if args.trace:
        from pipesim.io.trace import write_trace

        write_trace(result, args.trace)
        print(f"wrote {args.trace}", file=out)
    if args.save:
        result.save(args.save)
        print(f"saved the run to {args.save} (pipesim.load, `pipesim report/trace {args.save}`)", file=out)
    if args.html:
        from pipesim.io.viz import figures_to_html, run_views

        Path(args.html).write_text(figures_to_html(run_views(result, args.scenario), title=args.scenario))
        print(f"wrote {args.html}", file=out)
    return 0


def _check_save_dir(path: str | None) -> None:
    """``--save DIR``: a new directory (missing parents are made), an empty one, or a saved run."""
    if path is None:
        return
    from pipesim.io.saved import is_saved_run

    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"--save: {path!r} is a file; a saved run is a directory")
    if p.is_dir() and any(p.iterdir()) and not is_saved_run(p):
        raise UsageError(f"--save: {path!r} is a non-empty directory that is not a saved run")
    for anc in p.parents:  # missing parents are made, like the directory itself
        if anc.exists() and not anc.is_dir():
            raise UsageError(f"--save: {str(anc)!r} is a file, not a directory")


def _load_saved(path: str) -> Any:
    from pipesim.io.saved import load

    try:
        return load(path)
    except ValueError as exc:
        raise UsageError(_one_line(exc)) from None


def split_values(text: str) -> list[str]:
    """Split ``v1,v2,...`` at top-level commas (not inside parentheses, brackets or quotes), so
    ``Replicas(2, LeastLoaded()),Replicas(4, LeastLoaded())`` is two values."""
    parts: list[str] = []
    cur: list[str] = []
    depth, quote = 0, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _parse_over(scen: Any, items: Sequence[str]) -> dict[str, list[Any]]:
    from pipesim.io.registry import parse_value

    over: dict[str, list[Any]] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--over {item!r} is not key=v1,v2,...")
        key, values = (s.strip() for s in item.split("=", 1))
        if key.startswith("durations."):
            raise UsageError(
                "--over does not take durations.FIELD keys; sweep durations=Model(...),Model(...)"
            )
        try:
            over[key] = [parse_value(scen, key, v) for v in split_values(values)]
        except ValueError as exc:
            raise UsageError(_one_line(exc)) from None
        if not over[key]:
            raise UsageError(f"--over {key}: no values given")
    return over


def _preset_designs(entry: Any, sets: Sequence[str], items: Sequence[str]) -> dict[str, Any]:
    """``--over`` axes over the factory's parameters (``max_head_offpolicyness=1,2,4`` of
    ``systems:areal``): one design per combination, built by the factory and labelled by it."""
    import itertools

    from pipesim.io.registry import build, parse_parameter

    axes: dict[str, list[str]] = {}
    for item in items:
        key, values = (s.strip() for s in item.split("=", 1))
        axes[key] = split_values(values)
        if not axes[key]:
            raise UsageError(f"--over {key}: no values given")
        if len(set(axes[key])) != len(axes[key]):
            raise UsageError(f"--over {key}: a value is given twice")
        try:
            for v in axes[key]:
                parse_parameter(entry, key, v)
        except ValueError as exc:
            raise UsageError(_one_line(exc)) from None
    designs: dict[str, Any] = {}
    for combo in itertools.product(*axes.values()):
        pairs = [f"{k}={v}" for k, v in zip(axes, combo)]
        try:
            designs[", ".join(pairs)], _ = build(entry, [*sets, *pairs])
        except ValueError as exc:
            raise UsageError(_one_line(exc)) from None
    return designs


def _table(df: Any) -> str:
    with __import__("pandas").option_context("display.width", 200, "display.max_columns", 30):
        return str(df.to_string(index=False, float_format=fmt_number))


def cmd_sweep(args: argparse.Namespace) -> int:
    from pipesim.io.registry import resolve
    from pipesim.io.sweeps import SweepError, grid, sweep

    if args.seeds < 1:
        raise UsageError(f"--seeds must be >= 1, got {args.seeds}")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    if args.timeout_s is not None and not (math.isfinite(args.timeout_s) and args.timeout_s > 0):
        raise UsageError(f"--timeout-s must be a number of seconds > 0, got {args.timeout_s}")
    _check_output("csv", args.csv)
    _check_output("html", args.html)
    scen, _ = _scenario(args.scenario, args.set, None)
    try:
        entry = resolve(args.scenario)
    except ValueError as exc:
        raise UsageError(_one_line(exc)) from None
    params = entry.parameters()
    preset_items = [i for i in args.over if i.split("=", 1)[0].strip() in params]
    over = _parse_over(scen, [i for i in args.over if i not in preset_items])
    designs = _preset_designs(entry, args.set, preset_items) if preset_items else scen
    try:
        grid(designs, over, args.seeds)  # validates every cell before any worker starts
    except ValueError as exc:
        raise UsageError(_one_line(exc)) from None
    client = cluster = None
    executor = None
    if args.dask is not None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise UsageError("--dask needs dask[distributed]: pip install 'pipesim[dask]'") from None
        try:
            if args.dask == "local":
                cluster = LocalCluster(
                    n_workers=args.workers or 2, threads_per_worker=1, processes=True, dashboard_address=None
                )
                client = Client(cluster)
            else:
                client = Client(args.dask, timeout="10s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise UsageError(f"--dask: cannot connect to {args.dask}: {_one_line(exc)}") from None
        executor = client.get_executor()
    try:
        res = sweep(
            designs,
            over,
            args.seeds,
            executor=executor,
            workers=args.workers,
            progress=not args.quiet,
            timeout_s=args.timeout_s,
        )
    except SweepError as exc:
        raise UsageError(_sweep_failure(exc)) from None
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
    print(_table(agg[cols]))
    if len(res.failures):
        print(f"\n{len(res.failures)} cell(s) failed:", file=sys.stderr)
        print(res.failures.to_string(index=False), file=sys.stderr)
    if args.csv:
        res.runs.to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    if args.html:
        from pipesim.io import viz

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
    return 0


def _sweep_failure(exc: Exception) -> str:
    res = getattr(exc, "result", None)
    if res is None or not len(res.failures):
        return _one_line(exc)
    f = res.failures
    row = f.iloc[0]
    where = ", ".join(f"{k}={row[k]}" for k in (*res.keys, "seed") if k in row)
    first = " ".join(str(row["error"]).split())
    return f"every cell of the sweep failed ({len(f)} of {len(res.runs)}); the first ({where}): {first}"


def cmd_report(args: argparse.Namespace) -> int:
    from pipesim.io.report import build_report

    if args.seeds < 1:
        raise UsageError(f"--seeds must be >= 1, got {args.seeds}")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {args.workers}")
    _check_output("out", args.out)
    if args.run is not None:
        from pipesim.io.viz import run_page

        saved = _load_saved(args.run)
        Path(args.out).write_text(run_page(saved, title=f"pipesim run {saved.scenario.name} ({args.run})"))
        print(f"wrote {Path(args.out).resolve()}")
        return 0
    path = build_report(args.out, seeds=args.seeds, workers=args.workers, progress=not args.quiet)
    print(f"wrote {path.resolve()}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from pipesim.io.api import run
    from pipesim.io.trace import write_trace

    _check_output("out", args.out)
    src = Path(args.run)
    suffix = src.suffix.lower()
    if suffix in (".json", ".parquet", ".csv") and not src.exists():
        raise UsageError(f"{src}: no such file")
    if src.is_dir():
        from pipesim.io.trace import events_to_trace

        saved = _load_saved(args.run)
        trace = events_to_trace(
            saved.events, saved.episode_table, name=saved.scenario.name, trained=saved.trained
        )
        Path(args.out).write_text(json.dumps(trace, separators=(",", ":")))
    elif suffix in (".parquet", ".csv"):
        import pandas as pd

        events = pd.read_parquet(src) if suffix == ".parquet" else pd.read_csv(src)
        try:
            write_trace(events, args.out)
        except ValueError as exc:
            raise UsageError(f"{src}: {_one_line(exc)}") from None
    elif suffix == ".json":
        try:
            recipe = json.loads(src.read_text())["recipe"]
            spec, sets, seed = recipe["scenario"], list(recipe.get("set", [])), recipe.get("seed")
        except (json.JSONDecodeError, KeyError, TypeError):
            raise UsageError(f"{src}: not a run file written by `pipesim run --json` (no 'recipe')") from None
        scen, _ = _scenario(spec, [*sets, *args.set], args.seed if args.seed is not None else seed)
        write_trace(run(scen), args.out)
    else:
        scen, _ = _scenario(args.run, args.set, args.seed)
        write_trace(run(scen), args.out)
    print(f"wrote {args.out} (open it in https://ui.perfetto.dev or chrome://tracing)")
    return 0


def cmd_fit(args: argparse.Namespace) -> int:
    from pipesim.io.fit import FitError, fit_trace, format_result, to_json, write_qq

    _check_output("qq", args.qq, (".html",))
    _check_output("json", args.json, stdout=True)
    if args.scenario_out is not None:
        from pipesim.io.scenario_files import SUFFIXES

        _check_output("scenario-out", args.scenario_out, tuple(SUFFIXES))
    base = None
    if args.scenario_out is not None or args.base != "synchronous":
        base, _ = _scenario(args.base, [], None)
    from pipesim.workload.durations import AgentDurations

    agent_base = base.durations if base is not None and isinstance(base.durations, AgentDurations) else None
    try:
        result = fit_trace(
            args.trace, args.column, turns_column=args.turns_column, scale=args.scale, base=agent_base
        )
    except FitError as exc:
        raise UsageError(_one_line(exc)) from None
    out: IO[str] = sys.stderr if args.json == "-" else sys.stdout
    print(format_result(result), file=out)
    if args.json:
        if args.json == "-":
            sys.stdout.write(to_json(result) + "\n")
        else:
            Path(args.json).write_text(to_json(result))
            print(f"wrote {args.json}", file=out)
    if args.qq:
        write_qq(result, args.qq)
        print(f"wrote {args.qq} (QQ plot)", file=out)
    if args.scenario_out is not None:
        from pipesim.io.scenario_files import save_scenario

        assert base is not None
        scen = base.with_(durations=result.fits[args.model].model, pool_size=None)
        save_scenario(scen, args.scenario_out)
        print(f"wrote {args.scenario_out} ({args.base} with the {args.model} fit as its durations)", file=out)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from pipesim.io.scenario_files import SUFFIXES, dumps

    if args.out != "-":
        _check_output("out", args.out, tuple(SUFFIXES))
    scen, _ = _scenario(args.scenario, args.set, args.seed)
    fmt = args.format or ("toml" if args.out == "-" else SUFFIXES[Path(args.out).suffix.lower()])
    try:
        text = dumps(scen, fmt)
    except ValueError as exc:
        raise UsageError(_one_line(exc)) from None
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
        print(f"wrote {args.out} (run it: pipesim run {args.out})")
    return 0


# -- the parser ------------------------------------------------------------------------------------
SCENARIO_HELP = (
    "a registered name (pipesim list), a scenario file (.toml, .yaml, .yml), package.module:factory "
    "or path/to/file.py:factory; e.g. systems:areal, my.toml, ./mine.py:make"
)
SET_HELP = (
    "override a field, a policy (with arguments) or a factory parameter; repeatable; e.g. "
    "--set n_slots=8, --set 'weight_update=InFlightUpdate(load_time_s=2)', "
    "--set 'replicas=Replicas(2, LeastLoaded())', --set timeout=none, --set max_head_offpolicyness=4"
)


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {ln}" for ln in lines)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pipesim")
    except PackageNotFoundError:
        return "unknown"


POLICIES_HELP = (
    "a module of your own policy classes, by dotted name or .py path, to name them in --set and "
    "--over (repeatable); e.g. --policies headroom.py"
)


def register_policies(specs: Sequence[str]) -> None:
    """Add the policy classes of each user module named on the command line to the catalog."""
    from pathlib import Path

    from pipesim.io.registry import _import_file
    from pipesim.policies import catalog

    for spec in specs:
        if spec.endswith(".py"):
            path = Path(spec)
            if not path.is_file():
                raise UsageError(f"--policies: no such file {spec!r}")
            try:
                name = _import_file(path).__name__
            except Exception as exc:  # noqa: BLE001 - the user's file: report it in one line
                raise UsageError(f"--policies: cannot import {spec}: {_one_line(exc)}") from None
        else:
            name = spec
        try:
            catalog.register_module(name)
        except ValueError as exc:
            raise UsageError(f"--policies: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    fmt = argparse.RawDescriptionHelpFormatter
    p = _Parser(
        prog="pipesim",
        description="Simulate RL rollout pipelines (chapter 13).",
        epilog=_examples(
            "pipesim list",
            "pipesim run async-eta2",
            "pipesim run systems:areal --set max_head_offpolicyness=4",
        ),
        formatter_class=fmt,
    )
    p.add_argument("--version", action="version", version=f"pipesim {_version()}", help="print the version")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser(
        "plan",
        add_help=False,
        help="search placements, TP, eta, weight-update policy and sync interval for the best design "
        "under staleness limits (docs/plan.md); pipesim plan --help",
    )
    ls = sub.add_parser(
        "list",
        help="list scenarios, or show one scenario's keys and parameters",
        description="List the registered scenarios; with SCENARIO, show its parameters, keys and file form.",
        epilog=_examples("pipesim list", "pipesim list --keys", "pipesim list systems:areal"),
        formatter_class=fmt,
    )
    ls.add_argument("scenario", nargs="?", help=f"show this scenario: {SCENARIO_HELP}")
    ls.add_argument(
        "--keys", action="store_true", help="also list the keys --set accepts and every policy; e.g. --keys"
    )
    ls.set_defaults(func=cmd_list)

    r = sub.add_parser(
        "run",
        help="run one scenario and print its summary",
        description="Run one scenario and print its summary.",
        epilog=_examples(
            "pipesim run synchronous",
            "pipesim run async-eta2 --set n_slots=128 --seed 3 --html timeline.html",
            "pipesim run systems:areal --set 'admission=AReaLThrottle(max_concurrent=48)'",
            "pipesim run my.toml --json -   # the summary as JSON on stdout, the table on stderr",
        ),
        formatter_class=fmt,
    )
    r.add_argument("scenario", help=SCENARIO_HELP)
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    r.add_argument("--policies", action="append", default=[], metavar="MODULE", help=POLICIES_HELP)
    r.add_argument(
        "--seed", type=int, help="the duration pool's seed, an integer in [0, 2**64); e.g. --seed 3"
    )
    r.add_argument("--html", metavar="PATH", help="write an interactive timeline; e.g. --html timeline.html")
    r.add_argument(
        "--json",
        metavar="PATH",
        help="write summary, scenario and recipe (for `pipesim trace`); - is stdout; e.g. --json run.json",
    )
    r.add_argument(
        "--events",
        metavar="PATH",
        help="write the event table (.parquet or .csv); e.g. --events events.parquet",
    )
    r.add_argument(
        "--trace", metavar="PATH", help="write a Chrome/Perfetto trace-event JSON; e.g. --trace trace.json"
    )
    r.add_argument(
        "--save",
        metavar="DIR",
        help="save the run as a directory (tables as Parquet, scenario and summary as JSON) for "
        "pipesim.load, `pipesim report DIR` and `pipesim trace DIR`; e.g. --save runs/areal",
    )
    r.set_defaults(func=cmd_run)

    s = sub.add_parser(
        "sweep",
        help="run a grid of values x seeds",
        description="Run every combination of the --over values, each with --seeds seeds.",
        epilog=_examples(
            "pipesim sweep synchronous --over max_staleness=0,1,2 --seeds 3",
            "pipesim sweep async-eta2 --over 'weight_update=InFlightUpdate(load_time_s=0.5),Drain'",
        ),
        formatter_class=fmt,
    )
    s.add_argument("scenario", help=SCENARIO_HELP)
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    s.add_argument("--policies", action="append", default=[], metavar="MODULE", help=POLICIES_HELP)
    s.add_argument(
        "--over",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="an axis of the grid; repeatable; e.g. --over max_staleness=0,1,2 or "
        "--over 'replicas=Replicas(2, LeastLoaded()),Replicas(4, LeastLoaded())'",
    )
    s.add_argument(
        "--seeds", type=int, default=1, metavar="N", help="seeds per grid point (>= 1); e.g. --seeds 5"
    )
    g = s.add_mutually_exclusive_group()
    g.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="local process pool size (>= 1; default: CPUs); e.g. --workers 4",
    )
    g.add_argument(
        "--dask",
        metavar="local|tcp://HOST:PORT",
        help="run on a Dask cluster; e.g. --dask local or --dask tcp://10.0.0.5:8786",
    )
    s.add_argument(
        "--timeout-s",
        type=float,
        metavar="SECONDS",
        help="fail a cell that runs longer than this many seconds; e.g. --timeout-s 600",
    )
    s.add_argument("--csv", metavar="PATH", help="write one row per run; e.g. --csv runs.csv")
    s.add_argument("--html", metavar="PATH", help="write sweep figures; e.g. --html sweep.html")
    s.add_argument("--quiet", action="store_true", help="no progress bar; e.g. --quiet")
    s.set_defaults(func=cmd_sweep)

    rep = sub.add_parser(
        "report",
        help="write the offline HTML report of the chapter's figures",
        description="Compute the chapter's tables and figures and write one self-contained HTML page.",
        epilog=_examples(
            "pipesim report --out report.html --seeds 3", "pipesim report runs/areal --out areal.html"
        ),
        formatter_class=fmt,
    )
    rep.add_argument(
        "run",
        nargs="?",
        metavar="DIR",
        help="a saved run (`pipesim run --save DIR`): write its summary and views instead of the "
        "chapter's report; e.g. pipesim report runs/areal --out areal.html",
    )
    rep.add_argument(
        "--out", default="report.html", metavar="PATH", help="the page to write; e.g. --out report.html"
    )
    rep.add_argument(
        "--seeds", type=int, default=3, metavar="N", help="seeds per banded point (>= 1); e.g. --seeds 3"
    )
    rep.add_argument(
        "--workers", type=int, metavar="N", help="local process pool size (>= 1); e.g. --workers 2"
    )
    rep.add_argument("--quiet", action="store_true", help="no progress bar; e.g. --quiet")
    rep.set_defaults(func=cmd_report)

    t = sub.add_parser(
        "trace",
        help="export a run as Chrome/Perfetto trace-event JSON",
        description="Write a Chrome/Perfetto trace of a run file, an events table or a scenario.",
        epilog=_examples(
            "pipesim trace run.json --out trace.json",
            "pipesim trace runs/areal --out trace.json   # a run saved with `pipesim run --save`",
            "pipesim trace events.parquet --out trace.json",
            "pipesim trace systems:areal --set steps=3 --out trace.json",
        ),
        formatter_class=fmt,
    )
    t.add_argument(
        "run",
        help="RUN.json from `pipesim run --json`, a saved-run directory (`pipesim run --save`), an events "
        f".parquet/.csv, or a scenario ({SCENARIO_HELP})",
    )
    t.add_argument(
        "--out", required=True, metavar="PATH", help="the trace file to write; e.g. --out trace.json"
    )
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    t.add_argument("--policies", action="append", default=[], metavar="MODULE", help=POLICIES_HELP)
    t.add_argument("--seed", type=int, metavar="N", help="the seed, in [0, 2**64); e.g. --seed 3")
    t.set_defaults(func=cmd_trace)

    f = sub.add_parser(
        "fit",
        help="fit duration models to a column of a trace (CSV or JSONL)",
        description=(
            "Fit log-normal, agent and empirical models to the positive values of one column of a "
            "CSV or JSONL trace (episode seconds, or token counts with --scale); print parameters and "
            "Kolmogorov-Smirnov goodness of fit; write a QQ plot and, optionally, a scenario file "
            "with the fitted model (see pipesim.io.fit)."
        ),
        epilog=_examples(
            "pipesim fit episodes.csv --column duration_s --qq qq.html",
            "pipesim fit episodes.jsonl --column duration_s --turns-column turns",
            "pipesim fit trace.csv --column num_decode_tokens --scale 0.025 "
            "--scenario-out fitted.toml --model lognormal --base async-eta2",
        ),
        formatter_class=fmt,
    )
    f.add_argument("trace", help="the trace: .csv, .tsv, .jsonl, .json or .parquet; e.g. episodes.csv")
    f.add_argument("--column", required=True, help="the column to fit; e.g. --column duration_s")
    f.add_argument(
        "--turns-column",
        metavar="COLUMN",
        help="a per-episode turn count (identifies the agent model's mean turns); e.g. --turns-column turns",
    )
    f.add_argument(
        "--scale",
        type=float,
        default=1.0,
        metavar="X",
        help="multiply every value (e.g. seconds per token for token counts); e.g. --scale 0.025",
    )
    f.add_argument("--qq", metavar="PATH", help="write a QQ plot of every model (.html); e.g. --qq qq.html")
    f.add_argument("--json", metavar="PATH", help="write the fits as JSON; - is stdout; e.g. --json fit.json")
    f.add_argument(
        "--scenario-out",
        metavar="PATH",
        help="write --base with the fitted --model as durations (.toml/.yaml); e.g. --scenario-out fit.toml",
    )
    f.add_argument(
        "--model",
        choices=("lognormal", "agent", "empirical"),
        default="lognormal",
        help="the model --scenario-out writes (default lognormal); e.g. --model agent",
    )
    f.add_argument(
        "--base",
        default="synchronous",
        metavar="SCENARIO",
        help=f"the scenario --scenario-out starts from (its agent model is the agent fit's shape): "
        f"{SCENARIO_HELP}; e.g. --base systems:areal",
    )
    f.set_defaults(func=cmd_fit)

    x = sub.add_parser(
        "export",
        help="write a scenario as a TOML or YAML scenario file",
        description=(
            "Write a scenario as a file that `pipesim run FILE` runs (see pipesim.io.scenario_files)."
        ),
        epilog=_examples(
            "pipesim export systems:areal --out areal.toml",
            "pipesim export async-eta2 --set n_slots=128 --out mine.yaml",
        ),
        formatter_class=fmt,
    )
    x.add_argument("scenario", help=SCENARIO_HELP)
    x.add_argument(
        "--out", required=True, help="the file (.toml, .yaml, .yml), or - for stdout; e.g. --out my.toml"
    )
    x.add_argument("--format", choices=("toml", "yaml"), help="the format for --out -; e.g. --format yaml")
    x.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    x.add_argument("--policies", action="append", default=[], metavar="MODULE", help=POLICIES_HELP)
    x.add_argument("--seed", type=int, metavar="N", help="the seed written into the file; e.g. --seed 3")
    x.set_defaults(func=cmd_export)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for usage errors and runs that cannot finish)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["plan"]:  # the planner parses its own arguments (pipesim plan --help)
        from pipesim.plan import main as plan_main

        return plan_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        register_policies(getattr(args, "policies", None) or [])
        return int(args.func(args))
    except UsageError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `pipesim ... | head`: the reader left; nothing to report
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stops the interpreter's flush failing at exit
        return 0
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback (PIPESIM_TRACEBACK=1 shows it)
        if os.environ.get("PIPESIM_TRACEBACK"):
            raise
        from pipesim.core.errors import PipelineError

        if isinstance(exc, PipelineError):
            return _fail(f"the run cannot finish: {_one_line(exc)}")
        if isinstance(exc, ValueError | OSError):
            return _fail(_one_line(exc))
        return _fail(f"{type(exc).__name__}: {_one_line(exc)} (PIPESIM_TRACEBACK=1 shows where)")


def _fail(message: str) -> int:
    print(f"pipesim: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
