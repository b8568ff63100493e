"""Aggregate views of one run: what a timeline cannot show at 1,000+ slots.

:func:`aggregate_view` draws, on one shared time axis,

1. **episodes in flight by version** -- episodes on a slot, generating or paused (through a
   sync), stacked by the version they were generating under (the timeline's colours; past
   :data:`~pipesim.io.viz.palette.MAX_VERSION_LEGEND` versions, by the timeline's bands of
   consecutive versions, :func:`~pipesim.io.viz.palette.version_band`, one trace a band);
2. **buffer depth** -- finished episodes waiting for the trainer, the mean over each bin: an
   episode enters at its end and leaves when the training step that takes it starts (a dropped one
   when the batch policy discards it, the episode table's ``discarded_s``, as
   :mod:`pipesim.io.trace` reads it; a table saved before that column, at the next step's start
   after its end; one still buffered at the run's end);
3. **slots generating** -- the share of slots generating, per time bin, and **trainer busy**,
   the share of each bin the trainer trains, both clipped to [0, 1];

and below them, on its own axis, 4. **staleness per trained batch** -- a heatmap of how many
episodes of each training step had each staleness (trained version minus starting version), with
eta a dotted line labelled with what it bounds (:func:`eta_bounds`): "staleness bound" where a
policy promises it of every trained episode, "admission bound" where it paces the starts only (a
partial rollout trains episodes continued across updates above it by design).

Every series is a time-weighted mean per bin (:func:`binned_means`: one pass over the tables, no
loop over episodes or versions), so a run of millions of segments draws in a second in ``n_bins``
points a series (counts at each bin's middle drew a 2,500-step run's 5 s syncs as drops to zero
in flight, and its buffer as noise). Each is drawn as steps, its value over its own bin
(:data:`STEP_SHAPE`), and its hover names the bin (``mean over 30 s to 60 s``). Count axes tick
without repeats (:func:`count_ticks`); the version legend lies under the first panel, every
entry shown. It works on a ``RunResult`` and on a run loaded with :func:`pipesim.load`;
:func:`pipesim.io.viz.run_views` chooses it instead of the timeline above ``AGGREGATE_THRESHOLD``
slots.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pipesim.core.validate import check_int
from pipesim.io.viz.binning import (  # moved there; importing them from here still works
    COUNT_TICKS,
    _count_at,
    _support,
    bin_middles,
    bin_spans,
    binned_means,
    busy_share,
    count_ticks,
    mean_count,
)
from pipesim.io.viz.palette import TRAIN_COLOR, band_color, n_versions_of, short_title, version_colors
from pipesim.io.viz.runs import band_label, eta_bounds, run_of  # eta_bounds: importable here too
from pipesim.io.viz.traces import add_specs

AGGREGATE_THRESHOLD = 256
"""Slots above which :func:`pipesim.io.viz.run_views` draws the aggregate view, not the timeline."""
AGGREGATE_EPISODES = 20_000
"""Episodes above which :func:`pipesim.io.viz.run_views` draws the aggregate view, not the
timeline: a timeline holds every episode's segment and legend entry per version, about 350 bytes
an episode (a 256-slot run of 1,000 steps, 256,000 episodes, was an 88 MB page of one solid block
that took 157 s to write and 28 s to render)."""
N_BINS, MAX_BINS = 400, 100_000
BUFFER_COLOR, UTIL_COLOR = "#7f7f7f", "#ff7f0e"
STALENESS_SCALE = [[0.0, "#dadaeb"], [0.5, "#807dba"], [1.0, "#3f007d"]]
"""The heatmap's colours: its lightest (one episode) stays visible on white (no episodes)."""
STEP_SHAPE = "hvh"
"""The line shape of every per-bin series: a point at each bin's middle (``bin_middles``), the step
between two points halfway, on the bin edge, so bin k's value is drawn over bin k (the first and
last half bins excepted: a line ends at its last point). ``"hv"`` at the middles drew each value
from its bin's middle to the next one's, half a bin late."""
BIN_HOVER = "mean over %{customdata[0]:,.4~r} s to %{customdata[1]:,.4~r} s"
"""The hover's bin, from ``customdata`` (each point's bin edges, :func:`bin_spans`)."""
TIME_FORMAT = ",~r"
"""The d3 format of a time axis in seconds, here and in the timeline: thousands separators
(``2,500``, ``50,000``; plotly's default printed ``2.5k`` and ``50k``) and a short run's
fractions kept (``0.5``, which ``,d`` would print as ``0`` or ``1``)."""

