"""A training log in: a file read into a :class:`TrainingLog`, one row per step, checked
(``docs/calibrate.md``). What a column is and what its cells may hold (verl's names, a number, a
time, a length, a share) is :mod:`pipesim.calibrate.cells`, whose names this module re-exports;
here, what a log is as a whole: its steps (cut, merged, renumbered), its columns (mapped, with gaps
left out) and the phases it did not time.

A log is CSV (``.csv``, ``.tsv``) or JSON lines (``.jsonl``, ``.ndjson``): :data:`LOG_SUFFIXES`, the
one list the reader, its errors and ``--help`` take. One row per training
step, with a ``step`` column and any of :data:`COLUMNS` (verl's names, seconds and tokens). Columns
may be missing: the fit uses what is there and says what it could not identify. A column with an
empty cell in the steps used is left out, and said so. Other columns are ignored.
``--columns MAP.toml`` maps another framework's names onto verl's: a ``[columns]`` table whose
keys are verl's names and whose values the log's (``"timing_s/gen" = "timing/rollout"``).
``--steps A:B`` keeps the rows with ``A <= step < B`` (either side may be left out).

Every problem is one :class:`LogError` naming the file and the column (its :attr:`~LogError.field`
holds the column or key): no such file, an unknown suffix, no ``step`` column, a cell that is not a
finite number (with its row; in a JSON-lines log, a number written as text), a step that is not an
integer up to :data:`MAX_STEP`, a step given twice with two values of a column (records of one
step that add columns are one row; a row given again with the same values is read once, with a
note: :func:`pipesim.calibrate.logfile.merged_records`), a row short of the header's fields (but
the file's last line cut mid-write, with no newline after it, which is left out with a note), a
negative time or length, a time above :data:`MAX_TIMING_S` (or below :data:`MIN_TIMING_S` but not
0), a length (response mean or max, prompt mean) below 1 token, a step's response max below its
mean, a clip ratio above 1, a trainer phase of 0 s where other steps time it (a phase column of 0 s
at every step is left out, and said so), a mapped column the log does not have, too few steps, more than
:data:`~pipesim.calibrate.frame.MAX_LOG_STEPS` steps (cut with ``--steps``), a last step of
``MAX_LOG_STEPS`` or more (a log's step ``s`` is the run's step ``s``: every simulation runs the run from
its step 0 through the log's last step, :func:`pipesim.calibrate.frame.reach_error`).
:func:`pipesim.calibrate.check_log` then refuses a length above what the spec allows, or a mean
below what the clip ratio's samples at the cap give (the log is of another run). A
:class:`TrainingLog` built in Python from a DataFrame is checked by the same rules
(:mod:`pipesim.calibrate.frame`), as are the calibration's arguments.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipesim.calibrate.cells import (
    COLUMNS,
    MAX_STEP,
    MAX_TIMING_S,
    MIN_TIMING_S,
    PHASES,
    STEP_SOURCE,
    SUMMED,
    LogError,
    column_numbers,
    near_misses,
    not_a_column,
    row_name,
)
from pipesim.core.errors import shown
from pipesim.core.readfile import LOG_MAX_BYTES, SPEC_MAX_BYTES, read_bytes, read_text

__all__ = ["COLUMNS", "SUMMED", "LogError", "TrainingLog", "parse_steps", "read_columns_map", "read_log"]
__all__ += ["MAX_STEP", "MAX_TIMING_S", "MIN_TIMING_S"]  # cells.py's, as they were here
__all__ += ["LOG_SUFFIXES"]

CSV_SUFFIXES = {".csv": ",", ".tsv": "\t"}
"""The CSV suffixes a log may have, each with its separator."""
JSONL_SUFFIXES = (".jsonl", ".ndjson")
"""The JSON-lines suffixes a log may have (one JSON object per line)."""
LOG_SUFFIXES = (*CSV_SUFFIXES, *JSONL_SUFFIXES)
"""Every suffix a log may have: what the reader takes, its error and ``--help`` list (one place)."""
LOG_SUFFIXES_SAID = ", ".join(LOG_SUFFIXES[:-1]) + f" or {LOG_SUFFIXES[-1]}"
""":data:`LOG_SUFFIXES` as a sentence says them: ``.csv, .tsv, .jsonl or .ndjson``."""

MIN_STEPS = 3
"""The fewest steps a calibration accepts (a line through the trainer's times needs three)."""
STEPS_NEEDED = (
    f"at least {MIN_STEPS} needed (the trainer's fit draws a line through the steps' times); "
    "its intervals need 4 or more (3 steps leave update_actor's noise unestimated), "
    "a held-out validation 6"
)
"""What a log too short to calibrate is told (the counts: :data:`MIN_STEPS`,
:func:`pipesim.calibrate.fitbounds.unbounded_note`, :data:`pipesim.calibrate.MIN_HOLDOUT_STEPS`)."""


@dataclass(frozen=True)
class TrainingLog:
    """The steps of a log (sorted by ``step``), the verl columns it has, and the file's SHA-256.

    Built by :func:`read_log`, or directly from a DataFrame: every argument is checked as a log's
    cells are (:func:`pipesim.calibrate.frame.check_log_frame`), a :class:`LogError` naming the
    argument or the column; the frame is kept as a float copy with a fresh index."""

    path: str
    sha256: str
    frame: pd.DataFrame
    """``step`` and the :data:`COLUMNS` present and complete, as floats."""
    notes: tuple[str, ...] = ()
    """Columns left out (a cell empty in the steps used), said as the calibration reports them."""
    step_includes_sync: bool | None = None
    """Whether ``timing_s/step`` holds the weight sync (``timing_s/param_sync``), as the trainer
    that wrote the log times it; None: as verl times the spec's design (colocated: yes; split,
    fully async: no; :mod:`pipesim.calibrate.steptime`)."""
    trainer_steps_per_row: int | None = None
    """How many trainer steps each row covers: verl's fully-async trainer logs one row per
    parameter version, aggregated over its ``trigger_parameter_sync_step`` trainer steps (its
    ``timing_s/*`` summed: :data:`SUMMED`); None: one (a row per step), as given to
    :func:`pipesim.calibrate.calibrate` or ``--trainer-steps-per-row`` (:mod:`pipesim.calibrate.rows`)."""

    def __post_init__(self) -> None:
        from pipesim.calibrate.frame import check_log_args

        for name, value in zip(("path", "sha256", "frame", "notes"), check_log_args(self), strict=True):
            object.__setattr__(self, name, value)
        if self.step_includes_sync is not None and not isinstance(self.step_includes_sync, bool):
            raise LogError(
                "step_includes_sync must be True, False or None (as verl times the spec's design), "
                f"got {shown(self.step_includes_sync)}",
                "step_includes_sync",
            )
        k = self.trainer_steps_per_row
        if k is not None:
            from pipesim.calibrate.frame import MAX_LOG_STEPS

            if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= MAX_LOG_STEPS:
                raise LogError(
                    f"trainer_steps_per_row must be an integer from 1 to {MAX_LOG_STEPS:,} (the trainer "
                    f"steps a row covers: verl's trigger_parameter_sync_step), or None (one), got {shown(k)}",
                    "trainer_steps_per_row",
                )
            if (int(self.steps.max()) + 1) * int(k) > MAX_LOG_STEPS:  # every simulation runs this far
                from pipesim.calibrate.frame import reach_error

                raise reach_error(self.path, int(self.steps.max()), int(k), field="trainer_steps_per_row")
            object.__setattr__(self, "trainer_steps_per_row", int(k))

    @property
    def steps(self) -> np.ndarray:
        return self.frame["step"].to_numpy()

    def has(self, column: str) -> bool:
        return column in self.frame.columns and bool(self.frame[column].notna().all())

    @property
    def per_row(self) -> int:
        """The trainer steps each row covers (:attr:`trainer_steps_per_row`, 1 where None)."""
        return self.trainer_steps_per_row or 1

    def col(self, column: str) -> np.ndarray:
        """``column``'s values per trainer step: a column verl's aggregator sums over a row's
        trainer steps (:data:`SUMMED`) divided by :attr:`per_row` (the mean of the row's steps);
        any other as logged (a row's lengths are verl's means over its steps, ``response_length/max``
        their maximum, ``param_sync`` the row's one sync). The only place a row's sums are divided."""
        x = np.asarray(self.frame[column].to_numpy(dtype=float))
        return x / self.per_row if column in SUMMED and self.per_row > 1 else x

    def select(self, mask: np.ndarray) -> TrainingLog:
        """The steps where ``mask`` (booleans, one per step) is true."""
        m = np.asarray(mask)
        if m.dtype != bool or m.shape != (len(self),):
            raise LogError(
                f"mask must be {len(self)} booleans (one per step), got {m.dtype} of shape {m.shape}", "mask"
            )
        # by position (``m``): a boolean Series of another index would be aligned on its labels
        frame = self.frame[m].reset_index(drop=True)
        return TrainingLog(
            self.path, self.sha256, frame, self.notes, self.step_includes_sync, self.trainer_steps_per_row
        )

    def __len__(self) -> int:
        return len(self.frame)


def read_columns_map(path: str | Path | None) -> dict[str, str]:
    """verl's name -> the log's, from a ``[columns]`` table of a TOML file (empty for None)."""
    if path is None:
        return {}
    if not isinstance(path, str | os.PathLike):
        raise LogError(f"columns: a column map is a path to a TOML file, got {shown(path)}", "columns")
    import tomllib

    p = Path(path)
    try:
        data = tomllib.loads(read_text(p, "column maps", SPEC_MAX_BYTES))
    except OSError as e:
        raise LogError(f"{path}: cannot read: {e.strerror or e}", "columns") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise LogError(f"{path}: not valid TOML: {e}", "columns") from None
    except RecursionError:  # arrays hundreds deep: the parser recursed out
        raise LogError(f"{path}: arrays nest too deep for a column map", "columns") from None
    cols = data.get("columns")
    if not isinstance(cols, dict) or set(data) != {"columns"}:
        raise LogError(f"{path}: a column map is one [columns] table (verl name = the log's name)", "columns")
    return check_columns_map(cols, f"{path}: ")


def check_columns_map(cols: object, where: str = "") -> dict[str, str]:
    """``cols`` as a column map (verl's name -> the log's), or a LogError naming the key."""
    if not isinstance(cols, dict):
        raise LogError(
            f"{where}columns must be a dict of verl's name -> the log's, got {shown(cols)}", "columns"
        )
    for k, v in cols.items():
        if k not in ("step", *COLUMNS):
            name = k if isinstance(k, str) else shown(k)
            raise LogError(f"{where}columns.{name}: {not_a_column(k)}", str(name))
        if not isinstance(v, str):
            raise LogError(f"{where}columns.{k} must be the log's column name, got {shown(v)}", k)
    return dict(cols)


def parse_steps(text: str | None) -> tuple[float, float]:
    """``A:B`` as ``(A, B)``, ``-inf`` / ``inf`` for a side left out; LogError naming ``--steps``."""
    if text is None:
        return (-math.inf, math.inf)
    if not isinstance(text, str):
        raise LogError(f"--steps must be a string A:B (or None), got {shown(text)}", "steps")
    a, colon, b = text.partition(":")
    try:
        if not colon:
            raise ValueError
        lo = float(int(a)) if a.strip() else -math.inf
        hi = float(int(b)) if b.strip() else math.inf
    except ValueError:
        raise LogError(
            f"--steps must be A:B (integers, either may be left out), got {shown(text)}", "steps"
        ) from None
    if hi <= lo:
        raise LogError(f"--steps {text}: B must exceed A (the steps A <= step < B)", "steps")
    return lo, hi


def _phases(path: str | Path, frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The trainer's phase columns (:data:`PHASES`) of the steps used: all 0, dropped with a note (a
    phase the log did not time); a 0 among times, LogError naming the column and the step."""
    notes = []
    for c in PHASES:
        if c not in frame.columns:
            continue
        zero = (frame[c] == 0).to_numpy()
        if zero.all():
            notes.append(f"{c}: 0 s at every step (the phase not timed); the column is not used")
            frame = frame.drop(columns=c)
        elif zero.any():
            step = frame["step"].iloc[int(np.flatnonzero(zero)[0])]
            raise LogError(
                f"{path}: column {c!r}, step {step:g}: 0 s, where other steps time the phase (a phase "
                "that runs takes time; leave the cell empty and the column is not used)",
                c,
            )
    return frame, notes


def read_log(
    path: str | Path, columns: dict[str, str] | None = None, steps: str | None = None, first_step: int = 0
) -> TrainingLog:
    """The log at ``path``, its columns renamed by ``columns`` (verl name -> the log's) and its rows
    cut to ``steps`` (``A:B``, the log's own numbers); see the module docstring for what is refused.

    ``first_step``: the number the log gives the run's first step (verl's ``global_steps`` start at
    1), so that its step ``s`` is read as the run's step ``s - first_step``: a calibration deals each
    step's samples to the ranks as the spec's run dealt that step, and a log numbered from 1 read
    from 0 moved the trainer's constants by 21-63% on a noiseless log of known constants. A log
    whose first step is 1 read with the default 0 gets a note saying so."""
    if not isinstance(path, str | os.PathLike):
        raise LogError(f"log: a log is a path to a file, got {shown(path)}", "log")
    columns = check_columns_map(columns) if columns is not None else None
    parse_steps(steps)  # a bad range is refused before the file is read
    p = Path(path)
    try:
        raw = read_bytes(p, "logs", LOG_MAX_BYTES)  # a FIFO, /dev/zero: refused, not waited on
    except OSError as e:
        raise LogError(f"{path}: cannot read: {e.strerror or e}", "log") from None
    from pipesim.calibrate.logfile import (
        READ_NOTES,
        column_mapping,
        inside_step,
        merged_records,
        reach,
        read_frame,
        renumbered,
        repeated_columns,
        shadowed,
    )

    mapping, mapped = column_mapping(path, columns or {})
    df = read_frame(p, raw, mapping["step"], steps)  # a long log's steps counted first
    read_notes = list(df.attrs.get(READ_NOTES, []))  # a partial last line dropped, records flattened
    repeated_columns(p, raw, set(mapping.values()))
    for name, source in (columns or {}).items():
        if source not in df.columns:
            raise LogError(
                f"{path}: the column map names {shown(source)} for {name}, which the log does not have "
                f"(a run that does not log it: drop or comment out that line of the map; columns: "
                f"{', '.join(map(str, df.columns))})",
                source,
            )
    if mapping["step"] not in df.columns:
        raise LogError(
            f"{path}: no {shown(mapping['step'])} column (one row per step needs the step number; map "
            f"another name with --columns); columns: {', '.join(map(str, df.columns[:12]))}",
            "step",
        )
    df.attrs[STEP_SOURCE] = mapping["step"]  # a bad cell's error names its step (cells.row_name)
    out: dict[str, Any] = {}
    for name, source in mapping.items():
        if source in df.columns:
            out[name] = column_numbers(p, df, name, source)
    frame = pd.DataFrame(out)
    if list(frame.columns) == ["step"]:  # it wrote the spec back unchanged, "calibrated"
        raise LogError(
            f"{path}: nothing to calibrate from: the log has step numbers and no column calibrate "
            f"reads ({', '.join(c for c in mapping if c != 'step')[:300]}; map other names with "
            f"--columns); columns: {', '.join(map(str, df.columns[:12]))}",
            "log",
        )
    inside = inside_step(p, df, frame)
    if frame["step"].isna().any():
        i = int(np.flatnonzero(frame["step"].isna().to_numpy())[0])
        raise LogError(f"{path}: column {shown(mapping['step'])}, {row_name(df, i)}: no step number", "step")
    merged: list[str] = []
    if frame["step"].duplicated().any():
        frame, merged = merged_records(path, frame)
    lo, hi = parse_steps(steps)
    start = float(frame["step"].min())  # the log's first step, before the cut (renumbered reads it)
    frame = frame[(frame["step"] >= lo) & (frame["step"] < hi)].sort_values("step").reset_index(drop=True)
    _check_enough(path, len(frame), steps, "steps")
    notes = [
        f"{name}: the log's column {source!r} is {mapped[source]} (--columns); {name} is not read"
        for name, source in shadowed(columns or {}).items()
        if source in df.columns
    ] + near_misses(list(df.columns), mapping)  # timing_s/update_acter: the phase's column misspelt
    origin = renumbered(path, frame, first_step, start) + reach(path, frame, steps, first_step)
    frame, gaps = _gaps(path, frame, steps)
    frame, zeros = _phases(path, frame)
    return TrainingLog(
        str(path),
        hashlib.sha256(raw).hexdigest(),
        frame,
        tuple(read_notes + merged + origin + inside + notes + gaps + zeros),
    )


MAX_GAP_SHARE = 0.25
"""The share of a column's steps that may be empty with the column kept: those steps are left out
(verl logs no ``update_actor`` in its first ``critic_warmup`` steps; a run's one failed write). A
column emptier than that is logged now and then (every ``test_freq`` steps), and is left out."""


def _gaps(path: str | Path, frame: pd.DataFrame, steps: str | None) -> tuple[pd.DataFrame, list[str]]:
    """The steps with an empty cell left out, where at most :data:`MAX_GAP_SHARE` of a column is
    empty, else the column; a note for each. Before, any empty cell left the column out, and one
    blank ``update_actor`` step left the trainer's efficiency at the profile's (the calibrated
    spec's update 54% short of the log it was fitted on)."""
    notes, drop_rows = [], np.zeros(len(frame), dtype=bool)
    for c in list(frame.columns[1:]):
        empty = frame[c].isna().to_numpy()
        if not empty.any():
            continue
        n = int(empty.sum())
        if n <= MAX_GAP_SHARE * len(frame):
            drop_rows |= empty
            notes.append(
                f"{c}: no value at step {listed_steps(frame['step'][empty])}; those steps are left out"
            )
        else:
            notes.append(f"{c}: {n} of {len(frame)} steps have no value; the column is not used")
            frame = frame.drop(columns=c)
    if drop_rows.any():
        frame = frame[~drop_rows].reset_index(drop=True)
        _check_enough(path, len(frame), steps, "steps have a value in every column")
    return frame, notes


def listed_steps(steps: pd.Series) -> str:
    """The step numbers a note names: the first five, then how many more (``3, 8, 13 and 2 more``)."""
    first = ", ".join(f"{x:g}" for x in steps.iloc[:5])
    return first + (f" and {len(steps) - 5} more" if len(steps) > 5 else "")


def _check_enough(path: str | Path, n: int, steps: str | None, what: str) -> None:
    """LogError naming ``steps`` when fewer than :data:`MIN_STEPS` steps are left to fit."""
    if n < MIN_STEPS:
        cut = f" in --steps {steps}" if steps else ""
        said = what if n != 1 else what.replace("steps have", "step has").replace("steps", "step")
        raise LogError(f"{path}: {n} {said}{cut}; {STEPS_NEEDED}", "steps")
