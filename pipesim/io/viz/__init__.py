"""Plotly figures of pipesim runs and sweeps (imports plotly; ``import pipesim`` does not).

* :func:`timeline` / :func:`timelines` -- interactive timelines of one run or several on a shared
  time axis (Figure 13.1); implemented in :mod:`pipesim.io.viz.timeline`, which documents the layout
  and when it switches to WebGL.
* :func:`staleness_throughput_figure` (Figure 13.2), :func:`lines_figure` (e.g. throughput against
  sync time, one line per design) and :func:`design_comparison_figure` -- sweep figures with 95%
  bands over seeds, in :mod:`pipesim.io.viz.sweep`.
* :func:`aggregate_view` -- in flight by version, buffer depth, utilisation and trainer busy over
  time, staleness per trained batch: for runs too large for a timeline
  (:mod:`pipesim.io.viz.aggregate`); :func:`run_views` picks the timeline or it by size
  (above ``AGGREGATE_THRESHOLD`` slots the aggregate view only, else both), and :func:`run_page`
  is one run's page (its summary table and views), what ``pipesim report DIR`` writes.
* :func:`compute_view` -- KV-cache occupancy and decode tokens/s per replica of a compute-engine
  run (:mod:`pipesim.io.viz.compute`).
* :func:`figures_to_html` -- several figures in one self-contained page with plotly.js inlined once.
* :func:`version_colors` and the other colours the views share -- :mod:`pipesim.io.viz.palette`.
* What a view accepts (a run, a list of runs, one run where a list is expected) and the refusal of
  anything else, naming the argument -- :mod:`pipesim.io.viz.runs`.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from pipesim.core.validate import FieldTypeError, refuse, shown
from pipesim.io.viz.aggregate import AGGREGATE_EPISODES, AGGREGATE_THRESHOLD, aggregate_view
from pipesim.io.viz.compute import compute_view
from pipesim.io.viz.palette import version_colors
from pipesim.io.viz.runs import run_of
from pipesim.io.viz.sweep import design_comparison_figure, lines_figure, staleness_throughput_figure
from pipesim.io.viz.timeline import WEBGL_THRESHOLD, segments_frame, timeline, timelines

__all__ = [
    "AGGREGATE_EPISODES",
    "AGGREGATE_THRESHOLD",
    "WEBGL_THRESHOLD",
    "aggregate_view",
    "compute_view",
    "run_page",
    "run_views",
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


def _text(field: str, value: object) -> None:
    if not isinstance(value, str):
        raise refuse(field, f"must be a string, got {type(value).__name__} {shown(value)}", FieldTypeError)


def figures_to_html(figures: Sequence[go.Figure], title: str = "pipesim", preamble: str = "") -> str:
    """A self-contained offline page: plotly.js once in the head, then ``preamble`` (HTML) and
    each figure's div, numbered (``fig-1``, ...): plotly's own ids are random, and the same run
    wrote a different page each time. One figure on its own is a page of one."""
    figures = [figures] if isinstance(figures, go.Figure) else figures
    if isinstance(figures, str | bytes) or not isinstance(figures, Sequence):
        got = f"got {type(figures).__name__} {shown(figures)}"
        raise refuse("figures", f"must be a list of plotly figures, {got}", FieldTypeError)
    for i, f in enumerate(figures):
        if not isinstance(f, go.Figure):
            raise refuse(f"figures[{i}]", f"must be a plotly Figure, got {type(f).__name__}", FieldTypeError)
    _text("title", title)
    _text("preamble", preamble)
    body = preamble + "\n".join(figure_div(f, f"fig-{i}") for i, f in enumerate(figures, start=1))
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"{plotlyjs_script()}</head><body>{body}</body></html>"
    )


def run_views(result: Any, title: str | None = None, *, aggregate: bool | None = None) -> list[go.Figure]:
    """The figures for one run: the timeline and the aggregate view, or above
    ``AGGREGATE_THRESHOLD`` slots or ``AGGREGATE_EPISODES`` episodes the aggregate view alone
    (``aggregate`` forces either way). A
    ``ComputeRun`` that recorded its timelines also gets :func:`compute_view` (KV cache, tokens/s)."""
    if hasattr(result, "result") and hasattr(result, "timelines"):  # a ComputeRun
        extra = [compute_view(result, title)] if result.timelines else []
        return run_views(result.result, title, aggregate=aggregate) + extra
    result = run_of(result)
    if aggregate is not None and not isinstance(aggregate, bool):
        raise refuse("aggregate", f"must be True, False or None, got {shown(aggregate)}", FieldTypeError)
    cols = getattr(result, "columns", None)  # a RunResult's; a saved run has its episode table
    episodes = cols.n if cols is not None else len(getattr(result, "episode_table", ()))
    big = result.scenario.pipeline.n_slots > AGGREGATE_THRESHOLD or episodes > AGGREGATE_EPISODES
    if aggregate is None:
        aggregate = big
    if aggregate:
        return [aggregate_view(result, title)]
    return [timeline(result, title), aggregate_view(result, title)]


def run_page(
    result: Any,
    title: str = "pipesim run",
    *,
    aggregate: bool | None = None,
    name: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> str:
    """One run as a self-contained page: its summary and scenario tables (the numbers the CLI
    prints), then :func:`run_views` (``name`` heads the figures; default the scenario's name). A
    recorded ``ComputeRun`` also gets its engines' view. ``overrides``: the ``--set`` pairs the
    run was built with; the page says "with k=v, ..." after its title, as ``pipesim run`` prints,
    and the tables and figures name the run so (a preset's name, ``async eta=2, partial``, no
    longer says what ran once ``weight_update`` is set)."""
    from pipesim.io.html import run_html

    run_of(result)  # a path or a table is refused here, naming result, not inside the tables
    _text("title", title)
    if name is not None:
        _text("name", name)
    if overrides is not None and not isinstance(overrides, Mapping):
        raise refuse("overrides", f"must be a dict of key to value, got {shown(overrides)}", FieldTypeError)
    if overrides:
        given = ", ".join(f"{k}={v}" for k, v in overrides.items())
        title = f"{title} with {given}"
        name = f"{name or run_of(result).scenario.name} with {given}"
        result = _named_run(result, name)
    head = f'<h2 style="font-family:sans-serif">{html.escape(title)}</h2>{run_html(result)}'
    return figures_to_html(run_views(result, name, aggregate=aggregate), title=title, preamble=head)


def _named_run(result: Any, name: str) -> Any:
    """``result`` with its scenario named ``name`` (where the name is one a scenario takes), for the
    tables; its tables already built are kept (they do not read the name)."""
    from pipesim.results.run import RunResult

    if not isinstance(result, RunResult):
        return result  # a loaded or compute run: its heading and figures carry the name
    try:
        renamed = dataclasses.replace(result, scenario=result.scenario.with_(name=name))
    except ValueError:  # too long a name for a scenario: the heading and figures still say it
        return result
    fields = {f.name for f in dataclasses.fields(result)}
    renamed.__dict__.update({k: v for k, v in vars(result).items() if k not in fields})
    return renamed
