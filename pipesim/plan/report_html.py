"""A plan's HTML report: one Plotly figure (plotly.js embedded once, no CDN) of throughput
against mean staleness and against discarded share, the tables and the recommended code."""

from __future__ import annotations

import html
import math
from typing import Any

from pipesim.plan.code import scenario_code, wrap_code
from pipesim.plan.report import _fmt, _write, best_heading, header, rows, text
from pipesim.plan.report_lines import conclusion, proved_twin
from pipesim.plan.search import PlanResult
from pipesim.plan.slots import slot_lines
from pipesim.plan.verdicts import why_infeasible

HOVER_X = {
    "staleness_mean": "mean staleness %{x:.2f} versions",
    "discarded_share": "discarded %{x:.1%} of tokens",
}
"""The x value of a point in its hover text, by the panel's metric."""
HOVER_Y = "trained samples/h<extra></extra>"
INFEASIBLE = "full, infeasible"
"""The trace of the infeasible full runs: its hover says why each is (the mean staleness the x
axis shows is the whole run's; the judge reads the settled one, :mod:`pipesim.plan.verdicts`)."""


SHARE_TICKS = 5
"""The fewest ticks past 0 the discarded-share axis gets (fewer than 2.5x as many: 1-2-5 steps)."""

HTML_TOP = 12
"""Rows of the page's best-designs table (the text shows 8; the heading says how many)."""


def share_ticks(top: float) -> tuple[float, str]:
    """The tick step and d3 format of a share axis from 0 to ``top``: the largest step of 1, 2 or
    5 x 10^k giving at least :data:`SHARE_TICKS` ticks past 0, and as many decimals of a percent
    as the step has, so no two ticks print alike (``.0%`` printed ``0% 0% 0% 1% 1% 1%`` over 0-1%)."""
    raw = max(top, 1e-9) / SHARE_TICKS
    exp = math.floor(math.log10(raw))
    step = next(m * 10.0**exp for m in (5, 2, 1) if m * 10.0**exp <= raw * (1 + 1e-9))
    step = float(f"{step:.12g}")  # 0.002, not 0.0020000000000000005
    decimals = max(0, -math.floor(math.log10(step * 100) + 1e-9))
    return step, f".{decimals}%"


