"""``pipesim plan``: the highest-throughput design for a cluster, a model and a workload under
staleness and discard constraints, and the Pareto front around it (``docs/plan.md``).

* :mod:`~pipesim.plan.space` -- :class:`PlanSpec`, :class:`Constraints`, :class:`Space`,
  :class:`Design` and the candidates (placements at replica granularity, TP, eta, weight update,
  sync interval, over-sampling);
* :mod:`~pipesim.plan.evaluate` -- one design on the compute engine, cached and parallel;
* :mod:`~pipesim.plan.search` -- grid or Optuna NSGA-II screening, successive halving, the front,
  the infeasibility message and the sensitivity note (the rungs and the NSGA-II screen:
  :mod:`~pipesim.plan.rungs`);
* :mod:`~pipesim.plan.report` -- text, JSON, HTML (Plotly) and the recommended design as code;
* :mod:`~pipesim.plan.specfile` -- TOML / YAML specs;
* :mod:`~pipesim.plan.checks` -- the checks and bounds of a spec's values, each error naming the key;
* :mod:`~pipesim.plan.options` -- the command's options and their checks.

``plan(spec, seed=, workers=)`` returns a :class:`PlanResult`; ``main(argv)`` is the command. Its
options and their checks, made before the spec is read, are :mod:`~pipesim.plan.options`
(``parser`` is re-exported here); those shared with ``pipesim``'s commands (``--json``,
``--html``, ``--workers``, ``--seed``, ``--dask``, ``--quiet``) and the Dask connection come from
:mod:`pipesim.io.cli_options`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from pipesim.io.cli_common import UsageError, progress_wanted
from pipesim.io.cli_options import DaskError, close_dask, open_dask
from pipesim.plan.build import candidates
from pipesim.plan.checks import plain_warnings
from pipesim.plan.evaluate import Evaluated, nondominated, run_design
from pipesim.plan.options import check_args, trials_problem
from pipesim.plan.options import parser as parser  # re-exported: callers found it here
from pipesim.plan.search import PlanInfeasible, PlanInterrupted, PlanResult, plan, search, sensitivity
from pipesim.plan.space import Constraints, Design, PlanError, PlanSpec, Space
from pipesim.plan.specfile import from_dict, load

__all__ = [
    "Constraints",
    "Design",
    "Evaluated",
    "PlanError",
    "PlanInfeasible",
    "PlanInterrupted",
    "PlanResult",
    "PlanSpec",
    "Space",
    "candidates",
    "from_dict",
    "load",
    "main",
    "nondominated",
    "plan",
    "run_design",
    "search",
    "sensitivity",
]


def _error(message: str) -> int:
    """A user error: one line on stderr, as argparse prints its own (``pipesim plan: error: ...``),
    and exit status 2."""
    print(f"pipesim plan: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


def _write_all(result: PlanResult, args: argparse.Namespace) -> None:
    """Every requested output of ``result`` (whole files: an interrupt leaves the old one). An
    output that cannot be written (the disk filled, the directory went away since the check) is a
    UsageError naming its option, after the others are written: the search is not lost to one."""
    from pipesim.plan import frame, report

    outputs = (
        ("json", args.json, report.write_json),
        ("html", args.html, report.write_html),
        ("csv", args.csv, frame.write_csv),
        ("parquet", args.parquet, frame.write_parquet),
    )
    failed = []
    for opt, path, write in outputs:
        if path:
            try:
                write(result, path)
            except OSError as e:
                failed.append(f"--{opt} {path}: cannot write it ({e.strerror or e})")
    if failed:
        raise UsageError("; ".join(failed))


def main(argv: list[str] | None = None) -> int:
    """``pipesim plan SPEC [--json FILE] [--html FILE] [--csv FILE] [--parquet FILE] [--workers N]
    [--seed N] [--trials N] [--resume]``.

    Exit status 0, 2 for a user error (an option, an output path or the spec; one line on stderr
    naming the option or the file and key, before any search), 3 when no design meets the
    constraints, 130 when Ctrl-C or SIGTERM stopped it: one line (with ``no recommendation
    yet`` when none had been judged feasible in full), and every requested output holds the designs finished
    by then (``partial: true``). ``--json -`` / ``--html -`` / ``--csv -``
    write to standard output, and the text goes to stderr.
    """
    from pipesim.io.interrupts import interrupt_once
    from pipesim.plan.report import runs_said

    # the first Ctrl-C or SIGTERM stops the plan; a later one is dropped until it has written what
    # finished (one 30 ms after the first cut the saving, or killed the process with -2)
    with interrupt_once(), plain_warnings():
        try:
            return _main(argv)
        except PlanInterrupted as e:
            said = f"pipesim plan: interrupted: {runs_said(e.result)} done; {_kept(e.result, e)}"
            if e.result.best is None:  # before the resume hint: what ran, what it gave, what next
                said += "; no recommendation yet"
            if "--no-cache" not in (argv if argv is not None else sys.argv[1:]):
                said += "; the same command with --resume continues from the runs cached"
            _close_bars()
            print(said, file=sys.stderr)
            return 130
        except KeyboardInterrupt:
            _close_bars()
            print("pipesim plan: interrupted before any design was run; nothing written", file=sys.stderr)
            return 130


def _close_bars() -> None:
    """Close the progress bars an interrupt left open, so that their last line comes before the
    line that says so. A bar closes as its runs' iterator unwinds, but one held in a frame of the
    interrupt's traceback (the NSGA-II screen's, before it closed itself; an evaluator's whose
    interrupt landed between two runs) closed only when the exception was dropped, and printed one
    more bar line under "interrupted". tqdm's registry of open bars (``tqdm._instances``, which
    ``tqdm.write`` reads too) is read here only."""
    from tqdm import tqdm

    for bar in list(getattr(tqdm, "_instances", ())):
        bar.close()


def _kept(result: PlanResult, e: PlanInterrupted) -> str:
    """What the interrupted plan kept, counted as its outputs hold it (:func:`report.designs_said`:
    a design run in full was counted twice, 155 for a CSV of 137 rows)."""
    from pipesim.plan.report import designs_said

    n = designs_said(result)
    if not result.partial:
        return "nothing written"
    if not e.outputs_asked:  # no --json/--csv/--html/--parquet
        return f"{n} finished (no output was asked for)"
    return f"{n} written with partial: true"


def _announcer(spec: PlanSpec) -> Callable[[int], None]:
    """The line on stderr that says the space's size as soon as it is counted (before the designs
    are enumerated, checked and ranked): 767,200 designs, a typo of 6400 GPUs for 64, went two
    minutes on a terminal without a word before the first bar."""

    def say(n: int) -> None:
        then = "; the fluid first cut ranks them before the screening" if spec.first_cut and n > 1 else ""
        print(f"pipesim plan: {n:,} design{'s' * (n != 1)} in the space{then}", file=sys.stderr)

    return say


def _cache_line(disk: Any, before: int) -> str:
    """How many runs the cache gave back, and why it gave back no more: runs of this plan cached by
    other code (a run's key holds the hash of pipesim's code, :mod:`pipesim.plan.cache`), or, with
    none of those, how many runs of other plans it held (``before``: counted before the plan)."""
    line = f"run cache {disk.root}: {disk.hits} runs reused"
    if disk.stale:
        return line + (
            f"; {disk.stale} cached runs from other code were not reused (pipesim's code or version "
            "changed since they ran, and a run's key holds the code's hash)"
        )
    if not disk.hits:
        if not before:
            return line + "; it was empty"
        return line + (
            f"; none of the {before} runs it held is one of this plan's (other specs, lengths or "
            "seeds, or runs an older pipesim cached)"
        )
    return line


def _main(argv: list[str] | None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.explain_keys:
        from pipesim.plan.keys import explain

        print(explain())
        return 0
    problem = check_args(args)
    if problem is not None:
        return _error(problem)
    try:
        spec = load(args.spec, args.set)  # its errors name the file
        if args.trials is not None:
            spec = spec.with_(trials=args.trials)
        if args.method is not None:
            spec = spec.with_(method=args.method)
    except PlanError as e:
        return _error(str(e))
    if (problem := trials_problem(spec.method, args.trials)) is not None:  # the spec's method grid
        return _error(problem)
    from pipesim.plan import report
    from pipesim.plan.cache import DiskCache

    disk = None if args.no_cache else DiskCache(args.cache_dir)
    before = disk.files() if disk is not None and args.resume else 0  # what --resume had to go on
    text_out = sys.stderr if "-" in (args.json, args.html, args.csv) else sys.stdout
    client: Any = None
    cluster: Any = None
    executor: Any = None
    if args.dask is not None:
        try:
            client, cluster = open_dask(args.dask, args.workers)
        except DaskError as e:
            return _error(str(e))
        executor = client.get_executor()
    try:
        result = plan(
            spec,
            seed=args.seed,
            workers=args.workers,
            progress=progress_wanted(args.quiet),
            with_sensitivity=not args.no_sensitivity,
            executor=executor,
            cache=disk,
            announce=None if args.quiet else _announcer(spec),
        )
    except PlanInterrupted as e:
        from pipesim.io.interrupts import deferred_interrupts, stopping

        stopping()  # it may have come as no signal (a worker's): a signal now must not cut the saving
        e.outputs_asked = any(getattr(args, k, None) for k in ("json", "html", "csv", "parquet"))

        try:
            with deferred_interrupts():  # a second Ctrl-C while writing: the files first
                _write_all(e.result, args)
        except UsageError as w:  # said, and the interrupt still ends the plan
            _error(str(w))
        raise
    except PlanInfeasible as e:
        print(f"pipesim plan: {e}", file=sys.stderr)
        try:
            _write_all(e.result, args)
        except UsageError as w:
            return _error(str(w))
        return 3
    except (PlanError, OSError, ValueError) as e:  # the model does not fit, no candidate design
        return _error(f"{args.spec}: {e}")
    finally:
        close_dask(client, cluster)
    if disk is not None and (args.resume or disk.hits or disk.stale):
        print(_cache_line(disk, before), file=text_out)
    print(report.text(result), file=text_out)
    # an output that cannot be written: the designs are in the run cache, and rerunning with
    # another path reuses them
    try:
        _write_all(result, args)
    except UsageError as e:
        return _error(str(e))
    if args.export_best and result.best is not None:
        from pipesim.plan.runspec import write_best
        from pipesim.plan.specfile import edited

        source = edited(args.spec, args.set) if args.set else args.spec  # the tables the plan read
        try:
            print(write_best(source, result, args.export_best), file=text_out)
        except OSError as e:
            return _error(f"--export-best {args.export_best}: cannot write it ({e.strerror or e})")
    return 0
