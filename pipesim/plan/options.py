"""``pipesim plan``'s command line: its options (:func:`parser`) and the checks of their values
that run before the spec is read or anything runs (:func:`check_args`).

The options ``pipesim``'s own commands take too (``--json``, ``--html``, ``--workers``,
``--seed``, ``--dask``, ``--quiet``) come from :mod:`pipesim.io.cli_options`, so they are spelled
and checked alike everywhere; the planner's own (``--csv``, ``--parquet``, ``--cache-dir``,
``--no-cache``, ``--resume``, ``--trials``, ``--method``, ``--export-best``, ...) are added here.
:func:`check_args` returns what is wrong as one line (None: nothing), which the command prints as
argparse prints its own errors, exit status 2: a bad seed or worker count, an output that cannot
be written or that names another output or the spec, ``--resume`` or ``--cache-dir`` with
``--no-cache``, and a run cache that cannot hold the runs (:func:`cache_problem`) are refused
before any design runs, not after the search. The command itself (:func:`pipesim.plan.main`)
lives in the package's ``__init__``; ``parser`` is re-exported there.
"""

from __future__ import annotations

import argparse

from pipesim.io.cli_common import UsageError
from pipesim.io.cli_options import add_option, workers_problem
from pipesim.plan.checks import MAX_SEED


