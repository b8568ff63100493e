"""The ``pipesim`` command line: list, run, compare, sweep, report, trace, fit, export.

Design: every subcommand is a thin layer over the library (registry, ``run``, ``sweep``,
``report.build_report``, ``trace``, ``scenario_files``), so anything the CLI does is also one call
in Python. A scenario is named the same way everywhere (:func:`pipesim.io.registry.resolve`): a
registered name (``systems:areal``), a scenario file (``my.toml``, ``my.yaml``), or
``package.module:factory`` / ``path/to/file.py:factory``.

Ctrl-C and SIGTERM (:func:`~pipesim.io.interrupts.sigterm_as_interrupt`) stop a command with one
line and exit status 130; outputs are written whole or not at all (``sweep`` keeps its finished
cells in ``--csv``, with ``partial`` set). User errors (unknown scenario, key or policy, ill-typed
value, unreadable file, a bad output path, a run that cannot finish, a sweep whose every cell fails)
exit with status 2 and print at most a usage line and one ``pipesim: error: ...`` line; never a
traceback (``PIPESIM_TRACEBACK=1`` shows it for an unexpected error). Output paths are checked
before anything runs. ``main(argv)`` returns the exit status, which keeps it testable in-process.

A ``--json`` run file stores the summary, the scenario (as text and as scenario-file data) and the
*recipe* (scenario, ``--set`` overrides and seed). ``pipesim trace RUN.json`` rebuilds the run from
the recipe: a run is deterministic given its seed, so the file stays small and the trace is exact.

The parts, each under about 300 lines:

* :mod:`~pipesim.io.cli_parser` -- the parser, a subparser per command;
* :mod:`~pipesim.io.cli_options` -- the options several commands share, with ``pipesim plan``
  (scenario, ``--set``, ``--policies``, ``--seed``, ``--over``, ``--workers``, ``--dask``, ...);
* :mod:`~pipesim.io.cli_common` -- :class:`UsageError`, checks before work, scenarios, numbers;
* :mod:`~pipesim.io.cli_run` (list, run, export), :mod:`~pipesim.io.cli_compare`,
  :mod:`~pipesim.io.cli_sweep`, :mod:`~pipesim.io.cli_trace` (trace, report),
  :mod:`~pipesim.io.cli_fit` -- the commands.

This module is the entry point (``python -m pipesim``, ``python -m pipesim.io.cli``; the console
script goes through :mod:`pipesim_entry`, which answers a Ctrl-C while this is imported): it
dispatches ``plan``, runs the command and turns every error into one line. The names the parts
define are re-exported here, where callers have always found them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator, Sequence

from pipesim.core.collector import pause_collector_during_runs
from pipesim.io.cli_common import (
    MAX_SEED,
    UsageError,
    build_scenario,
    check_output,
    fmt_number,
    one_line,
    register_policies,
    split_values,
)
from pipesim.io.cli_compare import cmd_compare
from pipesim.io.cli_fit import cmd_fit
from pipesim.io.cli_options import POLICIES_HELP, SCENARIO_HELP, SET_HELP
from pipesim.io.cli_parser import Parser, build_parser
from pipesim.io.cli_run import cmd_export, cmd_list, cmd_run
from pipesim.io.cli_sweep import cmd_sweep, parse_over
from pipesim.io.cli_trace import cmd_report, cmd_trace
from pipesim.io.interrupts import command_finished, sigterm_as_interrupt

__all__ = [
    "MAX_SEED",
    "POLICIES_HELP",
    "SCENARIO_HELP",
    "SET_HELP",
    "Parser",
    "UsageError",
    "build_parser",
    "build_scenario",
    "check_output",
    "cmd_compare",
    "cmd_export",
    "cmd_fit",
    "cmd_list",
    "cmd_report",
    "cmd_run",
    "cmd_sweep",
    "cmd_trace",
    "fmt_number",
    "main",
    "one_line",
    "parse_over",
    "register_policies",
    "split_values",
]

# the names these had when they were defined here
_Parser = Parser
_parse_over = parse_over
_scenario = build_scenario
_check_output = check_output
_one_line = one_line


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for usage errors and runs that cannot finish).
    A reader that leaves early (``pipesim run ... --trace t.json | head``) does not stop the
    command: what it prints is dropped, and every file asked for is written (before, the first
    print to the closed pipe ended the command with 0 and no trace)."""
    from pipesim.io.interrupts import command_signals, stdout_may_close

    words = list(sys.argv[1:] if argv is None else argv)
    with command_signals(words[0] if words else "pipesim"), stdout_may_close():
        return _main(words)


