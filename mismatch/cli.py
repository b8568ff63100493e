"""``python -m mismatch``: run the probe, print every table, write JSON (and optionally the figure).

Exactly one model source: ``--model PATH`` (a local checkpoint or an HF-cache id, never downloaded),
``--tiny`` (the default) or ``--random-0.6b``. ``--from-json FILE`` re-prints the tables of a saved
run (and renders ``--html``) without running anything, e.g. for results brought back from a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import torch

from mismatch.checks import FieldError


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
    p.add_argument("--prompts", type=int, default=30, help="number of prompts (default 30)")
    p.add_argument("--new-tokens", type=int, default=32, help="tokens sampled per prompt (default 32)")
    p.add_argument("--batch", type=int, default=None, help="batch N for trainer/engine (default: --prompts)")
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


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build the source and run the probe (no printing of tables)."""
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
    return run_probe(source, cfg, log=lambda s: print(f"[mismatch] {s}", file=sys.stderr, flush=True))


def load_result(path: str) -> dict[str, Any]:
    """A saved run (``--from-json``), with its schema and top-level keys checked, so a file of
    another shape is one clear error rather than a ``KeyError`` inside the tables."""
    from mismatch.probe import SCHEMA, TOP_LEVEL_KEYS

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
    return result


def check_output(parser: argparse.ArgumentParser, flag: str, path: str | None) -> None:
    """``parser.error`` (usage, exit 2) naming ``flag`` unless ``path`` (None: not given) can be
    written: a missing directory, a path that is a directory, or one this user cannot write.
    ``os.access`` is not enough (root passes it on ``/proc``), so the check opens the file for
    appending, as the write will, and removes it again if it was not there. (``mismatch`` imports
    neither ``scenarios`` nor ``offpolicy``, whose ``check_output`` this copies.)"""
    if not path:
        return
    if _special(path):  # a pipe, a terminal, /dev/null: opening it to test would block or drain it
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
        if args.html and path and Path(args.html).resolve() == Path(path).resolve() and not _special(path):
            parser.error(
                f"--html {args.html} is also --{flag.replace('_', '-')}: the figure would replace it; "
                "give --html another path"
            )


class DropOnClosedPipe:
    """A stdout that, once its reader has left (``| head``), drops what is written instead of
    raising BrokenPipeError: the run goes on and writes its files. The first broken write points
    the stream's file descriptor at os.devnull, so the interpreter's final flush of what is still
    buffered cannot fail either (that made the exit status 120). Anything else is the stream's."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.dropping = False

    def write(self, text: str) -> int:
        if not self.dropping:
            try:
                return int(self.stream.write(text))
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.dropping:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        self.dropping = True
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):  # not a file (a test's capture): nothing to flush
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def closed_pipe_dropped() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` are :class:`DropOnClosedPipe` within the block (``|&
    head`` closes both), flushed at its end and then restored."""
    guards = {name: DropOnClosedPipe(getattr(sys, name)) for name in ("stdout", "stderr")}
    for name, guard in guards.items():
        setattr(sys, name, guard)
    try:
        yield
    finally:
        for name, guard in guards.items():
            guard.flush()
            if getattr(sys, name) is guard:
                setattr(sys, name, guard.stream)


def main(argv: Sequence[str] | None = None) -> int:
    with closed_pipe_dropped():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
    try:
        with sigterm_as_interrupt():
            return _run_and_write(args, format_report, written)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: one line; an output is written whole or not at all
        kept = f"{', '.join(written)} written; the rest not" if written else "nothing written"
        print(f"python -m mismatch: interrupted: {kept}", file=sys.stderr, flush=True)
        return 130


def _run_and_write(args: argparse.Namespace, format_report: Any, written: list[str]) -> int:
    """Run (or load) the probe, print the tables, write ``--json`` and ``--html`` (each added to
    ``written`` once it is)."""
    try:
        result = load_result(args.from_json) if args.from_json else run(args)
        report = format_report(result)
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
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


def write_atomic(path: str, write: Any) -> None:
    """``write(tmp)`` to a temporary file beside ``path``, then rename it over ``path``: an
    interrupt leaves the old file or none, never half of one. A pipe or a terminal (``/dev/stdout``)
    is written in place. (``mismatch`` does not import pipesim, whose ``write_atomic`` this twins.)"""
    if _special(path):
        write(Path(path))
        return
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.resolve().parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; results are meant to be shared
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises KeyboardInterrupt, as Ctrl-C does (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _special(path: str) -> bool:
    """Whether ``path`` is an existing pipe, character device or socket (``/dev/stdout``, a FIFO,
    ``>(cat)``), which a script writes as a stream: nothing to test by opening it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)
