"""The results files of the experiment scripts: one JSON file of runs, rewritten after every run.

A grid of runs can take hours, so ``lr_sweep``, ``staleness`` and ``fp8`` write the whole file
after each run, atomically (a temporary file and a rename: Ctrl-C mid-write leaves the previous
file, never half of one), and ``--resume`` reads it back. :func:`read_runs` refuses a file of
another shape by name, so a wrong ``--json`` path fails before hours of work, not inside a table,
and a run record with a value no table can read (:func:`record_problem`: a seed ``"5"``, a lag -3,
a held-out pass rate 1.7) by its index and field, as ``scenarios.cosim`` refuses its own.

Resuming is one loop shared by the three scripts (:func:`run_cells`). A script lists its grid as
:class:`Cell` s, each the values of its key fields (``staleness``: lag, correction, seed, lr,
steps) and a function that trains that run. The loop skips a cell whose run the file already holds
complete (:func:`complete`), trains the others, and writes the file after each. It returns the runs
in the grid's order, so a resumed grid prints the table an uninterrupted one prints. Runs of
other settings must not share a cell with the new ones: ``check_cli_args``
(:mod:`offpolicy.cli_checks`) refuses other ``--steps`` and ``--lr``, and :func:`resume_refusal`
the settings a run records beside those: the gym, and the sampler, which tells an fp8 file from
the others.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offpolicy import stats
from offpolicy.checks import LR_MAX, SEED_MAX, FieldError, shown
from offpolicy.gym import GYMS
from offpolicy.interrupts import Kept
from offpolicy.update import CORRECTIONS


def write_json(path: str | Path, payload: dict[str, Any]) -> None:
    """Atomic JSON write (temporary file + rename)."""
    write_text(path, json.dumps(payload, indent=1))


def write_text(path: str | Path, text: str) -> None:
    """Atomic text write (temporary file + rename): the results' JSON, table and figure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:  # Ctrl-C mid-write: the file stays as it was, no temporary one is left
        Path(tmp).unlink(missing_ok=True)
        raise


#: What every stored run carries that the tables and the figure read.
RUN_KEYS = frozenset({"seed", "correction", "heldout", "history"})

OFFPOLICY_SCRIPTS = "python -m offpolicy.staleness, lr_sweep or fp8"
COSIM = "python -m scenarios.cosim"
COSIM_PERF = "python -m scenarios.cosim --perf"
#: What every run of a ``scenarios.cosim`` grid file carries (its own check is
#: ``scenarios.cosim_checks.RUN_KEYS``): enough to tell its files from these scripts' by name.
COSIM_RUN_KEYS = frozenset({"design", "correction", "seed", "summary", "evals"})


def writer_of(payload: object) -> str | None:
    """The command whose results file ``payload`` (parsed JSON) is, by its shape: these scripts'
    runs carry :data:`RUN_KEYS`, a ``scenarios.cosim`` grid's :data:`COSIM_RUN_KEYS`, and a
    ``--perf`` file has a ``designs`` list beside its table. None: none of them (or no runs to
    tell by). A file of one command given to another is refused naming its writer."""
    if not isinstance(payload, dict):
        return None
    runs = payload.get("runs")
    if isinstance(runs, list) and runs and all(isinstance(r, dict) for r in runs):
        for keys, writer in ((RUN_KEYS, OFFPOLICY_SCRIPTS), (COSIM_RUN_KEYS, COSIM)):
            if all(r.keys() >= keys for r in runs):
                return writer
    if isinstance(payload.get("designs"), list) and "table" in payload:
        return COSIM_PERF
    return None


