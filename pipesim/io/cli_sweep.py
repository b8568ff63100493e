"""``pipesim sweep``: a grid of values x seeds, on local processes or a Dask cluster.

Design: the command turns ``--over KEY=V1,V2,...`` axes into the arguments of
:func:`pipesim.io.sweeps.sweep` and validates every cell (:func:`pipesim.io.sweeps.grid`) before a
worker starts. An axis over a field or a policy is parsed like ``--set`` (:func:`parse_over`:
values split at top-level commas, so ``Replicas(2, LeastLoaded()),Replicas(4, LeastLoaded())`` is
two values); an axis over a parameter of the scenario's factory (``max_head_offpolicyness`` of
``systems:areal``) builds one design per combination with the factory (:func:`preset_designs`).
``--dask`` runs on a cluster through :mod:`pipesim.io.cli_options`; a sweep whose every cell fails
is one line naming the first failure (:func:`sweep_failure`). Outputs are checked before anything
runs (none over the scenario file or over another output); what is written, and where an
interrupted sweep puts its partial table, is :mod:`pipesim.io.sweep_outputs`. ``--seeds`` is at
most :data:`~pipesim.io.compare_seeds.MAX_SEEDS` per grid point, as ``pipesim compare``'s: 100,000
was taken, and ran for about four hours.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import Any

from pipesim.core.errors import shown
from pipesim.io.cli_common import (
    UsageError,
    build_scenario,
    check_distinct,
    check_output,
    one_line,
    progress_wanted,
    read_inputs,
    split_values,
    table,
)
from pipesim.io.cli_options import DaskError, close_dask, open_dask, workers_problem
from pipesim.io.sweep_dask import quiet_dask_shutdown, workers_ignore_interrupts
from pipesim.io.sweep_outputs import (
    cell_refusal,
    failures_line,
    interrupted,
    no_interval_note,
    summary_table,
    sweep_preamble,
    tail_note,
    tail_share,
    trace_note,
    write_html,
    write_runs,
)
from pipesim.io.sweep_presets import (
    _axis,
    check_knob_axes,
    preset_designs,
    preset_grid,
    with_knobs,
)
from pipesim.io.sweep_resume import SweepBook, drop_partials, drop_sidecar, resume_rows

__all__ = [
    "cell_limit",
    "cmd_sweep",
    "interrupted",
    "no_interval_note",
    "parse_over",
    "preset_designs",
    "preset_grid",
    "summary_and_tail",
    "sweep_failure",
    "sweep_preamble",
    "with_knobs",
    "write_runs",
]


def parse_over(scen: Any, items: Sequence[str], entry: Any = None) -> dict[str, list[Any]]:
    """The ``--over`` axes over the scenario's own keys; an unknown key's error also lists (and
    suggests from) the parameters of ``entry``, the preset named, where it has any. An axis over a
    role's whole object beside one over its field is refused before either is read
    (:func:`~pipesim.io.overrides_dotted.whole_and_field`): the field's values were checked on the
    base scenario's object, which no cell of the whole axis runs."""
    from pipesim.io.overrides import axis_value, over_keys, with_preset_params
    from pipesim.io.overrides_dotted import whole_and_field, whole_and_field_refusal

    keys = [i.split("=", 1)[0].strip() for i in items if "=" in i]
    if (clash := whole_and_field(keys)) is not None:  # before a value is read off the base's object
        raise UsageError(whole_and_field_refusal(*clash, lambda k: f"--over {shown(k)}"))
    over: dict[str, list[Any]] = {}
    for item in items:
        key, values = _axis(item, list(over))
        try:
            over[key] = [axis_value(scen, key, v) for v in split_values(values)]
        except ValueError as exc:
            raise UsageError(one_line(with_preset_params(exc, scen, entry, over_keys(scen)))) from None
        if not over[key]:
            raise UsageError(f"--over {key}: no values given")
    return over


