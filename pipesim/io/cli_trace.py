"""``pipesim trace`` and ``pipesim report``: pages and traces of a run, saved or rebuilt.

Design: ``trace`` accepts whatever a run leaves behind and never needs more than it stores: a saved
run (a directory, ``pipesim run --save``: its tables are read back, nothing reruns), an events
table (``.parquet``/``.csv``), a run file (``--json``: the run is rebuilt from its recipe, which is
exact because a run is deterministic given its seed), or a scenario to run now. A run too large to
trace (:data:`pipesim.io.trace.MAX_TRACE_EVENTS`) is refused before it is loaded where its count is
known up front (the events of a saved run or a ``.parquet`` table, from the Parquet footer; a
``.csv`` table's, from below by its line ends, :func:`pipesim.io.trace.csv_rows_at_least`), and
before it is rerun where its scenario or run spec bounds the count from below
(:func:`pipesim.io.trace.check_run_events`; ``pipesim run --trace`` asks the same before its run).
``report`` writes
the chapter's offline report (:func:`pipesim.io.report.build_report`) or, given a saved run, that
run's summary and views (:func:`pipesim.io.viz.run_page`). Both write their output whole or not at
all (:mod:`pipesim.io.interrupts`).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

from pipesim.core.errors import MAX_SEED, shown
from pipesim.core.readfile import LOG_MAX_BYTES, RUN_FILE_MAX_BYTES
from pipesim.io.cli_common import (
    UsageError,
    build_scenario,
    check_distinct,
    check_output,
    check_seed,
    load_saved,
    one_line,
    progress_wanted,
    read_inputs,
)
from pipesim.io.cli_options import workers_problem
from pipesim.io.interrupts import write_atomic, write_text_atomic


def cmd_report(args: argparse.Namespace) -> int:
    from pipesim.io.compare_seeds import MAX_SEEDS
    from pipesim.io.report import build_report

    if args.run is not None and (args.seeds is not None or args.workers is not None):
        # a saved run's page draws the run as it was: nothing reruns, so either would be ignored
        given = "--seeds" if args.seeds is not None else "--workers"
        raise UsageError(
            f"{given}: {args.run} is a saved run, reported as it was run; {given} is for the "
            "chapter's report (pipesim report --out report.html)"
        )
    seeds = 3 if args.seeds is None else args.seeds
    if not 1 <= seeds <= MAX_SEEDS:  # compare's and sweep's bound: each seed reruns every figure
        raise UsageError(f"--seeds must be an integer from 1 to {MAX_SEEDS}, got {seeds:,}")
    if (problem := workers_problem(args.workers)) is not None:
        raise UsageError(problem)
    check_output("out", args.out)
    if args.run is not None:
        from pipesim.io.viz import run_page

        saved = load_saved(args.run)
        name = _saved_name(saved)  # heads the figures too: a compute run's without its stand-in tail
        write_text_atomic(args.out, run_page(saved, title=f"pipesim run {name} ({args.run})", name=name))
        print(f"wrote {Path(args.out).resolve()}")
        return 0
    path = build_report(args.out, seeds=seeds, workers=args.workers, progress=progress_wanted(args.quiet))
    print(f"wrote {path.resolve()}")
    return 0


def _saved_name(saved: Any) -> str:
    """A saved run's name in a title: a compute run's without its stand-in tail (the run was the
    compute engine's, not the stand-in scenario's: :func:`pipesim.io.saved_scenario.compute_stand_in`)."""
    from pipesim.io.saved_scenario import saved_name

    return str(saved_name(saved.scenario) if saved.engine == "compute" else saved.scenario.name)


def cmd_trace(args: argparse.Namespace) -> int:
    from pipesim.io.registry import names_a_path
    from pipesim.io.trace import flows_note, write_trace

    check_output("out", args.out)
    src = Path(args.run)
    suffix = src.suffix.lower()
    if not os.path.lexists(src) and (suffix in (".json", ".parquet", ".csv") or names_a_path(args.run)):
        raise UsageError(f"{src}: no such file or directory")
    # the trace over the run file or events table it was made from replaced its own input: refused
    # once the input has been read (a broken one says so first), before anything runs or is written
    read = {".json": "run file", ".csv": "events table", ".parquet": "events table"}.get(suffix)
    inputs = [(read, args.run)] if read is not None else read_inputs(args.run)
    inputs += read_inputs(None, args.policies)
    if (src.is_dir() or suffix in (".parquet", ".csv")) and (args.set or args.seed is not None):
        # a saved run or an events table is drawn as it stands: nothing reruns, so a --set or a
        # --seed would be ignored without a word (a run file, or a scenario, reruns with them)
        given = "--set" if args.set else "--seed"
        what = "a saved run" if src.is_dir() else "an events table"
        raise UsageError(
            f"{given}: {src} is {what}, traced as it was run; --set and --seed rebuild a run from a "
            "run file (pipesim run --json) or a scenario"
        )
    trained = None  # the trained table, where there is one: the note on flow arrows reads it
    if src.is_dir():
        from pipesim.io.trace import events_to_trace

        _check_rows(src, src / "events.parquet")  # before the run's tables are read
        saved = load_saved(args.run)
        check_distinct([("out", args.out)], inputs)
        trained = saved.trained
        trace = events_to_trace(
            saved.events, saved.episode_table, name=_saved_name(saved), trained=saved.trained
        )
        write_text_atomic(args.out, json.dumps(trace, separators=(",", ":")))
    elif suffix in (".parquet", ".csv"):
        import pandas as pd

        from pipesim.io.parquet import read_parquet

        _check_rows(src, src)
        data = _read_input(src, "events tables", LOG_MAX_BYTES)
        if not data.strip():
            raise UsageError(f"{src}: not an events table (the file is empty)")
        try:
            events = read_parquet(data) if suffix == ".parquet" else pd.read_csv(io.BytesIO(data))
        except (ValueError, UnicodeDecodeError, OSError) as exc:  # empty, binary, not a table
            raise UsageError(f"{src}: not an events table ({one_line(exc)})") from None
        check_distinct([("out", args.out)], inputs)
        try:
            write_atomic(args.out, lambda p: write_trace(events, p))
        except ValueError as exc:
            raise UsageError(f"{src}: {one_line(exc)}") from None
    elif suffix == ".json":
        raw = _read_input(src, "run files", RUN_FILE_MAX_BYTES)
        try:
            data = json.loads(raw.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            why = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else "not valid JSON"
            raise UsageError(f"{src}: {why} (a run file written by `pipesim run --json`)") from None
        try:
            recipe = data["recipe"]
            spec, sets, seed = recipe["scenario"], list(recipe.get("set", [])), recipe.get("seed")
        except (KeyError, TypeError, AttributeError):
            raise UsageError(f"{src}: not a run file written by `pipesim run --json` (no 'recipe')") from None
        if (
            not isinstance(spec, str)
            or not isinstance(recipe.get("set", []), list)  # a string's characters are no pairs
            or not all(isinstance(s, str) for s in sets)
            or not (seed is None or (isinstance(seed, int) and not isinstance(seed, bool)))
        ):
            raise UsageError(
                f"{src}: its recipe needs a scenario (text), set (a list of text) and seed (an integer), "
                f"got {shown(recipe)}"
            )
        if args.seed is None and seed is not None and not 0 <= seed < MAX_SEED:  # the file's, not a flag
            raise UsageError(f"{src}: its recipe's seed must be an integer in [0, 2**64), got {shown(seed)}")
        check_distinct([("out", args.out)], [*inputs, *read_inputs(spec)])  # and the recipe's scenario
        kept_spec = _recorded_runspec(src, data, spec, sets, seed)
        recorded = None if kept_spec is not None else _recorded(src, data, spec, sets, seed)
        if kept_spec is not None:  # a compute run: rebuilt from the spec the run file holds
            result = _run_runspec(spec, kept_spec, args.set, args.seed)
        elif recorded is None:
            result = _rerun(spec, [*sets, *args.set], args.seed if args.seed is not None else seed, str(src))
        else:  # the scenario moved or changed since the run: trace the run the file records
            result = _run_recorded(recorded, args.set, args.seed, src)
        write_atomic(args.out, lambda p: write_trace(result, p))
        trained = result.trained
    else:
        _check_traceable(args.run)
        check_distinct([("out", args.out)], inputs)
        result = _rerun(args.run, args.set, args.seed)
        write_atomic(args.out, lambda p: write_trace(result, p))
        trained = result.trained
    print(f"wrote {args.out} (open it in https://ui.perfetto.dev or chrome://tracing){flows_note(trained)}")
    return 0


def _read_input(src: Path, what: str, max_bytes: int) -> bytes:
    """The bytes of the run file or events table ``src``, read as every command reads a user's file
    (:func:`pipesim.core.readfile.read_bytes`): a FIFO was waited on, and a link to ``/dev/zero``
    read until memory ran out; each is refused naming what the path is, as is a file past its cap
    (:data:`~pipesim.core.readfile.RUN_FILE_MAX_BYTES` for a run file,
    :data:`~pipesim.core.readfile.LOG_MAX_BYTES` for an events table, far past the million events
    a trace takes)."""
    from pipesim.core.readfile import read_bytes

    try:
        return read_bytes(src, what, max_bytes)
    except OSError as exc:
        raise UsageError(f"{src}: cannot read: {exc.strerror or exc}") from None


def _check_traceable(spec: str) -> None:
    """UsageError where ``spec`` is a regular file that trace reads as none of its inputs (a
    ``README.md``, a ``run.json.bak``): the message says everything trace takes, where the
    scenario builder's said only what a scenario file is (``pipesim run``'s message)."""
    from pipesim.io.registry import SCENARIO_FILE_SUFFIXES, registry
    from pipesim.io.user_code import is_module_path

    where, _, attr = spec.rpartition(":")
    if (
        not Path(spec).is_file()  # a name, a factory, or a missing path: the builder says which
        or spec.lower().endswith(SCENARIO_FILE_SUFFIXES)
        or (where and attr.isidentifier() and is_module_path(where))
        or spec in registry()
    ):
        return
    *most, last = SCENARIO_FILE_SUFFIXES
    raise UsageError(
        f"{shown(spec)} is a file but not one trace reads: trace takes RUN.json (pipesim run --json), "
        "a saved run's directory (pipesim run --save DIR), an events table (EVENTS.parquet or "
        f"EVENTS.csv), or a scenario or run spec (a {', '.join(most)} or {last} file; a registered "
        "name; path/to/file.py:factory)"
    )


def _check_rows(src: Path, table: Path) -> None:
    """UsageError naming ``src`` where the events ``table`` holds more events than a trace takes,
    counted before the table is read: a Parquet file's from its footer, a ``.csv`` file's from below
    by its line ends, up to the bound (nothing where that gives no count: the reader says why)."""
    from pipesim.io.trace_bounds import MAX_TRACE_EVENTS, check_event_count, csv_rows_at_least

    rows, how = None, ""
    if table.is_file() and table.suffix.lower() == ".csv":
        rows, how = csv_rows_at_least(table, MAX_TRACE_EVENTS), "(its CSV lines past the header)"
    elif table.is_file():
        from pipesim.io.parquet import parquet_rows

        rows = parquet_rows(table)
    if rows is not None:
        try:
            check_event_count(rows, how)
        except ValueError as exc:
            raise UsageError(f"{src}: {one_line(exc)}") from None


def check_trace_size(steps: int, batch_size: int, source: str, steps_key: str = "steps") -> None:
    """UsageError naming ``source`` where a run of ``steps`` x ``batch_size`` is sure to exceed the
    events a trace takes (:func:`pipesim.io.trace.check_run_events`), before it runs: a run file's
    rerun of 11.6M events ran 34 s (1.8 GB), and a run spec's of 2.0M 42 s (730 MB), before the
    trace refused it. ``pipesim run --trace`` asks it too."""
    from pipesim.io.trace import check_run_events

    try:
        check_run_events(steps, batch_size, steps_key)
    except ValueError as exc:
        raise UsageError(f"{source}: {one_line(exc)}") from None


def _check_size(scenario: Any, spec: str) -> None:
    """:func:`check_trace_size` of a slot scenario's run."""
    check_trace_size(scenario.pipeline.steps, scenario.pipeline.batch_size, spec)