def figure(result: PlanResult) -> Any:
    """Throughput against mean staleness and against discarded share: screened designs (grey),
    full runs (infeasible hollow, feasible filled by cost), the front (a line), the best (a star)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    spec = result.spec
    n = spec.n_gpus
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("throughput vs mean staleness", "throughput vs discarded-token share")
    )
    full_keys = {e.design for e in result.full}
    groups = [
        (
            "screened (short runs)",
            [e for e in result.screened if e.design not in full_keys and not e.metrics.get("failed")],
            dict(color="lightgrey", size=6),
        ),
        (
            INFEASIBLE,
            [e for e in result.full if not e.feasible and not e.metrics.get("failed")],
            dict(color="indianred", size=8, symbol="circle-open"),
        ),
        (
            "full, feasible",
            result.feasible,
            dict(
                size=9,
                color=[e.metrics["gpu_hours_per_mtok"] for e in result.feasible],
                colorscale="Viridis",
                colorbar=dict(title="GPU-h / Mtok"),
                showscale=True,
            ),
        ),
    ]
    for col, key in ((1, "staleness_mean"), (2, "discarded_share")):
        for name, evals, marker in groups:
            if not evals:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[e.metrics[key] for e in evals],
                    y=[e.throughput for e in evals],
                    mode="markers",
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    marker=marker if col == 1 or "colorbar" not in marker else {**marker, "showscale": False},
                    text=[
                        f"{e.design.label(n)}<br>{e.steps} steps<br>"
                        f"{_fmt(e.metrics['gpu_hours_per_mtok'], '.2f')} GPU-h/Mtok"
                        + (
                            f"<br>infeasible: {html.escape(why_infeasible(spec, e))}"
                            if name == INFEASIBLE
                            else ""
                        )
                        for e in evals
                    ],
                    hovertemplate=f"%{{text}}<br>{name}<br>{HOVER_X[key]}<br>%{{y:,.0f}} {HOVER_Y}",
                    cliponaxis=False,  # a design at 0 (no staleness, nothing discarded) shows whole
                ),
                row=1,
                col=col,
            )
        front = sorted(result.front, key=lambda e: e.metrics[key])
        if front:
            fig.add_trace(
                go.Scatter(
                    x=[e.metrics[key] for e in front],
                    y=[e.throughput for e in front],
                    mode="lines",
                    line=dict(color="black", dash="dot"),
                    name="Pareto front",
                    legendgroup="front",
                    showlegend=col == 1,
                    hoverinfo="skip",
                ),
                row=1,
                col=col,
            )
        if result.best is not None:
            b = proved_twin(result, result.best)  # the name the text gives it (the same runs)
            fig.add_trace(
                go.Scatter(
                    x=[b.metrics[key]],
                    y=[b.throughput],
                    mode="markers",
                    name="recommended",
                    legendgroup="best",
                    showlegend=col == 1,
                    marker=dict(symbol="star", size=16, color="gold", line=dict(color="black", width=1)),
                    text=[b.design.label(n)],
                    hovertemplate=f"recommended: %{{text}}<br>{HOVER_X[key]}<br>%{{y:,.0f}} {HOVER_Y}",
                    cliponaxis=False,
                ),
                row=1,
                col=col,
            )
    # axes from zero to a little past the largest value (an all-zero share spanned -100%..100%)
    shown = [e for e in [*result.screened, *result.full] if not e.metrics.get("failed")]
    top_stale = max([e.metrics["staleness_mean"] for e in shown] + [0.0])
    top_disc = max([e.metrics["discarded_share"] for e in shown] + [0.0])
    top_thr = max([e.throughput for e in shown] + [0.0])
    # a little left of 0 and below it, so that a design at 0 clears the axis and its tick labels
    x1, x2, y = max(top_stale * 1.08, 0.5), max(top_disc * 1.08, 0.01), max(top_thr * 1.08, 1.0)
    fig.update_xaxes(title_text="mean staleness (versions)", range=[-0.03 * x1, x1], row=1, col=1)
    step, fmt = share_ticks(x2)
    fig.update_xaxes(
        title_text="discarded / generated tokens",
        tickformat=fmt,
        tick0=0.0,
        dtick=step,
        range=[-0.03 * x2, x2],
        row=1,
        col=2,
    )
    fig.update_xaxes(zeroline=True, zerolinecolor="#ccc")
    fig.update_yaxes(range=[-0.03 * y, y])
    fig.update_yaxes(title_text="trained samples per hour", separatethousands=True)
    fig.update_layout(height=520, template="plotly_white", legend=dict(orientation="h", y=-0.2))
    return fig


def _html_table(result: PlanResult, body_rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header(result))
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body_rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _section(title: str, lines: list[str]) -> str:
    return f"<h2>{html.escape(title)}</h2><pre class='said'>{html.escape(chr(10).join(lines))}</pre>"


def write_html(result: PlanResult, path: str) -> None:
    """The report: the figure (plotly.js embedded once, no CDN), the tables, the recommendation;
    to ``path`` (``-``: standard output)."""
    spec = result.spec
    n = spec.n_gpus
    fig_html = figure(result).to_html(
        full_html=False, include_plotlyjs=True, div_id="fig-plan", config={"displaylogo": False}
    )
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>pipesim plan</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:first-child{text-align:left}"
        "pre{background:#f6f6f6;padding:1em;white-space:pre-wrap;overflow-wrap:anywhere}"  # long lines wrap
        "pre.said{background:#fffbe6;font-size:13px}"  # the conclusion's sentences, not code
        "</style></head><body>",
        f"<h1>pipesim plan: {html.escape(spec.model.name)} on {n} x {html.escape(spec.gpu.name)}</h1>",
        f"<pre>{html.escape(text(result).split(chr(10) + chr(10))[0])}</pre>",
        fig_html,
        f"<h2>Best feasible designs</h2><p>{html.escape(best_heading(result, HTML_TOP))}:</p>",
        _html_table(result, rows(result, result.feasible, HTML_TOP)),
    ]
    if slots := slot_lines(result, HTML_TOP):  # the designs held back by their tool-call slots
        parts.append(_section("Tool-call slots", slots))
    # the conclusion, section by section, in the text's words (pipesim.plan.report_lines): the
    # paired test, verification and its fallback, the baseline's verdict and the infeasible full
    # runs with why under the first table, then the front, the recommendation (its tie and notes
    # over its code) and the sensitivity
    sections = dict(conclusion(result))
    for title in ("Paired test", "Verification", "Baseline", "Infeasible"):
        if title in sections:
            parts.append(_section(title, sections[title]))
    parts += ["<h2>Pareto front</h2>", _html_table(result, rows(result, result.front))]
    if result.best is not None:
        said = [s.removeprefix("  ") for s in sections["Recommended"][1:]]  # the first is the heading
        named = proved_twin(result, result.best).design  # as the text and the JSON name it
        parts += [
            f"<h2>Recommended: {html.escape(named.label(n))}</h2>",
            *([f"<pre class='said'>{html.escape(chr(10).join(said))}</pre>"] if said else []),
            f"<pre>{html.escape(wrap_code(scenario_code(spec, named)))}</pre>",
        ]
    if "Sensitivity" in sections:  # heading line and all, as the text prints it
        parts.append("<h2>Sensitivity</h2><pre>" + html.escape("\n".join(sections["Sensitivity"])) + "</pre>")
    parts.append("</body></html>")
    _write("\n".join(parts), path)
