"""Adding many traces to a subplot figure in time linear in their number.

A view that draws one trace per policy version (the timeline's segments, the aggregate view's
in-flight stack) draws thousands of traces for a run of thousands of steps. ``fig.add_trace(go.X(...),
row=r, col=c)`` builds each trace twice (the object, then its copy in the figure) and places it on
its subplot through a layout lookup, about 2 ms a trace: 8,000 versions were some 20 s.
:func:`add_specs` takes the traces as plain dicts with their axes already named
(:func:`subplot_axes`) and adds them in one call, so each is built once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

__all__ = ["add_specs", "legend_entry", "subplot_axes"]


def subplot_axes(fig: go.Figure, row: int, col: int = 1) -> dict[str, str]:
    """The ``xaxis`` and ``yaxis`` a trace on subplot (``row``, ``col``) of ``fig`` names
    (``{"xaxis": "x3", "yaxis": "y3"}``), as ``add_trace(..., row=row, col=col)`` would set them."""
    sub = fig.get_subplot(row, col)
    return {
        "xaxis": sub.xaxis.plotly_name.replace("axis", ""),
        "yaxis": sub.yaxis.plotly_name.replace("axis", ""),
    }


def add_specs(fig: go.Figure, specs: Sequence[dict[str, Any]], row: int, col: int = 1) -> None:
    """Add ``specs`` (trace dicts, each with its ``type``) to subplot (``row``, ``col``) of
    ``fig``, in order, in one call."""
    axes = subplot_axes(fig, row, col)
    fig.add_traces([{**spec, **axes} for spec in specs])


def legend_entry(kind: str, name: str, color: str, showlegend: bool = True) -> dict[str, Any]:
    """A trace of ``kind`` (``"bar"``, ``"scattergl"``) that draws nothing and lists ``name`` in
    ``color`` in the legend, in the legend group ``name`` (one point at None: plotly lists no trace
    without points). The timeline lists a band of versions in :func:`~pipesim.io.viz.palette.band_color`
    with it where the band's first version has no segment of its own."""
    spec: dict[str, Any] = dict(type=kind, x=[None], y=[None], name=name, legendgroup=name)
    style = dict(marker=dict(color=color)) if kind == "bar" else dict(mode="lines", line=dict(color=color))
    return {**spec, **style, "showlegend": showlegend, "hoverinfo": "skip"}
