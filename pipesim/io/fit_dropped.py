"""What a fit left out of a trace, and where: the rows :func:`~pipesim.io.fit_readers.read_fit_columns`
drops, counted by column and reason and the first few named.

Dropped rows are never silent: each is counted under why (``missing``, ``not a number`` for text
such as ``12s`` or a JSON flag, ``not finite`` for ``inf``, ``not positive``, or, in a turn
column, ``below 1``: :func:`drop_reasons`), and the first :data:`SHOWN_ROWS` of each are named by
line (a CSV's, header included: :func:`row_lines`) or row (the other formats) with the cell as
written (:class:`Dropped`, its rows :class:`DroppedRow`: data that ``--json`` writes as such, not
the printed phrase, which :func:`describe_dropped` makes). Missing cells are dropped as before: a
trace's gaps are common.

Split from :mod:`pipesim.io.fit_readers`, which re-exports every name here (and
:mod:`pipesim.io.fit` the ones it did).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pipesim.core.errors import shown

__all__ = [
    "SHOWN_ROWS",
    "Dropped",
    "DroppedRow",
    "describe_dropped",
    "drop_reasons",
    "dropped_of",
    "row_labels",
    "row_lines",
]


SHOWN_ROWS = 3
"""How many rows of each kind of dropped cell a fit names (the rest are counted)."""


@dataclass(frozen=True)
class DroppedRow:
    """One dropped row named: its data row (1-based), its ``line`` in a CSV or TSV (None in the other
    formats), and its ``cell``: None where missing, the cell as written where it is no number (text,
    or a JSON true or false), else the number read (before ``--scale``; ``inf`` where not finite)."""

    row: int
    line: int | None
    cell: str | float | bool | None

    @property
    def label(self) -> str:
        """``line 5: '12s'``, ``line 9: inf``, ``row 3`` (missing): as the fit's first line names it."""
        where = f"line {self.line}" if self.line is not None else f"row {self.row}"
        if self.cell is None:
            return where
        return f"{where}: {self.cell:g}" if isinstance(self.cell, float) else f"{where}: {shown(self.cell)}"


@dataclass(frozen=True)
class Dropped:
    """Rows of a trace left out of a fit for one reason: ``count`` of them, the first
    :data:`SHOWN_ROWS` named (``rows``; ``first`` as printed, ``line 5: '12s'``)."""

    column: str
    reason: str
    count: int
    rows: tuple[DroppedRow, ...]

    @property
    def first(self) -> tuple[str, ...]:
        return tuple(r.label for r in self.rows)


def row_lines(path: str | Path, rows: list[int]) -> dict[int, int | None]:
    """The line of each of ``rows`` (0-based data rows) in a CSV or TSV (its header is line 1; a
    blank line before it is counted, and one after it is a row, as
    :func:`~pipesim.io.fit_readers.read_table` reads it); None for each in the other formats."""
    p = Path(path)
    out: dict[int, int | None] = dict.fromkeys(rows)
    if p.suffix.lower() not in (".csv", ".tsv", ".txt") or not rows:
        return out
    want, k, last = set(rows), -1, max(rows)  # k: the data row of the next non-blank line (-1: header)
    with p.open(newline="", errors="replace") as f:
        for line_no, line in enumerate(f, 1):
            if k < 0 and not line.strip():  # before the header: no row
                continue
            if k in want:
                out[k] = line_no
            k += 1
            if k > last:
                break
    return out


def row_labels(path: str | Path, rows: list[int]) -> dict[int, str]:
    """Where each of ``rows`` (0-based data rows) is in the file: ``line N`` of a CSV or TSV
    (:func:`row_lines`), else ``row N`` (1-based)."""
    return {i: f"row {i + 1}" if n is None else f"line {n}" for i, n in row_lines(path, rows).items()}


def drop_reasons(cells: pd.Series, values: np.ndarray, usable: np.ndarray, below: str) -> np.ndarray:
    """Per row, why it cannot be used (``""`` where it can)."""
    missing = cells.isna().to_numpy()
    why = np.full(len(values), "", dtype=object)
    why[~usable & np.isinf(values)] = "not finite"
    why[~usable & np.isfinite(values)] = below
    why[np.isnan(values) & ~missing] = "not a number"
    why[missing] = "missing"
    return why


def dropped_of(df: pd.DataFrame, path: str | Path, whys: list[tuple[str, np.ndarray]]) -> tuple[Dropped, ...]:
    """Each column's dropped rows by reason (``whys``: per column, :func:`drop_reasons`' array),
    counted, the first :data:`SHOWN_ROWS` of each named by line or row with the cell as written."""
    dropped = []
    for name, w in whys:
        for reason in ("missing", "not a number", "not finite", "not positive", "below 1"):
            rows = np.flatnonzero(w == reason)
            if len(rows):
                first = rows[:SHOWN_ROWS].tolist()
                lines = row_lines(path, first)
                named = tuple(DroppedRow(i + 1, lines[i], _cell(df[name], i, reason)) for i in first)
                dropped.append(Dropped(name, reason, len(rows), named))
    return tuple(dropped)


def _cell(cells: pd.Series, i: int, reason: str) -> str | float | bool | None:
    """Row ``i``'s cell as :class:`DroppedRow` holds it (the number before ``--scale``)."""
    if reason == "missing":
        return None
    cell = cells.iloc[i]
    if reason != "not a number":
        return float(pd.to_numeric(cell, errors="coerce"))
    return bool(cell) if isinstance(cell, bool | np.bool_) else str(cell)


def describe_dropped(dropped: tuple[Dropped, ...]) -> str:
    """``'d': 1 missing (line 5), 2 not finite (line 9: inf, line 12: -inf)``, columns apart by ``;``."""
    by_column: dict[str, list[str]] = {}
    for d in dropped:
        more = f", and {d.count - len(d.first):,} more" if d.count > len(d.first) else ""
        by_column.setdefault(d.column, []).append(f"{d.count:,} {d.reason} ({', '.join(d.first)}{more})")
    return "; ".join(f"{shown(c)}: {', '.join(parts)}" for c, parts in by_column.items())