__all__ = [
    "AGGREGATE_EPISODES",
    "AGGREGATE_THRESHOLD",
    "COUNT_TICKS",
    "aggregate_view",
    "busy_share",
    "buffer_depth",
    "buffer_mean",
    "count_ticks",
    "eta_bounds",
    "in_flight",
    "in_flight_mean",
    "bin_middles",
    "bin_spans",
    "binned_means",
    "mean_count",
    "run_name",
]


def run_name(result: Any) -> str:
    """A run's name in a figure's title: a saved compute run's without its stand-in tail (its
    figures draw the tables the engine recorded, not the kernel's stand-in scenario)."""
    if getattr(result, "engine", "slots") == "compute":
        from pipesim.io.saved_scenario import saved_name

        return saved_name(result.scenario)
    return str(result.scenario.name)


def in_flight(events: Any, t: np.ndarray) -> dict[int, np.ndarray]:
    """Per version, the segments generating at each instant ``t`` (the figure: :func:`in_flight_mean`)."""
    groups = events[events["kind"] == "gen"].groupby("version", sort=True, observed=True)
    return {int(str(v)): _count_at(t, g["start_s"].to_numpy(), g["end_s"].to_numpy()) for v, g in groups}


def in_flight_mean(events: Any, edges: np.ndarray, key: Any = int) -> dict[Any, np.ndarray]:
    """Per version (per ``key(version)``: the figure passes its band), the mean number of episodes
    on a slot in each bin between ``edges``: generating (``gen`` segments) or paused between them
    (``pause``, under the version it was generating), so an episode counts from start to end."""
    rows = events[events["kind"].isin(["gen", "pause"])]
    versions, inverse = np.unique(rows["version"].to_numpy(), return_inverse=True)
    keys = list(dict.fromkeys(key(v) for v in versions.tolist()))  # in version order
    index = {k: i for i, k in enumerate(keys)}
    group = np.array([index[key(v)] for v in versions.tolist()], dtype=np.int64)[inverse]
    means = binned_means(edges, rows["start_s"].to_numpy(), rows["end_s"].to_numpy(), group, len(keys))
    return dict(zip(keys, means))


def _discarded_at(ended: Any) -> np.ndarray:
    """When each episode of ``ended`` was discarded (NaN where it was not, or where the table was
    saved before it had ``discarded_s``)."""
    if "discarded_s" not in ended.columns:
        return np.full(len(ended), np.nan)
    return ended["discarded_s"].to_numpy(dtype=np.float64, na_value=np.nan)  # type: ignore[no-any-return]


def _buffered(result: Any) -> tuple[np.ndarray, np.ndarray]:
    """When each finished episode entered the buffer and left it (see the module docstring)."""
    eps = result.episode_table
    train = result.events[result.events["kind"] == "train"]
    step_start = np.sort(train["start_s"].to_numpy(dtype=np.float64))
    T = float(result.sim_time_s)
    ended = eps[eps["status"].isin(["trained", "buffered", "discarded"])]
    enter = ended["end_s"].to_numpy(dtype=np.float64)
    leave = np.full(len(ended), T + 1.0)
    if len(step_start):
        tr = result.trained.set_index("episode_id")["step"]
        steps = ended["episode_id"].map(tr).to_numpy(dtype=np.float64)
        trained = ~np.isnan(steps)  # step k is the k-th training step (from 0), in time order
        idx = np.clip(steps[trained].astype(np.int64), 0, len(step_start) - 1)
        leave[trained] = step_start[idx]
        dropped = (ended["status"] == "discarded").to_numpy()
        nxt = np.searchsorted(step_start, enter[dropped], side="left")
        leave[dropped] = np.where(nxt < len(step_start), step_start[np.minimum(nxt, len(step_start) - 1)], T)
    gone = _discarded_at(ended)  # when the batch policy dropped it, where the table says
    known = ~np.isnan(gone)
    leave[known] = gone[known]
    return enter, np.maximum(leave, enter)


