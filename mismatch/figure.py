"""Figure 13.3-style plot: CDFs of |d| per comparison, and mean |d| by engine probability.

Plotly is imported inside the functions only, so ``import mismatch`` never needs it. The figure is
built from the result dict (``samples.d`` holds every per-token difference), so JSON written on a
GPU machine without Plotly can be rendered later. Exact zeros cannot sit on a log axis; their
share is written in the legend instead. The HTML embeds plotly.js, so it renders offline, and
the figure takes the window's width.
"""

from __future__ import annotations

import html
import io
from typing import Any


def mismatch_figure(result: dict[str, Any]) -> Any:
    """Two-panel Plotly figure from a probe result -> plotly.graph_objects.Figure."""
    import plotly.graph_objects as go
    from plotly.colors import qualitative
    from plotly.subplots import make_subplots

    names = {c["key"]: c["name"] for c in result["comparisons"]}
    keys = list(dict.fromkeys([*names, *result["samples"]["d"]]))
    color = {k: qualitative.Plotly[i % len(qualitative.Plotly)] for i, k in enumerate(keys)}  # line = bars
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("CDF of |log pi_trainer - log mu| per token", "mean |d| by engine probability"),
    )
    for key, rows in result["samples"]["d"].items():
        gaps = sorted(abs(x) for row in rows for x in row)
        total = len(gaps)
        nonzero = [g for g in gaps if g > 0]
        zeros = total - len(nonzero)
        cdf = [(zeros + i + 1) / total for i in range(len(nonzero))]
        label = f"{names[key]} ({zeros / total:.0%} exactly 0)" if zeros else names[key]
        line = go.Scatter(x=nonzero, y=cdf, mode="lines", name=label, legendgroup=key, line_color=color[key])
        fig.add_trace(line, row=1, col=1)
    bins = result["bins"]
    ticks = [f"[{b['lo']:.1f}, {b['hi']:.1f}{']' if b['hi'] >= 1 else ')'} n={b['n_tokens']}" for b in bins]
    for key in names:
        vals = [b["mean_abs_d"][key] for b in bins]
        fig.add_trace(
            go.Bar(
                x=ticks,
                y=vals,
                name=names[key],
                legendgroup=key,
                showlegend=key not in result["samples"]["d"],  # else its CDF line names it
                marker_color=color[key],
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(type="log", title_text="|d| (nats)", row=1, col=1)
    fig.update_yaxes(title_text="fraction of tokens", range=[0, 1], row=1, col=1)
    fig.update_yaxes(type="log", title_text="mean |d| (nats)", row=1, col=2)
    fig.update_layout(
        title=page_title(result),
        barmode="group",
        height=520,  # no width: the window's (1,250 px fixed needed a scroll bar on a laptop)
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def page_title(result: dict[str, Any]) -> str:
    """The ``<title>`` of the page: what it shows and of which model."""
    cut = " (INCOMPLETE run)" if "incomplete" in result else ""
    return f"Training-inference mismatch: {result['model']['label']}{cut}"


def write_html(result: dict[str, Any], path: str) -> None:
    """Write the figure as a self-contained HTML file (plotly.js embedded) as wide as the window,
    titled :func:`page_title` (plotly writes no ``<title>``: the tab showed the file's name)."""
    page = io.StringIO()
    mismatch_figure(result).write_html(
        page,
        include_plotlyjs=True,
        full_html=True,
        config={"responsive": True},
        default_width="100%",
        default_height="520px",
    )
    title = f"<head><title>{html.escape(page_title(result))}</title>"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(page.getvalue().replace("<head>", title, 1))