def read_payload(path: str | Path, name: str, field: str = "") -> object:
    """The parsed JSON of results file ``path``, ``name`` (the flag and the path) opening every
    error: a FieldError (its ``field``: the caller's flag, if any) for a file that cannot be
    read, is not text or is not JSON (the decoder's line and column). A file with nothing in it
    (blank text, ``{}`` or ``[]``) is ``{}``: it holds no run, so writing over it loses nothing
    and resuming from it starts afresh."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        payload = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise FieldError(f"{name}: not JSON ({exc})", field, str(path)) from None
    except UnicodeDecodeError:
        raise FieldError(f"{name}: not a text file (not UTF-8)", field, str(path)) from None
    except OSError as exc:
        raise FieldError(f"{name}: cannot read it ({exc.strerror})", field, str(path)) from None
    return {} if payload in ({}, []) else payload


def read_runs(path: str | Path, needs: Collection[str] = ()) -> list[dict[str, Any]]:
    """Runs stored in a results JSON (empty when the file does not exist, or holds nothing:
    :func:`read_payload`); a file of another shape is a ``ValueError`` naming it (not a
    ``KeyError`` or ``min()`` of nothing in a table), and naming the command that wrote it where
    :func:`writer_of` knows it (a ``scenarios.cosim`` file). Every record's values are checked as
    well (:func:`record_problem`, with ``needs``: the fields a table will read): a bad one is a
    FieldError ``path: runs[i].field ...`` whose ``field`` is ``runs[i].field``."""
    path = Path(path)
    if not path.exists():
        return []
    if path.is_dir():  # Path('') is '.': an empty --json reached here as the current directory
        raise FieldError(f"{path}: is a directory, not a results file; give a file name", "", str(path))
    payload = read_payload(path, str(path))
    if payload == {}:
        return []
    writer = writer_of(payload)
    if writer is not None and writer != OFFPOLICY_SCRIPTS:
        raise FieldError(f"{path}: a results file of {writer}, not of these scripts", "runs", str(path))
    runs = payload.get("runs") if isinstance(payload, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and r.keys() >= RUN_KEYS for r in runs):
        raise FieldError(
            f"{path}: not a results file of these scripts (a 'runs' list of run records)", "runs", str(path)
        )
    for i, run in enumerate(runs):
        if (problem := record_problem(run, needs)) is not None:
            field, what = problem
            raise FieldError(f"{path}: runs[{i}].{field} {what}", f"runs[{i}].{field}", str(path))
    return list(runs)


METRIC_BOUNDS: dict[str, stats.Bounds] = {
    **dict.fromkeys(("reward", "pass_rate", "eval_pass_rate", "invalid", "eval_invalid"), stats.RATE),
    **dict.fromkeys(("over_cap", "clip_frac", "out_of_band", "at_cap"), stats.RATE),  # token shares
    **dict.fromkeys(("mismatch", "reads", "eval_reads"), stats.NONNEGATIVE),
    **dict.fromkeys(("health_mean", "health_p99", "health_max"), stats.NONNEGATIVE),
}
"""What each run metric can take: every episode's reward is 0 or 1 (:mod:`offpolicy.gym`), so a
reward or pass-rate mean is a rate; ``over_cap`` and the like are shares of tokens; ``mismatch`` and
``health_*`` are means of ``|log pi - log mu|``, ``reads`` a count per episode. The tables cut their
intervals there (:func:`offpolicy.experiment.bounds_of`), and a stored value outside is refused
(:func:`record_problem`)."""

SAMPLERS = ("exact", "fp8")
"""The ``sampler`` of an fp8 run; the other scripts' runs record None."""


