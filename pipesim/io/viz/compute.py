"""Views of a compute-engine run (:func:`pipesim.compute.cluster.run_compute` with ``record=True``).

:func:`compute_view` draws, per engine replica and on one time axis, the **KV-cache occupancy**
(resident tokens over the replica's KV budget, in [0, 1]) and the **decode tokens/s** the replica
generates. Each replica's batch timeline is a step function (its values hold until the next
event), so each series is its time-weighted mean over ``n_bins`` bins, computed from cumulative
integrals: a figure's size does not grow with the run. Each replica has its own colour
(:func:`pipesim.io.viz.palette.replica_colors`: D3 up to ten, distinct colours for 48 or more) and
its name in the legend and the hover. :func:`pipesim.io.viz.run_views` adds it below the other
views when handed a ``ComputeRun`` that recorded its timelines.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pipesim.core.errors import check_int
from pipesim.core.validate import refuse
from pipesim.io.viz.palette import replica_colors

__all__ = ["binned_mean", "compute_view"]


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


def compute_view(crun: Any, title: str | None = None, *, n_bins: int = 400) -> go.Figure:
    """KV-cache occupancy and decode tokens/s per replica over time (see the module docstring)."""
    check_int("n_bins", n_bins, 1)
    if not getattr(crun, "timelines", None):
        raise refuse("compute_view", "needs a ComputeRun recorded with run_compute(..., record=True)")
    T = float(crun.result.sim_time_s)
    edges = np.linspace(0.0, T if T > 0 else 1.0, n_bins + 1)
    mid = (edges[:-1] + edges[1:]) / 2
    name = title or crun.result.scenario.name
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=(f"{name}: KV-cache occupancy per replica", "decode tokens/s per replica"),
    )
    top = 0.0
    colors = replica_colors(len(crun.timelines))  # D3 up to ten replicas, then distinct colours
    for i, (tl, stats) in enumerate(zip(crun.timelines, crun.engines)):
        if not tl:
            continue
        arr = np.asarray([(row[0], row[3], row[4]) for row in tl], dtype=np.float64)
        budget = float(stats.get("kv_budget_tokens") or 0.0)
        occ = binned_mean(arr[:, 0], arr[:, 1], edges) / budget if budget > 0 else np.zeros(n_bins)
        rate = binned_mean(arr[:, 0], arr[:, 2], edges)
        color = colors[i]
        top = max(top, float(np.clip(occ, 0.0, 1.0).max(initial=0.0)))
        for row, y, fmt in ((1, np.clip(occ, 0.0, 1.0), ".0%"), (2, rate, ",.0f")):
            fig.add_trace(
                go.Scatter(
                    x=mid,
                    y=y,
                    mode="lines",
                    line=dict(color=color, shape="hv"),
                    name=f"replica {i}",
                    legendgroup=f"r{i}",
                    showlegend=row == 1,
                    hovertemplate=f"replica {i}: %{{y:{fmt}}} at %{{x:,.0f}} s<extra></extra>",
                ),
                row=row,
                col=1,
            )
    # the KV axis ends just above the peak (a small model on a large GPU barely fills its cache)
    fig.update_yaxes(
        title_text="KV share", range=[0, min(1.05, max(top * 1.2, 0.01))], tickformat=".1%", row=1, col=1
    )
    fig.update_yaxes(title_text="tokens/s", rangemode="tozero", tickformat=",d", row=2, col=1)
    fig.update_xaxes(title_text="simulated seconds", row=2, col=1)
    fig.update_xaxes(range=[0, T * 1.01], showgrid=True, gridcolor="#eee")
    fig.update_layout(
        height=560, plot_bgcolor="white", legend_title_text="engine replica", hovermode="closest"
    )
    return fig
