"""What ``pipesim sweep`` writes: the ``--csv`` table, the ``--html`` page and, when it is
interrupted, the finished cells.

Design: every file is written whole or not at all (:func:`pipesim.io.interrupts.write_atomic`). A
sweep's result says which cells failed or timed out, and so does everything written from it: the
CSV has their rows, standard error counts them, and the page says so above its table
(:func:`failures_note`), since its figures and table hold only the cells that ran. An interrupted
sweep never replaces a complete file it finds at ``--csv``: its partial table goes beside it
(:func:`pipesim.io.sweep_resume.write_partial`), so a rerun stopped early keeps the earlier result.
"""

from __future__ import annotations

import argparse
import html
import itertools
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from pipesim.core.errors import shown
from pipesim.io.cli_common import fmt_number, one_line, table
from pipesim.io.interrupts import write_atomic, write_text_atomic

__all__ = [
    "TAIL_NOTE_SHARE",
    "cell_refusal",
    "failures_line",
    "failures_note",
    "interrupted",
    "no_interval_note",
    "print_partial",
    "seeds_text",
    "summary_table",
    "sweep_label",
    "sweep_preamble",
    "tail_note",
    "tail_share",
    "trace_note",
    "write_html",
    "write_runs",
]

LISTED = 20
"""The failed cells the page names one by one; the rest are counted (the CSV has them all)."""


def write_runs(runs: Any, path: str, partial: bool) -> None:
    """The ``--csv`` table: one row per cell and a ``partial`` column, True on every row of an
    interrupted sweep (it holds only the cells that finished) and False on a complete one; the
    file is written whole or not at all. A count (``episodes_*``) stays an integer where a failed
    cell leaves it empty (pandas would write every count as ``128.0``)."""
    table_ = runs.assign(partial=partial)
    table_ = table_[[c for c in table_.columns if not str(c).startswith("_")]]  # side values: no column
    for c in table_.columns:
        if c.startswith("episodes_"):
            values = table_[c].dropna()
            if len(values) and (values == values.round()).all():
                table_[c] = table_[c].astype("Int64")
    write_atomic(path, lambda p: table_.to_csv(p, index=False))


SUMMARY_METRICS = ("throughput_per_hour", "gen_util", "staleness_mean", "staleness_max")
"""The metrics of the table ``pipesim sweep`` prints (each as ``_mean``, ``_lo`` and ``_hi``)."""


def summary_table(res: Any) -> Any:
    """The table ``pipesim sweep`` prints and its page shows: per cell of ``res`` (a
    :class:`~pipesim.io.sweeps.SweepResult`) its keys, ``n_seeds`` and the mean and interval of each
    of :data:`SUMMARY_METRICS` the cell function gave; a complete sweep's and an interrupted one's."""
    agg = res.aggregate
    metrics = [f"{m}_{part}" for m in SUMMARY_METRICS for part in ("mean", "lo", "hi")]
    return agg[[*res.keys, "n_seeds", *(c for c in metrics if c in agg)]]


def print_partial(res: Any, done: int, total: int) -> None:
    """The finished cells' table on standard output, as a complete sweep prints it, headed as
    partial: ``res`` holds the ``done`` cells of ``total`` that had finished. Before, a sweep
    interrupted without ``--csv`` printed nothing and its finished cells were lost."""
    ok = int((res.runs["status"] == "ok").sum())
    print(
        f"partial: interrupted after {done} of {total} cells had finished; the table holds those "
        f"({ok} ran ok; n_seeds counts each cell's seeds that finished)"
    )
    if ok:
        print(table(summary_table(res)))