def cell_limit(text: str | None, dask: str | None) -> float | None:
    """``--timeout-s``: seconds > 0, ``none`` for no limit, or (not given) the library's default.

    ``--dask`` cannot stop a late cell (Dask abandons it; its worker stays busy), so with it a limit,
    the default included, is refused: no limit must be asked for (``--timeout-s none``)."""
    from pipesim.io.sweeps import DEFAULT_CELL_TIMEOUT_S, MAX_CELL_TIMEOUT_S

    if text is None:
        value: float | None = DEFAULT_CELL_TIMEOUT_S
    elif text.strip().lower() == "none":
        value = None
    else:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not 0 < value <= MAX_CELL_TIMEOUT_S:  # NaN too
            raise UsageError(
                f"--timeout-s must be seconds in (0, {MAX_CELL_TIMEOUT_S:,.0f}] or none, got {shown(text)}"
            )
    if dask is not None and value is not None:
        given = (
            f"the default --timeout-s {DEFAULT_CELL_TIMEOUT_S:g}" if text is None else f"--timeout-s {text}"
        )
        raise UsageError(
            f"--dask cannot stop a cell that runs too long (Dask abandons it and its worker stays busy), "
            f"so {given} cannot hold: add --timeout-s none to run with no per-cell limit, or use local "
            "processes (--workers N), which enforce it"
        )
    return value


def _check_set_not_swept(sets: Sequence[str], overs: Sequence[str]) -> None:
    """A key both ``--set`` and swept by ``--over`` (or a field of the axis's: ``--set
    durations.tool_median_s=3`` with ``--over durations=...``) is refused: the axis's values would
    replace the set value in every cell without a word. An axis over a field of a table set
    (``--set weight_update=SyncWhenBuffered() --over weight_update.n=16,64``) edits it, as a second
    ``--set`` would."""
    set_keys = [s.split("=", 1)[0].strip() for s in sets if "=" in s]
    for item in overs:
        axis = item.split("=", 1)[0].strip()
        for key in set_keys:
            if key == axis or key.startswith(axis + "."):
                raise UsageError(
                    f"--set {shown(key)} and --over {shown(axis)}: the axis's values replace the set "
                    "value in every cell; give the key once (as an --over axis, or as a --set)"
                )


def _check_seed_range(designs: Any, seeds: int) -> None:
    """``--seeds N`` runs seeds S..S+N-1 from the scenario's seed S: where the last is past the
    largest seed the scenario takes, the refusal names ``--seeds`` and S. Before, the grid's own
    error named S+1 (``got 4,294,967,296``), a seed nobody had given."""
    from pipesim.core.errors import MAX_SEED
    from pipesim.workload.durations import CHAPTER_SEEDS

    if seeds < 2:  # the scenario's own seed: checked where it was built
        return
    for scen in designs.values() if isinstance(designs, dict) else [designs]:
        top = scen.seed + seeds - 1
        try:
            scen.with_(seed=top)
        except ValueError as exc:
            fits = [m for m in (MAX_SEED - 1, CHAPTER_SEEDS - 1) if scen.seed <= m < top and _takes(scen, m)]
            largest = f"the largest {fits[0]}" if fits else f"what this scenario takes ({one_line(exc)})"
            raise UsageError(
                f"--seeds {seeds}: seed {scen.seed} + --seeds {seeds} needs seeds up to {top}, past "
                f"{largest}; lower --seeds or the seed (--set seed=...)"
            ) from None


def _takes(scen: Any, seed: int) -> bool:
    try:
        scen.with_(seed=seed)
    except ValueError:
        return False
    return True


def cmd_sweep(args: argparse.Namespace) -> int:
    """``pipesim sweep``. The first Ctrl-C or SIGTERM stops it, and the cells finished by then are
    written (:func:`~pipesim.io.sweep_outputs.interrupted`); a later one is dropped until the
    command ends (:func:`~pipesim.io.interrupts.interrupt_once`), since one landing in the saving
    lost the cells: a second Ctrl-C 30 ms after the first left no ``--csv``."""
    from pipesim.io.interrupts import interrupt_once

    with interrupt_once():
        return _sweep(args)


