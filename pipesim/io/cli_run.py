"""``pipesim list``, ``pipesim run`` and ``pipesim export``: one scenario, listed, run or written.

Design: each command is a thin layer over the library -- the registry (:func:`~pipesim.io.registry.resolve`,
:func:`~pipesim.io.registry.build`), :func:`pipesim.run`, the scenario files -- so anything it does
is one call in Python. ``run`` checks every output path before it runs (and refuses a ``--trace``
of a run sure to exceed what a trace takes: :func:`pipesim.io.cli_trace.check_trace_size`; without
``--trace`` any size runs), prints the summary (on standard error when ``--json -`` takes standard
output), and writes each output it was asked for.
Its ``--json`` run file stores the summary, the scenario (as text and as scenario-file data) and
the *recipe* (scenario, ``--set`` overrides and seed) from which ``pipesim trace RUN.json``
rebuilds the run exactly: a run is deterministic given its seed. Every output is written whole or
not at all (:mod:`pipesim.io.interrupts`; ``--save`` by :meth:`RunResult.save` itself), so Ctrl-C
or SIGTERM leaves no file that half loads; :func:`pipesim.io.cli.main` says so in one line.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import IO, Any

from pipesim.core.errors import shown
from pipesim.io.cli_common import (
    UsageError,
    build_scenario,
    check_distinct,
    check_output,
    check_save_dir,
    is_plan_spec,
    one_line,
    recipe_source,
    scenario_dict,
    summary_table,
    write_run_outputs,
)
from pipesim.io.interrupts import write_text_atomic


def _refuse_a_spec(name: str) -> None:
    """UsageError saying what a run spec or a plan spec is listed with (they have no scenario keys;
    read as scenario files they were refused for a missing ``schema_version``)."""
    from pipesim.plan.runspec import is_runspec

    if is_runspec(name):
        raise UsageError(
            f'{name}: a run spec (kind = "compute"), not a scenario: `pipesim export {name} --out -` '
            f"prints it with every key (docs/runspec.md), `pipesim run {name}` runs it"
        )
    if is_plan_spec(name):
        raise UsageError(
            f"{name}: a plan spec, not a scenario: `pipesim plan {name} --explain-keys` lists its keys"
        )


def cmd_list(args: argparse.Namespace) -> int:
    from pipesim.io.registry import build, registry, resolve, valid_keys
    from pipesim.policies.catalog import KINDS, catalog

    if args.scenario is not None:
        from pipesim.io.scenario_files import dumps

        _refuse_a_spec(args.scenario)
        try:
            entry = resolve(args.scenario)
            scen, _ = build(entry, [])
        except ValueError as exc:
            raise UsageError(one_line(exc)) from None
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
            print(f"(not writable as a scenario file: {one_line(exc)})")
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


def staleness_note(result: Any) -> str | None:
    """One line on standard error where a policy of the run promises a staleness bound
    (``staleness_bound``) and the run trained an episode staler than it; None otherwise.

    A plain ``pipesim run`` of a user's policy that promised staleness <= 1 and trained episodes
    3 versions stale printed ``staleness_max 3`` with no remark: only
    ``pipesim.testing.check_invariants`` named the broken promise. The note says it beside the
    summary, as the drain-tail note does. It reads the promise as the kit does, but never fails
    the run over it: a promise that raises or is no int >= 0 gets no note here (the kit names it)."""
    import numbers

    from pipesim.core.port import StalenessPromise

    sc, tr = result.scenario, result.trained
    if not len(tr):
        return None
    worst = int(tr["staleness"].max())
    for policy in (sc.admission, sc.weight_update, sc.batching):
        if not isinstance(policy, StalenessPromise):
            continue
        try:
            bound = policy.staleness_bound(sc)
        except Exception:  # noqa: BLE001 - a user's method: check_invariants names what it raised
            continue
        if isinstance(bound, numbers.Integral) and not isinstance(bound, bool) and 0 <= bound < worst:
            past = int((tr["staleness"] > bound).sum())
            return (
                f"note: {type(policy).__name__}.staleness_bound promises staleness <= {int(bound)}, but "
                f"the run trained episodes up to {worst} versions stale ({past:,} of {len(tr):,} past "
                "the bound); pipesim.testing.check_invariants names the first (docs/testing.md)"
            )
    return None


def cmd_run(args: argparse.Namespace) -> int:
    from pipesim.io.api import run
    from pipesim.plan.runspec import is_runspec

    if is_runspec(args.scenario):  # kind = "compute": the compute engine (pipesim.io.cli_runspec)
        from pipesim.io.cli_runspec import run_spec

        if args.trace:
            _check_spec_trace(args)
        return run_spec(args)
    if args.intervals is not None:
        raise UsageError('--intervals needs a calibrated run spec (kind = "compute", pipesim calibrate)')

    check_output("json", args.json, stdout=True)
    check_output("html", args.html)
    check_output("events", args.events, (".parquet", ".csv"))
    check_output("trace", args.trace)
    check_save_dir(args.save)
    outputs = [(o, getattr(args, o)) for o in ("json", "html", "events", "trace", "save")]
    check_distinct(outputs, [("scenario file", args.scenario)])
    scen, given = build_scenario(args.scenario, args.set, args.seed)
    if args.trace:  # before the run: one sure to be too large to trace is refused, not run
        from pipesim.io.cli_trace import check_trace_size

        check_trace_size(scen.pipeline.steps, scen.pipeline.batch_size, f"--trace {args.trace}")
    out: IO[str] = sys.stderr if args.json == "-" else sys.stdout
    result = run(scen)
    summary = result.summary()
    shown = ", ".join(f"{k}={v}" for k, v in given.items())
    print(f"{args.scenario} (seed {scen.seed})" + (f" with {shown}" if given else ""), file=out)
    print(summary_table(summary), file=out)
    from pipesim.io.sweep_outputs import tail_note, tail_share

    if (note := tail_note([tail_share(result)], float(result.sim_time_s))) is not None:
        print(note, file=sys.stderr)  # throughput counts the final drain and sync: say so on a short run
    if (broken := staleness_note(result)) is not None:
        print(broken, file=sys.stderr)  # a promise the run broke: check_invariants alone said so
    payload: dict[str, Any] | None = None
    if args.json:
        from pipesim.io.saved import json_number

        payload = {
            "summary": {k: json_number(v) for k, v in summary.items()},  # NaN as "nan": valid JSON
            "scenario": scenario_dict(scen),
            "recipe": {"scenario": recipe_source(args.scenario), "set": list(args.set), "seed": scen.seed},
        }
        try:
            from pipesim.io.scenario_files import scenario_to_dict

            payload["scenario_file"] = scenario_to_dict(scen)
        except ValueError:
            pass  # a policy outside the catalog: the recipe alone rebuilds the run

    def html_page() -> str:
        from pipesim.io.viz import run_page

        # the summary's headline numbers above the views, as `pipesim report DIR` writes them; the
        # --set pairs after the title and in the run's name, as printed (the preset's own name,
        # "async eta=2, partial", no longer says what ran once --set weight_update=... changes it)
        page = run_page(result, title=f"pipesim run {args.scenario}", name=args.scenario, overrides=given)
        return str(page)

    write_run_outputs(
        args,
        result,
        out,
        payload,
        saved=f"saved the run to {args.save} (pipesim.load, `pipesim report/trace {args.save}`)",
        html_page=html_page,
    )
    return 0


def _check_spec_trace(args: argparse.Namespace) -> None:
    """``--trace`` of a run spec refused before its run where the run is sure to be too large to
    trace (:func:`pipesim.io.cli_trace.check_trace_size`: ``run.steps`` x its batch). A spec that
    does not load is left to :func:`~pipesim.io.cli_runspec.run_spec`, which says why."""
    from pipesim.io.cli_trace import check_trace_size
    from pipesim.plan.checks import PlanError
    from pipesim.plan.runspec import load

    try:
        rs = load(args.scenario, list(args.set or ()), args.seed)
    except PlanError:
        return
    check_trace_size(rs.steps, rs.plan.batch_size, f"--trace {args.trace}", "run.steps")


def _system_file(spec: str, given: dict[str, str]) -> dict[str, Any] | None:
    """A ``systems:`` preset whose --set pairs are all its own knobs, as a ``[system]`` file in the
    system's knob names (:func:`~pipesim.io.scenario_files.system_to_dict`); else None."""
    from pipesim.io.registry import parse_parameter, resolve
    from pipesim.io.scenario_files import system_to_dict

    entry = resolve(spec)
    params = entry.parameters()
    if not entry.name.startswith("systems:") or any(k not in params for k in given):
        return None
    return system_to_dict(entry.name, **{k: parse_parameter(entry, k, v) for k, v in given.items()})