def _check_spec_size(spec: str, sets: list[str], seed: int | None, source: str) -> None:
    """:func:`check_trace_size` of a run spec's compute run (``run.steps`` x its batch, samples a
    step), read as :func:`pipesim.io.cli_runspec.rerun` reads it (a bad spec says so here, as there);
    ``source`` is named."""
    from pipesim.plan.checks import PlanError
    from pipesim.plan.runspec import load

    try:
        rs = load(spec, sets, seed)
    except PlanError as exc:
        raise UsageError(one_line(exc)) from None
    check_trace_size(rs.steps, rs.plan.batch_size, source, "run.steps")


def _recorded(src: Path, data: dict[str, Any], spec: str, sets: list[str], seed: int | None) -> Any:
    """The scenario a run file records (its ``scenario_file``, the run's whole scenario), where
    its recipe no longer builds that scenario: the scenario file was edited or moved since the
    run (before, the trace was of the edited file's run, without a word); None where the recipe
    rebuilds it, or the run file records no scenario (a policy outside the catalog, a run spec).
    A note on stderr says which was traced."""
    from pipesim.io.scenario_files import scenario_from_dict
    from pipesim.plan.runspec import is_runspec

    kept = data.get("scenario_file")
    if not isinstance(kept, dict) or is_runspec(spec):
        return None
    try:
        scenario = scenario_from_dict(kept, source=f"{src} (scenario_file)")
    except ValueError:
        return None  # written by another pipesim, or a plug-in not registered: the recipe it is
    try:
        rebuilt, _ = build_scenario(spec, sets, seed)
    except UsageError as exc:
        why = f"its recipe no longer builds ({one_line(exc)})"
    else:
        if rebuilt == scenario:
            return None
        why = f"{spec} has changed since the run"
    _say_recorded(why, src, "scenario_file")
    return scenario


