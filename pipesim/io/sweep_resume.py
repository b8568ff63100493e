"""Partial tables of ``pipesim sweep``: which sweep wrote them, where the next one goes, and
``--resume``.

Design: an interrupted sweep writes its finished cells as a CSV (``partial=True``) and, beside it,
``<csv>.sweep.json``: the sweep's fingerprint (:func:`fingerprint`), a hash of every cell's
labels and scenario (``grid``) with the settings that made them, as given (scenario, ``--set``,
``--policies``, ``--over``, the seeds) and the pipesim version. Two tables are of the same sweep
when their ``grid`` and version agree; the settings only say what differs when they do not
(``./mine.yaml`` and ``mine.yaml`` are one sweep).

Where a partial table goes (:func:`write_partial`): the first of ``--csv``, ``stem.partial.csv``,
``stem.partial.2.csv``, ... that is free or holds a partial table of the same sweep, which is then
merged with the new rows (a cell in both keeps the new row). A complete table, or another sweep's
partial one, is never replaced: a second interrupted sweep replaced the first one's 10 rows with
its own 4. ``--resume`` (:func:`resume_rows`) reads the finished cells back from every table of
those names that is of this sweep, so they are not run again; a partial table of another sweep
there is refused, naming what differs. Rows are matched to cells by their labels as the CSV
writes them (:func:`_text`), and read back with their numbers exact (``round_trip``), so a resumed
sweep's CSV is the uninterrupted one's (a label None is ``none`` in the CSV and in the cells alike:
:func:`~pipesim.io.overrides.cell_label`). Once the complete table is written, this sweep's
partial tables beside it and their sidecars go (:func:`drop_partials`): a stale one made a later
``--resume`` rerun the cells it lacked. A complete table keeps no sidecar, so ``--resume`` onto
one, with no partial table of this sweep beside it, is refused rather than run again in full
(:func:`resume_rows`). The sidecar also keeps each finished cell's share of
time after its last training step (:data:`TAIL_SHARES`), which the CSV has no column for, so the
resumed sweep's note on it counts the cells read back too.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipesim.io.interrupts import write_text_atomic, writes_in_place
from pipesim.io.sweep_grid import Cell, SweepResult, collect

__all__ = [
    "add_resume_option",
    "SweepBook",
    "candidates",
    "differences",
    "drop_partials",
    "fingerprint",
    "resume_rows",
    "sidecar",
    "drop_sidecar",
    "write_partial",
]

SETTINGS = (
    ("scenario", "the scenario"),
    ("set", "--set"),
    ("policies", "--policies"),
    ("over", "--over"),
    ("seeds", "the seeds"),
)
"""The fingerprint's settings as given, in the order a mismatch names them, with their names."""


def fingerprint(args: Any, cells: Sequence[Cell]) -> dict[str, Any]:
    """What identifies a sweep (module docstring): its ``grid`` hash and the settings as given."""
    digest = hashlib.sha256()
    with np.printoptions(threshold=sys.maxsize):  # a trace's durations in full, not "..."
        for c in cells:
            digest.update(repr(sorted(c.labels.items(), key=lambda kv: kv[0])).encode())
            digest.update(repr(c.scenario).encode())
    return {
        "scenario": str(args.scenario),
        "set": list(args.set or []),
        "policies": list(getattr(args, "policies", None) or []),
        "over": list(args.over or []),
        "seeds": sorted({int(c.labels["seed"]) for c in cells}),
        "cells": len(cells),
        "pipesim": _version(),
        "grid": digest.hexdigest(),
    }


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pipesim")
    except PackageNotFoundError:
        return "unknown"


