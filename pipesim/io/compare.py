"""Side-by-side comparison of two or more designs: ``pipesim.compare({"A": s1, "B": s2})``.

Each value may be a :class:`~pipesim.config.Scenario` (run here), a
:class:`~pipesim.results.run.RunResult`, or a run loaded with :func:`pipesim.load`. The result
holds ``table`` (one row per headline metric, one column per design) and ``figure`` (a Plotly
figure: one panel per headline metric, a bar per design), and displays as the table in a notebook.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pipesim.config import Scenario
from pipesim.core.errors import shown
from pipesim.core.validate import FieldError, refuse
from pipesim.io.api import run
from pipesim.io.html import HEADLINE_KEYS

__all__ = ["Comparison", "FIGURE_METRICS", "compare"]

FIGURE_METRICS = (
    ("throughput_per_hour", "episodes / hour"),
    ("gen_util", "slot utilisation"),
    ("staleness_mean", "mean staleness (versions)"),
    ("length_bias", "length bias"),
)


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare` returns: the runs, the side-by-side table and the figure."""

    results: dict[str, Any]
    table: pd.DataFrame
    figure: go.Figure

    def _repr_html_(self) -> str:
        from pipesim.io.cli_common import fmt_number  # 28,096 (",.4g" wrote 2.81e+04)

        return str(self.table.to_html(float_format=fmt_number))

    def __iter__(self) -> Any:  # table, figure = pipesim.compare(...)
        return iter((self.table, self.figure))


def compare(designs: Mapping[str, Any], *, metrics: Any = None) -> Comparison:
    """Run (where needed) and set two or more designs side by side.

    ``metrics``: the summary keys for the table's rows (default: the headline keys of
    :mod:`pipesim.io.html`, which label the rows)."""
    if not isinstance(designs, Mapping) or len(designs) < 2:
        raise FieldError("compare needs a mapping of two or more designs, e.g. {'A': s1, 'B': s2}", "designs")
    names = [str(name) for name in designs]
    if len(set(names)) != len(names):  # {1: a, "1": b} kept one of the two
        raise FieldError(
            f"compare: the designs' names must be distinct as text, got {shown(list(designs))}", "designs"
        )
    if metrics is not None:
        given = metrics
        # a string is not a list of keys (it became one row per character)
        metrics = list(metrics) if isinstance(metrics, Sequence) and not isinstance(metrics, str) else []
        if not metrics or not all(isinstance(k, str) for k in metrics):
            raise refuse("metrics", f"must be a non-empty list of summary keys, got {shown(given)}")
    results: dict[str, Any] = {}
    for name, d in designs.items():
        if isinstance(d, Scenario):
            results[str(name)] = run(d)
        elif hasattr(d, "summary") and hasattr(d, "scenario"):
            results[str(name)] = d
        else:
            raise FieldError(
                f"compare: designs[{shown(name)}] is a {type(d).__name__}; give a Scenario, a RunResult "
                "or a loaded run",
                f"designs[{shown(name)}]",
            )
    summaries = {k: r.summary() for k, r in results.items()}
    keys = list(metrics) if metrics is not None else [k for k, _ in HEADLINE_KEYS]
    unknown = [k for k in keys if not any(k in s for s in summaries.values())]
    if metrics is not None and unknown:  # a typo read as a row of NaN
        known = sorted(set().union(*summaries.values()))
        raise FieldError(f"metrics: unknown summary key(s) {unknown}; known: {', '.join(known)}", "metrics")
    labels = dict(HEADLINE_KEYS)
    table = pd.DataFrame(
        {name: [float(s.get(k, float("nan"))) for k in keys] for name, s in summaries.items()},
        index=pd.Index([labels.get(k, k) for k in keys], name="metric"),
    )
    fig = make_subplots(rows=1, cols=len(FIGURE_METRICS), subplot_titles=[t for _, t in FIGURE_METRICS])
    from pipesim.io.viz.sweep import NUM, PALETTE

    names = list(summaries)
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(names))]
    for j, (k, label) in enumerate(FIGURE_METRICS, start=1):
        fig.add_trace(
            go.Bar(
                x=names,
                y=[summaries[n].get(k, float("nan")) for n in names],
                marker_color=colors,
                name=label,
                showlegend=False,
                hovertemplate="%{x}<br>" + label + ": %{y:" + NUM + "}<extra></extra>",
                texttemplate="%{y:" + NUM + "}",  # the value on each bar: a zero is a visible 0
                textposition="outside",
                cliponaxis=False,
            ),
            row=1,
            col=j,
        )
    fig.update_yaxes(range=[0, 1.1], row=1, col=2)
    fig.update_yaxes(separatethousands=True, rangemode="tozero")
    fig.update_layout(height=380, plot_bgcolor="white", title="designs side by side (one run each)")
    return Comparison(results=results, table=table, figure=fig)