def _recorded_runspec(
    src: Path, data: dict[str, Any], spec: str, sets: list[str], seed: int | None
) -> dict[str, Any] | None:
    """The run spec a compute run's file holds (``runspec``: the spec's data with the run's
    ``--set`` pairs and seed applied, as ``pipesim run --json`` wrote it), or None for a slot run.
    The run is rebuilt from it, not from the file its recipe names: that file may have been edited
    or moved since (before, the trace was of the edited file's run without a word, and a deleted
    file was refused). A note on stderr says where the file no longer builds the recorded spec."""
    from pipesim.plan.checks import PlanError
    from pipesim.plan.runspec import is_runspec, load

    kept = data.get("runspec")
    if not isinstance(kept, dict):
        return None
    if not is_runspec(spec):
        why = f"{spec} is gone or no longer a run spec"
    else:
        try:
            now = load(spec, sets, seed).data
        except PlanError as exc:
            why = f"its recipe no longer builds ({one_line(exc)})"
        else:
            if now == kept:
                return kept
            why = f"{spec} has changed since the run"
    _say_recorded(why, src, "runspec")
    return kept


def _say_recorded(why: str, src: Path, key: str) -> None:
    """The one note of both readers above: why the run file's own record (``key``) is traced."""
    print(f"pipesim: note: {why}; tracing the run as {src} records it (its {key})", file=sys.stderr)