def interrupted(exc: Any, csv: str | None, book: Any, printed: Any = None) -> int:
    """Ctrl-C or SIGTERM during the sweep: the finished cells' table is printed on standard output,
    headed as partial (:func:`print_partial`; ``printed``: the result to print, the preset axes'
    columns added, else ``exc.result``), the cells go to ``--csv`` (partial=True; beside it where a
    file is there already, or merged with a partial table of the same sweep there:
    :func:`pipesim.io.sweep_resume.write_partial`, with ``book``, the sweep's
    :class:`~pipesim.io.sweep_resume.SweepBook`, which writes the preset axes' columns and the
    sidecar ``--resume`` reads), one line on standard error says so, and the exit status is 130
    (the shell's for an interrupt)."""
    from pipesim.io.sweep_resume import write_partial

    res, total = exc.result, exc.total
    done = 0 if res is None else len(res.runs)
    if res is not None:
        print_partial(res if printed is None else printed, done, total)
    if csv is None:
        kept = "nothing written (no --csv)"
    elif res is None:
        kept = f"nothing written to {csv}"
    else:
        target, note = write_partial(book.results_of(res.runs), csv, book)
        kept = f"wrote them to {target} with partial=True{note}; the same command with --resume runs the rest"
    print(f"pipesim: interrupted: {done} of {total} cells had finished; {kept}", file=sys.stderr)
    return 130


def cell_refusal(designs: Any, over: Mapping[str, Sequence[Any]], exc: Exception) -> str:
    """The line for a grid that refused one of its cells (:func:`~pipesim.io.sweeps.grid` builds
    every cell before a worker starts): ``exc``, headed by the ``--over`` values of the first cell
    refused (and its design, where the sweep has several), which the scenario's own message cannot
    name (``--over max_staleness=100000: max_staleness is the largest term of ...``); ``exc`` alone
    where the grid itself was refused (its ``over``, ``seeds``: asked before any cell, so a grid
    past ``MAX_CELLS`` is never walked here) or no cell's values are."""
    from pipesim.io.overrides import cell_label
    from pipesim.io.overrides_dotted import fold

    field = str(getattr(exc, "field", ""))
    if field.split(".")[0].split("[")[0] in ("over", "seeds", "scenarios"):
        return one_line(exc)
    bases = designs if isinstance(designs, Mapping) else {designs.name: designs}
    for design, base in bases.items():  # in the grid's order, so the first refused is its refusal
        for combo in itertools.product(*over.values()):
            changes = dict(zip(over, combo))
            try:
                base.with_(**fold(base, changes))
            except (ValueError, TypeError):
                where = ", ".join(f"{k}={cell_label(v)}" for k, v in changes.items())
                of = f" (design {design})" if len(bases) > 1 else ""
                return f"--over {where}{of}: {one_line(exc)}"
    return one_line(exc)


def _timed_out(failures: Any) -> int:
    return int(failures["error"].astype(str).str.startswith("timed out").sum())


def failures_line(res: Any) -> str:
    """The line on standard error above the failed cells' table: how many of the cells failed,
    how many of those timed out, and that the table printed leaves them out."""
    f = res.failures
    late = _timed_out(f)
    why = f" ({late} timed out)" if late else ""
    return f"{len(f)} of {len(res.runs)} cells failed{why}; the table above leaves them out:"


def failures_note(res: Any) -> str:
    """The page's note on failed cells (empty where none failed): how many failed or timed out and
    which, by the values that vary in the sweep and the seed, with the first line of each error.
    Before, the page showed the cells that ran and said nothing of the rest."""
    f = res.failures
    if not len(f):
        return ""
    late = _timed_out(f)
    head = f"{len(f)} of {len(res.runs)} cells failed" + (f" ({late} of them timed out)" if late else "")
    items = []
    for _, row in f.head(LISTED).iterrows():
        where = ", ".join(f"{k}={shown(row[k])}" for k in (*res.keys, "seed") if k in row)
        first = next((ln.strip() for ln in str(row["error"]).splitlines() if ln.strip()), "")
        items.append(f"<li>{html.escape(where)}: {html.escape(first[:200])}</li>")
    if len(f) > LISTED:
        items.append(f"<li>... and {len(f) - LISTED} more (the --csv table has every one)</li>")
    return (
        '<div class="pipesim-failures" style="border:1px solid #d33;background:#fff4f4;padding:4px 10px;'
        'margin:8px 0"><p><b>' + html.escape(head) + "</b>; the table and figures below leave "
        "them out:</p><ul>" + "".join(items) + "</ul></div>"
    )