def record_problem(run: Mapping[str, Any], needs: Collection[str] = ()) -> tuple[str, str] | None:
    """What is wrong in one stored run record, as (its dotted field, what is wrong: ``'5' is not
    an integer >= 0``); None: nothing. The tables group, pair and average these values, so a bad
    one printed a wrong row (a seed ``"5"`` stopped pairing, a lag -3 got its own row) or failed
    deep in :mod:`offpolicy.stats`. A value is checked wherever it is present: the key fields (a
    seed an integer, not a bool; a lag from 0 to below ``steps``; a known correction, sampler and
    gym; a learning rate as :func:`offpolicy.checks.check_lr` takes it), the held-out pass rate and
    every history value of :data:`METRIC_BOUNDS` (finite, in its bounds). A held-out pass rate
    that is absent or None is an unfinished run (:func:`complete`: ``--resume`` trains it again),
    unless ``needs`` names it: ``needs`` are the fields a table reads (``lag``,
    ``heldout.pass_rate``, ``history.reward``: every step's), each of which must then be there."""
    for name in sorted(n for n in needs if "." not in n):
        if name not in run:
            return name, "is missing (the table reads it)"
    for name, least in (("seed", 0), ("lag", 0), ("steps", 1)):
        if name in run and (problem := _integer_problem(run[name], least)) is not None:
            return name, problem
    if not isinstance(run["seed"], bool) and isinstance(run["seed"], int) and run["seed"] > SEED_MAX:
        return "seed", f"{run['seed']} is not an integer in [0, {SEED_MAX}]"
    if isinstance(run.get("steps"), int) and isinstance(run.get("lag"), int) and run["lag"] >= run["steps"]:
        return "lag", f"{run['lag']} is not below steps {run['steps']} (a lag of a run is at most steps - 1)"
    for name, known in (("correction", CORRECTIONS), ("gym", GYMS), ("sampler", (None, *SAMPLERS))):
        if name in run and (not (run[name] is None or isinstance(run[name], str)) or run[name] not in known):
            return name, f"{shown(run[name])} is not one of {', '.join(map(str, known))}"
    if "lr" in run and (not _within(run["lr"], (0.0, LR_MAX)) or run["lr"] == 0):
        return "lr", f"{shown(run['lr'])} is not a learning rate in (0, {LR_MAX:g}]"
    if run.get("diverged") is not None and not isinstance(run["diverged"], dict):
        return "diverged", f"{shown(run['diverged'])} is not null or a record of where the run diverged"
    held = run["heldout"]
    if not isinstance(held, dict):
        return "heldout", f"{shown(held)} is not a record of held-out results"
    want = {n.split(".", 1)[1] for n in needs if n.startswith("heldout.")}
    for name in sorted(want | held.keys()):
        value = held.get(name)
        if name in want and value is None:
            return f"heldout.{name}", "is missing (the table reads it)"
        unfinished = value is None and name == "pass_rate"  # complete() says so: --resume trains it again
        problem = None if unfinished or name not in METRIC_BOUNDS else _metric_problem(name, value)
        if problem is not None:
            return f"heldout.{name}", problem
    history = run["history"]
    if not isinstance(history, list):
        return "history", f"{shown(history)} is not a list of step records"
    want = {n.split(".", 1)[1] for n in needs if n.startswith("history.")}
    for j, step in enumerate(history):
        if not isinstance(step, dict):
            return f"history[{j}]", f"{shown(step)} is not a step record"
        if missing := sorted(want - step.keys()):
            return f"history[{j}].{missing[0]}", "is missing (the table reads it)"
        if "step" in step and (problem := _integer_problem(step["step"], 0)) is not None:
            return f"history[{j}].step", problem
        for name in METRIC_BOUNDS.keys() & step.keys():
            if (problem := _metric_problem(name, step[name])) is not None:
                return f"history[{j}].{name}", problem
    return None


def _integer_problem(value: object, least: int) -> str | None:
    """``'5' is not an integer >= 0`` for a value that is not an int (a bool is not) >= ``least``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        return f"{shown(value)} is not an integer >= {least}"
    return None


def _within(value: object, bounds: stats.Bounds) -> bool:
    """Whether ``value`` is a finite int or float (not a bool) in ``bounds`` (closed)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return False
    return bounds[0] <= value <= bounds[1]


def _metric_problem(name: str, value: object) -> str | None:
    """``1.7 is not a pass rate in [0, 1]`` for a value of metric ``name`` outside its
    :data:`METRIC_BOUNDS` (or not a finite number); None when it is one."""
    bounds = METRIC_BOUNDS[name]
    if _within(value, bounds):
        return None
    what = "a pass rate" if name.endswith("pass_rate") else "a finite number"
    where = f"in [{bounds[0]:g}, {bounds[1]:g}]" if math.isfinite(bounds[1]) else f">= {bounds[0]:g}"
    return f"{shown(value)} is not {what} {where}"


#: The value of a setting in runs written before the scripts recorded it: every run without a
#: ``gym`` was trained on the defect gym, the default until the issue gym replaced it.
UNRECORDED = {"gym": "defect"}


