"""``pipesim calibrate LOG --spec RUN.toml --out CALIBRATED.toml``: the command (see
:mod:`pipesim.calibrate`). Output paths are checked before anything is read or run; a bad log, map,
step range or spec is one line naming the file and the column or key (exit status 2). A spec
that misses the log's held-out steps (:mod:`pipesim.calibrate.result`, the held-out guard) is
written with the warning in its ``not_identified`` list, and the warning is printed (on stdout
with the results, and on stderr). On a
terminal, one status line on stderr says which part and which simulation is running (a
1,000-step log takes about 20 s; ``--quiet`` hides it). The written spec records the log
(``[calibration] log``) relative to its own folder, as its other paths (:func:`recorded_log`).
``--out`` and ``--json`` are written together, under
:func:`~pipesim.io.interrupts.deferred_interrupts` (a Ctrl-C between the two left a new spec beside
an old table), and each file written is named. A decode overhead fitted far above the engine's
own (:func:`pipesim.calibrate.fitspec.overhead_warning`) is warned of on stderr."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from pipesim.io.cli_common import UsageError, check_distinct, check_output, one_line
from pipesim.io.interrupts import deferred_interrupts, write_text_atomic


def cmd_calibrate(args: argparse.Namespace) -> int:
    from pipesim.calibrate import LogError, calibrate, calibrated_spec, read_columns_map, read_log
    from pipesim.calibrate.fitspec import overhead_warning
    from pipesim.plan.checks import PlanError
    from pipesim.plan.runspec import dumps, load

    check_output("out", args.out, (".toml", ".yaml", ".yml"))
    check_output("json", args.json, stdout=True)
    check_distinct(
        [("out", args.out), ("json", args.json)],
        [("log", args.log), ("run spec (--spec)", args.spec), ("column map (--columns)", args.columns)],
    )
    if args.seed is not None and not 0 <= args.seed < 2**32:
        raise UsageError(f"--seed must be an integer in [0, 2**32), got {args.seed}")
    try:
        rs = load(args.spec)
    except PlanError as exc:
        raise UsageError(f"--spec {one_line(exc)}{_log_as_spec(args.spec)}") from None
    status = _StatusLine(sys.stderr) if sys.stderr.isatty() and not args.quiet else None
    try:
        log = read_log(args.log, read_columns_map(args.columns), args.steps, args.first_step)
        holds = {None: None, "yes": True, "no": False}[args.step_includes_sync]
        # the rows' steps set on the log itself: calibrate's checks of the steps its simulations
        # run (the spec's task pool: frame.check_calibrate_args) count each row's trainer steps
        log = dataclasses.replace(
            log, step_includes_sync=holds, trainer_steps_per_row=args.trainer_steps_per_row
        )
        cal = calibrate(log, rs, seed=args.seed or 0, progress=status)
    except LogError as exc:
        flag = {"trainer_steps_per_row": "--trainer-steps-per-row", "first_step": "--first-step"}.get(
            str(getattr(exc, "field", ""))
        )
        why = one_line(exc)
        raise UsageError(f"{flag}: {why}" if flag and not why.startswith(flag) else why) from None
    finally:
        if status is not None:
            status.close()
    out = sys.stderr if args.json == "-" else sys.stdout
    print(cal.text(), file=out)
    data = calibrated_spec(rs, cal)
    fmt = "toml" if Path(args.out).suffix.lower() == ".toml" else "yaml"
    from pipesim.plan.runspec_export import relocated

    data = relocated(data, rs.base, args.out)  # its paths still resolve
    data["calibration"]["log"] = recorded_log(args.log, args.out)
    spec_text, json_text = dumps(data, fmt), _json_table(data, args) if args.json else None
    # both files or neither: a Ctrl-C between the two would leave a new spec beside an old table
    with deferred_interrupts():
        write_text_atomic(args.out, spec_text)
        if json_text is not None and args.json != "-":
            write_text_atomic(args.json, json_text)
    print(
        f"wrote {args.out} (run it: pipesim run {args.out}; plan with it: pipesim plan {args.out})", file=out
    )
    if json_text is not None and args.json == "-":
        sys.stdout.write(json_text + "\n")
    elif json_text is not None:
        print(f"wrote {args.json} (the [calibration] table as JSON)", file=out)
    said = out is sys.stderr or (out.isatty() and sys.stderr.isatty())  # cal.text() said it on screen
    for w in [] if said else cal.misses:  # written, and said: the spec misses its held-out steps
        print(f"pipesim: warning: {args.out}: {w}", file=sys.stderr)
    if (far := overhead_warning(cal.values)) is not None:  # a note on screen: a warning here, always
        print(f"pipesim: warning: {args.out}: {far}", file=sys.stderr)
    return 0


def _log_as_spec(spec: str) -> str:
    """What a refusal of ``--spec`` adds where the file has a log's suffix: the log is the first
    argument, and ``--spec`` takes the run spec of the logged run."""
    from pipesim.calibrate.log import LOG_SUFFIXES

    if Path(spec).suffix.lower() not in LOG_SUFFIXES:
        return ""
    return (
        " (a training log? calibrate takes the log first and the run spec of the logged run as "
        "--spec: pipesim calibrate LOG --spec RUN.toml --out CALIBRATED.toml)"
    )


def _json_table(data: dict[str, Any], args: argparse.Namespace) -> str:
    """``--json``'s text: the ``[calibration]`` table, its log relative to the JSON file's folder
    (to the working folder for ``-``), an open interval's ``inf`` as ``"inf"`` (valid JSON)."""
    from pipesim.io.saved import json_number

    def plain(v: object) -> object:
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return json_number(v) if isinstance(v, float) else v

    table = {**data["calibration"], "log": recorded_log(args.log, "." if args.json == "-" else args.json)}
    return json.dumps(plain(table), indent=1, allow_nan=False)