def differences(stored: Mapping[str, Any] | None, fp: Mapping[str, Any]) -> str | None:
    """None where ``stored`` is the fingerprint of the same sweep as ``fp``; else what differs."""
    if stored is None:
        return "has no record of the sweep that wrote it (no .sweep.json beside it)"
    if stored.get("pipesim") != fp["pipesim"]:
        return f"was written by pipesim {stored.get('pipesim')}, this is {fp['pipesim']}"
    if stored.get("grid") == fp["grid"]:
        return None
    said = [
        f"{name} {_shown(stored.get(key))} there, {_shown(fp[key])} here"
        for key, name in SETTINGS
        if not _same_setting(key, stored.get(key), fp[key])
    ]
    if not said:  # the same settings: the scenario file or a --policies module changed since
        return "is of other cells: the same settings, but the scenario they build differs (a file changed?)"
    return "is of another sweep: " + "; ".join(said)


def _same_setting(key: str, there: Any, here: Any) -> bool:
    """Whether a setting is the same in two fingerprints, up to the spelling of a file's path
    (``big.yaml``, ``./big.yaml``): respelled, the sweep is the same (its grid says whether its
    cells are), so a respelled and edited file was named as the cause rather than the edit."""
    if there == here:
        return True
    if key == "scenario":
        return isinstance(there, str) and _same_spec(there, here)
    if key == "policies":
        return (
            isinstance(there, list)
            and len(there) == len(here)
            and all(isinstance(a, str) and _same_spec(a, b) for a, b in zip(there, here, strict=True))
        )
    return False


def _same_spec(a: str, b: str) -> bool:
    """Whether two spellings name the same file (and the same ``:factory`` of it), as seen from here."""
    (pa, fa), (pb, fb) = (_file_part(a), _file_part(b))
    if fa != fb or not pa or not pb:
        return False
    return os.path.realpath(pa) == os.path.realpath(pb)


def _file_part(spec: str) -> tuple[str, str]:
    """``(path, factory)`` of a spec naming a file (``f.yaml``; ``f.py:make``), else ``("", spec)``."""
    where, sep, attr = spec.rpartition(":")
    if sep and where.endswith(".py"):
        return where, attr
    if spec.lower().endswith((".toml", ".yaml", ".yml", ".py")) or os.sep in spec:
        return spec, ""
    return "", spec


def _shown(value: Any) -> str:
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        lo, hi = value[0], value[-1]
        return f"{lo}..{hi}" if value == list(range(lo, hi + 1)) and len(value) > 2 else str(value)
    return json.dumps(value)


def sidecar(path: str | Path) -> Path:
    """Where the fingerprint of the table at ``path`` is kept: ``<path>.sweep.json``."""
    p = Path(path)
    return p.with_name(p.name + ".sweep.json")


