"""Aggregate views of one run: what a timeline cannot show at 1,000+ slots.

:func:`aggregate_view` draws, on one shared time axis,

1. **episodes in flight by version** -- generation segments running at each instant, stacked by
   the version generating them (the same colours as the timeline; past
   :data:`~pipesim.io.viz.palette.MAX_VERSION_LEGEND` versions, by the timeline's bands of
   consecutive versions, :func:`~pipesim.io.viz.palette.version_band`, one trace a band);
2. **buffer depth** -- finished episodes waiting for the trainer: an episode enters at its end
   and leaves when the training step that takes it starts (a dropped one at the next step's
   start after its end, where the batch policy discards it; one still buffered at the run's end);
3. **slots generating** -- the share of slots generating, per time bin, and **trainer busy**,
   the share of each bin the trainer trains, both clipped to [0, 1];

and below them, on its own axis, 4. **staleness per trained batch** -- a heatmap of how many
episodes of each training step had each staleness (trained version minus starting version), with
eta a dotted line labelled with what it bounds (:func:`eta_bounds`): "staleness bound" where a
policy promises it of every trained episode, "admission bound" where it paces the starts only (a
partial rollout trains episodes continued across updates above it by design).

Every series is computed from the ``events``, ``trained`` and ``episode_table`` tables with
cumulative sums over sorted interval ends (no per-bin loop over episodes), so a run of millions
of segments draws in a second and the figure holds ``n_bins`` points per series whatever the run's
size. It works on a :class:`~pipesim.results.run.RunResult` and on a run loaded with
:func:`pipesim.load`. :func:`pipesim.io.viz.run_views` chooses it instead of the timeline above
``AGGREGATE_THRESHOLD`` slots; it is available for any run.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pipesim.core.port import StalenessPromise
from pipesim.io.viz.palette import TRAIN_COLOR, n_versions_of, version_band, version_colors
from pipesim.io.viz.traces import add_specs
from pipesim.policies.base import OwnStalenessBound

AGGREGATE_THRESHOLD = 256
"""Slots above which :func:`pipesim.io.viz.run_views` draws the aggregate view, not the timeline."""
AGGREGATE_EPISODES = 20_000
"""Episodes above which :func:`pipesim.io.viz.run_views` draws the aggregate view, not the
timeline: a timeline holds every episode's segment and legend entry per version, about 350 bytes
an episode (a 256-slot run of 1,000 steps, 256,000 episodes, was an 88 MB page of one solid block
that took 157 s to write and 28 s to render)."""
N_BINS = 400
BUFFER_COLOR, UTIL_COLOR = "#7f7f7f", "#ff7f0e"
STALENESS_SCALE = [[0.0, "#dadaeb"], [0.5, "#807dba"], [1.0, "#3f007d"]]
"""The heatmap's colours: its lightest (one episode) stays visible on white (no episodes)."""

__all__ = [
    "AGGREGATE_EPISODES",
    "AGGREGATE_THRESHOLD",
    "aggregate_view",
    "busy_share",
    "buffer_depth",
    "eta_bounds",
    "in_flight",
]


def eta_bounds(scenario: Any) -> str | None:
    """What the pipeline's ``max_staleness`` (eta) bounds in ``scenario``, as the figures label it:
    ``"staleness"`` where a policy promises that no trained episode is staler than eta
    (:class:`~pipesim.core.port.StalenessPromise`: ``DropStale``, ``Drain`` under the count
    throttle); ``"admission"`` where it paces only the starts (the count throttle with a partial
    rollout: staleness counts from the version an episode started under, so one continued across
    updates trains staler than eta by design); None where the admission rule has a bound of its own
    and never reads eta (:class:`~pipesim.policies.base.OwnStalenessBound`)."""
    eta = int(scenario.pipeline.max_staleness)
    for policy in (scenario.admission, scenario.weight_update, scenario.batching):
        if isinstance(policy, StalenessPromise):
            bound = policy.staleness_bound(scenario)
            if bound is not None and bound <= eta:
                return "staleness"
    return None if isinstance(scenario.admission, OwnStalenessBound) else "admission"