def buffer_depth(result: Any, t: np.ndarray) -> np.ndarray:
    """Finished episodes waiting for the trainer at each instant ``t`` (see the module docstring)."""
    return _count_at(t, *_buffered(result))


def buffer_mean(result: Any, edges: np.ndarray) -> np.ndarray:
    """The mean number of finished episodes waiting for the trainer in each bin between ``edges``."""
    return mean_count(edges, *_buffered(result))


def aggregate_view(result: Any, title: str | None = None, *, n_bins: int = N_BINS) -> go.Figure:
    """The aggregate view of one run (see the module docstring)."""
    result = run_of(result)
    check_int("n_bins", n_bins, 1, MAX_BINS, "a point a bin in every series")
    ev, T = result.events, float(result.sim_time_s)
    n_slots = int(result.scenario.pipeline.n_slots)
    edges = np.linspace(0.0, T if T > 0 else 1.0, n_bins + 1)
    mid, spans = bin_middles(edges), bin_spans(edges)
    name = title or run_name(result)
    n_versions = n_versions_of(ev)
    colors = version_colors(n_versions)  # the timeline's colours for the same run
    bands = in_flight_mean(ev, edges, key=lambda v: band_label(v, n_versions))  # a grid of bands
    fig = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=False,
        vertical_spacing=0.085,
        row_heights=[0.34, 0.18, 0.18, 0.30],
        subplot_titles=(
            # the run's name on a line of its own, cut (a preset with its --set pairs ran off both
            # sides of the page): the panel's own description below it is never cut
            f"{short_title(name)}<br>episodes in flight by version (on a slot, generating or paused; "
            f"mean per bin; {n_slots:,} slots)",
            "buffer depth (finished, waiting for the trainer; mean per bin)",
            "slots generating and trainer busy (share of each bin)",
            "staleness of each trained batch (episodes per step and staleness)",
        ),
    )
    stack: list[dict[str, Any]] = []
    for (lo, _, label), counts in bands.items():
        keep = _support(counts)  # a band's own bins: the stack infers zero elsewhere
        color = band_color(lo, colors)  # the timeline's legend swatch for the band
        stack.append(
            dict(
                type="scatter",
                x=mid[keep].tolist(),  # a few points each: lists are cheaper than arrays to add
                y=counts[keep].tolist(),
                customdata=spans[keep].tolist(),
                mode="lines",
                line_shape=STEP_SHAPE,
                stackgroup="flight",
                stackgaps="infer zero",
                line=dict(width=0.5, color=color),
                fillcolor=color,
                name=label,
                legendgroup=label,
                hovertemplate=f"{label}: %{{y:,.1f}} in flight, {BIN_HOVER}<extra></extra>",
            )
        )
    add_specs(fig, stack, row=1)  # one trace a version, thousands in a long run: added at once
    depth = buffer_mean(result, edges)
    gen, train = ev[ev["kind"] == "gen"], ev[ev["kind"] == "train"]
    for row, series, color, vals, hover in (
        (2, "buffer depth", BUFFER_COLOR, depth, "%{y:,.1f} buffered"),
        (3, "slots generating", UTIL_COLOR, busy_share(edges, gen["start_s"], gen["end_s"], n_slots), ""),
        (3, "trainer busy", TRAIN_COLOR, busy_share(edges, train["start_s"], train["end_s"], 1.0), ""),
    ):
        fig.add_trace(
            go.Scatter(
                x=mid,
                y=vals,
                customdata=spans,
                mode="lines",
                line=dict(color=color, shape=STEP_SHAPE),
                name=series,
                legendgroup="series",
                legend="legend2",
                hovertemplate=f"{hover or series + ': %{y:.0%}'}, {BIN_HOVER}<extra></extra>",
            ),
            row=row,
            col=1,
        )
    tr = result.trained
    if len(tr):
        steps = tr["step"].to_numpy(dtype=np.int64)
        stale = tr["staleness"].to_numpy(dtype=np.int64)
        s0, smax = int(steps.min()), int(stale.max())
        grid = np.zeros((smax + 1, int(steps.max()) - s0 + 1), dtype=np.int64)
        np.add.at(grid, (stale, steps - s0), 1)
        fig.add_trace(
            go.Heatmap(
                x=np.arange(s0, s0 + grid.shape[1]),
                y=np.arange(smax + 1),
                z=np.where(grid > 0, grid, np.nan),
                colorscale=STALENESS_SCALE,
                # both ends: plotly ignores zmin alone, and scaled the cells from the fewest to the
                # most (a run whose cells all hold 64 drew them all the scale's middle, no ticks)
                zmin=0,
                zmax=max(int(grid.max()), 1),
                colorbar=dict(
                    title=dict(text="episodes", side="top"),
                    orientation="h",
                    len=0.3,
                    x=1.0,
                    xanchor="right",
                    y=-0.09,
                    yanchor="top",
                    thickness=10,
                    tick0=0,
                    dtick=max(1.0, count_ticks(float(grid.max()))[0]),  # whole episodes: 1, 2, not 1.5
                    tickformat=",d",
                ),
                hovertemplate="step %{x}, staleness %{y}: %{z:,} episodes<extra></extra>",
                hoverongaps=False,  # an empty cell (no episodes) has no hover
                name="staleness",
                showlegend=False,
            ),
            row=4,
            col=1,
        )
        eta = int(result.scenario.pipeline.max_staleness)
        bounds = eta_bounds(result.scenario)  # the line says what eta bounds; none where it is unread
        if bounds and eta <= smax + 1:  # drawn inside the panel (a far one would squash it)
            fig.add_hline(y=eta + 0.5, line=dict(color="#d62728", dash="dot"), row=4, col=1)
            # labelled right of the panel, level with the line: inside it, the label sat on the
            # cells of a large run and ran into the staleness ticks ("3admission bound")
            fig.add_annotation(
                text=f"{bounds} bound eta = {eta}",
                font=dict(color="#d62728", size=11),
                xref="x4 domain",
                x=1.0,
                xanchor="left",
                xshift=6,
                yref="y4",
                y=eta + 0.5,
                yanchor="middle",
                align="left",
                showarrow=False,
            )
            fig.update_yaxes(range=[-0.5, max(smax + 0.5, eta + 1.2)], row=4, col=1)
    for r in (1, 2, 3):  # seconds with thousands separators (2,500, not 2.5k), fractions kept
        fig.update_xaxes(
            range=[0, T * 1.01], row=r, col=1, showgrid=True, gridcolor="#eee", tickformat=TIME_FORMAT
        )
    fig.update_xaxes(matches="x", row=2, col=1)
    fig.update_xaxes(matches="x", row=3, col=1)
    fig.update_xaxes(title_text="simulated seconds", row=3, col=1)
    fig.update_xaxes(
        title_text="training step",
        row=4,
        col=1,
        dtick=max(1, (len(result.train_log) + 19) // 20),
        tickformat=",d",
    )
    top = np.sum(list(bands.values()), axis=0).max() if bands else 0.0  # the stack's highest bin
    for row, peak in ((1, float(top)), (2, float(depth.max(initial=0.0)))):
        step, fmt = count_ticks(peak)
        rng = [0, max(peak, step) * 1.05]
        fig.update_yaxes(
            title_text="episodes", row=row, col=1, range=rng, tick0=0, dtick=step, tickformat=fmt
        )
    fig.update_yaxes(title_text="share", row=3, col=1, range=[0, 1.05], tickformat=".0%")
    smax = int(tr["staleness"].max()) if len(tr) else 0  # ticks at the staleness values drawn only
    ticks = list(range(0, smax + 1, max(1, (smax + 9) // 10)))
    fig.update_yaxes(title_text="staleness (versions)", row=4, col=1, tickmode="array", tickvals=ticks)
    _lay_out(fig, len(bands), max((len(label) for _, _, label in bands), default=2))
    return fig


ROW_PX, GAP_PX, LEGEND_ROW_PX, MARGIN_PX = (213, 113, 113, 188), 71, 22, (70, 110)  # t: two lines
AXIS_TITLE_PX = 24
"""Added to the gap under the share panel: its "simulated seconds" title, which touched the
staleness panel's title in the 71 px the other gaps have."""
LEGEND_WIDTH_PX = 720
"""The plot width the version legend's rows are planned for: about 720 px in a 1,000 px window.
Each entry takes ``1 / per_row`` of the plot's width less :data:`LEGEND_GAP_FRACTION` (plotly's
``entrywidthmode="fraction"``), so the legend has the rows planned at any width from this one up
(sized in pixels, a 1,400 px window fit more entries a row, and a 63-entry legend left some
100 px blank under it)."""
LEGEND_GAP_FRACTION = 5.5 / LEGEND_WIDTH_PX
"""What each entry's fraction gives up for plotly's 5 px gap after it: ``per_row`` entries fit
in a plot of :data:`LEGEND_WIDTH_PX` or wider, and one more never does."""


def legend_rows(n_entries: int, label_chars: int) -> tuple[int, int]:
    """The px of a version legend entry's text (all alike: columns) and the rows ``n_entries`` take
    across :data:`LEGEND_WIDTH_PX` (10 a row of ``v12``, 5 of ``v1984-v2047``)."""
    text_px = 7 * label_chars + 8
    return text_px, max(1, -(-n_entries // legend_per_row(text_px)))


def legend_per_row(text_px: int) -> int:
    """Entries of ``text_px`` of text (and plotly's 40 px of symbol and gaps) a legend row holds."""
    return max(1, LEGEND_WIDTH_PX // (text_px + 40))


def legend_share(text_px: int) -> float:
    """The share of the plot's width a version legend entry of ``text_px`` of text takes (plotly's
    ``entrywidth`` in ``entrywidthmode="fraction"``): :func:`legend_per_row` of them a row."""
    return 1 / legend_per_row(text_px) - LEGEND_GAP_FRACTION


def _lay_out(fig: go.Figure, n_entries: int, label_chars: int) -> None:
    """Panels of :data:`ROW_PX`; the version legend under the first, every entry shown (at most
    ``MAX_VERSION_LEGEND``), the series' legend beside the buffer and share panels it names."""
    text_px, rows = legend_rows(n_entries, label_chars)
    legend_px = LEGEND_ROW_PX * (rows + 1)  # the title on a line of its own
    # under the first panel: its ticks, the legend; under the third: its axis title
    gaps = [GAP_PX + 20 + legend_px, GAP_PX, GAP_PX + AXIS_TITLE_PX]
    plot_px = sum(ROW_PX) + sum(gaps)
    top = float(plot_px)
    domains = []
    for i, h in enumerate(ROW_PX):
        domains.append((max(top - h, 0.0) / plot_px, top / plot_px))
        top -= h + (gaps[i] if i < len(gaps) else 0)
    for i, dom in enumerate(domains):
        fig.layout[f"yaxis{i + 1 if i else ''}"].domain = dom
        fig.layout.annotations[i].y = dom[1]  # the panel's title (make_subplots' i-th annotation)
    fig.update_layout(
        height=plot_px + sum(MARGIN_PX),
        plot_bgcolor="white",
        hovermode="closest",
        margin=dict(l=70, r=20, t=MARGIN_PX[0], b=MARGIN_PX[1]),
        legend=dict(
            title=dict(text="colour = generating version", side="top"),
            orientation="h",
            x=0,
            xanchor="left",
            y=domains[0][0] - 28 / plot_px,  # below the first panel's tick labels
            yanchor="top",
            entrywidth=legend_share(text_px),
            entrywidthmode="fraction",  # the rows planned, whatever the page's width
            groupclick="toggleitem",
            tracegroupgap=0,  # each version is its own group: no gap between them
        ),
        legend2=dict(title_text="series", y=domains[1][1], yanchor="top", x=1.02, xanchor="left"),
    )
