"""The figure of :func:`pipesim.compare`: one panel per metric, a bar per design.

Split from :mod:`pipesim.io.compare`, which builds the comparison's table and calls
:func:`comparison_figure` with what to draw; that module re-exports :data:`FIGURE_METRICS` and
:data:`COMPUTE_FIGURE_METRICS`.

Design notes:

- The panels follow the engine, as the table's rows do: slot runs (and a mix of slot and compute
  runs) get :data:`FIGURE_METRICS`, designs that are all compute runs
  :data:`COMPUTE_FIGURE_METRICS`. Shares (slot utilisation, engine busy share) sit on [0, 1].
- One run per design: a bar of its value. Several seeds: a bar of the mean and an error bar of the
  95% t interval (none where there is no interval: one seed, or a design given as one run).
- A bar carries its value as the table writes it (:func:`bar_label`): d3's four significant digits
  wrote 11,820 for 11,823. The y axes use thousands separators (10,000, not 10k).
- The values are written by a text trace per panel, drawn after the bars (``fig.data`` starts with
  one bar trace per panel), each value above the top of its bar and of its error bar
  (:func:`_label_height`). A bar's own text cannot do this: inside the bar the lower whisker crossed
  it (5,011 read ",011") and a zero bar had no room for its 0; outside, the upper whisker crosses it.
  Above the whisker, a zero reads as a visible 0 with or without an interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

__all__ = ["COMPUTE_FIGURE_METRICS", "FIGURE_METRICS", "bar_label", "comparison_figure", "error_gap"]

FIGURE_METRICS = (
    ("throughput_per_hour", "episodes / hour"),
    ("gen_util", "slot utilisation"),
    ("staleness_mean", "mean staleness (versions)"),
    ("length_bias", "length bias"),
)
"""The figure's panels for slot runs (and for a mix of slot and compute runs)."""
COMPUTE_FIGURE_METRICS = (
    ("throughput_per_hour", "episodes / hour"),
    ("step_time_s_mean", "mean step (s)"),
    ("decode_tokens_per_s", "decode tokens / s"),
    ("engine_busy_share", "engine busy share"),
    ("staleness_mean", "mean staleness (versions)"),
)
"""The figure's panels when every design is a compute run."""
_SHARES = ("gen_util", "engine_busy_share")  # panels on [0, 1]


def comparison_figure(
    summaries: Mapping[str, Mapping[str, Any]],
    panels: tuple[tuple[str, str], ...],
    bounds: Mapping[str, Mapping[str, tuple[float, float]]] | None = None,
    title: str = "designs side by side (one run each)",
) -> go.Figure:
    """One panel per metric of ``panels``, a bar per design; ``bounds``: each bar's interval (lo,
    hi), drawn as an error bar (none where NaN). Each bar's value is written as the table writes it
    (:func:`bar_label`), and the y axes with thousands separators (10,000, not 10k)."""
    from pipesim.io.cli_common import fmt_number
    from pipesim.io.viz.sweep import PALETTE

    titles = [t.replace(" (", "<br>(", 1) if len(t) > 30 else t for _, t in panels]  # a long qualifier
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=titles)

    names = list(summaries)
    labels: list[tuple[int, str, list[float], list[str]]] = []  # per panel: column, name, heights, values
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(names))]
    for j, (k, label) in enumerate(panels, start=1):
        y = [float(summaries[n].get(k, float("nan"))) for n in names]
        error = None
        if bounds is not None:
            lo_hi = [bounds[n].get(k, (math.nan, math.nan)) for n in names]
            error = go.bar.ErrorY(
                type="data",
                symmetric=False,
                array=[error_gap(hi - v) for v, (_, hi) in zip(y, lo_hi)],
                arrayminus=[error_gap(v - lo) for v, (lo, _) in zip(y, lo_hi)],
            )
        text = [bar_label(v, fmt_number) for v in y]
        fig.add_trace(
            go.Bar(
                x=names,
                y=y,
                error_y=error,
                marker_color=colors,
                name=label,
                showlegend=False,
                text=text,
                hovertemplate="%{x}<br>" + label + ": %{text}<extra></extra>",
                textposition="none",  # written by the panel's text trace, above the error bar
            ),
            row=1,
            col=j,
        )
        tops = [_label_height(v, e) for v, e in zip(y, _plus(error, len(y)))]
        labels.append((j, label, tops, text))
        if k in _SHARES:
            fig.update_yaxes(range=[0, 1.1], row=1, col=j)
        else:  # room above the highest label: autorange leaves none for text
            top = max((t for t in tops if math.isfinite(t)), default=math.nan)
            if top > 0:
                fig.update_yaxes(autorangeoptions={"include": [top * 1.18]}, row=1, col=j)
    for j, label, tops, text in labels:  # after every bar: fig.data[:len(panels)] are the panels' bars
        fig.add_trace(
            go.Scatter(
                x=names,
                y=tops,
                text=text,
                mode="markers+text",
                marker={"size": 6, "opacity": 0},  # unseen: its radius is the text's gap above
                textposition="top center",  # above the bar and its upper whisker: a zero is a 0
                name=label,
                showlegend=False,
                hoverinfo="skip",
                cliponaxis=False,
            ),
            row=1,
            col=j,
        )
    fig.update_yaxes(tickformat=",", rangemode="tozero")  # 10,000 (separatethousands drew 10k)
    fig.update_layout(height=380, plot_bgcolor="white", title=title)
    return fig


def bar_label(v: float, fmt_number: Callable[[float], str]) -> str:
    """A bar's value as the table writes it, character for character (11,823 and 0.7930; d3's
    four digits wrote 11,820, and dropping trailing zeros wrote 0.793 beside the table's 0.7930);
    none where there is no value."""
    return fmt_number(v) if math.isfinite(v) else ""


def error_gap(x: float) -> float | None:
    """An error bar's length; None (no bar, not a bar of 0) where there is no interval."""
    return float(x) if math.isfinite(x) else None


def _label_height(v: float, plus: float | None) -> float:
    """Where a bar's value is written: at the top of the bar or of its upper whisker, whichever is
    higher (``plus``: the whisker's length, None where there is none), so no whisker crosses it; at
    0 for a bar below the axis; NaN (no label) where there is no value."""
    if not math.isfinite(v):
        return math.nan
    top = v + plus if plus is not None and math.isfinite(plus) and plus > 0 else v
    return max(top, 0.0)


def _plus(error: go.bar.ErrorY | None, n: int) -> list[float | None]:
    """The upper whiskers' lengths of a panel's ``n`` bars (None where a bar has none)."""
    return [None] * n if error is None else list(error.array)
