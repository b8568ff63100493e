"""``pipesim compare A B [C ...]``: two or more designs side by side, with 95% intervals over seeds.

Design: the command is :func:`pipesim.compare` on the command line. Each argument is read as
``pipesim run`` reads its scenario -- a registered name, a scenario file, ``module:factory``, a
run spec (``kind = "compute"``) -- or is a saved run's directory (``pipesim run ... --save DIR``),
and names its column; a design that names a policy class of the user's own reads it from
``--policies FILE``, registered before any design is read, as for ``pipesim run``
(:func:`~pipesim.io.cli_common.register_policies`, which :mod:`pipesim.io.cli` calls for every
command with the option; compare had none, though the unknown-policy error pointed to it).
``--seeds N`` runs each design that runs (a scenario, a run spec) at seeds
0..N-1 and prints each metric's mean with its 95% Student t interval over seeds, and each later
design's paired difference with the first, marked distinguishable from seed noise where its
interval excludes 0 (:mod:`pipesim.io.compare_seeds`). A saved run is one run: it stands as its
single value, and a note under the table says so. ``--json`` writes the table (``-``: standard
output, the table then on standard error; a number that is not there, such as the interval of one
run, is ``null``), ``--html`` the figure and the table on one page with plotly.js inlined once (it
opens offline). Where a design's argument is long (over :data:`LONG_NAME` characters) the printed
table heads its columns A, B, C ... and a line above it says which argument each letter is.

Every argument is read, and every output path checked, before anything runs; a bad one is one
line naming it (an unknown design, a design given twice, a directory that is no saved run). Ctrl-C
or SIGTERM keeps the seeds every design had finished: their table is printed and written, headed
as partial, and the command exits 130 (:func:`~pipesim.io.interrupts.interrupt_once`). A design
whose run fails (a policy that raises, a run that stalls) does the same, and the command exits 2
with one line naming the design and the seed (:class:`~pipesim.io.compare.CompareFailed`).
"""

from __future__ import annotations

import argparse
import html
import math
import os
import string
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from pipesim.core.errors import shown
from pipesim.io.cli_common import (
    UsageError,
    build_scenario,
    check_distinct,
    check_output,
    fmt_number,
    load_saved,
    one_line,
    progress_wanted,
    read_inputs,
    recipe_source,
)
from pipesim.io.cli_outputs import write_json

__all__ = ["LONG_NAME", "cmd_compare", "comparison_json", "comparison_text", "failed_json", "read_design"]

LONG_NAME = 20
"""The longest design argument the printed table heads a column with; past it, letters."""


def read_design(arg: str) -> Any:
    """What ``compare`` takes for the argument ``arg``: a loaded saved run, a run spec or a
    scenario; UsageError naming ``arg`` when it is none of them."""
    from pipesim.io.registry import names_a_path
    from pipesim.io.saved import is_saved_run
    from pipesim.plan.checks import PlanError
    from pipesim.plan.runspec import is_runspec, load

    try:
        if Path(arg).is_dir():
            if not is_saved_run(arg):
                raise UsageError(
                    "a directory that is not a saved run (`pipesim run SCENARIO --save DIR` writes one)"
                )
            return load_saved(arg)
        if is_runspec(arg):
            return load(arg)
        if names_a_path(arg) and not os.path.lexists(arg):  # runs/nosuch: no unknown scenario
            raise UsageError(
                "no such file or directory (a design is a saved run's directory, "
                "`pipesim run SCENARIO --save DIR`, a run spec or a scenario)"
            )
        return build_scenario(arg, [], None)[0]
    except (UsageError, PlanError) as exc:
        raise UsageError(f"design {shown(arg)}: {one_line(exc)}") from None


def _identity(design: str) -> str:
    """What a design argument names, as a run file's recipe stores it
    (:func:`~pipesim.io.cli_common.recipe_source`: ``a.toml``, ``./a.toml`` and a link to it are
    one, and so are ``mine.py:make`` and ``./mine.py:make``); a saved run's directory by its
    resolved path."""
    path = Path(design)
    return str(path.resolve()) if path.is_dir() else recipe_source(design)