def _count_at(t: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How many intervals [start, end) hold each instant ``t``."""
    s, e = np.sort(start), np.sort(end)
    return np.searchsorted(s, t, side="right") - np.searchsorted(e, t, side="right")


def _integral(t: np.ndarray, points: np.ndarray) -> np.ndarray:
    """sum over ``points`` p <= t of (t - p), at each ``t`` (``points`` sorted)."""
    k = np.searchsorted(points, t, side="right")
    csum = np.concatenate([[0.0], np.cumsum(points)])
    return k * t - csum[k]  # type: ignore[no-any-return]


def busy_share(edges: np.ndarray, start: np.ndarray, end: np.ndarray, capacity: float) -> np.ndarray:
    """Per bin between ``edges``, the interval-seconds inside it over ``capacity`` x the bin's
    width, clipped to [0, 1] (``capacity`` 1 for the trainer, ``n_slots`` for the engine)."""
    s, e = np.sort(start.astype(np.float64)), np.sort(end.astype(np.float64))
    busy = _integral(edges, s) - _integral(edges, e)  # interval-seconds in [0, edge]
    width = np.diff(edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.diff(busy) / (capacity * width)
    return np.clip(np.nan_to_num(share), 0.0, 1.0)


def in_flight(events: Any, t: np.ndarray) -> dict[int, np.ndarray]:
    """Per generating version, the segments running at each instant ``t``."""
    gen = events[events["kind"] == "gen"]
    out: dict[int, np.ndarray] = {}
    for v, g in gen.groupby("version", sort=True, observed=True):
        out[int(str(v))] = _count_at(t, g["start_s"].to_numpy(), g["end_s"].to_numpy())
    return out


def buffer_depth(result: Any, t: np.ndarray) -> np.ndarray:
    """Finished episodes waiting for the trainer at each instant ``t`` (see the module docstring)."""
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
    leave = np.maximum(leave, enter)
    return _count_at(t, enter, leave)


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


def aggregate_view(result: Any, title: str | None = None, *, n_bins: int = N_BINS) -> go.Figure:
    """The aggregate view of one run (see the module docstring)."""
    ev = result.events
    T = float(result.sim_time_s)
    n_slots = int(result.scenario.pipeline.n_slots)
    edges = np.linspace(0.0, T if T > 0 else 1.0, n_bins + 1)
    mid = (edges[:-1] + edges[1:]) / 2
    name = title or result.scenario.name
    fig = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=False,
        vertical_spacing=0.085,
        row_heights=[0.34, 0.18, 0.18, 0.30],
        subplot_titles=(
            f"{name}: episodes in flight by generating version ({n_slots:,} slots)",
            "buffer depth (finished, waiting for the trainer)",
            "slots generating and trainer busy (share of each bin)",
            "staleness of each trained batch (episodes per step and staleness)",
        ),
    )
    flight = in_flight(ev, mid)
    n_versions = n_versions_of(ev)
    colors = version_colors(n_versions)  # the timeline's colours for the same run
    bands: dict[tuple[int, int, str], np.ndarray] = {}
    for v, counts in flight.items():  # versions in order: so are their bands
        band = version_band(v, n_versions)
        bands[band] = bands[band] + counts if band in bands else counts
    stack: list[dict[str, Any]] = []
    for (lo, hi, label), counts in bands.items():
        keep = _support(counts)  # a band's own bins: the stack infers zero elsewhere
        color = colors[((lo + hi) // 2) % len(colors)]
        stack.append(
            dict(
                type="scatter",
                x=mid[keep].tolist(),  # a few points each: lists are cheaper than arrays to add
                y=counts[keep].tolist(),
                mode="lines",
                stackgroup="flight",
                stackgaps="infer zero",
                line=dict(width=0.5, color=color),
                fillcolor=color,
                name=label,
                legendgroup=label,
                hovertemplate=f"{label}: %{{y:,}} in flight at %{{x:,.0f}} s<extra></extra>",
            )
        )
    add_specs(fig, stack, row=1)  # one trace a version, thousands in a long run: added at once
    fig.add_trace(
        go.Scatter(
            x=mid,
            y=buffer_depth(result, mid),
            mode="lines",
            line=dict(color=BUFFER_COLOR, shape="hv"),
            name="buffer depth",
            legendgroup="series",
            legend="legend2",
            hovertemplate="%{y:,} buffered at %{x:,.0f} s<extra></extra>",
        ),
        row=2,
        col=1,
    )
    gen = ev[ev["kind"] == "gen"]
    train = ev[ev["kind"] == "train"]
    for series, color, vals in (
        (
            "slots generating",
            UTIL_COLOR,
            busy_share(edges, gen["start_s"].to_numpy(), gen["end_s"].to_numpy(), n_slots),
        ),
        (
            "trainer busy",
            TRAIN_COLOR,
            busy_share(edges, train["start_s"].to_numpy(), train["end_s"].to_numpy(), 1.0),
        ),
    ):
        fig.add_trace(
            go.Scatter(
                x=mid,
                y=vals,
                mode="lines",
                line=dict(color=color, shape="hv"),
                name=series,
                legendgroup="series",
                legend="legend2",
                hovertemplate=f"{series}: %{{y:.0%}} at %{{x:,.0f}} s<extra></extra>",
            ),
            row=3,
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
                zmin=0,
                colorbar=dict(
                    title=dict(text="episodes", side="top"),
                    orientation="h",
                    len=0.3,
                    x=1.0,
                    xanchor="right",
                    y=-0.09,
                    yanchor="top",
                    thickness=10,
                ),
                hovertemplate="step %{x}, staleness %{y}: %{z:,} episodes<extra></extra>",
                name="staleness",
                showlegend=False,
            ),
            row=4,
            col=1,
        )
        eta = int(result.scenario.pipeline.max_staleness)
        bounds = eta_bounds(result.scenario)  # the line says what eta bounds; none where it is unread
        if bounds and eta <= smax + 1:  # labelled, inside the panel (a far one would squash it)
            fig.add_hline(
                y=eta + 0.5,
                line=dict(color="#d62728", dash="dot"),
                annotation=dict(text=f"{bounds} bound eta = {eta}", font_color="#d62728"),
                annotation_position="top left",
                row=4,
                col=1,
            )
            fig.update_yaxes(range=[-0.5, max(smax + 0.5, eta + 1.2)], row=4, col=1)
    for r in (1, 2, 3):
        fig.update_xaxes(range=[0, T * 1.01], row=r, col=1, showgrid=True, gridcolor="#eee")
    fig.update_xaxes(matches="x", row=2, col=1)
    fig.update_xaxes(matches="x", row=3, col=1)
    fig.update_xaxes(title_text="simulated seconds", row=3, col=1)
    fig.update_xaxes(
        title_text="training step", row=4, col=1, dtick=max(1, (len(result.train_log) + 19) // 20)
    )
    fig.update_yaxes(title_text="episodes", row=1, col=1, rangemode="tozero", tickformat=",d")
    fig.update_yaxes(title_text="episodes", row=2, col=1, rangemode="tozero", tickformat=",d")
    fig.update_yaxes(title_text="share", row=3, col=1, range=[0, 1.05], tickformat=".0%")
    smax = int(tr["staleness"].max()) if len(tr) else 0  # ticks at the staleness values drawn only
    ticks = list(range(0, smax + 1, max(1, (smax + 9) // 10)))
    fig.update_yaxes(title_text="staleness (versions)", row=4, col=1, tickmode="array", tickvals=ticks)
    # two legends, each beside what it names: the versions beside the in-flight panel (scrolling
    # within it when there are many), the three series beside the buffer and share panels; in one
    # legend the series came after every version, beside the heatmap, or past the figure's end
    top_row1, top_row2 = fig.layout.yaxis.domain[1], fig.layout.yaxis2.domain[1]
    fig.update_layout(
        height=1000,
        plot_bgcolor="white",
        hovermode="closest",
        margin=dict(l=70, r=20, t=50, b=110),
        legend=dict(
            title_text="colour = generating version",
            groupclick="toggleitem",
            y=top_row1,
            yanchor="top",
            tracegroupgap=0,  # each version is its own group: no gap between them
            maxheight=0.3,  # of the figure's height: it stops above the series' legend
        ),
        legend2=dict(title_text="series", y=top_row2, yanchor="top", x=1.02, xanchor="left"),
    )
    return fig
