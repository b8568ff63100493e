"""Per-bin means of intervals and the ticks of count axes: the numpy part of the aggregate view.

:func:`binned_means` is the one pass every series of :mod:`pipesim.io.viz.aggregate` is built
on (the time-weighted mean number of intervals open in each bin, per group), :func:`busy_share`
and :func:`mean_count` its one-group uses, :func:`count_ticks` the tick step of a count axis and
:func:`_support` the bins a stacked trace needs. They draw nothing (no plotly), split from the
aggregate view, which imports them (so ``from pipesim.io.viz.aggregate import count_ticks``
still works), to keep that module a readable size.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "COUNT_TICKS",
    "bin_middles",
    "bin_spans",
    "binned_means",
    "busy_share",
    "count_ticks",
    "mean_count",
]


def bin_middles(edges: np.ndarray) -> np.ndarray:
    """Where the aggregate view draws each bin's point (its middle; the line's steps fall halfway
    between two points, on the bin edges: ``pipesim.io.viz.aggregate.STEP_SHAPE``)."""
    return (edges[:-1] + edges[1:]) / 2  # type: ignore[no-any-return]


def bin_spans(edges: np.ndarray) -> np.ndarray:
    """``(n_bins, 2)``: each bin's first and last second (a hover's ``customdata``)."""
    return np.column_stack([edges[:-1], edges[1:]])


def _count_at(t: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How many intervals [start, end) hold each instant ``t``."""
    s, e = np.sort(start), np.sort(end)
    return np.searchsorted(s, t, side="right") - np.searchsorted(e, t, side="right")


def busy_share(edges: np.ndarray, start: np.ndarray, end: np.ndarray, capacity: float) -> np.ndarray:
    """Per bin between ``edges``, the interval-seconds inside it over ``capacity`` x the bin's
    width, clipped to [0, 1] (``capacity`` 1 for the trainer, ``n_slots`` for the engine)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip(np.nan_to_num(mean_count(edges, start, end) / capacity), 0.0, 1.0)


def binned_means(
    edges: np.ndarray, start: np.ndarray, end: np.ndarray, group: np.ndarray, n_groups: int
) -> np.ndarray:
    """``(n_groups, n_bins)``: per group and bin between ``edges``, the time-weighted mean number of
    the group's intervals [start, end) open in it. One pass: an interval adds its partial overlaps
    to its first and last bins and counts once in each bin it covers whole (a difference array of
    integers: a bin no interval overlaps is exactly 0, which :func:`_support` skips)."""
    n_bins = len(edges) - 1
    s = np.clip(np.asarray(start, dtype=np.float64), edges[0], edges[-1])
    e = np.clip(np.asarray(end, dtype=np.float64), edges[0], edges[-1])
    bs = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, n_bins - 1)
    be = np.clip(np.searchsorted(edges, e, side="right") - 1, 0, n_bins - 1)
    base = group.astype(np.int64) * n_bins
    one = bs == be
    part = np.where(one, e - s, edges[bs + 1] - s)  # the first bin's share (all of it in one bin)
    size = n_groups * n_bins
    seconds = np.bincount(base + bs, weights=part, minlength=size)
    seconds += np.bincount((base + be)[~one], weights=(e - edges[be])[~one], minlength=size)
    # whole bins bs+1 .. be-1 of each interval, a difference array (a group's ends before the next's)
    full = np.bincount((base + bs + 1)[~one], minlength=size) - np.bincount((base + be)[~one], minlength=size)
    whole = np.cumsum(full).reshape(n_groups, n_bins)
    width = np.diff(edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nan_to_num(seconds.reshape(n_groups, n_bins) / width) + whole
    return np.maximum(mean, 0.0)  # type: ignore[no-any-return]


def mean_count(edges: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per bin between ``edges``, the time-weighted mean number of intervals [start, end) open in it."""
    return binned_means(edges, start, end, np.zeros(len(start), dtype=np.int64), 1)[0]


COUNT_TICKS = 4
"""The fewest ticks past 0 a count axis gets (fewer than 2.5x as many: 1-2-5 steps)."""


def count_ticks(top: float) -> tuple[float, str]:
    """The tick step and d3 format of a count axis from 0 to ``top``: the largest step of 1, 2 or
    5 x 10^k giving :data:`COUNT_TICKS` ticks or more past 0, with the decimals the step has, so no
    two ticks print alike (as ``pipesim.plan.report_html.share_ticks`` does for shares)."""
    raw = max(float(top), 1e-9) / COUNT_TICKS
    exp = math.floor(math.log10(raw))
    step = next(m * 10.0**exp for m in (5, 2, 1) if m * 10.0**exp <= raw * (1 + 1e-9))
    step = float(f"{step:.12g}")  # 0.2, not 0.20000000000000001
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return step, f",.{decimals}~f" if decimals else ",d"


def _support(counts: np.ndarray) -> np.ndarray:
    """The bins where ``counts`` is not zero, and their neighbours (the zeros its line rises from
    and falls to). A stacked trace drawn on these alone looks the same (the stack takes a zero
    wherever a trace has no point: ``stackgaps="infer zero"``), and a run of thousands of versions,
    each in flight for a few bins, draws ``n_bins`` points a version no longer (8,000 versions were
    3.2M points, nearly all zeros). A version in flight at no bin's middle keeps its first bin (a
    zero): plotly lists no trace without points in the legend, and the legend lists every version."""
    nz = counts != 0
    keep = nz.copy()
    keep[1:] |= nz[:-1]
    keep[:-1] |= nz[1:]
    if len(keep) and not keep.any():
        keep[0] = True
    return keep