def _check_args(args: argparse.Namespace) -> None:
    """Two or more designs, each once, and writable outputs that are none of them: before any work."""
    designs: list[str] = args.designs
    if len(designs) < 2:
        raise UsageError(f"compare needs two or more designs (DESIGN), got {len(designs)}: {shown(designs)}")
    same = [_identity(d) for d in designs]  # a.toml and ./a.toml are one design
    for i, d in enumerate(designs):
        if same[i] in same[:i]:
            first = same.index(same[i]) + 1
            raise UsageError(
                f"design {shown(d)} is given twice (arguments {first} and {i + 1}); each names a column, "
                "so give each design once"
            )
    check_output("json", args.json, stdout=True)
    check_output("html", args.html)
    inputs = [inp for d in designs for inp in read_inputs(d)] + read_inputs(None, args.policies)
    check_distinct([("json", args.json), ("html", args.html)], inputs)


def cmd_compare(args: argparse.Namespace) -> int:
    from pipesim.io.compare import CompareFailed, CompareInterrupted, compare
    from pipesim.io.interrupts import interrupt_once

    _check_args(args)
    designs = {d: read_design(d) for d in args.designs}
    out: IO[str] = sys.stderr if args.json == "-" else sys.stdout
    bar = _bar(sum(not Path(d).is_dir() for d in args.designs) * args.seeds, args.quiet)
    with interrupt_once():
        try:
            cmp = compare(designs, seeds=args.seeds, on_run=lambda *_: bar.update(1) if bar else None)
        except CompareInterrupted as exc:
            if bar is not None:
                bar.close()  # its line cleared before the table
            return _interrupted(args, exc, out)
        except CompareFailed as exc:
            if bar is not None:
                bar.close()
            return _failed(args, exc, out)
        finally:
            if bar is not None:
                bar.close()
        _show(args, cmp, out)
    return 0


def _failed(args: argparse.Namespace, exc: Any, out: IO[str]) -> int:
    """A design's run failed: the seeds every design finished, shown and written as partial, and
    one line naming the design and the seed; exit status 2 (``PIPESIM_TRACEBACK=1``: the traceback
    after the table)."""
    if exc.partial is not None:
        stopped = f"stopped by a failure after {exc.done} of {exc.n} seeds"
        _show(args, exc.partial, out, stopped=stopped, error=one_line(exc))
    else:  # nothing to tabulate: the JSON still says what failed, for a script reading it
        if args.json:
            write_json(args.json, failed_json(args.designs, args.seeds, one_line(exc)), out)
        if args.html:
            print(f"not written: --html {args.html} (no seed finished for every design)", file=sys.stderr)
    if os.environ.get("PIPESIM_TRACEBACK"):
        raise exc
    where = "" if isinstance(exc.error, ValueError) else " (PIPESIM_TRACEBACK=1 shows where)"
    print(f"pipesim: error: {one_line(exc)}{where}", file=sys.stderr)
    return 2


def _bar(n: int, quiet: bool) -> Any:
    """A tqdm bar of the ``n`` runs, where progress is shown (a terminal, not --quiet); else None."""
    if not n or not progress_wanted(quiet):
        return None
    from tqdm import tqdm

    return tqdm(total=n, desc="runs", unit="run", leave=False)


def _interrupted(args: argparse.Namespace, exc: Any, out: IO[str]) -> int:
    """Ctrl-C: the seeds every design finished, shown and written as partial; exit status 130."""
    if exc.partial is None:
        print(f"interrupted after {exc.done} of {exc.n} seeds: none finished for every design", file=out)
        skipped = [f"--{o} {getattr(args, o)}" for o in ("json", "html") if getattr(args, o)]
        print(
            "pipesim: interrupted: compare stopped before a seed finished for every design"
            + (f"; not written: {', '.join(skipped)}" if skipped else ""),
            file=sys.stderr,
        )
        return 130
    _show(args, exc.partial, out, stopped=f"interrupted after {exc.done} of {exc.n} seeds")
    print(f"pipesim: interrupted: compare stopped after {exc.done} of {exc.n} seeds", file=sys.stderr)
    return 130


def _short(names: Sequence[str]) -> dict[str, str]:
    """Each design's column head in the printed table: its argument, or where one is longer than
    :data:`LONG_NAME`, a letter (A, B, ... Z, then D27, D28, ...)."""
    if max(len(n) for n in names) <= LONG_NAME:
        return {n: n for n in names}
    return {n: string.ascii_uppercase[i] if i < 26 else f"D{i + 1}" for i, n in enumerate(names)}


