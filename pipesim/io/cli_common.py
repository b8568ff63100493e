"""What every ``pipesim`` subcommand shares: user errors, checks made before any work, scenarios from
the command line, and numbers and tables as people read them.

Design: a subcommand fails in one line. Anything the user got wrong raises :class:`UsageError`,
which :func:`pipesim.io.cli.main` prints as ``pipesim: error: ...`` with exit status 2; an error
from the library is turned into one with :func:`one_line`. Output paths are checked before
anything runs (:func:`check_output`, :func:`check_save_dir`), so a long run never ends in a
failed write. A scenario is named the same way in every subcommand (:func:`build_scenario`, through
:func:`pipesim.io.registry.resolve` and :func:`~pipesim.io.registry.build`), and a run file's
recipe stores it so that it rebuilds anywhere (:func:`recipe_source`: file paths made absolute).
What ``pipesim run`` writes beside its summary is :mod:`pipesim.io.cli_outputs`.

The subcommands themselves are :mod:`pipesim.io.cli_run` (list, run, export),
:mod:`pipesim.io.cli_sweep`, :mod:`pipesim.io.cli_trace` (trace, report) and
:mod:`pipesim.io.cli_fit`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipesim.core.errors import MAX_SEED, shown
from pipesim.io.cli_outputs import write_run_outputs as write_run_outputs  # re-exported

__all__ = [
    "MAX_SEED",
    "UsageError",
    "check_distinct",
    "check_output",
    "check_save_dir",
    "check_seed",
    "fmt_number",
    "load_saved",
    "one_line",
    "read_inputs",
    "recipe_source",
    "register_policies",
    "build_scenario",
    "scenario_dict",
    "split_values",
    "summary_table",
    "table",
]


class UsageError(Exception):
    """A user error: printed as ``pipesim: error: ...`` with exit status 2."""


def fmt_number(v: Any) -> str:
    """A number as people read it: integers (and integer-valued floats) with thousands separators,
    others with about four significant digits and no exponent (1,850 not 1.85e+03)."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if not math.isfinite(v):
        return str(v)
    if v.is_integer() and abs(v) < 1e18:
        return f"{int(v):,}"
    a = abs(v)
    if a < 1e-9:
        return f"{v:.3g}"
    decimals = min(max(0, 3 - math.floor(math.log10(a))), 10)
    return f"{v:,.{decimals}f}"


def summary_table(summary: dict[str, float]) -> str:
    """A run's summary, one ``name  value`` line per metric."""
    w = max(len(k) for k in summary)
    return "\n".join(f"{k:<{w}}  {fmt_number(v):>14}" for k, v in summary.items())


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (its lines joined by ``; ``)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return "; ".join(lines) or type(exc).__name__


def check_seed(seed: int | None) -> None:
    """UsageError unless ``seed`` is None or in [0, 2**64)."""
    if seed is not None and not 0 <= seed < MAX_SEED:
        raise UsageError(f"--seed must be an integer in [0, 2**64), got {seed}")


def build_scenario(spec: str, sets: Sequence[str], seed: int | None) -> tuple[Any, dict[str, str]]:
    """The scenario ``spec`` names, with the ``--set`` pairs and the seed; and the pairs as given."""
    from pipesim.io.registry import build, resolve

    check_seed(seed)
    try:
        entry = resolve(spec)
        scen, given = build(entry, list(sets))
        if seed is not None:
            scen = scen.with_(seed=seed)
    except ValueError as exc:
        if is_plan_spec(spec):  # read as a scenario file it lacked schema_version: say what it is
            from pipesim.plan.runspec import is_runspec

            if is_runspec(spec):
                raise UsageError(
                    f'{spec}: a run spec (kind = "compute", docs/runspec.md), not a scenario: '
                    f"`pipesim run {spec}` runs it, and `pipesim plan {spec}` compares designs "
                    "(tp, placement, eta) with its [design] as the baseline"
                ) from None
            raise UsageError(
                f"{spec}: a plan spec (docs/plan.md), not a scenario: `pipesim plan {spec}` searches it"
            ) from None
        msg = one_line(exc)
        if Path(spec).is_file() and not msg.startswith(spec):  # a check of the whole scenario
            msg = f"{spec}: {msg}"  # (a pool too small for its steps), not of one of its keys
        raise UsageError(msg) from None
    return scen, given


def is_plan_spec(name: str) -> bool:
    """Whether ``name`` is a plan spec file (``[cluster]``, ``[space]`` or ``[search]``, no
    ``schema_version``; a run spec is one too, to ``pipesim plan``): what a scenario's command
    refuses as one, naming ``pipesim plan``. A ``kind`` other than ``"compute"`` (``kind =
    "Compute"``) is a run spec misspelt, not a plan spec: PlanError naming ``kind`` and the file."""
    from pipesim.plan import specfile
    from pipesim.plan.checks import PlanError
    from pipesim.plan.runspec_checks import KIND, missing_kind

    path = Path(name)
    if path.suffix.lower() not in specfile.SUFFIXES or not path.is_file():
        return False
    try:
        data = specfile.read(path)
    except PlanError:
        return False
    if "schema_version" in data:
        return False
    if "kind" in data and data["kind"] != KIND:
        msg = f'{name}: kind must be "{KIND}" (a run spec of the compute engine), got {shown(data["kind"])}'
        raise PlanError(msg, "kind", name)
    if (missing := missing_kind(data)) is not None:  # [design] or [run]: a run spec without its kind
        raise PlanError(f"{name}: {missing}", "kind", name)
    return bool({"cluster", "space", "search"} & set(data))


