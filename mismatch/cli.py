"""``python -m mismatch``: run the probe, print every table, write JSON (and optionally the figure).

Exactly one model source: ``--model PATH`` (a local checkpoint or an HF-cache id, never downloaded),
``--tiny`` (the default) or ``--random-0.6b``. ``--from-json FILE`` re-prints the tables of a saved
run (and renders ``--html``) without running anything, e.g. for results brought back from a GPU.
Ctrl-C or SIGTERM stops a run in one line (exit 130); once the main comparisons exist, their tables
are printed and ``--json`` is written with the result so far, marked ``incomplete``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import torch

from mismatch.checks import FieldError
from mismatch.cliio import (
    closed_pipe_dropped,
    interrupts_stop_once,
    special_path,
    write_atomic,
)


class _Parser(argparse.ArgumentParser):
    """Every usage error is one line, ``error: ...``, exit 2: the shape of the errors found after
    parsing (a saved file, a model, a device), instead of argparse's usage block for some only."""

    parsing = False  # within parse_args: argparse's own errors also point at --help

    def error(self, message: str) -> NoReturn:
        hint = f" (see {self.prog} --help)" if self.parsing else ""
        self.exit(2, f"error: {message}{hint}\n")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        self.parsing = True
        try:
            return super().parse_args(args, namespace)
        finally:
            self.parsing = False


#: flags that set up a new run: meaningless with --from-json, which runs nothing
RUN_ONLY = ("device", "prompts", "new_tokens", "batch", "seed", "attn", "no_knobs", "threads")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m mismatch", description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", metavar="PATH", help="local checkpoint dir or cached hub id (no download)")
    src.add_argument("--tiny", action="store_true", help="tiny random Qwen3 (default)")
    src.add_argument(
        "--random-0.6b", dest="random_06b", action="store_true", help="Qwen3-0.6B config, random"
    )
    src.add_argument("--from-json", metavar="FILE", help="print tables (and --html) of a saved run")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--prompts", type=int, default=30, help="number of prompts, 2 or more (default 30)")
    p.add_argument("--new-tokens", type=int, default=32, help="tokens sampled per prompt (default 32)")
    p.add_argument(
        "--batch", type=int, default=None, help="batch N for trainer/engine, 2 or more (default: --prompts)"
    )
    p.add_argument("--seed", type=int, default=0, help="weights and sampling seed (default 0)")
    p.add_argument(
        "--attn", default="sdpa", choices=("sdpa", "eager"), help="baseline attention (default sdpa)"
    )
    p.add_argument("--no-knobs", action="store_true", help="skip the knob variants")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads, 1 to the CPUs here (default: 1 for --tiny on the CPU, whose "
        "kernels are too small to split; torch's choice otherwise)",
    )
    p.add_argument("--json", metavar="FILE", help="write the result as JSON")
    p.add_argument("--html", metavar="FILE", help="write the CDF figure as HTML (needs plotly)")
    return p


def run(args: argparse.Namespace, partial: dict[str, Any] | None = None) -> dict[str, Any]:
    """Build the source and run the probe (no printing of tables); ``partial`` is
    ``run_probe``'s: the result so far, for a run that is stopped part-way."""
    from mismatch.models import ModelSource
    from mismatch.probe import ProbeConfig, run_probe

    cfg = ProbeConfig(
        n_prompts=args.prompts,
        new_tokens=args.new_tokens,
        seed=args.seed,
        batch_n=args.batch,
        knobs=not args.no_knobs,
    )
    if args.model:
        source = ModelSource.real(args.model, args.device, args.attn)
    elif args.random_06b:
        source = ModelSource.random_0_6b(args.seed, args.device, args.attn)
    else:
        source = ModelSource.tiny(args.seed, args.device, args.attn)
    return run_probe(
        source, cfg, log=lambda s: print(f"[mismatch] {s}", file=sys.stderr, flush=True), partial=partial
    )


