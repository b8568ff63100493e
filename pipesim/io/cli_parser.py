"""The ``pipesim`` argument parser: one subparser per command, each bound to its ``cmd_*`` function.

Design: the parser only describes; every subcommand's work is in its own module
(:mod:`~pipesim.io.cli_run`, :mod:`~pipesim.io.cli_sweep`, :mod:`~pipesim.io.cli_trace`,
:mod:`~pipesim.io.cli_fit`, :mod:`~pipesim.io.cli_compare`), bound with ``set_defaults(func=...)``.
Options that several commands take (scenario, ``--set``, ``--policies``, ``--seed``, ``--over``,
``--workers``, ``--dask``, ``--quiet``, ``--json``, ``--html``) come from
:mod:`pipesim.io.cli_options`, which ``pipesim plan`` uses as well; only a command's own options
are spelled out here. Every argument's help ends in an example and every command's ``--help`` ends
in an ``examples:`` block (a test holds them to it).
Errors print a one-line usage (:class:`~pipesim.io.cli_options.Parser`, re-exported here); the
full usage is in ``--help``. ``plan`` is listed here but parses its own (:func:`pipesim.plan.parser`).
"""

from __future__ import annotations

import argparse
from typing import Any

from pipesim.compute.profile_shapes import DESCRIPTION as PROFILE_DESCRIPTION
from pipesim.compute.profile_shapes import add_arguments as add_profile_arguments
from pipesim.io.argtypes import int_in
from pipesim.io.cli_compare import cmd_compare
from pipesim.io.cli_fit import cmd_fit
from pipesim.io.cli_options import SCENARIO_HELP, Parser, add_option, add_options, examples, policies_help
from pipesim.io.cli_profile import cmd_check_roofline, cmd_profile
from pipesim.io.cli_run import cmd_export, cmd_list, cmd_run
from pipesim.io.cli_sweep import cmd_sweep
from pipesim.io.cli_trace import cmd_report, cmd_trace
from pipesim.io.compare_seeds import MAX_SEEDS
from pipesim.io.sweep_resume import add_resume_option

__all__ = ["FIT_SUFFIXES", "Parser", "build_parser"]

