"""Sweep figures: lines with 95% bands over seeds, and a design comparison.

All functions take the aggregate table of :class:`pipesim.io.sweeps.SweepResult` (columns
``<metric>_mean``, ``_lo``, ``_hi``), so they draw whatever a sweep produced, on one seed (no band)
or many. Bands are filled polygons under each line, in the line's colour. Legends carry a title
(what the lines are: the ``by`` column), a parameter whose values are all integers gets integer
ticks (no "1.5 slots"), and bands of a share (a utilisation, an idle ratio) are clipped to [0, 1].
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pipesim.core.validate import FieldError
from pipesim.io.viz.palette import PALETTE
from pipesim.io.viz.sweep_axes import (
    axes_of,
    category_order,
    cell_text,
    is_number_column,
    ordered,
    split_columns,
    varied,
)


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color.lstrip("#")[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


SHARE_METRICS = (
    "gen_util",
    "gen_util_active",
    "gen_util_total",
    "trainer/idle_ratio",
    "rollouter/idle_ratio",
    "never_trained_share",
    "truncated_share",
)
"""Metrics that are shares: their 95% bands are clipped to [0, 1]."""


METRIC_LABELS = {
    "throughput_per_hour": "episodes trained per hour",
    "gen_util": "slot utilisation (share)",
    "staleness_mean": "mean staleness (versions)",
    "staleness_max": "max staleness (versions)",
    "length_bias": "length bias (trained / launched mean duration)",
    "trained_duration_mean": "trained episode mean duration (s)",
    "sim_time_s": "simulated time (s)",
    "lost_work_s": "lost work (s)",
}
"""Axis titles, with units, of the metrics a sweep figure draws by default; others are put in words."""
PARAM_LABELS = {
    "max_staleness": "staleness bound eta",
    "n_slots": "generation slots",
    "batch_size": "batch size B",
    "steps": "training steps",
}
"""Words for the parameters a sweep often varies (a column name in seconds reads "... (s)" anyway)."""


NUM = ",.4~r"
"""The d3 format of a number in hover text: four significant digits in decimal notation with
thousands separators (2,110, 0.9525, 28,100). ``.3g`` wrote a throughput of 2110 as 2.11e+3."""


def words(name: str) -> str:
    """A column name as words: ``sync_time_s`` -> ``sync time (s)``, ``trainer/idle_ratio`` ->
    ``trainer idle ratio``."""
    if name in PARAM_LABELS:
        return PARAM_LABELS[name]
    unit = " (s)" if name.endswith("_s") else ""
    base = name[:-2] if unit else name
    return re.sub(r"[_/]+", " ", base).strip() + unit


def metric_label(metric: str) -> str:
    """The axis title of ``metric``: :data:`METRIC_LABELS`, a share's name in words with "(share)",
    or its name in words (:func:`words`)."""
    if metric in METRIC_LABELS:
        return METRIC_LABELS[metric]
    if _is_share(metric):
        return f"{words(metric.removesuffix('_share'))} (share)"
    return words(metric)


def _is_share(metric: str) -> bool:
    return metric in SHARE_METRICS or "util" in metric or metric.endswith(("_share", "idle_ratio"))


def _integer_axis(fig: go.Figure, values: Sequence[object], **where: int) -> None:
    """Integer ticks on the x axis ``where`` when every value is an integer."""
    try:
        vals = sorted({float(v) for v in values})  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return
    if not vals or not all(v.is_integer() for v in vals):
        return
    if len(vals) <= 12:
        fig.update_xaxes(tickmode="array", tickvals=vals, ticktext=[f"{int(v):,}" for v in vals], **where)
    else:
        fig.update_xaxes(tickformat=",d", **where)


def _need(agg: pd.DataFrame, cols: Sequence[str]) -> None:
    missing = [c for c in cols if c not in agg.columns]
    if missing:
        msg = f"aggregate table lacks columns {missing}; it has {list(agg.columns)}"
        raise FieldError(msg, f"agg.{missing[0]}")  # the argument's first missing column


def add_band_line(
    fig: go.Figure,
    agg: pd.DataFrame,
    x: str,
    metric: str,
    name: str,
    color: str,
    *,
    row: int = 1,
    col: int = 1,
    dash: str | None = None,
    showlegend: bool = True,
) -> None:
    """One line of ``<metric>_mean`` against ``x`` with its 95% band (``_lo`` .. ``_hi``)."""
    _need(agg, [x, f"{metric}_mean", f"{metric}_lo", f"{metric}_hi"])
    # numbers in numeric order; categories as the rows give them (the sweep's order), not alphabetical
    d = agg.sort_values(x, kind="stable") if is_number_column(agg[x]) else agg
    xs = list(d[x])
    lo, hi = d[f"{metric}_lo"], d[f"{metric}_hi"]
    if _is_share(metric):
        lo, hi = lo.clip(0.0, 1.0), hi.clip(0.0, 1.0)
    # categories (policies) have no order: a point and its error bar each, no line or band between
    category, m = not is_number_column(agg[x]), d[f"{metric}_mean"]
    points = dict(marker_size=9, error_y=dict(type="data", symmetric=False, array=hi - m, arrayminus=m - lo))
    if not category and (hi > lo).any():
        fig.add_trace(
            go.Scatter(
                x=xs + xs[::-1],
                y=list(hi) + list(lo)[::-1],
                fill="toself",
                mode="lines",
                fillcolor=_rgba(color, 0.18),
                line=dict(width=0),
                hoverinfo="skip",
                showlegend=False,
                legendgroup=name,
            ),
            row=row,
            col=col,
        )
    n = d["n_seeds"] if "n_seeds" in d else [1] * len(d)
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=m,
            mode="markers" if category else "lines+markers",
            name=name,
            legendgroup=name,
            showlegend=showlegend,
            line=dict(color=color, dash=dash),
            **(points if category else {}),
            customdata=list(zip(lo, hi, n)),
            hovertemplate=f"{name}<br>{words(x)}: %{{x}}<br>{metric_label(metric)}: %{{y:{NUM}}} "
            f"(95%: %{{customdata[0]:{NUM}}} to %{{customdata[1]:{NUM}}}, %{{customdata[2]}} seeds)"
            "<extra></extra>",
        ),
        row=row,
        col=col,
    )


def _lines(agg: pd.DataFrame, x: str, by: str, caller: str) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """The lines of a figure of ``x``: one per value of ``by`` and of every other axis that splits
    the rows further (:func:`~pipesim.io.viz.sweep_axes.split_columns`), each with its cell's
    values and its rows in ``x`` order. A line that still holds one x twice is a ``ValueError``."""
    cols = split_columns(agg, [by], [a for a in axes_of(agg) if a not in (x, by)])
    out = []
    for _, g in ordered(agg, [*cols, x]).groupby(cols, sort=False, dropna=False):
        cell = {c: g.iloc[0][c] for c in cols}
        if g[x].duplicated().any():
            raise ValueError(
                f"{caller}: the line {cell} holds {x}={g[x][g[x].duplicated()].iloc[0]!r} more than once: "
                f"the table has rows that differ in columns other than {[*cols, x]}; pick one slice "
                "(filter the rows) or pass by= the column that tells them apart"
            )
        out.append((cell, g))
    return out


def lines_figure(
    agg: pd.DataFrame,
    x: str,
    metric: str,
    by: str = "design",
    *,
    title: str = "",
    ytitle: str | None = None,
    xtitle: str | None = None,
    log_x: bool = False,
) -> go.Figure:
    """``metric`` against ``x``, one line per value of ``by`` (e.g. throughput against sync time)
    and of every other axis of the sweep that splits the rows further: a grid over ``x`` and
    ``weight_update`` draws one line per weight update, named by its value (a line per design
    alone zig-zagged through both values at every x). The legend is titled with the columns that
    vary among the lines; lines and categories come in the order the sweep was given its values.
    A line that would still hold one x twice is a ``ValueError``."""
    _need(agg, [by, x])
    lines = _lines(agg, x, by, "lines_figure")
    named = varied(agg, list(lines[0][0])) if lines else []
    named = named or [by]
    fig = make_subplots(rows=1, cols=1)
    for i, (cell, g) in enumerate(lines):
        add_band_line(fig, g, x, metric, cell_text(cell, named), PALETTE[i % len(PALETTE)])
    fig.update_layout(
        title=title,
        xaxis_title=xtitle or words(x),
        yaxis_title=ytitle or metric_label(metric),
        height=420,
        plot_bgcolor="white",
        hovermode="closest",
        legend_title_text=", ".join(named),
    )
    if log_x:
        fig.update_xaxes(type="log")
    elif is_number_column(agg[x]):
        _integer_axis(fig, list(agg[x]))
    else:  # categories side by side (scattermode "group"); typed, as plotly read [32, "none"] as numbers
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=category_order(agg[x]))
        fig.update_layout(scattermode="group", scattergap=0.5)
    fig.update_xaxes(showgrid=True, gridcolor="#eee")
    fig.update_yaxes(showgrid=True, gridcolor="#eee", rangemode="tozero", separatethousands=True)
    return fig


def policy_words(label: str) -> str:
    """A policy's cell label as words: ``PartialRollout()`` -> ``partial rollout``; a label with
    arguments (``InFlightUpdate(load_time_s=0.5)``), or not a class name, is kept as it is."""
    if not re.fullmatch(r"[A-Z][A-Za-z0-9]*\(\)", label):
        return label
    name = label[:-2]
    if re.search(r"[A-Z]{2}", name):  # an acronym (AReaLThrottle): the class's own spelling
        return name
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).lower()


def staleness_throughput_figure(
    agg: pd.DataFrame, x: str = "max_staleness", by: str = "weight_update"
) -> go.Figure:
    """Figure 13.2: left, throughput against eta per weight-update policy (partial vs drain);
    right, mean and max staleness of trained episodes against eta for partial rollouts, with y = eta.
    A sweep over more axes (``n_slots`` too) draws a line per combination, named by the values
    that vary (joined into one line per policy, the cells zig-zagged between the slot counts);
    rows no axis tells apart are a ``ValueError``, as in :func:`lines_figure`."""
    _need(agg, [x, by])
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(
            "Throughput against the staleness bound",
            "Staleness of trained episodes (partial rollouts)",
        ),
    )
    lines = _lines(agg, x, by, "staleness_throughput_figure")
    extra = [c for c in varied(agg, list(lines[0][0])) if c != by] if lines else []
    partial = [(i, line) for i, line in enumerate(lines) if "partial" in str(line[0][by]).lower()]
    partial = partial or [(0, line) for line in lines[:1]]
    for i, (cell, g) in enumerate(lines):
        name = ", ".join([policy_words(str(cell[by])), *(f"{c}={cell[c]}" for c in extra)])
        add_band_line(fig, g, x, "throughput_per_hour", name, PALETTE[i % len(PALETTE)], row=1, col=1)
    for i, (cell, g) in partial:
        where = ", ".join(f"{c}={cell[c]}" for c in extra)
        suffix = f" ({where})" if where else ""  # in its throughput line's colour, max dotted
        colors = (PALETTE[2], PALETTE[3]) if len(partial) == 1 else (PALETTE[i % len(PALETTE)],) * 2
        add_band_line(fig, g, x, "staleness_mean", "mean staleness" + suffix, colors[0], row=1, col=2)
        add_band_line(
            fig, g, x, "staleness_max", "max staleness" + suffix, colors[1], row=1, col=2, dash="dot"
        )
    xs = sorted(set(agg[x]))
    fig.add_trace(
        go.Scatter(x=xs, y=xs, mode="lines", name="bound eta", line=dict(color="#999", dash="dash")),
        row=1,
        col=2,
    )
    fig.update_xaxes(title_text="staleness bound eta", showgrid=True, gridcolor="#eee")
    fig.update_yaxes(title_text="episodes trained per hour", row=1, col=1, rangemode="tozero")
    fig.update_yaxes(title_text="staleness (versions)", row=1, col=2, rangemode="tozero")
    fig.update_yaxes(showgrid=True, gridcolor="#eee", separatethousands=True)
    legend = f"{', '.join(w.replace('_', ' ') for w in [by, *extra])} (left), staleness (right)"
    entries = len(lines) + 2 * len(partial) + 1  # ~30 px each: tall enough that none scrolls
    fig.update_layout(
        height=max(440, 210 + 30 * entries),
        plot_bgcolor="white",
        hovermode="closest",
        legend_title_text=legend,
    )
    _integer_axis(fig, list(agg[x]), row=1, col=1)
    _integer_axis(fig, list(agg[x]), row=1, col=2)
    return fig


DESIGN_PANELS = [  # a title fits its quarter of a 1,000 px figure: long ones break (<br>)
    ("throughput_per_hour", "episodes / hour"),
    ("gen_util", "slot utilisation"),
    ("staleness_mean", "staleness (versions):<br>mean bar, max marker"),
    ("length_bias", "length bias (trained /<br>launched mean duration)"),
]


def _bar_cells(agg: pd.DataFrame, by: str) -> tuple[pd.DataFrame, list[Any], list[str], list[str], str]:
    """The comparison's cells in order, their x (one category per cell: ``by``'s value; two levels,
    a group of the other axes over a number axis, when several axes vary), colours, hover labels
    and the x axis title. Rows that no axis tells apart are a ``ValueError``."""
    cols = split_columns(agg, [by], [a for a in axes_of(agg) if a != by])
    shown = varied(agg, cols) or [by]
    if agg.duplicated(cols).any():
        raise ValueError(
            f"design_comparison_figure: {int(agg.duplicated(cols).sum()) + 1} rows share one bar of "
            f"{cols}: their other columns do not say which cell each is; pick one slice (filter the "
            "rows) or pass by= the column that names the bars"
        )
    if len(shown) == 1:
        d = ordered(agg, shown)
        x: list[Any] = [str(v) for v in d[shown[0]]]
        colors = [PALETTE[i % len(PALETTE)] for i in range(len(d))]
        xtitle = ""
    else:  # one bar per cell: the number axis inside, the rest as groups, coloured by group
        numbers = [c for c in shown if is_number_column(agg[c])]
        inner = numbers[-1] if numbers else shown[-1]
        outer = [c for c in shown if c != inner]
        d = ordered(agg, [*outer, inner])
        groups = [cell_text(r, outer, named=True) for _, r in d.iterrows()]
        x = [groups, [str(v) for v in d[inner]]]
        order = list(dict.fromkeys(groups))
        colors = [PALETTE[order.index(g) % len(PALETTE)] for g in groups]
        xtitle = words(inner)
    hover = [
        "<br>".join(str(r[c]) if c == by else f"{words(c)}: {r[c]}" for c in shown) for _, r in d.iterrows()
    ]
    return d, x, colors, hover, xtitle


def design_comparison_figure(agg: pd.DataFrame, by: str = "design") -> go.Figure:
    """Designs side by side on throughput, utilisation, staleness (mean bar, max marker) and length
    bias: one bar per cell. A sweep over more than designs (``max_staleness`` x ``weight_update``)
    gets a bar per combination, grouped on a two-level axis (a bar per design summed all of them)."""
    _need(agg, [by] + [f"{m}_mean" for m, _ in DESIGN_PANELS])
    d, names, colors, hover, xtitle = _bar_cells(agg, by)
    fig = make_subplots(rows=1, cols=len(DESIGN_PANELS), subplot_titles=[t for _, t in DESIGN_PANELS])
    for j, (m, _) in enumerate(DESIGN_PANELS, start=1):
        lo, hi, mean = d[f"{m}_lo"], d[f"{m}_hi"], d[f"{m}_mean"]
        if _is_share(m):
            lo, hi = lo.clip(0.0, 1.0), hi.clip(0.0, 1.0)
        fig.add_trace(
            go.Bar(
                x=names,
                y=mean,
                marker_color=colors,
                showlegend=False,
                name=m,
                customdata=hover,
                error_y=dict(
                    type="data", symmetric=False, array=hi - mean, arrayminus=mean - lo, visible=True
                ),
                hovertemplate="%{customdata}<br>" + metric_label(m) + ": %{y:" + NUM + "}<extra></extra>",
            ),
            row=1,
            col=j,
        )
        if m == "staleness_mean" and "staleness_max_mean" in d:
            fig.add_trace(
                go.Scatter(
                    x=names,
                    y=d["staleness_max_mean"],
                    mode="markers",
                    name="max staleness",
                    customdata=hover,
                    marker=dict(symbol="diamond", size=10 if xtitle == "" else 7, color="#333"),
                    hovertemplate="%{customdata}<br>max staleness: %{y:" + NUM + "}<extra></extra>",
                ),
                row=1,
                col=j,
            )
    if xtitle:
        fig.update_xaxes(title_text=xtitle, title_font_size=12)
    else:
        fig.update_xaxes(type="category", tickangle=-35)  # "32" and "none" are not a number axis
    fig.update_yaxes(separatethousands=True)
    fig.update_annotations(yshift=8)  # two-line titles clear the plots
    fig.update_layout(height=460, plot_bgcolor="white", margin=dict(b=140, t=80))
    return fig
