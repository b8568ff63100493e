"""The results files of the experiment scripts: one JSON file of runs, rewritten after every run.

A grid of runs can take hours, so ``lr_sweep``, ``staleness`` and ``fp8`` write the whole file
after each run, atomically (a temporary file and a rename: Ctrl-C mid-write leaves the previous
file, never half of one), and ``--resume`` reads it back. :func:`read_runs` refuses a file of
another shape by name, so a wrong ``--json`` path fails before hours of work, not inside a table.

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

from offpolicy.checks import FieldError
from offpolicy.interrupts import Kept


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


def read_runs(path: str | Path) -> list[dict[str, Any]]:
    """Runs stored in a results JSON (empty when the file does not exist, or holds nothing:
    :func:`read_payload`); a file of another shape is a ``ValueError`` naming it (not a
    ``KeyError`` or ``min()`` of nothing in a table), and naming the command that wrote it where
    :func:`writer_of` knows it (a ``scenarios.cosim`` file)."""
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
    return list(runs)


#: The value of a setting in runs written before the scripts recorded it: every run without a
#: ``gym`` was trained on the defect gym, the default until the issue gym replaced it.
UNRECORDED = {"gym": "defect"}


def resume_refusal(path: str | Path, settings: Mapping[str, Collection[object]]) -> str | None:
    """Why ``--resume`` cannot add runs to ``path`` (None: it can): a run whose recorded setting
    (``settings``: field -> the values this command trains) is another, named with the field
    (``gym``: ``holds runs of --gym ['defect'], not issue``). Its runs would share cells with the
    new ones; :mod:`offpolicy.cli_checks` refuses other ``--steps`` and ``--lr`` the same way."""
    try:
        stored = read_runs(path)
    except ValueError:  # another shape: check_cli_args has refused it already
        return None
    for field, wanted in settings.items():
        found = {r.get(field, UNRECORDED.get(field)) for r in stored}
        if found <= set(wanted):
            continue
        held = sorted(map(str, found))
        if field == "sampler":  # fp8's runs are 'exact' or 'fp8', the other scripts' None
            return f"{path} holds runs of sampler {held}, another script's: give --json another path"
        want = " or ".join(map(str, wanted))
        return f"{path} holds runs of --{field} {held}, not {want}: resume with its settings"
    return None


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