def _sweep(args: argparse.Namespace) -> int:
    from pipesim.io.compare_seeds import MAX_SEEDS
    from pipesim.io.registry import resolve
    from pipesim.io.sweep_exec import SIGNED_SUMMARY
    from pipesim.io.sweeps import SweepError, SweepInterrupted, grid, sweep

    if not 1 <= args.seeds <= MAX_SEEDS:  # the parser's bound (compare's): 100,000 ran for hours
        raise UsageError(f"--seeds must be an integer from 1 to {MAX_SEEDS}, got {args.seeds:,}")
    if (problem := workers_problem(args.workers)) is not None:
        raise UsageError(problem)
    timeout_s = cell_limit(args.timeout_s, args.dask)
    _check_set_not_swept(args.set, args.over)
    for opt in ("csv", "html"):
        if getattr(args, opt) == "-":  # run's --json - is standard output; a sweep prints its table there
            raise UsageError(
                f"--{opt} -: a sweep prints its table to standard output; give a file, or /dev/stdout "
                f"to send the {opt.upper()} there instead"
            )
    check_output("csv", args.csv)
    check_output("html", args.html)
    # the CSV over the scenario file it sweeps (or the page over the CSV) was written without a word
    check_distinct([("csv", args.csv), ("html", args.html)], read_inputs(args.scenario, args.policies))
    scen, _ = build_scenario(args.scenario, args.set, None)
    try:
        entry = resolve(args.scenario)
    except ValueError as exc:
        raise UsageError(one_line(exc)) from None
    from pipesim.io.overrides import POOL_KEYS, check_axes_kept

    factory_keys = {*entry.parameters(), *(POOL_KEYS if entry.takes_pipeline() else ())}
    preset_items = [i for i in args.over if i.split("=", 1)[0].strip() in factory_keys and "=" in i]
    over = parse_over(scen, [i for i in args.over if i not in preset_items], entry)
    try:  # an axis over a field a --set preset parameter sets would undo it in every cell
        check_axes_kept(entry, list(args.set), list(over))
    except ValueError as exc:
        raise UsageError(one_line(exc)) from None
    designs, knobs = preset_grid(entry, args.set, preset_items) if preset_items else (scen, {})
    check_knob_axes(entry, args.set, knobs, list(over))
    _check_seed_range(designs, args.seeds)
    try:
        cells = grid(designs, over, args.seeds)  # validates every cell before any worker starts
    except ValueError as exc:  # headed by the axis values of the cell refused
        raise UsageError(cell_refusal(designs, over, exc)) from None
    book = SweepBook(cells, args, knobs, SIGNED_SUMMARY)
    done = _resumed(args, book)
    client = cluster = None
    executor = None
    try:
        if args.dask is not None:
            try:  # its workers ignore Ctrl-C, as the process pool's do (pipesim.io.sweep_dask)
                with workers_ignore_interrupts():
                    client, cluster = open_dask(args.dask, args.workers or 2)
            except DaskError as exc:
                raise UsageError(str(exc)) from None
            executor = client.get_executor()
        res = sweep(
            designs,
            over,
            args.seeds,
            executor=executor,
            workers=args.workers,
            progress=progress_wanted(args.quiet),
            timeout_s=timeout_s,
            label=f"sweep {args.scenario}",
            fn=summary_and_tail,
            done=done,
        ).with_signed(SIGNED_SUMMARY)  # the default cell function's metrics, and their bounds
    except SweepError as exc:
        message = sweep_failure(exc)
        if args.csv and exc.result is not None:  # every cell failed: each failure is still a row
            write_runs(with_knobs(exc.result, knobs).runs, args.csv, partial=False)
            _drop_sidecars(args.csv, book)
            message += f" (wrote every cell's error to {args.csv})"
        raise UsageError(message) from None
    except SweepInterrupted as exc:
        from pipesim.io.interrupts import stopping

        stopping()  # it may have come as no signal (a worker's): a signal now must not cut the saving
        if exc.result is None or len(exc.result.runs) < exc.total:  # the finished cells, as partial
            shown = None if exc.result is None else with_knobs(exc.result.with_signed(SIGNED_SUMMARY), knobs)
            return interrupted(exc, args.csv, book, shown)
        res = exc.result.with_signed(SIGNED_SUMMARY)  # every cell had finished: the outputs are whole
    finally:
        with quiet_dask_shutdown(client):
            close_dask(client, cluster)
    return _outputs(args, with_knobs(res, knobs), over, book)


def _resumed(args: argparse.Namespace, book: SweepBook) -> dict[int, dict[str, Any]]:
    """``--resume``: the cells an interrupted run of this sweep finished, read back from the tables
    it left for ``--csv`` (:func:`~pipesim.io.sweep_resume.resume_rows`), said on standard error."""
    if not getattr(args, "resume", False):
        return {}
    if not args.csv:
        raise UsageError(
            "--resume reads the finished cells back from the table an interrupted sweep wrote for "
            "--csv: give the --csv it had"
        )
    try:
        done, used = resume_rows(args.csv, book)
    except ValueError as exc:
        raise UsageError(one_line(exc)) from None
    total = len(book.cells)
    if used:
        said = f"{len(done)} of {total} cells read back from {', '.join(used)}; running the other "
        said += str(total - len(done))
    else:
        said = f"no table of this sweep at {args.csv} or beside it; running every cell"
    print(f"pipesim: --resume: {said}", file=sys.stderr)
    return done