def load_result(path: str) -> dict[str, Any]:
    """A saved run (``--from-json``), with its schema, top-level keys and every field the tables
    and figure read checked (:func:`mismatch.report.check_result`), so a file of another shape or
    with impossible values is one error naming the file and the key path (exit 2), rather than a
    traceback inside the tables or figure, or a table that prints the values."""
    from mismatch.probe import SCHEMA, TOP_LEVEL_KEYS
    from mismatch.report import check_result

    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not text"
        raise FieldError(f"--from-json {path}: cannot read it ({why})", "--from-json", str(path)) from None
    try:
        result = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FieldError(f"--from-json {path}: not JSON ({exc})", "--from-json", str(path)) from None
    if not isinstance(result, dict) or result.get("schema") != SCHEMA:
        found = result.get("schema") if isinstance(result, dict) else type(result).__name__
        raise FieldError(
            f"--from-json {path}: not a probe result (schema {SCHEMA!r} expected, got {found!r})",
            "--from-json",
            str(path),
        )
    missing = [k for k in TOP_LEVEL_KEYS if k not in result]
    if missing:
        raise FieldError(
            f"--from-json {path}: a probe result without {', '.join(missing)}", "--from-json", str(path)
        )
    try:
        check_result(result)  # every field the tables and the figure read
    except FieldError as exc:
        raise FieldError(f"--from-json {path}: {exc}", exc.field, str(path)) from None
    return result


def check_output(parser: argparse.ArgumentParser, flag: str, path: str | None) -> None:
    """``parser.error`` (usage, exit 2) naming ``flag`` unless ``path`` (None: not given) can be
    written: a missing directory, a path that is a directory, or one this user cannot write.
    ``os.access`` is not enough (root passes it on ``/proc``), so the check opens the file for
    appending, as the write will, and removes it again if it was not there. (``mismatch`` imports
    neither ``scenarios`` nor ``offpolicy``, whose ``check_output`` this copies.)"""
    if not path:
        return
    if special_path(path):  # a pipe, a terminal, /dev/null: opening it to test would block or drain it
        return
    target = Path(path).resolve()
    if not target.parent.is_dir():
        parser.error(f"{flag} {path}: no directory {target.parent}")
    if target.is_dir():
        parser.error(f"{flag} {path}: is a directory; give a file name")
    existed = target.exists()
    try:
        with open(target, "a"):
            pass
    except OSError as exc:
        parser.error(f"{flag} {path}: cannot write it ({exc.strerror})")
    if not existed:
        target.unlink()


def given_flags(argv: Sequence[str] | None) -> set[str]:
    """The ``dest`` of each flag ``argv`` gives (its value may equal the default): ``argv`` parsed
    again with every default suppressed. ``argv`` has parsed once already, so this cannot fail."""
    quiet = build_parser()
    for action in quiet._actions:
        action.default = argparse.SUPPRESS
    return set(vars(quiet.parse_args(argv)))


def check_from_json(parser: argparse.ArgumentParser, args: argparse.Namespace, given: set[str]) -> None:
    """With --from-json nothing runs: --json (a new run's output) and the flags that set up a run
    are refused by name rather than ignored."""
    if not args.from_json:
        return
    if args.json:
        parser.error("--json writes a new run; with --from-json nothing is run (the file is the JSON)")
    ignored = [f"--{dest.replace('_', '-')}" for dest in RUN_ONLY if dest in given]
    if ignored:
        parser.error(
            f"{', '.join(ignored)} set up a new run; with --from-json nothing is run "
            "(drop them, or run without --from-json)"
        )