def _main(argv: list[str]) -> int:
    """The command ``argv`` names, its errors as one line each. Once it has returned, a Ctrl-C or
    SIGTERM no longer unwinds it (:func:`~pipesim.io.interrupts.command_finished`): it says the
    command had finished, where it had (before, one there gave 130 and "stopped before it
    finished" after the outputs were complete)."""
    if argv[:1] == ["plan"]:  # the planner parses its own arguments (pipesim plan --help)
        try:
            with sigterm_as_interrupt():
                from pipesim.plan import main as plan_main
        except KeyboardInterrupt:
            return _not_started("plan")
        try:
            with pause_collector_during_runs():
                return _finished("plan", plan_main(argv[1:]))
        except BrokenPipeError:  # `pipesim plan ... | head`: the reader left; nothing to report
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - as below
            return 0
    args = None  # the parsed command line, once the command has started
    status = None  # the command's, once it has returned
    try:
        # SIGTERM unwinds like Ctrl-C (nothing is left half-written); this process is the
        # command's, so its runs pause the cyclic collector while they run
        with sigterm_as_interrupt(), pause_collector_during_runs():
            # built in here: the parser imports the planner and calibration (~0.3 s, seconds
            # under load), and a Ctrl-C there was a raw traceback, a SIGTERM a silent 143
            args = build_parser().parse_args(argv)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                register_policies(getattr(args, "policies", None) or [])
            for w in caught:  # a person reads these: one line each
                print(f"pipesim: warning: {' '.join(str(w.message).split())}", file=sys.stderr)
            with _pipesim_warnings_one_line():
                status = args.func(args)  # no call between the return and the store: no signal lands
            return _finished(argv[0], status)
    except UsageError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:  # `pipesim sweep` says what it kept itself
        if args is None:  # while the parser was built or read: nothing had started
            return _not_started(argv[0] if argv and not argv[0].startswith("-") else "pipesim")
        if status is not None:  # it came after the command returned (its frame's clean-up takes ms)
            return _finished(argv[0], status, interrupted=True)
        command_finished(argv[0], 130)  # a second Ctrl-C must not cut the line below
        print(
            f"pipesim: interrupted: {argv[0]} stopped before it finished; every file it wrote is "
            "whole (none is left half-written)",
            file=sys.stderr,
        )
        return 130
    except BrokenPipeError:  # `pipesim ... | head`: the reader left; nothing to report
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stops the interpreter's flush failing at exit
        return 0
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback (PIPESIM_TRACEBACK=1 shows it)
        if os.environ.get("PIPESIM_TRACEBACK"):
            raise
        from pipesim.core.blame import NOTE_END
        from pipesim.core.errors import PipelineError

        if isinstance(exc, PipelineError):
            return _fail(f"the run cannot finish: {one_line(exc)}")
        culprit = [str(n) for n in getattr(exc, "__notes__", ()) if str(n).endswith(NOTE_END)]
        if culprit:  # a policy's own exception: its type, and which policy raised it
            return _fail(
                f"{type(exc).__name__}: {one_line(exc)} ({culprit[0]}; PIPESIM_TRACEBACK=1 shows where)"
            )
        if isinstance(exc, ValueError | OSError):
            return _fail(one_line(exc))
        return _fail(f"{type(exc).__name__}: {one_line(exc)} (PIPESIM_TRACEBACK=1 shows where)")


@contextlib.contextmanager
def _pipesim_warnings_one_line() -> Iterator[None]:
    """A warning pipesim raises (its category defined in pipesim, as ``ToolSlotWarning``) shows as
    one ``pipesim: warning:`` line, not Python's ``file:line: Category:`` form with the source line
    under it; other libraries' warnings show as Python shows them. The filters are untouched, so
    each still shows once per place."""
    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], *args: object, **kwargs: object) -> None:
        if category.__module__.split(".")[0] == "pipesim":
            print(f"pipesim: warning: {' '.join(str(message).split())}", file=sys.stderr)
        else:
            shown(message, category, *args, **kwargs)  # type: ignore[arg-type]

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


def _finished(command: str, status: int | None, interrupted: bool = False) -> int:
    """``status``, once the command has returned it: a Ctrl-C from now on says so (0: the outputs
    are complete) rather than unwinding the command's way out; ``interrupted``: one came already."""
    command_finished(command, int(status or 0), interrupted)
    return int(status or 0)


def _not_started(command: str) -> int:
    """The one line a Ctrl-C or SIGTERM before ``command`` started prints (the console script's,
    :mod:`pipesim_entry`, for one during the import before) -> its exit status, 130."""
    command_finished(command, 130)  # a second Ctrl-C must not cut the line below
    print(f"pipesim: interrupted before {command} started; nothing was written", file=sys.stderr)
    return 130


def _fail(message: str) -> int:
    print(f"pipesim: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