def seeds_text(seeds: Sequence[int]) -> str:
    """The seeds a sweep ran, as the page names them: ``7..9`` for a run of them, else listed."""
    ran = sorted({int(s) for s in seeds})
    if len(ran) > 2 and ran == list(range(ran[0], ran[-1] + 1)):
        return f"{ran[0]}..{ran[-1]}"
    return ", ".join(map(str, ran))


def sweep_preamble(
    args: argparse.Namespace, printed: Any, failures: str = "", seeds: Sequence[int] | None = None
) -> str:
    """The sweep page's heading: what was swept, over how many seeds and which (``seeds``: those
    that ran; the page said ``0..N-1`` whatever the scenario's seed), what a band is, the cells
    that failed (``failures``, :func:`failures_note`), and the table the command printed (the same
    numbers, formatted as printed)."""
    axes = "; ".join(html.escape(a) for a in args.over)
    which = f" ({seeds_text(seeds)})" if seeds is not None and len(seeds) else ""
    bands = (
        f"bands and the _lo/_hi columns: 95% t interval over {args.seeds} seeds{which}"
        if args.seeds > 1
        else f"one seed{which}: no interval"
    )
    rows = printed.to_html(index=False, float_format=fmt_number, border=0)
    return (
        '<div style="font:13px sans-serif"><h2>pipesim sweep ' + html.escape(sweep_label(args)) + "</h2>"
        f"<p>over {axes}; {bands}.</p>" + failures + "<style>.dataframe td,.dataframe th{padding:2px 8px;"
        "text-align:right;border-bottom:1px solid #eee}.dataframe{border-collapse:collapse}</style>"
        '<div style="overflow-x:auto">' + rows + "</div></div>"  # a wide table scrolls, not the page
    )


def sweep_label(args: argparse.Namespace) -> str:
    """The sweep as the command named it: the scenario and its ``--set`` pairs (``async-eta1 with
    steps=8``), not the preset's own name, which names policies an axis may replace."""
    sets = ", ".join(str(s).strip() for s in getattr(args, "set", None) or [])
    return f"{args.scenario}" + (f" with {sets}" if sets else "")


def write_html(
    args: argparse.Namespace, res: Any, over: Any, printed: Any, notes: Sequence[str] = ()
) -> None:
    """``--html``: a figure of throughput and of mean staleness against each swept key, the
    preset's parameters included (the columns :func:`pipesim.io.cli_sweep.with_knobs` adds: their
    axes became designs, and the page drew none of them), under :func:`sweep_preamble` (which
    names any failed cell) and the notes standard error printed."""
    from pipesim.io import viz

    swept = [k for k in res.keys if k != "design" and k not in over] + list(over)  # preset axes first
    figs = []
    for k in swept:
        others = [o for o in res.keys if o not in (k, "design")]
        by = others[0] if others else "design"
        # one design, named as the command gave it, over what varies: the preset's own name
        # ("async eta=1, partial") named a line whose points were Drain() and AbortRestart() too
        agg = res.aggregate.assign(design=f"{sweep_label(args)}, over {k}")
        figs.append(viz.lines_figure(agg, k, "throughput_per_hour", by=by, title=f"throughput against {k}"))
        figs.append(viz.lines_figure(agg, k, "staleness_mean", by=by, title=f"mean staleness against {k}"))
    said = "".join(f"<p>{html.escape(n)}</p>" for n in notes)
    ran = list(res.runs["seed"]) if "seed" in res.runs else None
    preamble = sweep_preamble(args, printed, failures_note(res) + said, ran)
    page = viz.figures_to_html(figs, title=f"pipesim sweep {args.scenario}", preamble=preamble)
    write_text_atomic(args.html, page)


