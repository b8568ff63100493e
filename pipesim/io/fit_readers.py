"""Trace readers for ``pipesim fit``: a table file in, the positive values of one column out.

Design: reading is separate from fitting, so that every model sees the same cleaned sample and
every reading failure is one :class:`FitError` that names the file, the column and what is wrong
(a missing file, an unknown suffix, an unparsable file, a missing or non-numeric column, fewer than
10 usable values). The suffix chooses the reader: ``.csv``/``.txt``, ``.tsv``, ``.jsonl``/``.ndjson``,
``.json`` and ``.parquet``. Values that are missing, not numbers, not finite or not positive are
dropped and counted. In the typed formats (JSON, JSON lines, Parquet) a number written as text
(``"12.5"``) is refused, naming the column and the row: it was read as the number without a word,
so a writer that quotes its numbers passed for one that does not (a CSV's cells are all text, and
its numbers are read from it). :mod:`pipesim.io.fit` re-exports these names.

Dropped rows are never silent (:func:`read_fit_columns`): each is counted under why and the first
few are named by line or row (:mod:`pipesim.io.fit_dropped`, whose names are re-exported here). In a
CSV or TSV a blank line between the header and the last row is a row of missing cells, as a line of
separators is (pandas skips it by default, and a one-column file's gaps went uncounted); blank lines
before the header or after the last row are none (:func:`read_table`). A turn column's cell that
is a number but not a whole one (2.5), or above the agent model's ``max_turns``, is refused naming
the column and the line: it is no count of turns, or one the model cannot draw.

Size: a trace is read whole, so a file above :data:`pipesim.core.readfile.LOG_MAX_BYTES` (256 MiB,
the bound of every log the project reads) is refused before it is read, naming the file, its size
and how to take a sample of its rows (:func:`read_table`; there is no option to read only some of
them). A 30M-row CSV (245 MB) was read and fitted for 3 minutes in 2.7 GB, printing nothing, and
a 1 GB one would have run past 10 minutes and 10 GB. The fit's time grows with the rows (about 5 s
per million, most of it the agent fit's bootstrap, on a 2-core machine), so a trace near the bound
still takes minutes: :func:`trace_rows` counts the rows cheaply (a scan for line ends, or Parquet's
footer) so that ``pipesim fit`` can say so before it starts. Lines are counted once, where pandas
ends them (:func:`pipesim.io.trace_bounds.scan_lines`, which ``pipesim trace``'s bound asks too).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd

from pipesim.core.errors import shown
from pipesim.core.readfile import LOG_MAX_BYTES, read_bytes
from pipesim.core.validate import FieldError
from pipesim.io.fit_dropped import (
    SHOWN_ROWS,
    Dropped,
    DroppedRow,
    describe_dropped,
    drop_reasons,
    dropped_of,
    row_labels,
    row_lines,
)
from pipesim.io.parquet import read_parquet
from pipesim.io.trace_bounds import scan_lines

__all__ = [
    "SHOWN_ROWS",
    "Dropped",
    "DroppedRow",
    "FitError",
    "check_turns",
    "column_values",
    "describe_dropped",
    "read_column",
    "read_fit_columns",
    "read_table",
    "row_labels",
    "row_lines",
    "scaled",
    "trace_rows",
]

MIN_VALUES = 10
"""The fewest usable values a fit accepts."""


class FitError(FieldError):
    """A trace that cannot be fitted (names the file, the column and what is wrong): a
    :class:`~pipesim.core.validate.FieldError` whose ``field`` is the column (or the flag,
    ``--scale``) and ``file`` the trace, ``""`` and the file where the whole file is refused."""


TEXT_SUFFIXES = (".csv", ".tsv", ".txt", ".jsonl", ".ndjson")
"""The formats with one row per line (a header line, in the CSVs)."""


def _sample_hint(p: Path) -> str:
    """How to cut a random sample of the rows of ``p``, in its format (no option reads fewer)."""
    name, suffix = shown(str(p)), p.suffix.lower()
    if suffix in (".csv", ".tsv", ".txt"):
        cmd = f"(head -n 1 {name}; tail -n +2 {name} | shuf -n 1000000) > sample{suffix}"
        return f"`{cmd}` (the header and a million random rows)"
    if suffix in (".jsonl", ".ndjson"):
        return f"`shuf -n 1000000 {name} > sample{suffix}` (a million random rows)"
    return f"`df.sample(n=1_000_000, random_state=0)` of the table in pandas, written as {suffix}"


def _read_capped(p: Path) -> bytes:
    """The bytes of ``p``, refused (FitError naming the file, its size and the remedy) past
    :data:`LOG_MAX_BYTES` before any is read: a FIFO, a device or a directory is refused too."""
    try:
        return read_bytes(p, "traces pipesim fit reads", LOG_MAX_BYTES)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno == errno.EFBIG:
            why += f"; fit a random sample of its rows, e.g. {_sample_hint(p)}"
        raise FitError(f"{p}: cannot read: {why}", "", str(p)) from None


def read_table(path: str | Path) -> pd.DataFrame:
    """The trace as a table, read by its suffix; FitError says why it cannot be read (a file above
    :data:`~pipesim.core.readfile.LOG_MAX_BYTES` is refused before it is read). A CSV's or TSV's
    blank line among its rows is a row of missing cells (:func:`_read_text_table`)."""
    p = Path(path)
    if not os.path.lexists(p):  # a directory, a FIFO, a device link: _read_capped says which
        raise FitError(f"{p}: no such file", "", str(p))
    suffix = p.suffix.lower()
    if suffix not in (*TEXT_SUFFIXES, ".json", ".parquet"):
        raise FitError(
            f"{p}: give a .csv, .tsv, .jsonl, .json or .parquet file, got {shown(suffix or 'no suffix')}",
            "",
            str(p),
        )
    data = _read_capped(p)
    if not data.strip():  # pandas said "No columns to parse from file", or "Expected object or value"
        what = " (no header, no rows)" if suffix in (".csv", ".tsv", ".txt") else ""
        raise FitError(f"{p}: the file is empty{what}", "", str(p))
    try:
        if suffix in (".jsonl", ".ndjson"):  # a true stays a bool, not 1
            return _typed(pd.read_json(io.BytesIO(data), lines=True, dtype=False))
        if suffix == ".json":
            return _typed(pd.read_json(io.BytesIO(data), dtype=False))
        if suffix == ".parquet":
            return _typed(read_parquet(data))
        sep = "\t" if suffix == ".tsv" else ","
        df = _read_text_table(data, sep)
        # the header as written: pandas renames a repeated name (d, d.1), and the fit would
        # read the first of two columns without a word (column_values refuses it)
        df.attrs["header"] = list(
            pd.read_csv(io.BytesIO(data), sep=sep, header=None, nrows=1, dtype=str).iloc[0]
        )
        return df
    except (ValueError, OSError) as exc:
        raise FitError(
            f"{p}: cannot read it as {suffix[1:]}: {' '.join(str(exc).split())}", "", str(p)
        ) from None


_LEADING_BLANK = re.compile(rb"(?:[ \t\f\v]*(?:\r\n|\r|\n))*")
_LINE_END = re.compile(rb"\r\n|\r|\n")


def _read_text_table(data: bytes, sep: str) -> pd.DataFrame:
    r"""A CSV's or TSV's rows, a blank line among them a row of missing cells: in a one-column
    file a blank line is its missing cell, which pandas' default skipped without a word (a
    two-column file's ``,`` line was counted missing, the same gap written as an empty line was
    not). Blank lines before the header and after the last row are no rows (a file's final line
    end, or an editor's extra one, is no missing cell). A file without a blank line is read as
    it always was: pandas' rows are then its lines past the header (a count of line ends where
    pandas ends lines, :func:`~pipesim.io.trace_bounds.scan_lines`, 30 ms for 55 MB, where a
    regular expression for blank lines took 0.9 s; a count of ``\n`` alone missed the blank line
    of a file with a lone ``\r``); where they are not (a blank line, or a quoted cell that holds a
    line end), it is read again with its blank lines kept."""
    df = pd.read_csv(io.BytesIO(data), sep=sep)
    if len(df) == scan_lines((data,)).lines - 1:
        return df
    start = _LEADING_BLANK.match(data).end()  # type: ignore[union-attr]  # it matches empty
    last = _LINE_END.search(data, len(data.rstrip(b" \t\r\f\v\n")))  # the last row's line end
    body = data[start : len(data) if last is None else last.end()]
    df = pd.read_csv(io.BytesIO(body), sep=sep, skip_blank_lines=False)
    if len(df.columns) and not pd.api.types.is_numeric_dtype(df.iloc[:, 0].dtype):
        # a line of spaces reads as its first cell, the others missing: that cell is missing too
        first = df.iloc[:, 0]
        spaces = first.map(lambda v: isinstance(v, str) and not v.strip()).to_numpy(dtype=bool)
        space = spaces & df.iloc[:, 1:].isna().all(axis=1).to_numpy(dtype=bool)
        if space.any():
            first = first.mask(space)
            with contextlib.suppress(ValueError, TypeError):  # numbers, as pandas reads them
                first = pd.to_numeric(first)
            df[df.columns[0]] = first
    return df


def trace_rows(path: str | Path) -> int | None:
    """About how many rows the trace at ``path`` holds, without reading it as a table: the lines of
    a CSV or JSON-lines file (:func:`~pipesim.io.trace_bounds.scan_lines` in blocks of 16 MiB,
    about 0.2 s per 256 MiB; a header or a blank line counts too, since a note needs no more; the
    bound that must not exceed pandas' rows is :func:`~pipesim.io.trace_bounds.csv_rows_at_least`),
    a Parquet file's row count from its footer. None where it cannot say cheaply: a JSON array, a
    file :func:`read_table` refuses (past the cap, not a regular file)."""
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError:
        return None
    suffix = p.suffix.lower()
    if not stat.S_ISREG(st.st_mode) or st.st_size > LOG_MAX_BYTES:
        return None
    try:
        if suffix == ".parquet":
            from pipesim.io.parquet import parquet_rows

            return parquet_rows(p)  # the footer only
        if suffix in TEXT_SUFFIXES:
            with p.open("rb") as f:
                return scan_lines(iter(lambda: f.read(16 << 20), b"")).lines
    except (OSError, ValueError):  # unreadable or no Parquet: read_table says why
        return None
    return None


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    """``df``, marked as read from a format whose cells have types (a number is no string)."""
    df.attrs["typed"] = True
    return df


def column_values(df: pd.DataFrame, path: str | Path, column: str) -> pd.Series:
    """``column`` of ``df`` as numbers (NaN where a cell is not one); FitError when it has none."""
    if column not in df.columns:
        raise FitError(
            f"{path}: no column {shown(column)}; the columns are {', '.join(map(str, df.columns))}",
            str(column),
            str(path),
        )
    if list(df.attrs.get("header", ())).count(column) > 1:
        raise FitError(
            f"{path}: column {shown(column)} is given twice in the header; keep one", str(column), str(path)
        )
    cells = df[column]
    col = pd.to_numeric(cells, errors="coerce")
    # a column of numbers holds no string and no flag: it is not scanned cell by cell (a CSV's
    # float column: 5 s of a 10M-row fit's 44 s); objects, text and categories are
    mixed = not pd.api.types.is_numeric_dtype(cells.dtype)
    if df.attrs.get("typed") and mixed:  # "12.5" in a JSON or Parquet table: text, which to_numeric reads
        quoted = cells.map(lambda v: isinstance(v, str)).astype(bool) & col.notna()
        if quoted.any():
            i = int(np.flatnonzero(quoted.to_numpy())[0])
            raise FitError(
                f"{path}: column {shown(column)}, row {i + 1}: {shown(cells.iloc[i])} is text, not a "
                "number; write the column's numbers as numbers, not strings",
                str(column),
                str(path),
            )
    # a JSON true or false is no duration (pandas reads it as 1 or 0): dropped with the other
    # cells that are not numbers, and counted as such
    if pd.api.types.is_bool_dtype(cells.dtype):
        col = col.mask(np.ones(len(col), dtype=bool))
    elif mixed:
        flags = cells.map(lambda v: isinstance(v, bool | np.bool_)).astype(bool)
        if flags.any():
            col = col.mask(flags.to_numpy())
    if col.notna().sum() == 0:
        raise FitError(f"{path}: column {shown(column)} holds no numbers", str(column), str(path))
    return col


def scaled(values: pd.Series, scale: float, path: str | Path, column: str) -> np.ndarray:
    """``values`` times ``scale`` as floats; FitError naming ``--scale`` where a finite value
    becomes infinite (1e308 made every row unusable, and the error blamed the column)."""
    x = values.to_numpy(dtype=np.float64)
    with np.errstate(over="ignore"):
        out = x * scale
    over = np.isfinite(x) & ~np.isfinite(out)
    if over.any():
        raise FitError(
            f"--scale {scale:g}: column {shown(column)} of {path} times it overflows "
            f"(e.g. {x[over][0]:g} x {scale:g}); a scale is seconds per unit, e.g. 0.025",
            "--scale",
            str(path),
        )
    return out


def read_column(path: str | Path, column: str, scale: float = 1.0) -> tuple[np.ndarray, int]:
    """The finite positive values of ``column`` (times ``scale``) and how many rows were dropped."""
    col = scaled(column_values(read_table(path), path, column), scale, path, column)
    keep = np.isfinite(col) & (col > 0)
    if keep.sum() < MIN_VALUES:
        raise FitError(
            f"{path}: column {shown(column)} has {int(keep.sum())} positive values; at least 10 needed",
            str(column),
            str(path),
        )
    return col[keep], int((~keep).sum())


def _rows(n: int) -> str:
    return f"{n:,} row" + ("" if n == 1 else "s")


def _turn_refusals(path: str | Path, t: np.ndarray, name: str, max_turns: int) -> None:
    """FitError naming the turn column and the line of its first fractional count, or of its
    first count above ``max_turns`` (the model caps an episode there: read as the grid's edge)."""
    for bad, what in (
        (np.isfinite(t) & (t != np.floor(t)), "is not a whole number of turns"),
        (np.isfinite(t) & (t > max_turns), f"is above the agent model's max_turns ({max_turns})"),
    ):
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            fix = (
                "give each episode's count of turns"
                if "whole" in what
                else f"fit against a base whose AgentDurations has max_turns >= {int(np.nanmax(t[bad]))} "
                "(--base SCENARIO, or base= in the API)"
            )
            raise FitError(
                f"{path}: column {shown(name)}, {row_labels(path, [i])[i]}: {t[i]:g} {what} "
                f"({_rows(int(bad.sum()))} such); {fix}",
                name,
                str(path),
            )


def read_fit_columns(
    path: str | Path, column: str, turns_column: str | None, scale: float, max_turns: int
) -> tuple[np.ndarray, np.ndarray | None, int, tuple[Dropped, ...]]:
    """The usable values of ``column`` (times ``scale``) and of ``turns_column``, row by row, how many
    rows were dropped and why (:class:`Dropped`); FitError where fewer than :data:`MIN_VALUES` rows
    are usable, or for a turn count that is no whole number or above ``max_turns``."""
    df = read_table(path)
    col = scaled(column_values(df, path, column), scale, path, column)
    ok = np.isfinite(col) & (col > 0)
    why = drop_reasons(df[column], col, ok, "not positive")
    keep, turns, t_ok = ok, None, ok
    whys = [(column, why)]
    if turns_column is not None:
        t = column_values(df, path, turns_column).to_numpy(dtype=np.float64)
        _turn_refusals(path, t, turns_column, max_turns)
        t_ok = np.isfinite(t) & (t >= 1)
        whys.append(
            (turns_column, np.where(why == "", drop_reasons(df[turns_column], t, t_ok, "below 1"), ""))
        )
        keep = ok & t_ok
        turns = t[keep]
    if keep.sum() < MIN_VALUES:
        bad = turns_column if turns_column is not None and ok.sum() >= MIN_VALUES else column
        need = f"{shown(column)} > 0" + (f", {shown(turns_column)} >= 1" if turns_column else "")
        raise FitError(
            f"{path}: column {shown(bad)} {'leaves' if keep.sum() < len(df) else 'has'} "
            f"{int(keep.sum())} usable row{'' if keep.sum() == 1 else 's'} ({need}); "
            f"at least {MIN_VALUES} needed",
            str(bad),
            str(path),
        )
    return col[keep], turns, int((~keep).sum()), dropped_of(df, path, whys)


def check_turns(turns: np.ndarray, cap: int, source: str) -> None:
    """FitError naming ``turns`` and the first count (by index) that is no whole number or above
    ``cap``: the API's arrays, as :func:`read_fit_columns` refuses a file's column by its line."""
    for bad, what in (
        (np.isfinite(turns) & (turns != np.floor(turns)), "is not a whole number of turns"),
        (np.isfinite(turns) & (turns > cap), f"is above the agent model's max_turns ({cap}); fit against "
         "a base whose AgentDurations has max_turns that high (--base SCENARIO, or base= in the API)"),
    ):  # fmt: skip
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise FitError(f"{source}: turns[{i}] = {turns[i]:g} {what}", "turns", source)
