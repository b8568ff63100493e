"""``pipesim fit``: calibrate a duration model from a column of a trace (:mod:`pipesim.io.fit`).

Design: the command only reads arguments and writes outputs; the fitting is
:func:`pipesim.io.fit.fit_trace`. Output paths (``--qq``, ``--json``, ``--scenario-out``) are
checked first, and every output is written whole or not at all (:mod:`pipesim.io.interrupts`).
The agent fit keeps the per-turn shape of ``--base``'s agent model when it has one; without
``--scenario-out``, a ``--base`` whose agent model is the default's (every built-in scenario's)
would change nothing, and is refused as ``--model`` is (it was ignored without a word).
``--scenario-out`` writes ``--base`` with the fitted ``--model`` as its durations, or without
``--model`` the fit :func:`pipesim.io.fit.choose_model` picks (the command says which and why), and
warns where the model written is a poor stand-in (:func:`pipesim.io.fit.fit_problems`: KS rejects
it, or its mean is off the data's, and with it the simulated throughput).

A trace above 256 MiB is refused before it is read (:func:`pipesim.io.fit_readers.read_table`).
One below it may still hold tens of millions of rows, and the fit's time grows with them (about
5 s per million on a 2-core machine: a 30M-row CSV ran 3 minutes printing nothing), so above
:data:`NOTED_ROWS` rows a line on stderr says how many are being read before the work starts.
"""

from __future__ import annotations

import argparse
import sys
from typing import IO, Any

from pipesim.io.cli_common import (
    UsageError,
    build_scenario,
    check_distinct,
    check_output,
    check_seed,
    one_line,
)

NOTED_ROWS = 1_000_000
"""Above this many rows (about 3 s to fit) ``pipesim fit`` says on stderr what it is reading."""


def _note_rows(path: str) -> None:
    """A line on stderr where the trace is long enough to take a while: its rows, counted without
    reading it as a table (:func:`pipesim.io.fit_readers.trace_rows`; a JSON array is not counted)."""
    from pipesim.io.fit_readers import trace_rows

    rows = trace_rows(path)
    if rows is not None and rows > NOTED_ROWS:
        print(
            f"pipesim: fit: reading about {rows:,} rows of {path}; the fit takes about 5 s per million "
            "rows (30 million: 3 minutes, on 2 cores), and a random sample of a million fits in seconds",
            file=sys.stderr,
        )


def cmd_fit(args: argparse.Namespace) -> int:
    from pipesim.io.fit import FitError, fit_trace, format_result, to_json, write_qq
    from pipesim.io.interrupts import write_text_atomic

    if args.model is not None and args.scenario_out is None:  # it chooses what that file holds, only
        raise UsageError(
            f"--model {args.model} chooses the fit --scenario-out writes; give --scenario-out FILE"
        )
    check_seed(args.seed)
    check_output("qq", args.qq, (".html",))
    check_output("json", args.json, stdout=True)
    if args.scenario_out is not None:
        from pipesim.io.scenario_files import SUFFIXES

        check_output("scenario-out", args.scenario_out, tuple(SUFFIXES))
    outputs = [("qq", args.qq), ("json", args.json), ("scenario-out", args.scenario_out)]
    check_distinct(outputs, [("trace", args.trace), ("--base scenario file", args.base)])
    base = None
    if args.scenario_out is not None or args.base != "synchronous":
        base, _ = build_scenario(args.base, [], None)
    from pipesim.workload.durations import AgentDurations

    agent_base = base.durations if base is not None and isinstance(base.durations, AgentDurations) else None
    if args.scenario_out is None and args.base != "synchronous" and agent_base in (None, AgentDurations()):
        # without --scenario-out, --base only lends the agent fit its shape: the default's is no change
        why = "it has no agent model" if agent_base is None else "its agent model is the default's"
        raise UsageError(
            f"--base {args.base} chooses the scenario --scenario-out writes, and the fit is the same "
            f"without it ({why}); give --scenario-out FILE"
        )
    _note_rows(args.trace)
    try:
        result = fit_trace(
            args.trace,
            args.column,
            turns_column=args.turns_column,
            scale=args.scale,
            base=agent_base,
            seed=args.seed,
        )
    except FitError as exc:
        raise UsageError(one_line(exc)) from None
    out: IO[str] = sys.stderr if args.json == "-" else sys.stdout
    print(format_result(result), file=out)
    if args.json:
        if args.json == "-":
            sys.stdout.write(to_json(result) + "\n")
        else:
            write_text_atomic(args.json, to_json(result))
            print(f"wrote {args.json}", file=out)
    if args.qq:
        write_qq(result, args.qq)
        print(f"wrote {args.qq} (QQ plot)", file=out)
    if args.scenario_out is not None:
        assert base is not None
        _write_scenario(args, base, result, out)
    return 0


def _write_scenario(args: argparse.Namespace, base: Any, result: Any, out: IO[str]) -> None:
    """``--base`` with the chosen fit as its durations, refused before writing where the file would
    be too large to load; a warning (on stderr) where the model written is a poor stand-in."""
    from pipesim.core.readfile import SCENARIO_MAX_BYTES
    from pipesim.io.fit import fit_problems
    from pipesim.io.interrupts import write_text_atomic
    from pipesim.io.scenario_files import dumps, file_format

    model = args.model or result.chosen
    fit = result.fits[model]
    text = dumps(base.with_(durations=fit.model, pool_size=None), file_format(args.scenario_out))
    size = len(text.encode("utf-8"))
    if size > SCENARIO_MAX_BYTES:  # the empirical fit is capped, so this is a base of its own size
        raise UsageError(
            f"--scenario-out: the scenario with --model {model} would be {size / 2**20:.1f} MiB; a "
            f"scenario file is at most {SCENARIO_MAX_BYTES // 2**20} MiB, so nothing could load it"
        )
    write_text_atomic(args.scenario_out, text)
    how = "" if args.model else ", the default model above"
    print(f"wrote {args.scenario_out} ({args.base} with the {model} fit as its durations{how})", file=out)
    for problem in fit_problems(fit, result.values):
        print(f"warning: the {fit.name} fit written to {args.scenario_out}: {problem}", file=sys.stderr)