def cmd_export(args: argparse.Namespace) -> int:
    from pipesim.io.scenario_files import SUFFIXES, dumps
    from pipesim.plan.runspec import is_runspec

    if is_runspec(args.scenario):  # kind = "compute": written back as a run spec
        from pipesim.io.cli_runspec import export_spec

        return export_spec(args)

    if args.out != "-":
        check_output("out", args.out, tuple(SUFFIXES))
        by_suffix = SUFFIXES[Path(args.out).suffix.lower()]
        if args.format is not None and args.format != by_suffix:
            raise UsageError(
                f"--format {args.format} does not match --out {shown(args.out)} (a {by_suffix} file); "
                "the suffix sets the format"
            )
    scen, given = build_scenario(args.scenario, args.set, args.seed)
    fmt = args.format or ("toml" if args.out == "-" else SUFFIXES[Path(args.out).suffix.lower()])
    content = _system_file(args.scenario, given) if args.seed is None else None
    try:
        text = dumps(scen if content is None else content, fmt)
    except ValueError as exc:
        raise UsageError(one_line(exc)) from None
    if args.out == "-":
        sys.stdout.write(text)
    else:
        write_text_atomic(args.out, text)
        plugins = "".join(f" --policies {shlex.quote(f)}" for f in getattr(args, "policies", None) or [])
        print(f"wrote {args.out} (run it: pipesim run {shlex.quote(args.out)}{plugins})")
    return 0