def parser(prog: str = "pipesim plan") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=prog,
        allow_abbrev=False,  # as pipesim's commands: --seed is never a prefix of another option
        description="Search placements, TP, admission, weight-update policy and sync interval for the "
        "highest-throughput design that meets the constraints; print the best designs, the Pareto "
        "front and the recommended scenario.",
        epilog="examples:\n"
        "  pipesim plan examples/plan_qwen3_8b.toml\n"
        "  pipesim plan examples/plan_qwen3_8b.toml --workers 2 --html plan.html --json plan.json\n"
        "  pipesim plan my_cluster.yaml --method grid --no-sensitivity --quiet",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # SPEC is optional to argparse only for --explain-keys; the usage said [SPEC]
        usage="%(prog)s SPEC [options]\n       %(prog)s --explain-keys",
    )
    ap.add_argument(
        "spec",
        nargs="?",
        metavar="SPEC",
        help='a plan spec, or a run spec (kind = "compute": its design runs as the baseline; '
        "docs/runspec.md), TOML or YAML (see docs/plan.md); e.g. examples/plan_qwen3_8b.toml or "
        "examples/run_qwen3_8b.toml",
    )
    # the options pipesim's own commands take too come from one place (pipesim.io.cli_options)
    add_option(
        ap,
        "json",
        metavar="FILE",
        help="write the front, every design run and the recommendation; e.g. --json plan.json",
    )
    add_option(
        ap, "html", metavar="FILE", help="write the report (plotly.js embedded); e.g. --html plan.html"
    )
    ap.add_argument(
        "--csv", metavar="FILE", help="write the designs as CSV (one row each); e.g. --csv plan.csv"
    )
    ap.add_argument(
        "--parquet", metavar="FILE", help="write the designs as Parquet; e.g. --parquet plan.parquet"
    )
    ap.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="where finished runs are kept and reused (default $PIPESIM_CACHE or "
        "~/.cache/pipesim/plan); e.g. --cache-dir runs/plan-cache",
    )
    ap.add_argument(
        "--no-cache", action="store_true", help="neither read nor write the run cache; e.g. --no-cache"
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted plan from the run cache (a plan always reuses it; this says "
        "how many runs it found); e.g. --resume",
    )
    ap.add_argument(
        "--explain-keys",
        action="store_true",
        help="print every spec key with verl's, AReaL's, slime's and ROLL's names and exit; "
        "e.g. pipesim plan --explain-keys",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="TABLE.KEY=VALUE",
        help="override a key of the spec file before it is read; repeatable; e.g. --set cluster.n_gpus=128, "
        "--set 'space.eta=[0, 1, 2]', --set workload.max_response_tokens=16384",
    )
    add_option(ap, "workers", default=1, help="processes (default 1); e.g. --workers 2")
    add_option(
        ap,
        "seed",
        default=0,
        help="the search's seed: Optuna's sampler and the first cut's audit, not the runs' "
        "(search.sim_seed; default 0); e.g. --seed 3",
    )
    ap.add_argument(
        "--trials",
        metavar="N",
        type=int,
        help="designs Optuna screens, or the slice search's screens and probes, each at most "
        "(overrides search.trials; not with --method grid, which screens every design); e.g. --trials 200",
    )
    ap.add_argument(
        "--method",
        choices=("auto", "grid", "slices", "optuna"),
        help="override the spec's search method; e.g. --method grid",
    )
    add_option(
        ap,
        "dask",
        help="run the designs on a Dask cluster (local: a LocalCluster of --workers); e.g. --dask local",
    )
    ap.add_argument(
        "--no-sensitivity", action="store_true", help="skip the sensitivity re-runs; e.g. --no-sensitivity"
    )
    ap.add_argument(
        "--export-best",
        metavar="FILE",
        help="write the recommended design as a run spec for `pipesim run` (docs/runspec.md); "
        "e.g. --export-best best.toml",
    )
    add_option(ap, "quiet")
    return ap


def check_args(args: argparse.Namespace) -> str | None:
    """What is wrong with the options, before the spec is read or anything runs; None: nothing."""
    from pipesim.io.cli_common import check_distinct, check_output

    if (problem := workers_problem(args.workers)) is not None:
        return problem
    if not 0 <= args.seed < MAX_SEED:
        return f"--seed must be an integer in [0, 2**32) (the range of Optuna's sampler), got {args.seed}"
    if args.trials is not None and args.trials < 1:
        return f"--trials must be at least 1, got {args.trials}"
    if (problem := trials_problem(args.method, args.trials)) is not None:
        return problem
    if args.spec is None:
        return "the following arguments are required: SPEC"
    outs = [o for o in ("json", "html", "csv") if getattr(args, o) == "-"]
    if len(outs) > 1:
        return f"--{' and --'.join(outs)} cannot all be '-' (standard output)"
    if args.no_cache and args.resume:
        return "--resume continues from the run cache; it cannot go with --no-cache"
    if args.no_cache and args.cache_dir is not None:
        return "--cache-dir names the run cache; it cannot go with --no-cache"
    if not args.no_cache and (problem := cache_problem(args.cache_dir)) is not None:
        return problem
    try:  # a directory, a missing parent, an unwritable one: not after the search
        check_output("json", args.json, stdout=True)
        check_output("html", args.html, stdout=True)
        check_output("export-best", args.export_best, (".toml", ".yaml", ".yml"))
        check_output("csv", args.csv, stdout=True)
        check_output("parquet", args.parquet)
        outputs = [
            (o.replace("_", "-"), getattr(args, o)) for o in ("json", "html", "csv", "parquet", "export_best")
        ]
        check_distinct(outputs, [("spec", args.spec)])
    except UsageError as e:
        return str(e)
    return None


def trials_problem(method: str | None, trials: int | None) -> str | None:
    """Why ``--trials`` cannot go with the search ``method`` (``--method``, or the spec's once it is
    read), or None: the grid screens every design and reads no ``trials``, so ``--method grid
    --trials 5`` ran the whole grid without a word. Optuna and the slice search read it; ``auto``
    may become either."""
    if method == "grid" and trials is not None:
        return (
            f"--trials {trials} sets the designs Optuna or the slice search screens; the grid "
            "search (method grid) screens every design, so it takes no --trials"
        )
    return None


def cache_problem(cache_dir: str | None) -> str | None:
    """Why the run cache (``--cache-dir``, else ``$PIPESIM_CACHE`` or the default) cannot hold the
    runs, or None: a file in its place or above it, or a directory no file can be made in. Checked
    before the search: the cache is what ``--resume`` continues an interrupted plan from, and a
    cache that cannot be written failed the plan at its first run, naming the spec."""
    from pipesim.io.cli_common import directory_problem
    from pipesim.plan.cache import DiskCache

    root = DiskCache(cache_dir).root
    if (problem := directory_problem(root)) is None:
        return None
    opt = (
        "--cache-dir" if cache_dir is not None else "the run cache ($PIPESIM_CACHE or ~/.cache/pipesim/plan)"
    )
    return f"{opt} {root}: {problem}"