def _header(cmp: Any, stopped: str = "") -> str:
    """The line above the table: what its numbers are (``stopped``: why it is partial)."""
    names = list(cmp.per_seed)
    short = _short(names)
    cut = f"{stopped}: partial, over those {cmp.done}; " if cmp.partial else ""
    if cmp.seeds == 1:
        return "each design run once at its own seed (--seeds N gives 95% intervals over N seeds)"
    diffs = ", ".join(f"{short[b]} - {short[names[0]]}" for b in names[1:])
    if cmp.done == 1:  # one seed gives no interval: the values as run, and their differences
        return (
            f"{cut}the value at seed 0 of each design run here (one seed: no interval, and none "
            f"for {diffs}, so nothing is marked distinguishable)"
        )
    single = {n for n in names if len(cmp.per_seed[n]) == 1}  # a saved run or result: one run
    paired = ", ".join(f"{short[b]} - {short[names[0]]}" for b in names[1:] if not {b, names[0]} & single)
    alone = ", ".join(f"{short[b]} - {short[names[0]]}" for b in names[1:] if {b, names[0]} & single)
    said = [f"{cut}mean [95% Student t interval] over seeds 0..{cmp.done - 1} of each design run here"]
    if paired:
        said.append(
            f"{paired}: the paired difference per seed, distinguishable from seed noise where its "
            "interval excludes 0"
        )
    if alone:  # one run less a mean over seeds: nothing to pair, no interval
        said.append(f"{alone}: a one-run design's value (seed 0) against the other's mean, not paired")
    return "; ".join(said)


def comparison_text(cmp: Any, width: int | None = None) -> str:
    """The table as printed: a value per design (with ``--seeds N``, ``mean [lo, hi]``), the
    differences and whether each is distinguishable (yes, no, or - where there is no interval; a
    difference the engines do not allow reads -). Long design arguments head their columns as
    letters, with a line above the table that says which is which (:func:`_short`). ``width``:
    the columns wrap into blocks of at most that many characters, each with the metric names (the
    command passes its terminal's width; five designs over seeds made a table about 600 characters
    wide); None, one block, as a file or pipe gets it."""
    import pandas as pd

    t, names = cmp.table, list(cmp.per_seed)
    short = _short(names)
    legend = "" if all(short[n] == n for n in names) else "; ".join(f"{short[n]} = {n}" for n in names) + "\n"

    def head(col: str) -> str:  # a design's name or a difference "B - A", in short
        return short.get(col) or next(
            (f"{short[b]} - {short[names[0]]}" for b in names[1:] if col.startswith(f"{b} - ")), col
        )

    if cmp.seeds == 1:
        one = t.rename(columns=head).to_string(float_format=fmt_number, na_rep="-", line_width=width)
        return legend + str(one)
    cells: dict[str, list[str]] = {}
    columns = list(dict.fromkeys(t.columns.get_level_values(0)))
    several = len(columns) - len(cmp.per_seed) > 1  # several differences: say whose
    for col in columns:
        rows = t[col][["mean", "lo", "hi"]].itertuples(index=False)
        cells[head(col)] = [_interval(m, lo, hi) for m, lo, hi in rows]
        if "distinguishable" in t[col]:
            cells[f"{head(col)}: distinguishable" if several else "distinguishable"] = [
                {True: "yes", False: "no"}.get(v, "-") for v in t[col]["distinguishable"]
            ]
    with pd.option_context("display.width", 250, "display.max_columns", 40, "display.max_colwidth", 60):
        return legend + str(pd.DataFrame(cells, index=t.index).to_string(line_width=width))


def _interval(mean: float, lo: float, hi: float) -> str:
    """``mean [lo, hi]``, or the mean alone where there is no interval; - where there is no mean (a
    metric a design's engine does not report, a difference two engines do not allow), in a
    design's column as in a difference's (a design's printed ``nan`` before)."""
    if not math.isfinite(mean):
        return "-"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return fmt_number(float(mean))
    return f"{fmt_number(float(mean))} [{fmt_number(float(lo))}, {fmt_number(float(hi))}]"


