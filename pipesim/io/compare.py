"""Side-by-side comparison of two or more designs: ``pipesim.compare({"A": s1, "B": s2})``.

Each value may be a :class:`~pipesim.config.Scenario` (run here), a
:class:`~pipesim.results.run.RunResult`, a :class:`~pipesim.compute.ComputeRun` (a run spec's
run, :func:`pipesim.plan.runspec.run`), or a run loaded with :func:`pipesim.load`. The result
holds ``table`` (one row per headline metric, one column per design) and ``figure`` (a Plotly
figure: one panel per headline metric, a bar per design), and displays as the table in a notebook.

The rows and their labels follow the engine that ran the designs, as a run's own page does
(:func:`pipesim.io.html.run_html`):

- slot runs: the headline rows (:data:`~pipesim.io.html.HEADLINE_KEYS`); a truncated episode is
  one its timeout cut ("timed out").
- compute runs (a ComputeRun, or a loaded ``pipesim run SPEC --save``): the headline rows and the
  compute rows (:data:`~pipesim.io.html.COMPUTE_HEADLINE_KEYS`: step time, decode tokens/s, engine
  busy share, replicas, ...); a truncated sample is one cut at the response cap (the compute engine
  has no timeout), and ``gen_util`` is labelled as the share of the engines' ``max_num_seqs``
  places it is, not their GPUs' (read ``engine_busy_share``, docs/compute.md). The figure shows
  episodes/hour, mean step, decode tokens/s, engine busy share and staleness. A ComputeRun's own
  summary is read: the kernel's ``.result`` lacks the compute keys (its column reads NaN in the
  compute rows; designs that are all such results get none).
- a mix of the two: the headline rows only (the rows every run has), the labels that differ
  between the engines naming both, and the slot figure.
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
from pipesim.io.html import COMPUTE_GEN_UTIL_LABEL, COMPUTE_HEADLINE_KEYS, HEADLINE_KEYS, truncated_label

__all__ = ["COMPUTE_FIGURE_METRICS", "Comparison", "FIGURE_METRICS", "compare"]

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
MIXED_GEN_UTIL_LABEL = "slot utilisation (a compute run's: of its max_num_seqs places)"
"""``gen_util``'s label where slot and compute runs are compared (what a slot means differs)."""


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
    :mod:`pipesim.io.html`, and its compute keys where every design is a compute run; they label
    the rows, as the module's docstring says)."""
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
    from pipesim.compute.compute_run import ComputeRun

    results: dict[str, Any] = {}
    for name, d in designs.items():
        if isinstance(d, Scenario):
            results[str(name)] = run(d)
        elif isinstance(d, ComputeRun) or (hasattr(d, "summary") and hasattr(d, "scenario")):
            results[str(name)] = d
        else:
            raise FieldError(
                f"compare: designs[{shown(name)}] is a {type(d).__name__}; give a Scenario, a RunResult, "
                "a ComputeRun or a loaded run",
                f"designs[{shown(name)}]",
            )
    summaries = {k: r.summary() for k, r in results.items()}  # a ComputeRun's: with the compute keys
    inner = {k: r.result if isinstance(r, ComputeRun) else r for k, r in results.items()}
    kinds = {_engine(r) for r in inner.values()}  # "slots", "compute"
    compute, mixed = kinds == {"compute"}, len(kinds) > 1
    keys = list(metrics) if metrics is not None else _default_keys(summaries, compute)
    unknown = [k for k in keys if not any(k in s for s in summaries.values())]
    if metrics is not None and unknown:  # a typo read as a row of NaN
        known = sorted(set().union(*summaries.values()))
        raise FieldError(f"metrics: unknown summary key(s) {unknown}; known: {', '.join(known)}", "metrics")
    labels = _labels(inner, compute, mixed)
    table = pd.DataFrame(
        {name: [float(s.get(k, float("nan"))) for k in keys] for name, s in summaries.items()},
        index=pd.Index([labels.get(k, k) for k in keys], name="metric"),
    )
    panels = COMPUTE_FIGURE_METRICS if compute else FIGURE_METRICS
    return Comparison(results=results, table=table, figure=_figure(summaries, panels))


def _engine(result: Any) -> str:
    """The engine that ran ``result`` (``RunResult.engine``, ``SavedRun.engine``)."""
    return str(getattr(result, "engine", "slots"))


def _default_keys(summaries: Mapping[str, Mapping[str, Any]], compute: bool) -> list[str]:
    """The default rows: the headline keys, and where every run is a compute run the compute keys
    any of them has (a kernel's ``.result`` among them reads NaN there); slot runs, and a mix of
    engines, get the headline keys only (the rows every run has)."""
    keys = [k for k, _ in HEADLINE_KEYS]
    if compute:
        keys += [k for k, _ in COMPUTE_HEADLINE_KEYS if any(k in s for s in summaries.values())]
    return keys


def _labels(inner: Mapping[str, Any], compute: bool, mixed: bool) -> dict[str, str]:
    """Row labels by summary key: a slot run truncates at its timeout ("timed out"), a compute run
    at the response cap (:func:`~pipesim.io.html.truncated_label`); a mix names both."""
    labels = dict(HEADLINE_KEYS) | dict(COMPUTE_HEADLINE_KEYS)
    slot_cut = labels["episodes_truncated"]
    cuts = {truncated_label(r.scenario) if _engine(r) == "compute" else slot_cut for r in inner.values()}
    labels["episodes_truncated"] = " / ".join(sorted(cuts, key=lambda c: c != slot_cut))  # slot runs' first
    if mixed:
        labels["gen_util"] = MIXED_GEN_UTIL_LABEL
    elif compute:
        labels["gen_util"] = COMPUTE_GEN_UTIL_LABEL
    return labels


def _figure(summaries: Mapping[str, Mapping[str, Any]], panels: tuple[tuple[str, str], ...]) -> go.Figure:
    """One panel per metric of ``panels``, a bar per design."""
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[t for _, t in panels])
    from pipesim.io.viz.sweep import NUM, PALETTE

    names = list(summaries)
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(names))]
    for j, (k, label) in enumerate(panels, start=1):
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
        if k in _SHARES:
            fig.update_yaxes(range=[0, 1.1], row=1, col=j)
    fig.update_yaxes(separatethousands=True, rangemode="tozero")
    fig.update_layout(height=380, plot_bgcolor="white", title="designs side by side (one run each)")
    return fig
