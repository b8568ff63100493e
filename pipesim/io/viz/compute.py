"""Views of a compute-engine run (:func:`pipesim.compute.cluster.run_compute` with ``record=True``).

:func:`compute_view` draws, on one time axis, the **KV-cache occupancy** of each engine replica
(resident tokens over the replica's KV budget, in [0, 1]) and the **decode tokens/s** it generates.
Both come from the run's binned series (``ComputeRun.replica_timeline``,
:class:`pipesim.compute.series.ReplicaSeries`), whose bins integrate to each replica's own counters:
each panel is the series' mean over ``n_bins`` bins of its own, re-binned through cumulative
integrals (:func:`rebinned_mean`), so the tokens/s panel integrates to the replica's
``tokens_generated`` and a figure's size does not grow with the run. The batch timeline
(``ComputeRun.timelines``) is not used: its rows record the rate *if* decoding, held through
prefill stalls and sync pauses, and read 7% above the tokens the replicas generated. Up to
:data:`PER_REPLICA_MAX` replicas, each has its own line, colour
(:func:`pipesim.io.viz.palette.replica_colors`) and name in the legend and the hover;
above it (48 replicas drew a tangle with a scrolling 48-entry legend) each panel draws the median
across replicas per bin with a min-max band, three traces whatever the number of replicas, and the
hover names the replicas at the min and the max (``per_replica=`` draws one way whatever the
count). :func:`pipesim.io.viz.run_views` adds it below
the other views when handed a ``ComputeRun`` that recorded its timelines.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pipesim.core.errors import check_int, shown
from pipesim.core.validate import refuse
from pipesim.io.viz.aggregate import TIME_FORMAT
from pipesim.io.viz.palette import replica_colors
from pipesim.io.viz.sweep import NUM

__all__ = ["PER_REPLICA_MAX", "binned_mean", "compute_view", "rebinned_mean"]


def binned_mean(t: np.ndarray, v: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Time-weighted mean per bin of the step function that is ``v[i]`` from ``t[i]`` to ``t[i+1]``
    (0 before ``t[0]``; the last value holds to the last edge)."""
    t = np.asarray(t, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if len(t) == 0:
        return np.zeros(len(edges) - 1)
    knots = np.concatenate([t, [max(float(edges[-1]), float(t[-1]))]])
    area = np.concatenate([[0.0], np.cumsum(v * np.diff(knots))])  # integral at each knot

    def integral(x: np.ndarray) -> np.ndarray:
        k = np.clip(np.searchsorted(knots, x, side="right") - 1, 0, len(t) - 1)
        inside = x >= knots[0]
        return np.where(inside, area[k] + v[k] * (x - knots[k]), 0.0)  # type: ignore[no-any-return]

    width = np.diff(edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(np.diff(integral(edges)) / width)  # type: ignore[no-any-return]


def rebinned_mean(t0: np.ndarray, t1: np.ndarray, amount: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Mean rate per bin of ``edges`` of the quantity that adds ``amount[i]`` evenly over
    ``[t0[i], t1[i])`` (contiguous, rising intervals; nothing outside them): the bins of ``edges``
    integrate to ``amount.sum()`` where they cover the intervals."""
    t0, t1 = np.asarray(t0, dtype=np.float64), np.asarray(t1, dtype=np.float64)
    if len(t0) == 0:
        return np.zeros(len(edges) - 1)
    knots = np.concatenate([t0[:1], t1])
    area = np.concatenate([[0.0], np.cumsum(np.asarray(amount, dtype=np.float64))])
    width = np.diff(edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(np.diff(np.interp(edges, knots, area)) / width)  # type: ignore[no-any-return]


PER_REPLICA_MAX = 8
"""Most replicas :func:`compute_view` draws one line each; above it, the median with a min-max band."""
SPREAD_COLOR, SPREAD_FILL = "#1f77b4", "rgba(31,119,180,0.2)"


def compute_view(
    crun: Any, title: str | None = None, *, n_bins: int = 400, per_replica: bool | None = None
) -> go.Figure:
    """KV-cache occupancy and decode tokens/s over time: per replica up to :data:`PER_REPLICA_MAX`
    replicas, their median and min-max band above it (see the module docstring); ``per_replica``
    True or False draws one way whatever the count."""
    check_int("n_bins", n_bins, 1)
    if per_replica is not None and not isinstance(per_replica, bool):
        raise refuse("per_replica", f"must be True, False or None, got {shown(per_replica)}")
    series = getattr(crun, "replica_timeline", None)
    if series is None or len(series) == 0:
        raise refuse("compute_view", "needs a ComputeRun recorded with run_compute(..., record=True)")
    T = float(crun.result.sim_time_s)
    edges = np.linspace(0.0, T if T > 0 else 1.0, n_bins + 1)
    mid = (edges[:-1] + edges[1:]) / 2
    name = title or crun.result.scenario.name
    ids, occs, rates = [], [], []
    for i, r in series.groupby("replica", sort=True):
        t0, t1 = r["t_start_s"].to_numpy(), r["t_end_s"].to_numpy()
        kv_s = np.nan_to_num(r["kv_occupancy"].to_numpy() * (t1 - t0))  # share x seconds per bin
        ids.append(int(i))  # type: ignore[call-overload]
        occs.append(np.clip(rebinned_mean(t0, t1, kv_s, edges), 0.0, 1.0))
        rates.append(rebinned_mean(t0, t1, r["tokens"].to_numpy(), edges))
    spread = bool(ids) and (len(ids) > PER_REPLICA_MAX if per_replica is None else not per_replica)
    what = f"median of {len(ids)} replicas, band min to max" if spread else "per replica"
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=(f"{name}: KV-cache occupancy, {what}", f"decode tokens/s, {what}"),
    )
    panels = ((1, occs, ".1%"), (2, rates, NUM))
    if spread:
        for row, series, fmt in panels:
            _add_spread(fig, row, mid, np.vstack(series), np.asarray(ids), fmt)
    else:
        # D3 up to ten replicas, then distinct colours
        colors = replica_colors(max(len(crun.engines), max(ids) + 1))
        for row, series, fmt in panels:
            for i, y in zip(ids, series):
                fig.add_trace(
                    go.Scatter(
                        x=mid,
                        y=y,
                        mode="lines",
                        line=dict(color=colors[i], shape="hv"),
                        name=f"replica {i}",
                        legendgroup=f"r{i}",
                        showlegend=row == 1,
                        hovertemplate=f"replica {i}: %{{y:{fmt}}} at %{{x:,.0f}} s<extra></extra>",
                    ),
                    row=row,
                    col=1,
                )
    # the KV axis ends just above the peak (a small model on a large GPU barely fills its cache)
    top = max((float(o.max(initial=0.0)) for o in occs), default=0.0)
    fig.update_yaxes(
        title_text="KV share", range=[0, min(1.05, max(top * 1.2, 0.01))], tickformat=".1%", row=1, col=1
    )
    fig.update_yaxes(title_text="tokens/s", rangemode="tozero", tickformat=",d", row=2, col=1)
    fig.update_xaxes(title_text="simulated seconds", row=2, col=1)
    fig.update_xaxes(range=[0, T * 1.01], showgrid=True, gridcolor="#eee", tickformat=TIME_FORMAT)
    legend = f"{len(ids)} engine replicas" if spread else "engine replica"
    fig.update_layout(height=560, plot_bgcolor="white", legend_title_text=legend, hovermode="closest")
    return fig


def _add_spread(fig: go.Figure, row: int, x: np.ndarray, ys: np.ndarray, ids: np.ndarray, fmt: str) -> None:
    """Three traces in ``row``: the min and the max of ``ys`` (one row per replica) per bin as a
    band, and their median as a line whose hover names the replicas at the min and the max."""
    lo, hi, med = ys.min(axis=0), ys.max(axis=0), np.median(ys, axis=0)
    at_lo, at_hi = ids[ys.argmin(axis=0)], ids[ys.argmax(axis=0)]
    n = len(ids)
    common = dict(x=x, mode="lines", legendgroup="band", hoverinfo="skip", line=dict(width=0, shape="hv"))
    fig.add_trace(go.Scatter(y=lo, showlegend=False, name="min", **common), row=row, col=1)
    fig.add_trace(
        go.Scatter(
            y=hi,
            fill="tonexty",
            fillcolor=SPREAD_FILL,
            name=f"min to max of {n} replicas",
            showlegend=row == 1,
            **common,
        ),
        row=row,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=med,
            mode="lines",
            line=dict(color=SPREAD_COLOR, shape="hv"),
            name=f"median of {n} replicas",
            legendgroup="median",
            showlegend=row == 1,
            customdata=np.column_stack([lo, at_lo, hi, at_hi]),
            hovertemplate=f"median of {n} replicas: %{{y:{fmt}}} at %{{x:,.0f}} s<br>"
            f"min %{{customdata[0]:{fmt}}} (replica %{{customdata[1]}}), "
            f"max %{{customdata[2]:{fmt}}} (replica %{{customdata[3]}})<extra></extra>",
        ),
        row=row,
        col=1,
    )