TAIL_SHARES = "tail_shares"
"""The sidecar's key for each finished cell's ``_tail_share`` (by cell index): a side value, not a
CSV column, that ``--resume`` reads back so the note on time after the last training step counts
every cell of the final table, not only those run after the resume. Not part of the fingerprint
(:func:`differences` compares only the grid, the version and the settings)."""


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _stored(path: str | Path) -> dict[str, Any] | None:
    try:
        data = json.loads(sidecar(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _partial_file(path: str | Path, partial: bool = True) -> bool:
    """Whether ``path`` is a sweep table every row of which says ``partial=True`` (``partial``
    False: ``partial=False``, a complete table)."""
    try:
        col = pd.read_csv(path, usecols=["partial"])["partial"]
    except (OSError, ValueError, pd.errors.ParserError):
        return False
    return bool(len(col)) and bool((col.astype(str) == str(partial)).all())


def candidates(csv: str) -> list[str]:
    """The tables a sweep to ``csv`` may have left: ``csv``, ``stem.partial.csv`` and each
    ``stem.partial.N.csv`` there (by N), then the next free N."""
    p = Path(csv)
    out = [csv, str(p.with_name(f"{p.stem}.partial{p.suffix}"))]
    pattern = re.compile(re.escape(f"{p.stem}.partial.") + r"(\d+)" + re.escape(p.suffix) + "$")
    numbered: list[int] = []
    if p.parent.is_dir():
        numbered = sorted(int(m.group(1)) for f in p.parent.iterdir() if (m := pattern.match(f.name)))
    out += [str(p.with_name(f"{p.stem}.partial.{n}{p.suffix}")) for n in numbered]
    nxt = max([1, *numbered]) + 1
    return [*out, str(p.with_name(f"{p.stem}.partial.{nxt}{p.suffix}"))]


def _text(value: Any) -> str:
    """A label as the CSV writes it (None and NaN: empty), so a row read back finds its cell."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


@dataclass(frozen=True)
class SweepBook:
    """One sweep's cells and fingerprint, and the knob columns its rows get (``knobs``: per design,
    the values of the preset parameters it was built with; :func:`pipesim.io.cli_sweep.with_knobs`)."""

    cells: Sequence[Cell]
    args: Any
    knobs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    signed: frozenset[str] = frozenset()

    @cached_property
    def fingerprint(self) -> dict[str, Any]:
        """:func:`fingerprint`, made when first needed (an interrupt, ``--resume``): it hashes
        every cell's scenario."""
        return fingerprint(self.args, self.cells)

    @property
    def label_cols(self) -> list[str]:
        return list(self.cells[0].labels)

    def index(self) -> dict[tuple[str, ...], int]:
        cols = self.label_cols
        return {tuple(_text(c.labels[k]) for k in cols): c.index for c in self.cells}

    def results_of(self, frame: pd.DataFrame) -> dict[int, dict[str, Any]]:
        """The result rows of ``frame`` (a table of this sweep: read back, or a result's ``runs``)
        by cell index, as the cells returned them (a failed row: its status and error only)."""
        cols = self.label_cols
        knob_cols = {k for v in self.knobs.values() for k in v}
        skip = {*cols, *knob_cols, "partial"}
        where = self.index()
        out: dict[int, dict[str, Any]] = {}
        for rec in frame.to_dict("records"):
            key = tuple(_text(rec.get(k)) for k in cols)
            if key not in where:
                continue
            ok = rec.get("status") == "ok"
            row: dict[str, Any] = {"status": str(rec.get("status")), "error": _text(rec.get("error"))}
            for k, v in rec.items():
                if k in skip or k in row:
                    continue
                if ok or not (isinstance(v, float) and math.isnan(v)):
                    row[str(k)] = v
            out[where[key]] = row
        return out

    def read(self, path: str | Path) -> dict[int, dict[str, Any]]:
        """The finished cells of the table at ``path`` (labels as text, numbers exact), each with
        the ``_tail_share`` its sidecar kept (:data:`TAIL_SHARES`) where it kept one."""
        conv = {c: str for c in self.label_cols}
        if int(pd.__version__.split(".")[0]) >= 3:  # reads floats exactly itself (the option is deprecated)
            frame = pd.read_csv(path, converters=conv)
        else:
            frame = pd.read_csv(path, converters=conv, float_precision="round_trip")
        rows = self.results_of(frame)
        kept = (_stored(path) or {}).get(TAIL_SHARES)
        for index, row in rows.items():
            share = kept.get(str(index)) if isinstance(kept, dict) else None
            if row["status"] == "ok" and share is not None and _finite(share):
                row["_tail_share"] = float(share)
        return rows

    def result(self, results: Mapping[int, Mapping[str, Any]]) -> SweepResult | None:
        """The :class:`SweepResult` of the cells in ``results`` (None where there are none), with
        the knob columns."""
        from pipesim.io.sweep_presets import with_knobs

        done = [c for c in self.cells if c.index in results]
        if not done:
            return None
        return with_knobs(collect(done, results, self.signed), self.knobs)


def resume_rows(csv: str, book: SweepBook) -> tuple[dict[int, dict[str, Any]], list[str]]:
    """``--resume``: the finished cells of every table a sweep to ``csv`` left that is of this
    sweep, and those tables' paths. ValueError where none is and a partial table there is of
    another sweep (naming what differs), or ``csv`` is a complete table: its sweep finished (its
    partial tables went, :func:`drop_partials`), and a resume of it used to run every cell again."""
    found: dict[int, dict[str, Any]] = {}
    used: list[str] = []
    refused: list[str] = []
    for path in candidates(csv):
        if writes_in_place(path) or not Path(path).is_file():
            continue
        why = differences(_stored(path), book.fingerprint)
        if why is None:
            found.update(book.read(path))
            used.append(path)
        elif _partial_file(path):
            refused.append(f"{path} {why}")
    if not used and refused:
        raise ValueError(
            f"--resume: {refused[0]}; resume with the settings of that sweep, or give another --csv"
        )
    if not used and not writes_in_place(csv) and _partial_file(csv, partial=False):
        raise ValueError(
            f"--resume: {csv} is a complete table (partial=False on every row) and no partial table of "
            "this sweep is beside it: the sweep that wrote it finished, so nothing is left to resume; "
            "run without --resume to run it again (it replaces the table), or give another --csv"
        )
    return found, used


def write_partial(results: Mapping[int, Mapping[str, Any]], csv: str, book: SweepBook) -> tuple[str, str]:
    """Write the finished cells ``results`` as a partial table for ``--csv csv`` (module docstring):
    returns the path written and what it says about it (merged, or beside what)."""
    from pipesim.io.sweep_outputs import write_runs

    note = ""
    skipped: list[str] = []
    target = csv  # the last candidate is always free: the loop ends at one
    merged_rows: dict[int, dict[str, Any]] = {}
    for path in candidates(csv):
        if writes_in_place(path):
            target = path
            break
        if not Path(path).exists():
            target = path
            break
        if _partial_file(path) and differences(_stored(path), book.fingerprint) is None:
            target, merged_rows = path, book.read(path)
            break
        skipped.append(path)
    all_rows = {**merged_rows, **results}
    res = book.result(all_rows)
    assert res is not None  # the caller has finished cells
    if not writes_in_place(target):
        shares = {
            str(i): float(r["_tail_share"]) for i, r in all_rows.items() if _finite(r.get("_tail_share"))
        }
        kept = {**book.fingerprint, TAIL_SHARES: shares}
        write_text_atomic(sidecar(target), json.dumps(kept, indent=1) + "\n")
    write_runs(res.runs, target, partial=True)
    if extra := len(set(merged_rows) - set(results)):
        note = f" (with the {extra} finished cell(s) of an earlier interrupted run of this sweep it held)"
    if skipped:
        which = " and ".join(f"--csv {p}" if p == csv else p for p in skipped)
        note += f" ({which} already existed and {'is' if len(skipped) == 1 else 'are'} left as it was)"
    return target, note


def drop_sidecar(csv: str) -> None:
    """After a complete table is written at ``csv``: the fingerprint a partial one left there goes."""
    if not writes_in_place(csv):
        sidecar(csv).unlink(missing_ok=True)


def drop_partials(csv: str, book: SweepBook) -> list[str]:
    """After this sweep's complete table is written at ``csv``: its partial tables beside it
    (``stem.partial.csv``, ``stem.partial.N.csv``) and their sidecars go, since the complete table
    holds their cells. They stayed, and a second ``--resume`` read 8 of 30 cells back from one and
    ran the other 22 again. Another sweep's partial tables stay. Returns the tables removed."""
    gone: list[str] = []
    for path in [] if writes_in_place(csv) else candidates(csv)[1:]:
        stored = _stored(path) if Path(path).is_file() and _partial_file(path) else None
        if stored is not None and differences(stored, book.fingerprint) is None:
            Path(path).unlink()  # the table first: a sidecar alone is ignored, a table alone refused
            sidecar(path).unlink(missing_ok=True)
            gone.append(path)
    return gone


def add_resume_option(parser: Any) -> None:
    """``--resume`` of ``pipesim sweep`` (:mod:`pipesim.io.sweep_resume`), as ``pipesim plan`` and
    the offpolicy scripts name it."""
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted sweep: the cells its --csv partial table holds are read back, "
        "not run again (the sweep must be the same: scenario, --set, --over, --seeds); e.g. --resume",
    )