def _run_runspec(spec: str, kept: dict[str, Any], sets: list[str], seed: int | None) -> Any:
    """The kernel's result of the run spec ``kept`` (read relative to ``spec``'s folder), with the
    trace's own ``--set`` pairs and ``--seed`` over it, refused before it runs where it is sure to
    be too large to trace."""
    from pipesim.plan.checks import PlanError
    from pipesim.plan.runspec import apply_sets, from_dict, run

    check_seed(seed)
    try:
        data = apply_sets(kept, list(sets))
        if seed is not None:
            if not isinstance(data.get("run", {}), dict):
                raise PlanError("run must be a table", "run")
            data.setdefault("run", {})["seed"] = seed
        rs = from_dict(data, Path(spec).parent)
        check_trace_size(rs.steps, rs.plan.batch_size, f"{spec} (as the run file records it)", "run.steps")
        return run(rs).result
    except PlanError as exc:
        raise UsageError(f"{spec} (as the run file records it): {one_line(exc)}") from None
    except ValueError as exc:
        raise UsageError(f"{spec}: the run cannot start: {one_line(exc)}") from None


def _run_recorded(scenario: Any, sets: list[str], seed: int | None, src: Path) -> Any:
    """The recorded scenario's run, with the trace's own ``--set`` and ``--seed`` over it (refused
    before it runs where it is sure to be too large to trace: ``src`` is the run file)."""
    from pipesim.io.api import run
    from pipesim.io.overrides import apply_overrides

    check_seed(seed)
    try:
        scenario, _ = apply_overrides(scenario, list(sets))
    except ValueError as exc:
        raise UsageError(one_line(exc)) from None
    _check_size(scenario, str(src))
    return run(scenario if seed is None else scenario.with_(seed=seed))


def _rerun(spec: str, sets: list[str], seed: int | None, source: str | None = None) -> Any:
    """The run a scenario (or a run spec, ``kind = "compute"``: :mod:`pipesim.io.cli_runspec`) names,
    refused before it runs where it is sure to be too large to trace (``source``, the run file the
    scenario came from, or the scenario, is named)."""
    from pipesim.io.api import run
    from pipesim.plan.runspec import is_runspec

    if is_runspec(spec):
        from pipesim.io.cli_runspec import rerun

        _check_spec_size(spec, sets, seed, source or spec)
        return rerun(spec, sets, seed)
    scen, _ = build_scenario(spec, sets, seed)
    _check_size(scen, source or spec)
    return run(scen)
