"""What a training log's columns are and what a cell of each may hold (``docs/calibrate.md``).

The vocabulary: :data:`COLUMNS`, verl's metric names the calibration reads, and their kinds (summed
over a row of several trainer steps, a share, a length, a trainer phase). The cell rules:
:func:`column_numbers` reads one column of a file's frame as floats and :func:`first_bad` finds the
first value no training log holds, each refusal a :class:`LogError` naming the column and the row
(:func:`pipesim.calibrate.log.read_log` reads a file with them; :mod:`pipesim.calibrate.frame`
checks a frame built in Python by the same rules).

A CSV's cells are text, and its numbers are read from the text. A JSON-lines log's cells have
types, so a number written as a string (``"12.5"``) is refused, naming the column and the row ("is
text, not a number"): read as the number without a word, a writer that quotes its numbers passed
for one that does not (as :mod:`pipesim.io.fit_readers` refuses it in a trace). A JSON ``true`` or
``false`` is no number either (pandas reads it as 1 or 0).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError
from pipesim.plan.runspec_calibration import MAX_STEP_TIME_S

__all__ = [
    "COLUMNS",
    "MAX_STEP",
    "MAX_TIMING_S",
    "MIN_TIMING_S",
    "PHASES",
    "POSITIVE",
    "SHARES",
    "SUMMED",
    "TYPED",
    "LogError",
    "column_numbers",
    "first_bad",
    "near_misses",
    "not_a_column",
]

COLUMNS = (
    "timing_s/step",
    "timing_s/gen",
    "timing_s/old_log_prob",
    "timing_s/ref",
    "timing_s/update_actor",
    "timing_s/param_sync",
    "response_length/mean",
    "response_length/max",
    "response_length/clip_ratio",
    "prompt_length/mean",
)
"""verl's metric names the calibration reads (``verl/trainer/ppo/metric_utils.py``:
``compute_timing_metrics`` and ``compute_data_metrics``)."""
SUMMED = tuple(c for c in COLUMNS if c.startswith("timing_s/") and c != "timing_s/param_sync")
"""The columns verl's fully-async trainer sums over the trainer steps of a logged row (its
``MetricsAggregator`` sums every ``timing_s/*`` metric of a step: ``detach_utils.py`` lines 256-257
and 294-295 at volcengine/verl ``b178a3c``); ``timing_s/param_sync`` is not a step's metric there
but one sync timed after the row's steps (:mod:`pipesim.calibrate.rows`). :meth:`TrainingLog.col`
reads them per trainer step."""
SHARES = ("response_length/clip_ratio",)
"""Columns that are a share of the step's samples, in [0, 1]."""
POSITIVE = ("response_length/mean", "response_length/max", "prompt_length/mean")
"""Columns of at least 1 token: a response holds at least one token (its end) and a prompt at least
one, so no step's mean or max is below 1 (0, or a fraction of a token: a share, not a length)."""
PHASES = ("timing_s/update_actor", "timing_s/old_log_prob", "timing_s/ref")
"""The trainer's phase columns: all 0 is a phase the log did not time (the column is not used, as
an all-0 ``timing_s/param_sync`` is no sync); a single 0 among times is no phase's time (refused)."""
MAX_STEP = 10**9
"""The largest step number: a billion optimizer steps is beyond any training run (a step a second
for 30 years); a larger number is a timestamp or a sample count, not a step. The smallest is 0 (a
run's steps count up from 0 or, verl's, 1): a negative step was refused as ``first_step
(--first-step) 0 is after the log's step -1``, blaming a flag the user never passed."""
MAX_TIMING_S = MAX_STEP_TIME_S
"""The longest time a ``timing_s/*`` cell may hold, a week: one training step (or phase of one)
takes seconds to hours; a week is a unit slip (milliseconds, nanoseconds), not a step (and the
longest a calibrated time may be, :data:`pipesim.plan.runspec_calibration.MAX_STEP_TIME_S`)."""
MIN_TIMING_S = 1e-9
"""The shortest nonzero time a ``timing_s/*`` cell may hold, a nanosecond (no timer resolves less):
below it, relative residuals ``(logged - predicted) / logged`` overflow."""


class LogError(FieldError):
    """A log, a column map or a step range that cannot be read, or a :class:`TrainingLog` (or an
    argument of the calibration) that cannot be used; ``field`` names the column, key or argument.
    A :class:`~pipesim.core.validate.FieldError`, so a ``ValueError``."""

    def __init__(self, message: str, field: str = "", file: str | None = None) -> None:
        super().__init__(message, field, file)


def not_a_column(name: object) -> str:
    """Why ``name`` is not a verl metric name (with the closest one), for a message."""
    import difflib

    valid = ("step", *COLUMNS)
    close = difflib.get_close_matches(name, valid, n=1) if isinstance(name, str) else []
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"not a verl metric name{hint} (valid: {', '.join(valid)})"


OTHER_METRICS = (
    *(f"timing_s/{k}" for k in ("reward", "values", "adv", "update_critic", "testing", "save_checkpoint")),
    *(f"{k}_length/{s}" for k in ("response", "prompt") for s in ("mean", "max", "min", "clip_ratio")),
)
"""verl's metric names that calibrate does not read, and that a log holds beside :data:`COLUMNS`:
each is itself, never a misspelling of one of them (:func:`near_misses`)."""
NEAR = 0.85
"""How like a verl name (difflib's ratio, case ignored) a log's column is to be named as its likely
misspelling: ``timing_s/update_acter`` is 0.95 like ``timing_s/update_actor``."""


def near_misses(log_columns: list[str], mapping: dict[str, str]) -> list[str]:
    """A note for each verl column calibrate reads under its own name (``mapping``: verl name ->
    the log's column) that the log lacks, where a column the log has and nothing reads is likely
    that name misspelt: more like it than like any other verl name (:data:`OTHER_METRICS`), by
    :data:`NEAR`. Before, a log headed ``timing_s/update_acter`` calibrated without the phase, and
    only said "no timing_s/update_actor column"."""
    import difflib

    unread = [c for c in map(str, log_columns) if c not in mapping.values()]
    known = [k.lower() for k in (*COLUMNS, *OTHER_METRICS)]
    notes = []
    for name, source in mapping.items():
        if source != name or name in log_columns:
            continue
        for c in unread:
            like = [difflib.SequenceMatcher(None, c.lower(), k).ratio() for k in known]
            if like[known.index(name.lower())] >= max(NEAR, *like):
                notes.append(
                    f"{name}: the log has no such column, and its column {c!r} is not read: {name} "
                    f'misspelt? rename the column, or map it with --columns ([columns] "{name}" = {c!r})'
                )
                break
    return notes


STEP_SOURCE = "step_source"
"""The key of ``DataFrame.attrs`` naming the log's own step column (``--columns`` may map it), which
:func:`row_name` reads a bad cell's step from."""


def row_name(df: pd.DataFrame, i: int) -> str:
    """Row ``i`` of the log's cells as an error names it: ``step N`` where the row's step cell holds
    a step number (a whole number from 0 to :data:`MAX_STEP`), else its file line (a CSV's header
    is line 1; a JSON line's own line). A step cell of 1e308 named its row by a 309-digit number."""
    src = df.attrs.get(STEP_SOURCE, "step")
    if src in df.columns:
        v = pd.to_numeric(pd.Series([df[src].iloc[i]]), errors="coerce").iloc[0]
        if pd.notna(v) and 0 <= float(v) <= MAX_STEP and float(v).is_integer():
            return f"step {int(v)}"
    return f"line {i + (1 if df.attrs.get(TYPED) else 2)}"


TYPED = "typed"
"""The key of ``DataFrame.attrs`` that marks a frame read from a format whose cells have types
(JSON lines, :func:`pipesim.calibrate.logfile.read_frame`): there a string is no number."""


def column_numbers(p: Path, df: pd.DataFrame, name: str, source: str) -> pd.Series:
    """Column ``source`` (verl's ``name``) as floats; LogError naming the first bad cell's row: a
    cell that is no finite number, a number as text in a typed frame (:data:`TYPED`: a JSON line's
    ``"12.5"``), a value :func:`first_bad` refuses.

    Whole columns at a time: a cell's own Python check runs only where it can matter (a typed
    frame's column of mixed types, for a string or a JSON ``true``; a cell that is no number, for
    a blank). Before, two checks ran per cell of every log, and with a per-row loop of the CSV's
    reading made a 6-million-step log take 58 s to be refused."""
    col = df[source]
    num = pd.to_numeric(col, errors="coerce")
    where = f"column {shown(source)}" + (f" (verl's {name})" if source != name else "")
    # a typed column that is not all numbers (object, or pandas' str: all strings); a CSV's are text
    mixed = bool(df.attrs.get(TYPED)) and not pd.api.types.is_numeric_dtype(col.dtype)
    if mixed:  # "12.5" in a JSON line: text, which to_numeric reads as 12.5
        text = col.map(lambda v: isinstance(v, str)).astype(bool) & num.notna()
        if text.any():
            i = int(np.flatnonzero(text.to_numpy())[0])
            raise LogError(
                f"{p}: {where}, {row_name(df, i)}: {shown(col.iloc[i])} is text, not a number; write the "
                "column's numbers as JSON numbers, not strings",
                source,
            )
    bad = (num.isna() & col.notna()).to_numpy(copy=True)
    if bad.any():  # a cell that is no number: bad unless blank (an empty cell)
        bad[bad] = (col[bad].astype(str).str.strip() != "").to_numpy()
    bad |= ~np.isfinite(num.fillna(0.0).to_numpy(dtype=float))
    # a JSON true or false is no number (pandas reads it as 1 or 0): a flag in a number's column
    if col.dtype == bool:
        bad[:] = True
    elif mixed:
        bad |= col.map(lambda v: isinstance(v, bool | np.bool_)).to_numpy(dtype=bool)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        cell = col.iloc[i]  # a JSON true or false as the log writes it, not as numpy holds it
        if isinstance(cell, bool | np.bool_):
            got = "true" if cell else "false"
        elif isinstance(cell, float | np.floating):  # inf, not np.float64(inf)
            got = shown(float(cell))
        else:
            got = shown(cell)
        raise LogError(f"{p}: {where}, {row_name(df, i)}: {got} is not a finite number", source)
    problem = first_bad(name, num.to_numpy(dtype=float))
    if problem is not None:
        i, why = problem
        raise LogError(f"{p}: column {shown(source)}, {row_name(df, i)}: {num.iloc[i]:g} {why}", source)
    return num.astype(float)


def first_bad(name: str, values: np.ndarray) -> tuple[int, str] | None:
    """The first of the finite ``values`` (NaN: an empty cell, passed) of verl's column ``name``
    that no training log holds, and why (None: none): a negative time or length, a step that is
    not an integer from 0 to :data:`MAX_STEP`, a time above :data:`MAX_TIMING_S` or
    between 0 and :data:`MIN_TIMING_S`, a length below 1 token, a share above 1."""
    x = np.nan_to_num(np.asarray(values, dtype=float), nan=0.0)
    checks: list[tuple[np.ndarray, str]] = []
    if name == "step":
        checks.append(
            (
                (x < 0) | (x > MAX_STEP) | (x != np.round(x)),
                f"is not a step number (an integer from 0 to {MAX_STEP:.0e}; verl numbers its steps from 1)",
            )
        )
    else:
        checks.append((x < 0, "is negative"))
    if name.startswith("timing_s/"):
        why = (
            f"seconds is out of range (0, or {MIN_TIMING_S:g} s to a week, {MAX_TIMING_S:g} s: a unit slip?)"
        )
        checks.append(((x > MAX_TIMING_S) | ((x > 0) & (x < MIN_TIMING_S)), why))
    elif name in POSITIVE:
        below = ~np.isnan(np.asarray(values, dtype=float)) & (x >= 0) & (x < 1)
        what = "a prompt holds" if name.startswith("prompt") else "a response holds"
        checks.append((below, f"tokens is below 1: {what} at least one token"))
    if name in SHARES:
        checks.append((x > 1, "is above 1 (a share of the batch)"))
    hits = [(int(np.flatnonzero(bad)[0]), why) for bad, why in checks if bad.any()]
    return min(hits) if hits else None
