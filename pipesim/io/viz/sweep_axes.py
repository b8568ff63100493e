"""Which columns of a sweep's aggregate table are its axes, and how its cells are split and named.

The aggregate of :class:`pipesim.io.sweeps.SweepResult` holds one row per cell: the grid's label
columns first (``design``, then each ``over`` key in the order given: ``SweepResult.keys``, the
columns ``pipesim sweep --html`` splits its lines by), then ``n_seeds``, then the metrics. A
figure that draws one line, or one bar, per value of a single column (``design``) stacked every
cell of a two-axis sweep into one line or one bar: a sawtooth through both values of the other
axis, a bar summing 18 cells. :func:`split_columns` finds the columns that split the rows further,
so a figure draws one line (one bar) per cell, and :func:`ordered` puts a column's values in the
order the sweep was given them (its rows' order), numbers in numeric order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["axes_of", "cell_text", "category_order", "is_number_column", "ordered", "split_columns", "varied"]


def axes_of(agg: pd.DataFrame) -> list[str]:
    """The label columns of an aggregate table: those before ``n_seeds`` (the sweep's keys), or,
    in a table without ``n_seeds``, every column that is not a metric (``_mean``, ``_lo``, ``_hi``)."""
    cols = [str(c) for c in agg.columns]
    if "n_seeds" in cols:
        return cols[: cols.index("n_seeds")]
    return [c for c in cols if not c.endswith(("_mean", "_lo", "_hi"))]


def _n_cells(agg: pd.DataFrame, cols: Sequence[str]) -> int:
    return len(agg.drop_duplicates(list(cols))) if cols else min(len(agg), 1)


def split_columns(agg: pd.DataFrame, first: Sequence[str], candidates: Sequence[str]) -> list[str]:
    """``first``, then each of ``candidates`` that splits the rows further: a column that only
    repeats another (a design named after its policy) adds nothing and is left out."""
    cols = list(first)
    n = _n_cells(agg, cols)
    for c in candidates:
        if c in cols:
            continue
        m = _n_cells(agg, [*cols, c])
        if m > n:
            cols.append(c)
            n = m
    return cols


def varied(agg: pd.DataFrame, cols: Sequence[str]) -> list[str]:
    """The columns of ``cols`` with more than one value in ``agg``."""
    return [c for c in cols if agg[c].nunique(dropna=False) > 1]


def is_number_column(values: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(values)) and not pd.api.types.is_bool_dtype(values)


def category_order(values: pd.Series) -> list[Any]:
    """The distinct values in the order they first appear: a sweep's rows come in the order its
    ``over`` values were given, so this is that order (``Drain()`` before ``PartialRollout()`` when
    given so, not alphabetical)."""
    return list(pd.unique(values))


def ordered(agg: pd.DataFrame, cols: Sequence[str]) -> pd.DataFrame:
    """``agg``'s rows sorted by ``cols``, the first the slowest: a number column in numeric order,
    any other in the order its values were given (:func:`category_order`). Stable."""
    if not cols or len(agg) == 0:
        return agg
    keys = []
    for c in cols:
        if is_number_column(agg[c]):
            keys.append(agg[c].to_numpy(dtype=float))
        else:
            given = [v for v in category_order(agg[c]) if not pd.isna(v)]  # a missing value sorts first
            keys.append(pd.Categorical(agg[c], categories=given).codes)
    return agg.iloc[np.lexsort(keys[::-1])]


def cell_text(row: pd.Series | dict[str, Any], cols: Sequence[str], *, named: bool = False) -> str:
    """A cell's values in ``cols``, joined by ", "; ``named``: a number as ``column=value`` (a bare
    8 does not say what it counts; a policy's label, ``Drain()``, does)."""
    parts = []
    for c in cols:
        v = row[c]
        number = isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)
        parts.append(f"{c}={v}" if named and number else str(v))
    return ", ".join(parts)