def check_distinct(
    outputs: Sequence[tuple[str, str | None]], inputs: Sequence[tuple[str, str | None]] = ()
) -> None:
    """UsageError where two outputs name one path (or one holds the other: ``--save DIR`` and
    ``--json DIR/r.json``), or an output names an input: the second write would replace the first,
    or the input the command reads (``pipesim fit t.csv --json t.csv`` replaced the trace, and
    ``calibrate --out b.toml --json b.toml`` left a TOML file holding JSON). Each is ``(option,
    path)``; None and ``-`` (standard output) are skipped. Checked before any work."""
    named = [(o, Path(v).resolve()) for o, v in outputs if v is not None and v != "-"]
    for i, (o, p) in enumerate(named):
        for o2, p2 in named[:i]:
            if p == p2 or p2 in p.parents or p in p2.parents:  # one would overwrite (or hold) the other
                raise UsageError(f"--{o2} and --{o} name the same path ({p}); give each its own")
    for o, p in named:
        for what, v in inputs:
            if v is not None and v != "-" and Path(v).resolve() == p:
                raise UsageError(f"--{o} {shown(str(v))} is the {what} this command reads; write elsewhere")


def read_inputs(spec: str | None, modules: Sequence[str] = ()) -> list[tuple[str, str]]:
    """The files a command reads for its scenario, as :func:`check_distinct` takes them: the
    scenario file (``mine.toml``, or the ``.py`` of ``file.py:name``) and each ``--policies`` file;
    a name that is no file (``synchronous``, from the registry) adds none."""
    where, sep, _ = (spec or "").rpartition(":")
    path = where if sep and where.endswith(".py") else spec
    found = [("scenario file", path)] if path and Path(path).is_file() else []
    return found + [("--policies module", m) for m in modules if m.endswith(".py")]


def check_output(opt: str, path: str | None, suffixes: Sequence[str] = (), stdout: bool = False) -> None:
    """Fail before any work when ``path`` cannot be written: a directory, a missing or non-directory
    parent, or a wrong suffix. ``-`` (standard output) is allowed where ``stdout``."""
    if path is None or (stdout and path == "-"):
        return
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"--{opt}: {shown(path)} is a directory; give a file name")
    parent = p.parent
    for anc in (parent, *parent.parents):
        if anc.exists() and not anc.is_dir():
            raise UsageError(f"--{opt}: {shown(str(anc))} is a file, not a directory")
    if not parent.exists():
        raise UsageError(f"--{opt}: directory {shown(str(parent))} does not exist")
    refuse_inside_saved_run(opt, path, parent, "a file")
    if suffixes and p.suffix.lower() not in suffixes:
        raise UsageError(f"--{opt}: file must end in {' or '.join(suffixes)}, got {shown(p.name)}")
    from pipesim.io.interrupts import writes_in_place

    if writes_in_place(p):  # a device, a pipe, /dev/stdout: written in place, no file made beside it
        return
    if (why := unwritable(parent)) is not None:
        raise UsageError(f"--{opt}: directory {shown(str(parent))} is not writable ({why})")


def progress_wanted(quiet: bool) -> bool:
    """Whether a command shows its progress bar: on a terminal, unless ``--quiet``. A pipe or a
    file (a CI log, ``2> log``) never gets one: its carriage returns would fill the log."""
    return not quiet and sys.stderr.isatty()


def saved_run_holding(directory: Path) -> Path | None:
    """The saved run (a directory :func:`pipesim.io.saved.save` wrote) that ``directory`` is or
    lies inside, if any."""
    from pipesim.io.saved import is_saved_run

    for d in (directory, *directory.resolve().parents):
        if is_saved_run(d):
            return d
    return None


def refuse_inside_saved_run(opt: str, path: str, parent: Path, what: str) -> None:
    """UsageError where ``parent``, the directory ``--opt path`` is made in, is or lies inside a
    saved run: it holds exactly the files its manifest lists, so ``what`` added there (a file; a
    run saved inside it) made every later load refuse it ("not listed in manifest.json")."""
    if (run := saved_run_holding(parent)) is not None:
        where = shown(str(run if run.name else run.resolve()))
        raise UsageError(
            f"--{opt}: {shown(path)} is inside the saved run {where}, which would no longer load "
            f"with {what} added; write it next to the run instead"
        )


