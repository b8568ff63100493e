"""Plotly timelines of one run, or several runs on a shared time axis (Figure 13.1).

Layout of one run: two subplot rows. The first holds the trainer (aqua bars, one per step) and the weight
syncs (gold bars) in ``LANE_ROW_PX`` pixels whatever the number of slots, so they stay readable at 1,024
slots; the second one row per generation slot, labelled as the events table labels its lanes
(``r<replica>/slot<slot>``). Each episode is drawn as one bar per *version segment*, coloured by the policy
version it generated under (the legend says so), so a partial rollout shows as bars of two or more colours
on one row with a grey pause between them. Sync intervals are also drawn as translucent yellow bands across
all slot rows, so the pause of every in-flight episode is visible. Markers, each in its own colour: at an
episode's end, dropped (discarded), aborted, cut by a timeout (``truncated``), failed (an environment-worker
failure), and trained with staleness above eta: "continued across updates" where the episode generated under
two versions or more (a partial rollout: its staleness counts from its start, so it passes an admission
bound by design), plain where it did not, none where the admission rule has a bound of its own
(:func:`pipesim.io.viz.aggregate.eta_bounds`); at an episode's start, a retry (it relaunches a failed or
aborted episode). Hover on a segment shows episode id, task, duration, versions (started, segment, newest),
staleness at training and status.

Scale: up to ``WEBGL_THRESHOLD`` segments are SVG bars (crisp; up to 400 labelled with the version
their episode *started* under, whence its staleness counts, coloured by their own version: a partial
rollout's continued segment coloured v3 reads "v2"; the hover gives both). Above it (1,024 slots x 20
steps, ~25k segments) segments are WebGL line segments (``Scattergl``, one trace per version), hover
comes from one WebGL marker trace at segment midpoints, pause bars are omitted (the gap plus the sync
band shows the pause), and slot tick labels are thinned. The aggregate view
(:mod:`pipesim.io.viz.aggregate`) says more of such runs; :func:`pipesim.io.viz.run_views` picks it.

This module draws. The frame of segments it draws (one row per segment, with its episode's
details and its row) is built in :mod:`pipesim.io.viz.segments`, and the colours (versions, lanes,
marks, the legend's title) are in :mod:`pipesim.io.viz.palette`, shared with the aggregate view;
both are imported here, so ``from pipesim.io.viz.timeline import MARKS, segments_frame`` still works.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pipesim.core.errors import shown
from pipesim.core.validate import FieldTypeError, check_int, refuse
from pipesim.io.html import truncated_label
from pipesim.io.viz.aggregate import TIME_FORMAT, eta_bounds
from pipesim.io.viz.palette import (  # moved there; importing them from here still works
    LEGEND_TITLE,
    MARKS,
    PAUSE_COLOR,
    SYNC_COLOR,
    TRAIN_COLOR,
    n_versions_of,
    short_title,
    version_colors,
    version_entries,
)
from pipesim.io.viz.runs import named_runs
from pipesim.io.viz.segments import lane_index, retried_ids, segments_frame, version_groups
from pipesim.io.viz.traces import add_specs, legend_entry

WEBGL_THRESHOLD = 4_000
"""Generation segments above which a run is drawn with WebGL traces instead of SVG bars."""
NOT_CUT = ("aborted", "failed", "running")  # statuses a timeout never cut
HOVER_COLS = "episode_id task_id duration_text version version_episode newest_version stale_text status end_s"
"""The segments' columns in ``customdata[0]`` .. ``[8]`` of ``HOVER``, space-separated."""
OVER_CONTINUED = ("staleness > eta (continued across updates)", "diamond-open", "#a55194")
"""The mark of a trained episode staler than eta that generated under two versions or more (a
partial rollout's: its staleness counts from its start), apart from ``MARKS["over_bound"]``."""
LANE_ROW_PX = 56
"""Pixel height of the trainer and sync lanes, whatever the number of slots."""
HOVER = (
    "episode %{customdata[0]} (task %{customdata[1]})<br>%{customdata[2]}<br>"
    "segment v%{customdata[3]}, started v%{customdata[4]}, newest v%{customdata[5]}<br>"
    "staleness at training: %{customdata[6]}<br>status: %{customdata[7]}"
    "<br>%{base:,.1f} s to %{customdata[8]:,.1f} s<extra></extra>"
)
LABEL_PX = 14
"""Fewest pixels between two slot tick labels (12 px text): closer ones overlap."""