def no_interval_note(agg: Any) -> str:
    """The line under a table with cells of one seed: their ``_lo`` and ``_hi`` are NaN, since one
    seed gives no interval (they used to repeat the mean, which read as an interval of width 0)."""
    one = int((agg["n_seeds"] < 2).sum())
    which = "every cell" if one == len(agg) else f"{one} of {len(agg)} cells"
    return (
        f"note: {which} ran one seed, so no interval: _lo and _hi are NaN there "
        "(--seeds 2 or more gives a 95% interval)"
    )


def trace_note(n_trace: int, n_cells: int) -> str:
    """The line under a table of several seeds whose cells take their durations from a trace
    (:class:`~pipesim.workload.durations.TraceDurations` replays its values in order and ignores
    the generator): their seeds ran the same episodes, so the interval holds only what else the seed
    draws (a group filter's decisions, failures), none where nothing else is drawn (it printed
    ``274.3 [274.3, 274.3]`` over 3 seeds without a word)."""
    which = "every cell takes" if n_trace == n_cells else f"{n_trace} of {n_cells} cells take"
    return (
        f"note: {which} their durations from a trace, which every seed replays the same, so their "
        "seeds differ only in what else they draw (a group filter, failures): _lo and _hi are NaN "
        "where every seed gave the same run (a model fitted to the trace, pipesim fit, draws new "
        "durations per seed)"
    )


TAIL_NOTE_SHARE = 0.10
"""The share of a run's simulated time after its last training step above which ``pipesim run``
and ``pipesim sweep`` say that throughput counts that tail (:func:`tail_note`)."""


def tail_share(result: Any) -> float:
    """The share of ``result``'s simulated time after its last training step ended (the final
    weight update: a drain waits for every episode in flight, then the sync), from the trainer's
    log (the ``events`` table's ``train`` rows); 0 for a run that trained nothing."""
    T = float(result.sim_time_s)
    ends = [float(end) for _, _, end, _ in result.train_log]
    return max(T - max(ends), 0.0) / T if ends and T > 0 else 0.0


def tail_note(shares: Sequence[float], T: float | None = None, unknown: int = 0) -> str | None:
    """One line on standard error where a run spent more than :data:`TAIL_NOTE_SHARE` of its
    simulated time after its last training step (``shares``: one per run; ``T``: the one run's
    simulated seconds): ``throughput_per_hour`` is trained / ``sim_time_s``, as the chapter counts
    it, so the tail weighs on short runs of draining designs (3 steps of async-eta4-drain: 469 s
    of 1,530). ``unknown``: the runs of the table whose share is not known (read back by
    ``--resume`` from a partial table that kept none), said rather than counted as no tail.
    None where no run's tail is that long."""
    over = [float(x) for x in shares if float(x) > TAIL_NOTE_SHARE]
    if not over:
        return None
    worst = _above(max(over))
    what = "the final weight update (a drain waits for the episodes in flight) and sync"
    if T is not None and len(over) == 1:
        head = f"{worst} of the run ({over[0] * T:,.0f} s of {T:,.0f} s) came after its last training step"
        where = "docs/usage.md"
    else:
        head = (
            f"in {len(over)} of {len(shares)} runs more than {TAIL_NOTE_SHARE:.0%} of the simulated "
            f"time (up to {worst}) came after the last training step"
        )
        where = "docs/sweeps.md"
        if unknown:
            head += f" ({unknown} more read back by --resume without it, not counted)"
    return (
        f"note: {head}: {what}; throughput_per_hour = trained / sim_time_s counts it, so short runs "
        f"of draining designs read slow (more steps shrink the tail; {where})"
    )


def _above(share: float) -> str:
    """``share`` as a percentage with the fewest decimals that show it above :data:`TAIL_NOTE_SHARE`
    (``31%``, ``10.4%``): ``.0%`` wrote a worst run of 10.35% as "up to 10%", under "more than 10%"."""
    for digits in range(8):
        if round(share * 100, digits) > TAIL_NOTE_SHARE * 100:
            break
    return f"{share:.{digits}%}"
