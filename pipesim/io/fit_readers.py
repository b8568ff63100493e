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

Dropped rows are never silent (:func:`read_fit_columns`): each is counted under why (``missing``,
``not a number`` for text such as ``12s`` or a JSON flag, ``not finite`` for ``inf``, ``not
positive``, or, in a turn column, ``below 1``), and the first few of each are named by line (a
CSV's, header included) or row (the other formats) with the cell as written (:class:`Dropped`).
Missing cells are dropped as before: a trace's gaps are common. A turn column's cell that is a
number but not a whole one (2.5), or above the agent model's ``max_turns``, is refused naming the
column and the line: it is no count of turns, or one the model cannot draw.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError
from pipesim.io.parquet import read_parquet

__all__ = [
    "Dropped",
    "FitError",
    "check_turns",
    "column_values",
    "describe_dropped",
    "read_column",
    "read_fit_columns",
    "read_table",
    "row_labels",
    "scaled",
]

MIN_VALUES = 10
"""The fewest usable values a fit accepts."""


class FitError(FieldError):
    """A trace that cannot be fitted (names the file, the column and what is wrong): a
    :class:`~pipesim.core.validate.FieldError` whose ``field`` is the column (or the flag,
    ``--scale``) and ``file`` the trace, ``""`` and the file where the whole file is refused."""


def read_table(path: str | Path) -> pd.DataFrame:
    """The trace as a table, read by its suffix; FitError says why it cannot be read."""
    p = Path(path)
    if not p.is_file():
        raise FitError(f"{p}: no such file", "", str(p))
    suffix = p.suffix.lower()
    try:
        if suffix in (".jsonl", ".ndjson"):
            return _typed(pd.read_json(p, lines=True, dtype=False))  # a true stays a bool, not 1
        if suffix == ".json":
            return _typed(pd.read_json(p, dtype=False))
        if suffix in (".csv", ".tsv", ".txt"):
            sep = "\t" if suffix == ".tsv" else ","
            df = pd.read_csv(p, sep=sep)
            # the header as written: pandas renames a repeated name (d, d.1), and the fit would
            # read the first of two columns without a word (column_values refuses it)
            df.attrs["header"] = list(pd.read_csv(p, sep=sep, header=None, nrows=1, dtype=str).iloc[0])
            return df
        if suffix == ".parquet":
            return _typed(read_parquet(p))
    except (ValueError, OSError) as exc:
        raise FitError(
            f"{p}: cannot read it as {suffix[1:]}: {' '.join(str(exc).split())}", "", str(p)
        ) from None
    raise FitError(
        f"{p}: give a .csv, .tsv, .jsonl, .json or .parquet file, got {shown(suffix or 'no suffix')}",
        "",
        str(p),
    )


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
    col = pd.to_numeric(df[column], errors="coerce")
    if df.attrs.get("typed"):  # "12.5" in a JSON or Parquet table: text, which to_numeric reads
        quoted = df[column].map(lambda v: isinstance(v, str)).astype(bool) & col.notna()
        if quoted.any():
            i = int(np.flatnonzero(quoted.to_numpy())[0])
            raise FitError(
                f"{path}: column {shown(column)}, row {i + 1}: {shown(df[column].iloc[i])} is text, not a "
                "number; write the column's numbers as numbers, not strings",
                str(column),
                str(path),
            )
    # a JSON true or false is no duration (pandas reads it as 1 or 0): dropped with the other
    # cells that are not numbers, and counted as such
    flags = df[column].map(lambda v: isinstance(v, bool | np.bool_)).astype(bool)
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


# -- what was dropped, and where -------------------------------------------------------------------
SHOWN_ROWS = 3
"""How many rows of each kind of dropped cell a fit names (the rest are counted)."""


@dataclass(frozen=True)
class Dropped:
    """Rows of a trace left out of a fit for one reason: ``count`` of them, the first
    :data:`SHOWN_ROWS` named (``line 5: '12s'``)."""

    column: str
    reason: str
    count: int
    first: tuple[str, ...]


def row_labels(path: str | Path, rows: list[int]) -> dict[int, str]:
    """Where each of ``rows`` (0-based data rows) is in the file: ``line N`` of a CSV or TSV (its
    header is line 1; blank lines, which the reader skips, are counted), else ``row N`` (1-based)."""
    p = Path(path)
    out = {i: f"row {i + 1}" for i in rows}
    if p.suffix.lower() not in (".csv", ".tsv", ".txt") or not rows:
        return out
    want, k, last = set(rows), -1, max(rows)  # k: the data row of the next non-blank line (-1: header)
    with p.open(newline="", errors="replace") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            if k in want:
                out[k] = f"line {line_no}"
            k += 1
            if k > last:
                break
    return out


def _rows(n: int) -> str:
    return f"{n:,} row" + ("" if n == 1 else "s")


def _reasons(cells: pd.Series, values: np.ndarray, usable: np.ndarray, below: str) -> np.ndarray:
    """Per row, why it cannot be used (``""`` where it can)."""
    missing = cells.isna().to_numpy()
    why = np.full(len(values), "", dtype=object)
    why[~usable & np.isinf(values)] = "not finite"
    why[~usable & np.isfinite(values)] = below
    why[np.isnan(values) & ~missing] = "not a number"
    why[missing] = "missing"
    return why


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
    why = _reasons(df[column], col, ok, "not positive")
    keep, turns, t_ok = ok, None, ok
    whys = [(column, why)]
    if turns_column is not None:
        t = column_values(df, path, turns_column).to_numpy(dtype=np.float64)
        _turn_refusals(path, t, turns_column, max_turns)
        t_ok = np.isfinite(t) & (t >= 1)
        whys.append((turns_column, np.where(why == "", _reasons(df[turns_column], t, t_ok, "below 1"), "")))
        keep = ok & t_ok
        turns = t[keep]
    if keep.sum() < MIN_VALUES:
        bad = turns_column if turns_column is not None and ok.sum() >= MIN_VALUES else column
        need = f"{shown(column)} > 0" + (f", {shown(turns_column)} >= 1" if turns_column else "")
        raise FitError(
            f"{path}: column {shown(bad)} leaves {int(keep.sum())} usable rows ({need}); "
            f"at least {MIN_VALUES} needed",
            str(bad),
            str(path),
        )
    dropped = []
    for name, w in whys:
        for reason in ("missing", "not a number", "not finite", "not positive", "below 1"):
            rows = np.flatnonzero(w == reason)
            if len(rows):
                first = rows[:SHOWN_ROWS].tolist()
                where = row_labels(path, first)
                number = pd.to_numeric(df[name], errors="coerce")  # the cell's own number, before --scale
                shown_rows = tuple(
                    where[i]
                    + (
                        ""
                        if reason == "missing"
                        else f": {shown(df[name].iloc[i])}"
                        if reason == "not a number"
                        else f": {number.iloc[i]:g}"
                    )
                    for i in first
                )
                dropped.append(Dropped(name, reason, len(rows), shown_rows))
    return col[keep], turns, int((~keep).sum()), tuple(dropped)


def describe_dropped(dropped: tuple[Dropped, ...]) -> str:
    """``'d': 1 missing (line 5), 2 not finite (line 9: inf, line 12: -inf)``, columns apart by ``;``."""
    by_column: dict[str, list[str]] = {}
    for d in dropped:
        more = f", and {d.count - len(d.first):,} more" if d.count > len(d.first) else ""
        by_column.setdefault(d.column, []).append(f"{d.count:,} {d.reason} ({', '.join(d.first)}{more})")
    return "; ".join(f"{shown(c)}: {', '.join(parts)}" for c, parts in by_column.items())


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
