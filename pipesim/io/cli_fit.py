"""``pipesim fit``: calibrate a duration model from a column of a trace (:mod:`pipesim.io.fit`).

Design: the command only reads arguments and writes outputs; the fitting is
:func:`pipesim.io.fit.fit_trace`. Output paths (``--qq``, ``--json``, ``--scenario-out``) are
checked first. The agent fit keeps the per-turn shape of ``--base``'s agent model when it has one;
``--scenario-out`` writes ``--base`` with the fitted ``--model`` as its durations.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO

from pipesim.io.cli_common import UsageError, build_scenario, check_distinct, check_output, one_line


def cmd_fit(args: argparse.Namespace) -> int:
    from pipesim.io.fit import FitError, fit_trace, format_result, to_json, write_qq

    if args.model is not None and args.scenario_out is None:  # it chooses what that file holds, only
        raise UsageError(
            f"--model {args.model} chooses the fit --scenario-out writes; give --scenario-out FILE"
        )
    model = args.model or "lognormal"
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
    try:
        result = fit_trace(
            args.trace, args.column, turns_column=args.turns_column, scale=args.scale, base=agent_base
        )
    except FitError as exc:
        raise UsageError(one_line(exc)) from None
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
        scen = base.with_(durations=result.fits[model].model, pool_size=None)
        save_scenario(scen, args.scenario_out)
        print(f"wrote {args.scenario_out} ({args.base} with the {model} fit as its durations)", file=out)
    return 0