def check_outputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Usage errors for the output flags, before any work (a probe run takes minutes)."""
    for flag in ("json", "html"):
        check_output(parser, f"--{flag}", getattr(args, flag))
    for flag in ("json", "from_json"):  # one file for two: the figure replaced the run's JSON
        path = getattr(args, flag)
        if (
            args.html
            and path
            and Path(args.html).resolve() == Path(path).resolve()
            and not special_path(path)
        ):
            parser.error(
                f"--html {args.html} is also --{flag.replace('_', '-')}: the figure would replace it; "
                "give --html another path"
            )


def main(argv: Sequence[str] | None = None) -> int:
    with closed_pipe_dropped():
        return _main(argv)


#: the flags that take a path: an empty one (``--json ""``, an unset shell variable) was taken as
#: "not given" (``--model ""`` ran the tiny model), so it is refused by name
PATH_FLAGS = ("model", "from_json", "json", "html")


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for dest in PATH_FLAGS:
        value = getattr(args, dest)
        if value is not None and not value.strip():
            flag = f"--{dest.replace('_', '-')}"
            parser.error(f"{flag} {value!r}: an empty path; give a {'model' if dest == 'model' else 'file'}")
    cpus = os.cpu_count() or 1  # more torch threads than CPUs only slows the probe down (or crashes it)
    if args.threads is not None and not 1 <= args.threads <= cpus:
        parser.error(f"--threads must be 1 to {cpus} (the CPUs here), got {args.threads}")
    check_from_json(parser, args, given_flags(argv))
    check_outputs(parser, args)
    tiny_on_cpu = not (args.model or args.random_06b or args.from_json) and args.device == "cpu"
    threads = args.threads if args.threads is not None else (1 if tiny_on_cpu else None)
    if threads:  # the tiny model's kernels take microseconds: threads only add waits, and on
        # cores another job shares, torch's default made --tiny 7x slower (64 s against 9 s)
        torch.set_num_threads(threads)
    from mismatch.report import format_report

    written: list[str] = []  # the outputs written so far, for the line an interrupt prints
    partial: dict[str, Any] = {}  # the result so far (run_probe fills it once the main rows exist)
    with interrupts_stop_once():
        try:
            return _run_and_write(args, format_report, written, partial)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: one line; an output is written whole or not at all
            so_far = _save_partial(args, format_report, partial, written)
            kept = f"{', '.join(written)} written{so_far}; the rest not" if written else "nothing written"
            print(f"python -m mismatch: interrupted: {kept}", file=sys.stderr, flush=True)
            return 130


def _save_partial(
    args: argparse.Namespace, format_report: Any, partial: dict[str, Any], written: list[str]
) -> str:
    """After an interrupt or a later stage's error: print the tables of the result so far and
    write it to ``--json`` (marked ``incomplete``), where the main comparisons exist and the JSON
    is not written yet -> what to add to the line that says what was written."""
    if not partial or args.from_json or (args.json and args.json in written):
        return ""
    print(format_report(partial))
    if not args.json:
        return ""
    try:
        write_atomic(args.json, lambda tmp: tmp.write_text(json.dumps(partial)))
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ""
    written.append(args.json)
    stage = partial.get("incomplete", {}).get("stage")
    return f" (the result so far, stopped during {stage})" if stage else ""


def _run_and_write(
    args: argparse.Namespace, format_report: Any, written: list[str], partial: dict[str, Any]
) -> int:
    """Run (or load) the probe, print the tables, write ``--json`` and ``--html`` (each added to
    ``written`` once it is). A run that fails part-way (a later stage out of GPU memory) still
    prints and writes the result so far (:func:`_save_partial`)."""
    try:
        result = load_result(args.from_json) if args.from_json else run(args, partial)
        report = format_report(result)
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        kept = _save_partial(args, format_report, partial, written)
        if written:
            print(f"python -m mismatch: wrote {', '.join(written)}{kept}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, IndexError) as exc:  # a saved file whose inner rows have another shape
        if not args.from_json:
            raise
        print(
            f"error: --from-json {args.from_json}: a probe result of another shape ({exc!r})", file=sys.stderr
        )
        return 2
    print(report)
    try:
        if args.json:
            write_atomic(args.json, lambda tmp: tmp.write_text(json.dumps(result)))
            written.append(args.json)
            print(f"wrote {args.json}")
        if args.html:
            from mismatch.figure import write_html

            write_atomic(args.html, lambda tmp: write_html(result, str(tmp)))
            written.append(args.html)
            print(f"wrote {args.html}")
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