def tick_step(n_lanes: int, rows_px: int) -> int:
    """Label every k-th slot, k the least of 1, 2, 4, 5, 8, 10, 16, 20, ... that keeps labels
    ``LABEL_PX`` apart in ``rows_px`` pixels."""
    need = n_lanes * LABEL_PX / max(rows_px, 1)
    nice = sorted({m * 10**e for e in range(7) for m in (1, 2, 5)} | {2**e for e in range(24)})
    return next((k for k in nice if k >= need), nice[-1])


def sync_band_path(sync_log: Sequence[tuple[float, float, int]], n_rows: int) -> str:
    """The sync bands of a run as one SVG path (data coordinates): per sync ``(a, b, version)`` a
    rectangle from ``a`` to ``b`` across the ``n_rows`` slot rows. One shape, not one per sync:
    plotly copies the layout's shapes at each ``add_shape``, so a shape per sync took time
    quadratic in the steps (122 s of 1,000 steps), and the browser drew thousands of elements."""
    top, bottom = "-0.5", f"{n_rows - 0.5:.1f}"
    return "".join(f"M{a:.6f},{top}H{b:.6f}V{bottom}H{a:.6f}Z" for a, b, _ in sync_log)


def add_run(
    fig: go.Figure,
    result: Any,
    row: int = 1,
    *,
    webgl: bool | None = None,
    showlegend: bool = True,
    n_versions: int | None = None,
) -> None:
    """Draw ``result`` into subplots ``row`` (trainer and sync lanes) and ``row + 1`` (the slots)
    of ``fig`` (see the module docstring for the layout). ``n_versions`` sizes the version
    palette (default: this run's :func:`n_versions_of`; runs drawn together share one)."""
    lane_row, row = row, row + 1
    seg = segments_frame(result)
    ev = result.events
    eta = result.scenario.pipeline.max_staleness
    colors = version_colors(n_versions or n_versions_of(ev))
    use_gl = len(seg) > WEBGL_THRESHOLD if webgl is None else webgl
    n_rows = int(seg["y"].max()) + 1 if len(seg) else 1
    T = result.sim_time_s

    if bands := sync_band_path(result.sync_log, n_rows):  # sync bands across every slot
        fig.add_shape(
            type="path",
            path=bands,
            fillcolor=SYNC_COLOR,
            opacity=0.25,
            line_width=0,
            layer="below",
            row=row,
            col=1,
        )
    train, sync = ev[ev["kind"] == "train"], ev[ev["kind"] == "sync"]
    for df, y, color, name in [
        (train, 0, TRAIN_COLOR, "training step"),
        (sync, 1, SYNC_COLOR, "weight sync"),
    ]:
        if not len(df):
            continue
        fig.add_trace(
            go.Bar(
                y=[y] * len(df),
                x=df["end_s"] - df["start_s"],
                base=df["start_s"],
                orientation="h",
                marker_color=color,
                width=0.8,
                name=name,
                legendgroup=name,
                showlegend=showlegend,
                customdata=np.stack([df["version"], df["end_s"]], axis=-1) if len(df) else None,
                hovertemplate=f"{name} (v%{{customdata[0]}})<br>%{{base:,.1f}} s to %{{customdata[1]:,.1f}} s"
                "<extra></extra>",
            ),
            row=lane_row,
            col=1,
        )

    cd_cols = HOVER_COLS.split()
    if not use_gl:
        pause = ev[ev["kind"] == "pause"]
        if len(pause):
            pause_y = seg.drop_duplicates("episode_id").set_index("episode_id")["y"]
            fig.add_trace(
                go.Bar(
                    y=pause["episode_id"].map(pause_y),
                    x=pause["end_s"] - pause["start_s"],
                    base=pause["start_s"],
                    orientation="h",
                    marker_color=PAUSE_COLOR,
                    width=0.35,
                    name="paused (sync)",
                    legendgroup="pause",
                    showlegend=showlegend,
                    hoverinfo="skip",
                ),
                row=row,
                col=1,
            )
        label_bars = len(seg) <= 400
        bars: list[dict[str, Any]] = []
        for v, g, label, swatch in version_groups(seg, colors):  # label: v3, or its band: v64-v127
            bars += [legend_entry("bar", label, swatch, showlegend)] if swatch else []
            bars.append(
                dict(
                    type="bar",
                    y=g["y"].to_numpy(),
                    x=(g["end_s"] - g["start_s"]).to_numpy(),
                    base=g["start_s"].to_numpy(),
                    orientation="h",
                    marker=dict(color=colors[v % len(colors)], line=dict(width=0.5, color="white")),
                    width=0.8,
                    name=label,
                    legendgroup=label,
                    showlegend=showlegend,
                    customdata=g[cd_cols].to_numpy(),
                    hovertemplate=HOVER,
                    text=[f"v{x}" for x in g["version_episode"]] if label_bars else None,
                    textposition="inside",
                    insidetextanchor="middle",
                    textangle=0,
                )
            )
        add_specs(fig, bars, row)  # one trace a version, thousands in a long run: added at once
    else:
        width = float(np.clip(700 / max(n_rows, 1), 1, 6))
        lines: list[dict[str, Any]] = []
        for v, g, label, swatch in version_groups(seg, colors):
            lines += [legend_entry("scattergl", label, swatch, showlegend)] if swatch else []
            k = len(g)
            xs, ys = np.full(3 * k, np.nan), np.full(3 * k, np.nan)
            xs[0::3], xs[1::3] = g["start_s"], g["end_s"]
            ys[0::3], ys[1::3] = g["y"], g["y"]
            lines.append(
                dict(
                    type="scattergl",
                    x=xs,
                    y=ys,
                    mode="lines",
                    line=dict(color=colors[v % len(colors)], width=width),
                    name=label,
                    legendgroup=label,
                    showlegend=showlegend,
                    hoverinfo="skip",
                    connectgaps=False,
                )
            )
        add_specs(fig, lines, row)
        fig.add_trace(
            go.Scattergl(
                x=(seg["start_s"] + seg["end_s"]) / 2,
                y=seg["y"],
                mode="markers",
                marker=dict(size=3, color="rgba(0,0,0,0.06)"),
                name="segment (hover)",
                showlegend=False,
                customdata=np.column_stack([seg[cd_cols].to_numpy(), seg["start_s"]]),
                hovertemplate=HOVER.replace("%{base:,.1f}", "%{customdata[9]:,.1f}"),
            ),
            row=row,
            col=1,
        )

    last = seg.sort_values("end_s").drop_duplicates("episode_id", keep="last")
    first = seg.sort_values("start_s").drop_duplicates("episode_id", keep="first")
    # above eta: marked where eta bounds something (not under a rule with its own bound), and apart where
    # the episode generated under 2+ versions (a partial rollout: its staleness counts from its start)
    over = (last["staleness"].fillna(-1) > eta) & (eta_bounds(result.scenario) is not None)
    continued = last["episode_id"].map(seg.groupby("episode_id")["version"].nunique()) > 1
    flags = {
        "discarded": (last, last["status"] == "discarded"),
        "aborted": (last, last["status"] == "aborted"),
        "truncated": (last, last["truncated"].astype(bool) & ~last["status"].isin(NOT_CUT)),
        "failed": (last, last["status"] == "failed"),
        "retried": (first, first["episode_id"].isin(retried_ids(result))),
        "over_bound": (last, over & ~continued),
        "over_continued": (last, over & continued),
    }
    Scatter = go.Scattergl if use_gl else go.Scatter
    for key, (frame, mask) in flags.items():
        pts = frame[mask.to_numpy()]
        if not len(pts):
            continue
        name, symbol, color = OVER_CONTINUED if key == "over_continued" else MARKS[key]
        if key == "truncated":
            name = truncated_label(result)  # by the engine that ran it
        at = "start_s" if key == "retried" else "end_s"
        fig.add_trace(
            Scatter(
                x=pts[at],
                y=pts["y"],
                mode="markers",
                name=name,
                legendgroup=name,
                showlegend=showlegend,
                marker=dict(
                    symbol=symbol,
                    size=5 if use_gl else 9,
                    color=color,
                    line=dict(width=1 if use_gl else 2, color=color),
                ),
                customdata=pts[cd_cols].to_numpy(),
                hovertemplate=HOVER.replace(
                    "%{base:,.1f} s to ", "starts " if key == "retried" else "ends "
                ).replace(
                    "%{customdata[8]:,.1f}", "%{x:,.1f}" if key == "retried" else "%{customdata[8]:,.1f}"
                ),
            ),
            row=row,
            col=1,
        )

    lanes = [f"r{r}/slot{s}" for r, s in lane_index(seg)]  # as the events table names them
    step = tick_step(len(lanes), slot_rows_px(n_rows))
    ticks = list(range(0, len(lanes), step))
    fig.update_yaxes(
        tickvals=ticks,
        ticktext=[lanes[i] for i in ticks],
        autorange=False,
        range=[n_rows - 0.5, -0.6],
        row=row,
        col=1,
        zeroline=False,
    )
    fig.update_yaxes(
        tickvals=[0, 1],
        ticktext=["trainer", "sync"],
        autorange=False,
        range=[1.6, -0.6],
        row=lane_row,
        col=1,
        zeroline=False,
        fixedrange=True,
    )
    fig.update_xaxes(range=[0, T * 1.01], row=row, col=1)
    fig.update_xaxes(range=[0, T * 1.01], row=lane_row, col=1)