def recorded_log(log: str, written: str) -> str:
    """The log's path as the file ``written`` records it (``[calibration] log``): relative to that
    file's folder, as a run spec's own paths are (:func:`pipesim.plan.runspec_export.relocated`),
    absolute where no relative path exists (another drive). ``log`` is as given, from the working
    folder; ``written`` ``"."`` (stdout) keeps it relative to the working folder."""
    target = os.path.abspath(log)
    try:
        return Path(os.path.relpath(target, os.path.abspath(Path(written).parent))).as_posix()
    except ValueError:  # another drive (Windows): no relative path
        return target


class _StatusLine:
    """The calibration's progress as one line rewritten in place on a terminal (``stream``), with
    the seconds since it started; :meth:`close` clears it. Not a terminal (a log, a pipe): silent."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.start, self.shown = stream, time.perf_counter(), False

    def __call__(self, text: str) -> None:
        width = max(shutil.get_terminal_size((100, 20)).columns - 1, 20)
        line = f"calibrate [{time.perf_counter() - self.start:5.1f} s] {text}"[:width]
        self.stream.write("\r\033[K" + line)
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """The ``calibrate`` subparser."""
    from pipesim.io.cli_options import add_option, examples

    c = sub.add_parser(
        "calibrate",
        help="fit a run spec to a verl-style training log (CSV or JSONL, one row per step)",
        description=(
            "Fit the response lengths, the trainer's framework profile, the weight sync and the "
            "engine's decode overhead of a run spec to a training log in verl's metric names, as "
            "far as its columns identify them (step times alone will do; gen and the trainer's "
            "phases split the fit further); each value with a 95% interval, checked on held-out "
            "steps (docs/calibrate.md)."
        ),
        epilog=examples(
            "pipesim calibrate examples/verl_sample_log.csv --spec examples/run_verl_8gpu.toml "
            "--out calibrated.toml",
            "pipesim calibrate slime.jsonl --spec run.toml --out cal.toml "
            "--columns examples/columns_slime.toml --steps 10:50",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from pipesim.calibrate.log import LOG_SUFFIXES_SAID

    c.add_argument("log", help=f"the log: {LOG_SUFFIXES_SAID}, a step column; e.g. verl_log.csv")
    c.add_argument(
        "--spec",
        required=True,
        help='the run spec of the logged run (kind = "compute"); e.g. --spec run.toml',
    )
    c.add_argument("--out", required=True, help="the calibrated spec to write; e.g. --out calibrated.toml")
    c.add_argument(
        "--columns",
        metavar="MAP.toml",
        help="a [columns] table mapping verl's names to the log's; "
        "e.g. --columns examples/columns_slime.toml",
    )
    c.add_argument(
        "--steps",
        metavar="A:B",
        help="use the steps A <= step < B (either side may be left out); e.g. --steps 5:",
    )
    c.add_argument(
        "--first-step",
        type=int,
        default=0,
        metavar="N",
        help="the number the log gives the run's first step (default 0; verl's start at 1): step s is "
        "read as the run's step s - N; e.g. --first-step 1",
    )
    c.add_argument(
        "--step-includes-sync",
        choices=("yes", "no"),
        help="whether the log's timing_s/step holds the weight sync (timing_s/param_sync); default: as "
        "verl times the spec's design, colocated yes, split (fully async) no (docs/calibrate.md); "
        "e.g. --step-includes-sync yes for verl's one_step_off_policy",
    )
    c.add_argument(
        "--trainer-steps-per-row",
        type=int,
        metavar="K",
        help="the trainer steps each row of the log covers (default 1): verl's fully-async trainer logs "
        "one row per parameter version, its timing_s/* summed over trigger_parameter_sync_step steps "
        "(docs/calibrate.md); e.g. --trainer-steps-per-row 4",
    )
    c.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="the simulations' and the bootstrap's seed (default 0; equal to the spec's run seed, it "
        "replays a log pipesim wrote from that spec: docs/calibrate.md); e.g. --seed 3",
    )
    c.add_argument(
        "--json", metavar="FILE", help="also write the [calibration] table as JSON; e.g. --json cal.json"
    )
    add_option(c, "quiet", help="no progress line on a terminal; e.g. --quiet")
    c.set_defaults(func=cmd_calibrate)
