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
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError
from pipesim.io.parquet import read_parquet

__all__ = ["FitError", "column_values", "read_column", "read_table", "scaled"]

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