def timeline(result: Any, title: str | None = None, *, webgl: bool | None = None) -> go.Figure:
    """An interactive timeline of one run (see the module docstring)."""
    return timelines({title or result.scenario.name: result}, webgl=webgl)


LEGEND_PER_ROW = 12
"""Legend entries a row of the horizontal legend holds at the page's usual width (about 1,300 px)."""
LEGEND_ROW_PX = 22
"""A legend row's height."""


def slot_rows_px(n_slots: int) -> int:
    """Pixel height of a run's slot rows: 22 px a slot for small runs, bounded for large ones."""
    return int(min(900, max(160, n_slots * 22 if n_slots <= 40 else 500 + n_slots // 8)))


def timelines(
    results: Mapping[str, Any] | Sequence[Any],
    *,
    webgl: bool | None = None,
    height: int | None = None,
) -> go.Figure:
    """Runs stacked on a shared time axis, like Figure 13.1 (synchronous above async eta=1).

    Each run has two rows: its trainer and sync lanes, ``LANE_ROW_PX`` pixels high whatever the
    number of slots, and its slots below them. ``results``: runs by title, a list of runs (titled
    by scenario name), or one run; anything else a :class:`FieldTypeError` naming it."""
    named = named_runs(results)
    if webgl is not None and not isinstance(webgl, bool):
        raise refuse("webgl", f"must be True, False or None, got {shown(webgl)}", FieldTypeError)
    if height is not None:
        check_int("height", height, 10)  # plotly's least
    titles: list[str] = []
    px: list[int] = []
    for k, r in named.items():
        titles += [
            f"{short_title(k)}: {r.scenario.pipeline.steps} steps in {r.sim_time_s:,.0f} s, "
            f"{r.summary()['throughput_per_hour']:,.0f} episodes/h",
            "",
        ]
        px += [LANE_ROW_PX, slot_rows_px(r.scenario.pipeline.n_slots)]
    n_versions = max(n_versions_of(r.events) for r in named.values())  # one colour per version
    # the legend wraps at LEGEND_PER_ROW entries (version bands, ~8 marks); rows past two take height
    # of their own, or plotly takes it from the plot (200 versions: ~260 px of a planned 532)
    legend_px = LEGEND_ROW_PX * max(0, math.ceil((version_entries(n_versions) + 8) / LEGEND_PER_ROW) - 2)
    gap_px, margin_px = 14 if len(named) == 1 else 40, 160 + legend_px  # margins: t=50 + b=110+
    plot_px = sum(px) + gap_px * (len(px) - 1)
    fig_height = height or int(plot_px + margin_px)
    spacing = gap_px / max(fig_height - margin_px, 1)
    fig = make_subplots(
        rows=2 * len(named),
        cols=1,
        shared_xaxes=True,
        subplot_titles=titles,
        vertical_spacing=spacing,
        row_heights=[float(p) for p in px],
    )
    for i, r in enumerate(named.values()):
        add_run(fig, r, row=2 * i + 1, webgl=webgl, n_versions=n_versions)
    # each legend entry once, from whichever run draws it first (a pause or a mark may be the second's)
    in_legend: set[str] = set()
    for trace in fig.data:
        if trace.showlegend is not False:
            trace.showlegend = trace.name not in in_legend
            in_legend.add(trace.name)
    T = max(float(r.sim_time_s) for r in named.values())  # the axis is shared: the longest run
    fig.update_xaxes(range=[0, T * 1.01], tickformat=TIME_FORMAT)  # 2,500 s, not 2.5k
    fig.update_layout(
        barmode="overlay",
        height=fig_height,
        # the title above the entries ("top"): beside them, plotly wraps the entries as if the title
        # took no width, and a row's last versions ran off the right edge (v12-v14 of 20 hidden)
        legend=dict(
            orientation="h", y=-60 / fig_height, title=dict(text=LEGEND_TITLE, side="top"), yanchor="top"
        ),
        margin=dict(l=80, r=20, t=50, b=110 + legend_px),
        plot_bgcolor="white",
        uniformtext=dict(minsize=8, mode="hide"),
        hovermode="closest",
    )
    fig.update_xaxes(
        title_text="simulated seconds", row=2 * len(named), col=1, showgrid=True, gridcolor="#eee"
    )
    return fig
