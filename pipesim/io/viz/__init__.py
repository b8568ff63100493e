"""Plotly figures of pipesim runs and sweeps (imports plotly; ``import pipesim`` does not).

* :func:`timeline` / :func:`timelines` -- interactive timelines of one run or several on a shared
  time axis (Figure 13.1); implemented in :mod:`pipesim.io.viz.timeline`, which documents the layout
  and when it switches to WebGL.
* :func:`staleness_throughput_figure` (Figure 13.2), :func:`lines_figure` (e.g. throughput against
  sync time, one line per design) and :func:`design_comparison_figure` -- sweep figures with 95%
  bands over seeds, in :mod:`pipesim.io.viz.sweep`.
* :func:`figures_to_html` -- several figures in one self-contained page with plotly.js inlined once.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from pipesim.io.viz.sweep import design_comparison_figure, lines_figure, staleness_throughput_figure
from pipesim.io.viz.timeline import WEBGL_THRESHOLD, segments_frame, timeline, timelines, version_colors

__all__ = [
    "WEBGL_THRESHOLD",
    "design_comparison_figure",
    "figure_div",
    "figures_to_html",
    "lines_figure",
    "plotlyjs_script",
    "segments_frame",
    "staleness_throughput_figure",
    "timeline",
    "timelines",
    "version_colors",
]


def plotlyjs_script() -> str:
    """plotly.js inlined in a ``<script>`` tag (about 4.8 MB): include it once per page."""
    from plotly.offline import get_plotlyjs

    return f'<script type="text/javascript">{get_plotlyjs()}</script>'


def figure_div(fig: go.Figure, div_id: str | None = None) -> str:
    """A figure as a ``<div>`` that relies on plotly.js already being on the page (no CDN)."""
    return fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        include_mathjax=False,
        div_id=div_id,
        config={"displaylogo": False, "responsive": True},
    )


def figures_to_html(figures: Sequence[go.Figure], title: str = "pipesim") -> str:
    """A self-contained offline page: plotly.js once in the head, then each figure's div."""
    body = "\n".join(figure_div(f) for f in figures)
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title>{plotlyjs_script()}'
        f"</head><body>{body}</body></html>"
    )