def comparison_json(cmp: Any, error: str | None = None) -> dict[str, Any]:
    """The table as JSON: per row its summary key, label, each design's value (with ``--seeds N``:
    ``{"mean", "lo", "hi"}``) and each difference (mean, lo, hi, distinguishable); a number that is
    not there (NaN: the interval of one run, a difference two engines do not allow) as ``null``, as
    ``pipesim fit --json`` writes one. ``error``: why a partial table stopped (a design's failure),
    else null."""
    from pipesim.io.saved import json_number

    def num(x: Any) -> Any:
        return None if isinstance(x, float | int) and math.isnan(float(x)) else json_number(float(x))

    t, names = cmp.table, list(cmp.per_seed)
    rows = []
    for i, (key, label) in enumerate(zip(cmp.keys, t.index)):
        row: dict[str, Any] = {"metric": key, "label": label}
        if cmp.seeds == 1:
            row["values"] = {n: num(t.iloc[i][n]) for n in names}
        else:
            r = t.iloc[i]
            row["values"] = {n: {s: num(r[(n, s)]) for s in ("mean", "lo", "hi")} for n in names}
            row["differences"] = {
                c: {
                    **{s: num(r[(c, s)]) for s in ("mean", "lo", "hi")},
                    "distinguishable": _flag(r[(c, "distinguishable")]),
                }
                for c in dict.fromkeys(t.columns.get_level_values(0))
                if c not in names
            }
        rows.append(row)
    return {
        "seeds": cmp.seeds,
        "seeds_done": cmp.done,
        "partial": cmp.partial,
        "interval": _interval_note(cmp.seeds, [len(cmp.per_seed[n]) for n in names]),
        "designs": {n: {"runs": len(cmp.per_seed[n])} for n in names},
        "rows": rows,
        "notes": list(cmp.notes),
        "error": error,
    }


def _interval_note(seeds: int, runs: Sequence[int]) -> str | None:
    """What the JSON's intervals are: paired by seed where every design ran over the seeds; a
    design of one run (a saved run) has its difference as one value against the other's mean, as
    the printed header says."""
    if seeds <= 1:
        return None
    if all(r > 1 for r in runs):
        return "95% Student t over seeds; differences paired by seed"
    return (
        "95% Student t over seeds; differences paired by seed between designs run over seeds, "
        "a one-run design's (seed 0) against the other's mean, not paired and with no interval"
    )


def failed_json(designs: Sequence[str], seeds: int, error: str) -> dict[str, Any]:
    """:func:`comparison_json`'s shape for a comparison that failed before any seed finished for
    every design: partial, no seed done, no rows, and ``error`` saying which design and seed
    failed (a saved run's directory is its one run). No file was written before, though the
    failure is what a script reading it wants to know."""
    return {
        "seeds": seeds,
        "seeds_done": 0,
        "partial": True,
        "interval": "95% Student t over seeds; differences paired by seed" if seeds > 1 else None,
        "designs": {d: {"runs": int(Path(d).is_dir())} for d in designs},
        "rows": [],
        "notes": [],
        "error": error,
    }


def _terminal_width(out: IO[str]) -> int | None:
    """The width to wrap the table at: a terminal's columns, None for a file or a pipe (one block,
    as scripts read it)."""
    import shutil

    try:
        return shutil.get_terminal_size().columns if out.isatty() else None
    except (AttributeError, ValueError, OSError):
        return None


def _flag(v: Any) -> bool | None:
    """A distinguishable cell as JSON: true, false, or null where there is no interval."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else bool(v)


def _show(
    args: argparse.Namespace, cmp: Any, out: IO[str], stopped: str = "", error: str | None = None
) -> None:
    """Print the table and its notes; write ``--json`` and ``--html`` (``stopped``: why the table is
    partial; ``error``: a design's failure, for the JSON)."""
    from pipesim.io.interrupts import write_text_atomic

    print(_header(cmp, stopped), file=out)
    print(comparison_text(cmp, _terminal_width(out)), file=out)
    for note in cmp.notes:
        print(f"note: {note}", file=out)
    if args.json:
        write_json(args.json, comparison_json(cmp, error), out)
    if args.html:
        write_text_atomic(args.html, _page(args.designs, cmp, stopped))
        print(f"wrote {args.html}", file=out)


def _page(designs: Sequence[str], cmp: Any, stopped: str = "") -> str:
    """The figure with the table and notes above it, plotly.js inlined once (no CDN)."""
    from pipesim.io import viz

    said = "".join(f"<p>note: {html.escape(n)}</p>" for n in cmp.notes)
    table = f"<pre>{html.escape(comparison_text(cmp))}</pre>"
    preamble = f"<p>{html.escape(_header(cmp, stopped))}</p>{table}{said}"
    title = "pipesim compare " + " ".join(designs)
    return viz.figures_to_html([cmp.figure], title=title, preamble=preamble)