def unwritable(directory: Path) -> str | None:
    """Why no file can be made in ``directory`` (None: one can): a file is made there and removed,
    as the output's temporary file will be (:func:`pipesim.io.interrupts.write_atomic`).
    ``os.access`` is not asked: it says yes to root everywhere, /proc and read-only mounts
    included, and the run's output then failed after the work."""
    import tempfile

    try:
        fd, name = tempfile.mkstemp(prefix=".pipesim-probe-", suffix=".tmp", dir=directory)
    except OSError as e:
        return e.strerror or type(e).__name__
    os.close(fd)
    with contextlib.suppress(OSError):  # made but not removable (another user's sticky directory)
        os.unlink(name)
    return None


def scenario_dict(scen: Any) -> dict[str, Any]:
    """The scenario as a run file shows it: plain fields, the pipeline as a dict, policies by repr."""
    out: dict[str, Any] = {"name": scen.name, "seed": scen.seed, "pool_size": scen.pool_size}
    out["pipeline"] = dataclasses.asdict(scen.pipeline)
    for f in ("durations", "admission", "weight_update", "batching", "timeout", "failures", "replicas"):
        out[f] = repr(getattr(scen, f))
    return out


def recipe_source(spec: str) -> str:
    """The scenario source as the run file stores it: file paths made absolute."""
    from pipesim.io.registry import SCENARIO_FILE_SUFFIXES, registry

    if spec in registry():
        return spec
    if spec.lower().endswith(SCENARIO_FILE_SUFFIXES):
        return str(Path(spec).resolve())
    where, _, attr = spec.rpartition(":")
    if where.endswith(".py"):
        return f"{Path(where).resolve()}:{attr}"
    return spec


def check_save_dir(path: str | None) -> None:
    """``--save DIR``: a new directory (missing parents are made), an empty one, or a saved run;
    not one inside a saved run (which would then fail to load, as for a file: :func:`check_output`)."""
    if path is None:
        return
    from pipesim.io.saved import is_saved_run
    from pipesim.io.saved_files import replaceable

    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"--save: {shown(path)} is a file; a saved run is a directory")
    try:
        replaceable(p)
    except ValueError as exc:  # the current directory: refused before the run, not after it
        raise UsageError(f"--save: {one_line(exc)}") from None
    if p.is_dir() and any(p.iterdir()) and not is_saved_run(p):
        raise UsageError(f"--save: {shown(path)} is a non-empty directory that is not a saved run")
    refuse_inside_saved_run("save", path, p.parent, "a directory")
    if (problem := directory_problem(p)) is not None:
        raise UsageError(f"--save: {problem}")


def directory_problem(p: Path) -> str | None:
    """Why a directory at ``p``, made with its missing parents, could not hold files (None: it
    could): a file in its place or above it, or no file can be made in the nearest existing one
    (the directory itself, or the ancestor its parents are made in). ``--save`` and the plan's run
    cache are both checked by it before any work."""
    for anc in (p, *p.parents):
        if anc.exists() and not anc.is_dir():
            return f"{shown(str(anc))} is a file, not a directory"
    here = next((d for d in (p, *p.parents) if d.exists()), Path("."))
    if (why := unwritable(here)) is not None:
        return f"directory {shown(str(here))} is not writable ({why})"
    return None


def load_saved(path: str) -> Any:
    """The saved run at ``path`` (``pipesim run --save``); UsageError when it is not one."""
    import warnings

    from pipesim.io.saved import load

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run = load(path)
    except ValueError as exc:
        raise UsageError(one_line(exc)) from None
    for w in caught:  # a person reads these: one line each, not Python's file:line form
        print(f"pipesim: warning: {' '.join(str(w.message).split())}", file=sys.stderr)
    return run


def split_values(text: str, keep_empty: bool = False) -> list[str]:
    """Split ``v1,v2,...`` at top-level commas (not inside parentheses, brackets or quotes), so
    ``Replicas(2, LeastLoaded()),Replicas(4, LeastLoaded())`` is two values; empty values are
    dropped unless ``keep_empty``."""
    parts: list[str] = []
    cur: list[str] = []
    depth, quote = 0, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if keep_empty or p.strip()]


def table(df: Any) -> str:
    """A DataFrame as text, numbers as :func:`fmt_number` writes them."""
    with __import__("pandas").option_context("display.width", 200, "display.max_columns", 30):
        return str(df.to_string(index=False, float_format=fmt_number))


def register_policies(specs: Sequence[str]) -> None:
    """Add the policy classes of each user module named on the command line to the catalog. A
    ``.py`` that is no regular file is refused as what it is (:func:`~pipesim.io.user_code.
    user_file_problem`: a FIFO, a directory, a device link; it was "no such file"), before it is
    imported (Python's import of a FIFO waits for a writer)."""
    from pipesim.io.user_code import import_file, user_file_problem
    from pipesim.policies import catalog

    for spec in specs:
        if spec.endswith(".py"):
            path = Path(spec)
            if (problem := user_file_problem(spec)) is not None:  # a FIFO or a directory: named so
                raise UsageError(f"--policies: {problem}")
            try:
                name = import_file(path).__name__
            except Exception as exc:  # noqa: BLE001 - the user's file: report it in one line
                raise UsageError(f"--policies: cannot import {spec}: {one_line(exc)}") from None
        else:
            name = spec
        try:
            catalog.register_module(name)
        except ValueError as exc:
            raise UsageError(f"--policies: {exc}") from None