def resume_refusal(path: str | Path, settings: Mapping[str, Collection[object]]) -> str | None:
    """Why ``--resume`` cannot add runs to ``path`` (None: it can): a run whose recorded setting
    (``settings``: field -> the values this command trains) is another, named with the field
    (``gym``: ``holds runs of the defect gym, not --gym issue``; ``sampler``: ``holds runs of
    offpolicy.fp8 (sampler exact), not of offpolicy.staleness or lr_sweep``). Its runs would share
    cells with the new ones; :mod:`offpolicy.cli_checks` refuses other ``--steps`` and ``--lr`` the
    same way."""
    try:
        stored = read_runs(path)
    except ValueError:  # another shape: check_cli_args has refused it already
        return None
    for field, wanted in settings.items():
        found = {r.get(field, UNRECORDED.get(field)) for r in stored}
        if found <= set(wanted):
            continue
        if field == "sampler":  # fp8's runs are 'exact' or 'fp8', the other scripts' None
            held, want = (_writer_by_sampler(s) for s in (found, set(wanted)))
            return f"{path} holds runs of {held}, not of {want}: give --json another path"
        held, want = " and ".join(sorted(map(str, found))), " or ".join(map(str, wanted))
        held = f"the {held} gym" if field == "gym" else f"{field} {held}"
        return f"{path} holds runs of {held}, not --{field} {want}: resume with its settings"
    return None


def _writer_by_sampler(samplers: Collection[object]) -> str:
    """The script whose runs record these ``sampler`` values, said with them: an fp8 run's is
    ``exact`` or ``fp8``, a staleness or lr-sweep run's None."""
    fp8 = sorted(str(s) for s in samplers if s is not None)
    if not fp8:
        return "offpolicy.staleness or lr_sweep (no sampler)"
    also = " and of offpolicy.staleness or lr_sweep" if None in samplers else ""
    return f"offpolicy.fp8 (sampler {', '.join(fp8)}){also}"


def check_resume(
    parser: argparse.ArgumentParser, args: argparse.Namespace, settings: Mapping[str, Collection[object]]
) -> None:
    """``parser.error`` (usage, exit 2) naming the setting when ``--resume`` meets a ``--json`` file
    of other settings (:func:`resume_refusal`), before any training."""
    if args.resume and (problem := resume_refusal(args.json, settings)) is not None:
        parser.error(f"--resume: {problem}")


def complete(run: dict[str, Any], fields: Sequence[str]) -> bool:
    """Whether a stored run is whole: it has the key ``fields``, a finite held-out pass rate, and
    a history of its ``steps`` (fewer only where it diverged, which is a finished run)."""
    held, history, steps = run.get("heldout"), run.get("history"), run.get("steps")
    rate = held.get("pass_rate") if isinstance(held, dict) else None
    if not all(f in run for f in fields) or not isinstance(history, list):
        return False
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate):
        return False
    if isinstance(steps, int):
        return len(history) == steps or (bool(run.get("diverged")) and len(history) <= steps)
    return True


@dataclass(frozen=True)
class Cell:
    """One run of a grid: ``key`` the values its record will hold in the script's key fields,
    ``train`` the function that trains it and returns the record."""

    key: tuple[Any, ...]
    train: Callable[[], dict[str, Any]]


def stored_runs(path: str | Path, resume: bool, fields: Sequence[str]) -> list[dict[str, Any]]:
    """The runs ``--resume`` keeps from ``path`` ([] without it): the complete ones; any other is
    named on stderr, left out of the file's next write and trained again."""
    if not resume:
        return []
    runs = read_runs(path)
    whole = [r for r in runs if complete(r, fields)]
    if len(whole) < len(runs):
        print(f"{path}: {len(runs) - len(whole)} incomplete run(s) left out, run again", file=sys.stderr)
    return whole


def run_cells(
    path: str | Path,
    meta: dict[str, Any],
    cells: Sequence[Cell],
    fields: Sequence[str],
    runs: list[dict[str, Any]],
    kept: Kept,
    said: Callable[[dict[str, Any]], None] = lambda run: None,
) -> list[dict[str, Any]]:
    """Train every cell whose key no run of ``runs`` (read by :func:`stored_runs`) has in
    ``fields``; after each, write ``path`` whole (``meta`` and every run), update ``kept`` and call
    ``said`` (the progress line). -> the runs of ``cells`` in their order, then the stored runs of
    other keys (kept in the file and the table as before)."""
    kept.before = len(runs)
    by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    for run in runs:
        by_key.setdefault(tuple(run[f] for f in fields), run)  # a key twice: the first one counts
    for cell in cells:
        if cell.key in by_key:
            continue
        run = cell.train()
        write_json(path, dict(meta, runs=[*runs, run]))
        runs.append(run)
        by_key[cell.key] = run
        kept.written = len(runs)
        said(run)
    keys = {cell.key for cell in cells}
    return [by_key[c.key] for c in cells] + [r for r in runs if tuple(r[f] for f in fields) not in keys]