def _drop_sidecars(csv: str, book: SweepBook) -> None:
    """The complete table is at ``csv``: its sidecar, and this sweep's partial tables beside it
    with theirs (:func:`~pipesim.io.sweep_resume.drop_partials`), go; each table removed is said."""
    drop_sidecar(csv)
    for path in drop_partials(csv, book):
        said = f"removed {path} and its .sweep.json, a partial table of this sweep: {csv} holds its cells"
        print(f"pipesim: {said}", file=sys.stderr)


def _outputs(args: argparse.Namespace, res: Any, over: Any, book: SweepBook) -> int:
    """Every cell finished: the table, the notes, ``--csv`` and ``--html``. A Ctrl-C or SIGTERM from
    here on waits for the outputs (one cut the CSV's writing, and the whole sweep's rows with it)
    and then only says so: the outputs are complete, so the exit status is 0 (it was 130 with
    "stopped before it finished", which a script read as a lost sweep)."""
    from pipesim.io.interrupts import command_finished, signals_to

    held: list[int] = []
    with signals_to(lambda signum, frame: held.append(signum)):
        agg, printed = res.aggregate, summary_table(res)
        print(table(printed))
        if (agg["n_seeds"] < 2).any():
            print(no_interval_note(agg), file=sys.stderr)
        notes = _notes(book.cells, res, args.seeds)
        for note in notes:
            print(note, file=sys.stderr)
        if len(res.failures):
            print(f"\n{failures_line(res)}", file=sys.stderr)
            print(res.failures.to_string(index=False), file=sys.stderr)
        if args.csv:
            write_runs(res.runs, args.csv, partial=False)
            _drop_sidecars(args.csv, book)
            print(f"wrote {args.csv}")
        if args.html:
            write_html(args, res, over, printed, notes)
            print(f"wrote {args.html}")
        # complete: a Ctrl-C from here to the exit is recorded, not raised (interrupts.Finished)
        command_finished("sweep", 0)
    if held:
        wrote = " and ".join(p for p in (args.csv, args.html) if p)
        print(
            "pipesim: interrupted after every cell had finished; the outputs are complete"
            + (f" ({wrote})" if wrote else ""),
            file=sys.stderr,
        )
    return 0


def summary_and_tail(scenario: Any) -> dict[str, float]:
    """The sweep's cell function: :func:`~pipesim.io.sweep_exec.run_summary`'s metrics, and the
    share of the run after its last training step as the side value ``_tail_share`` (not a metric,
    nor a CSV column: :func:`~pipesim.io.sweep_grid.collect`), for :func:`_notes`."""
    from pipesim.io.api import run
    from pipesim.io.sweep_exec import summary_metrics

    result = run(scenario)
    return {**summary_metrics(result), "_tail_share": tail_share(result)}


def _notes(cells: Sequence[Any], res: Any, seeds: int) -> list[str]:
    """The lines under the table on cells that replay a trace at every seed and on runs whose
    time after the last training step weighs on their throughput."""
    from pipesim.workload.durations import TraceDurations

    notes = []
    keys = [k for k in res.keys if k in cells[0].labels]  # not the preset axes with_knobs adds
    label = [tuple(str(c.labels[k]) for k in keys) for c in cells]
    traced = {lab for lab, c in zip(label, cells) if isinstance(c.scenario.durations, TraceDurations)}
    if seeds > 1 and traced:
        notes.append(trace_note(len(traced), len(set(label))))
    ok = res.runs[res.runs["status"] == "ok"]
    # every ok cell of the table: a cell read back by --resume has the share its partial table's
    # sidecar kept (pipesim.io.sweep_resume.TAIL_SHARES); one whose sidecar kept none is counted
    # as not known, and the note says so, rather than taken as no tail
    shares = list(ok["_tail_share"].astype(float).dropna()) if "_tail_share" in ok else []
    if shares and (note := tail_note(shares, unknown=len(ok) - len(shares))) is not None:
        notes.append(note)
    return notes


def sweep_failure(exc: Exception) -> str:
    res = getattr(exc, "result", None)
    if res is None or not len(res.failures):
        return one_line(exc)
    f = res.failures
    row = f.iloc[0]
    where = ", ".join(f"{k}={row[k]}" for k in (*res.keys, "seed") if k in row)
    first = " ".join(str(row["error"]).split())
    return f"every cell of the sweep failed ({len(f)} of {len(res.runs)}); the first ({where}): {first}"