FIT_SUFFIXES = (".csv", ".txt", ".tsv", ".jsonl", ".ndjson", ".json", ".parquet")
"""The suffixes ``pipesim fit`` reads (:func:`pipesim.io.fit_readers.read_table`; a test holds the
two lists together), spelled out here so that ``--help`` imports no reader."""
FIT_SUFFIXES_SAID = ", ".join(FIT_SUFFIXES[:-1]) + f" or {FIT_SUFFIXES[-1]}"
FIT_INPUTS = "CSV, TSV, JSON, JSON lines or Parquet"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pipesim")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The ``pipesim`` parser (``plan`` is dispatched before it, by :func:`pipesim.io.cli.main`)."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = Parser(
        prog="pipesim",
        description="Simulate RL rollout pipelines (chapter 13).",
        epilog=examples(
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
        epilog=examples("pipesim list", "pipesim list --keys", "pipesim list systems:areal"),
        formatter_class=fmt,
    )
    ls.add_argument("scenario", nargs="?", help=f"show this scenario: {SCENARIO_HELP}")
    ls.add_argument(
        "--keys", action="store_true", help="also list the keys --set accepts and every policy; e.g. --keys"
    )
    add_option(ls, "policies", help=policies_help("list"))  # --keys lists the classes a module adds
    ls.set_defaults(func=cmd_list)

    r = sub.add_parser(
        "run",
        help="run one scenario and print its summary",
        description=(
            'Run one scenario, or a compute-grounded run spec (kind = "compute": a cluster, a '
            "model, a workload and one design; a calibrated one from pipesim calibrate), and print "
            "its summary."
        ),
        epilog=examples(
            "pipesim run synchronous",
            "pipesim run async-eta2 --set n_slots=128 --seed 3 --html timeline.html",
            "pipesim run systems:areal --set 'admission=AReaLThrottle(max_concurrent=48)'",
            "pipesim run my.toml --json -   # the summary as JSON on stdout, the table on stderr",
        ),
        formatter_class=fmt,
    )
    add_options(r, "scenario", "set")
    add_option(r, "policies", help=policies_help("set"))
    add_option(
        r, "seed", metavar=None, help="the duration pool's seed, an integer in [0, 2**64); e.g. --seed 3"
    )
    add_option(r, "html", help="write an interactive timeline; e.g. --html timeline.html")
    add_option(
        r,
        "json",
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
    r.add_argument(
        "--intervals",
        type=int,
        metavar="N",
        help="a calibrated run spec (pipesim calibrate): also run N draws of the calibrated values "
        "and print each metric's 95%% range; e.g. --intervals 20",
    )
    r.set_defaults(func=cmd_run)

    add_compare(sub, fmt)

    s = sub.add_parser(
        "sweep",
        help="run a grid of values x seeds",
        description="Run every combination of the --over values, each with --seeds seeds.",
        epilog=examples(
            "pipesim sweep synchronous --over max_staleness=0,1,2 --seeds 3",
            "pipesim sweep async-eta2 --over 'weight_update=InFlightUpdate(load_time_s=0.5),Drain'",
        ),
        formatter_class=fmt,
    )
    add_options(s, "scenario", "set", "policies", "over")
    s.add_argument(
        "--seeds",
        type=int_in(1, MAX_SEEDS),
        default=1,
        metavar="N",
        help=f"seeds per grid point (1 to {MAX_SEEDS}, as compare's --seeds; default 1); e.g. --seeds 5",
    )
    g = s.add_mutually_exclusive_group()
    add_option(g, "workers", help="local process pool size (>= 1; default: CPUs); e.g. --workers 4")
    add_option(g, "dask")
    s.add_argument(
        "--timeout-s",
        metavar="SECONDS",
        help="fail a cell that runs longer than this many seconds (default 3600; none: no limit, "
        "which --dask needs); e.g. --timeout-s 600",
    )
    s.add_argument(
        "--csv",
        metavar="PATH",
        help="write one row per run, with a partial column (True on every row when the sweep was "
        "interrupted: the finished runs only); e.g. --csv runs.csv",
    )
    add_option(s, "html", help="write sweep figures; e.g. --html sweep.html")
    add_resume_option(s)
    add_option(s, "quiet")
    s.set_defaults(func=cmd_sweep)

    rep = sub.add_parser(
        "report",
        help="write the offline HTML report of the chapter's figures",
        description="Compute the chapter's tables and figures and write one self-contained HTML page.",
        epilog=examples(
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
    out_help = "the page to write (default report.html); e.g. --out areal.html"
    rep.add_argument("--out", default="report.html", metavar="PATH", help=out_help)
    rep.add_argument(
        "--seeds",
        type=int,
        default=None,
        metavar="N",
        help=f"seeds per banded point of the chapter's report (1 to {MAX_SEEDS}, default 3); e.g. --seeds 3",
    )
    add_options(rep, "workers", "quiet")
    add_option(rep, "policies", help=policies_help("report"))
    rep.set_defaults(func=cmd_report)

    t = sub.add_parser(
        "trace",
        help="export a run as Chrome/Perfetto trace-event JSON",
        description="Write a Chrome/Perfetto trace of a run file, an events table or a scenario.",
        epilog=examples(
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
    add_option(t, "set")
    add_option(t, "policies", help=policies_help("set"))
    add_option(t, "seed")
    t.set_defaults(func=cmd_trace)

    f = sub.add_parser(
        "fit",
        help=f"fit duration models to a column of a trace ({FIT_INPUTS})",
        description=(
            "Fit log-normal, agent and empirical models to the positive values of one column of a "
            f"trace ({FIT_INPUTS}; episode seconds, or token counts with --scale); print parameters and "
            "Kolmogorov-Smirnov goodness of fit; write a QQ plot and, optionally, a scenario file "
            "with the fitted model (see pipesim.io.fit)."
        ),
        epilog=examples(
            "pipesim fit episodes.csv --column duration_s --qq qq.html",
            "pipesim fit episodes.jsonl --column duration_s --turns-column turns",
            "pipesim fit trace.csv --column num_decode_tokens --scale 0.025 "
            "--scenario-out fitted.toml --model lognormal --base async-eta2",
        ),
        formatter_class=fmt,
    )
    f.add_argument("trace", help=f"the trace: {FIT_SUFFIXES_SAID}; e.g. episodes.csv")
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
        help="multiply every value by X (default 1; seconds per token for token counts); e.g. --scale 0.025",
    )
    f.add_argument("--qq", metavar="PATH", help="write a QQ plot of every model (.html); e.g. --qq qq.html")
    add_option(f, "json", help="write the fits as JSON; - is stdout; e.g. --json fit.json")
    f.add_argument(
        "--scenario-out",
        metavar="PATH",
        help="write --base with the fitted --model as durations (.toml/.yaml); e.g. --scenario-out fit.toml",
    )
    f.add_argument(
        "--model",
        choices=("lognormal", "agent", "empirical"),
        default=None,
        help="the model --scenario-out writes (default: the fit pipesim fit chooses, printed as "
        "'default model'; docs/usage.md); e.g. --model agent",
    )
    f.add_argument(
        "--base",
        default="synchronous",
        metavar="SCENARIO",
        help=f"the scenario --scenario-out starts from (its agent model is the agent fit's shape; "
        f"default synchronous): {SCENARIO_HELP}; e.g. --base systems:areal",
    )
    add_option(
        f,
        "seed",
        default=0,
        help="the seed of the agent fit's draws, the held-out half and the bootstrap, in [0, 2**64) "
        "(default 0); e.g. --seed 3",
    )
    f.set_defaults(func=cmd_fit)

    from pipesim.calibrate.cli import add_parser as add_calibrate

    add_calibrate(sub)

    x = sub.add_parser(
        "export",
        help="write a scenario (or a run spec) as a TOML or YAML file",
        description=(
            "Write a scenario as a file that `pipesim run FILE` runs (see pipesim.io.scenario_files)."
        ),
        epilog=examples(
            "pipesim export systems:areal --out areal.toml",
            "pipesim export async-eta2 --set n_slots=128 --out mine.yaml",
        ),
        formatter_class=fmt,
    )
    add_option(x, "scenario")
    x.add_argument(
        "--out", required=True, help="the file (.toml, .yaml, .yml), or - for stdout; e.g. --out my.toml"
    )
    x.add_argument("--format", choices=("toml", "yaml"), help="the format for --out -; e.g. --format yaml")
    add_option(x, "set")
    add_option(x, "policies", help=policies_help("set"))
    add_option(x, "seed", help="the seed written into the file; e.g. --seed 3")
    x.set_defaults(func=cmd_export)

    pr = sub.add_parser(
        "profile",
        help="measure this GPU's GEMMs, attention and all-reduce for a model (docs/decode.md)",
        description=PROFILE_DESCRIPTION,
        epilog=examples(
            "pipesim profile --model qwen3-8b --out gpu.csv", "pipesim check-roofline gpu.csv --gpu h100-sxm"
        ),
        formatter_class=fmt,
    )
    add_profile_arguments(pr)
    pr.set_defaults(func=cmd_profile)
    cr = sub.add_parser(
        "check-roofline",
        help="the roofline's error on a measurement CSV (pipesim profile's, or Vidur's extracts)",
        description="Score the roofline on each op of a measurement CSV (median, p90, bias).",
        epilog=examples(
            "pipesim check-roofline gpu.csv --gpu h100-sxm", "pipesim check-roofline a.csv --measured"
        ),
        formatter_class=fmt,
    )
    cr.add_argument("csv", help="the measurement CSV, e.g. gpu.csv")
    cr.add_argument(
        "--gpu",
        default=None,
        help="the catalog GPU it was measured on, e.g. a100-80gb; default: the GPU the CSV's device "
        "column names (pipesim profile writes it), required where it names none (Vidur's extracts)",
    )
    cr.add_argument(
        "--measured",
        action="store_true",
        help="kept for old command lines: the default constants include the measured attention "
        "ones now, so it selects the same (docs/decode.md); e.g. --measured",
    )
    cr.set_defaults(func=cmd_check_roofline)
    return p


def add_compare(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """``pipesim compare A B [C ...]`` (:mod:`pipesim.io.cli_compare`)."""
    c = sub.add_parser(
        "compare",
        help="run two or more designs and set them side by side, with 95%% intervals over --seeds",
        description=(
            "Run two or more designs (or read saved runs) and print their headline metrics side by "
            "side; with --seeds N, each design's mean and 95% Student t interval over seeds 0..N-1, "
            "and each later design's paired difference with the first, marked distinguishable from "
            "seed noise where its interval excludes 0."
        ),
        epilog=examples(
            "pipesim compare fig13.1-sync fig13.1-async --seeds 5",
            "pipesim compare synchronous async-eta2 --seeds 8 --html compare.html",
            "pipesim compare my.toml runs/areal --json -   # the table as JSON on stdout",
            "pipesim compare mine.yaml async-eta2 --policies mypol.py   # a class mine.yaml names",
        ),
        formatter_class=fmt,
    )
    c.add_argument(
        "designs",
        nargs="+",
        metavar="DESIGN",
        help="two or more designs, each once: a scenario as pipesim run takes it (a registered name, a "
        "scenario file, module:factory, a run spec) or a saved run's directory (pipesim run ... --save "
        "DIR); e.g. fig13.1-sync fig13.1-async runs/eta1",
    )
    c.add_argument(
        "--seeds",
        type=int_in(1, MAX_SEEDS),
        default=1,
        metavar="N",
        help=f"run each design at seeds 0..N-1 and give 95%% intervals (1 to {MAX_SEEDS}; default 1: one "
        "run each at its own seed); e.g. --seeds 5",
    )
    add_option(
        c,
        "policies",
        help="a module of your own policy classes, by dotted name or .py path, that a design's scenario "
        "file names (repeatable); e.g. --policies mypol.py",
    )
    add_option(c, "html", help="write the comparison figure (plotly.js inlined); e.g. --html compare.html")
    add_option(c, "json", help="write the table as JSON; - is stdout; e.g. --json compare.json")
    add_option(c, "quiet")
    c.set_defaults(func=cmd_compare)
