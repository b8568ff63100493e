"""A plan's outputs: the text report, the recommended design as code, JSON, and the HTML report
(one Plotly figure, plotly.js embedded once, plus the tables)."""

from __future__ import annotations

import html
import json
import math
import sys
from collections.abc import Mapping
from typing import Any

from pipesim.compute import GPUS, MODELS, LogNormalLengths
from pipesim.io.interrupts import write_text_atomic
from pipesim.plan.evaluate import Evaluated
from pipesim.plan.frame import provenance, whole
from pipesim.plan.search import PlanResult
from pipesim.plan.space import Design, PlanSpec, engine_config, routing, scenario


def _fmt(v: float, spec: str = ",.0f") -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def _key(table: Mapping[str, Any], value: Any) -> str:
    return next((k for k, v in table.items() if v == value), getattr(value, "name", "?"))


def _default_sync(spec: PlanSpec, d: Design) -> float:
    import pipesim.compute as pc

    cluster: Any = pc.Cluster
    c = cluster(engine=engine_config(spec, d.tp), n_gpus=spec.n_gpus, trainer_gpus=d.trainer_gpus)
    return float(c.sync_time_s())


def scenario_code(spec: PlanSpec, d: Design) -> str:
    """Python that builds and runs design ``d`` (``pipesim.compute.run_compute``)."""
    eng = engine_config(spec, d.tp)
    n_rep = (spec.n_gpus - d.trainer_gpus) // d.tp
    sc = scenario(spec, d, spec.steps, n_slots=n_rep * eng.max_num_seqs)
    w = spec.workload
    if isinstance(w.response, LogNormalLengths):
        work = repr(w)
    else:
        work = "...  # the spec's TokenWorkload (a response trace)"
    base = spec.sync_time_s
    if base is None and spec.sync_scale == 1:
        sync = "None"  # the cluster's default
    else:
        sync = repr((base if base is not None else _default_sync(spec, d)) * spec.sync_scale)
    return "\n".join(
        [
            "import pipesim",
            "from pipesim.compute import *",
            f"engine = EngineConfig(model=MODELS[{_key(MODELS, spec.model)!r}], "
            f"gpu=GPUS[{_key(GPUS, spec.gpu)!r}], "
            f"tp={d.tp}, max_model_len={eng.max_model_len!r}, max_num_seqs={eng.max_num_seqs}, "
            f"gpu_memory_utilization={eng.gpu_memory_utilization}"
            + (", share_group_prefix=True)" if eng.share_group_prefix else ")"),
            f"cluster = Cluster(engine=engine, n_gpus={spec.n_gpus}, trainer_gpus={d.trainer_gpus})",
            f"workload = {work}",
            f"scenario = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size={spec.batch_size}, "
            f"steps={spec.steps}, max_staleness={d.eta}), admission=pipesim.{sc.admission!r}, "
            f"weight_update=pipesim.{sc.weight_update!r}, pool_size={sc.pool_size!r})",
            f"trainer = TrainerConfig(model=engine.model, gpu=engine.gpu, "
            f"n_gpus={spec.n_gpus if d.colocated else d.trainer_gpus}, mfu={spec.mfu})",
            f"run = run_compute(scenario, cluster, workload, trainer=trainer, sync_time_s={sync}"
            + (f", routing=pipesim.{rule!r})" if (rule := routing(spec)) is not None else ")"),
        ]
    ).replace("inner=", "inner=pipesim.")


def _row(e: Evaluated, n_gpus: int) -> list[str]:
    m = e.metrics
    return [
        e.design.label(n_gpus),
        f"{_fmt(m['throughput_per_hour'])} ± {_fmt(m.get('throughput_ci', 0.0))}",
        _fmt(m["tokens_per_hour"] / 1e6, ".1f"),
        _fmt(m["staleness_mean"], ".2f"),
        _fmt(m["staleness_max"], ".0f"),
        _fmt(m["discarded_share"] * 100, ".1f"),
        _fmt(m["gpu_hours_per_mtok"], ".2f"),
        f"{_fmt(m['step_time_s'], '.1f')} = {_fmt(m['train_time_s'], '.1f')}+{_fmt(m['sync_time_s'], '.1f')}"
        f"+{_fmt(m['wait_time_s'], '.1f')}",
        f"{_fmt(m['trainer/idle_ratio'] * 100, '.0f')}/{_fmt((1 - m['engine_busy_share']) * 100, '.0f')}"
        f"/{_fmt(m['gpu_busy_share'] * 100, '.0f')}",
        "/".join(
            _fmt(m[f"tokens_{k}"] / 1e6, ".2f")
            for k in ("generated", "trained", "discarded", "buffered", "in_flight")
        ),
    ]


HEADER = [
    "design",
    "samples/h ± 95% CI",
    "Mtok/h",
    "stale mean",
    "stale max",
    "disc %",
    "GPU-h/Mtok",
    "step s = train+sync+wait",
    "idle % trainer/engine, GPU busy %",
    "ledger Mtok gen/trained/disc/buf/inflight",
]


def table(rows: list[list[str]], header: list[str] = HEADER) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def ascii_front(result: PlanResult, width: int = 60, height: int = 14) -> str:
    """Throughput (up) against mean staleness (right) of the full runs: ``o`` infeasible, ``#``
    feasible, ``F`` on the front, ``*`` recommended."""
    pts = [e for e in result.full if not e.metrics.get("failed")]
    if not pts:
        return ""
    xs = [e.metrics["staleness_mean"] for e in pts]
    ys = [e.throughput for e in pts]
    x1, y1 = max(max(xs), 1e-9), max(max(ys), 1e-9)
    grid = [[" "] * width for _ in range(height)]
    front = {e.design for e in result.front}
    rank = {"o": 0, "#": 1, "F": 2, "*": 3}
    for e, x, y in zip(pts, xs, ys, strict=True):
        c = "o" if not e.feasible else "#"
        if e.design in front:
            c = "F"
        if result.best is not None and e.design == result.best.design:
            c = "*"
        i = height - 1 - min(int(y / y1 * (height - 1) + 0.5), height - 1)
        j = min(int(x / x1 * (width - 1) + 0.5), width - 1)
        if rank[c] >= rank.get(grid[i][j], -1):
            grid[i][j] = c
    lines = [f"{_fmt(y1):>9} |" + "".join(grid[0])]
    lines += ["          |" + "".join(r) for r in grid[1:]]
    lines.append("        0 +" + "-" * width)
    lines.append(f"           0{'mean staleness':^{width - 10}}{x1:>8.2f}")
    return "\n".join(lines)


def cut_line(result: PlanResult) -> str:
    """The fluid first cut in one line, with the share of its audited designs that disagreed."""
    cut = result.cut
    if not cut.ceilings:
        return "first cut: off"
    if not cut.ruled_out:
        return f"first cut (fluid ceiling): none of {len(cut.ceilings)} designs below the floor"
    share = cut.disagreement
    told = (
        "no audit"
        if share is None
        else f"{len(cut.disagreed)} of {len(cut.audited)} audited disagreed ({share:.0%})"
    )
    return (
        f"first cut (fluid ceiling, docs/plan.md): ruled out {len(cut.ruled_out)} of {len(cut.ceilings)} "
        f"designs below a floor of {_fmt(cut.floor)} samples/h; {told}"
    )


def text(result: PlanResult, top: int = 8) -> str:
    spec, best = result.spec, result.best
    c = spec.constraints
    limits = ", ".join(
        f"{k} <= {getattr(c, k)}"
        for k in ("mean_staleness", "max_staleness", "discarded_share")
        if getattr(c, k) is not None
    )
    out = [
        f"plan: {spec.model.name} on {spec.n_gpus} x {spec.gpu.name}, {spec.batch_size} samples per step "
        f"({spec.workload.samples_per_prompt} per prompt); constraints: {limits or 'none'}, "
        f"min trainer GPUs {c.min_trainer_gpus}",
        f"search: {result.method}, {result.n_candidates} candidates, "
        + ", ".join(f"{n} run for {s} steps" for s, n in result.rungs)
        + f" ({spec.seeds} seeds in full); {result.runs} runs in {result.elapsed_s:.1f} s",
        cut_line(result),
        "",
        f"best feasible designs (of {len(result.full)} run in full, {len(result.feasible)} feasible):",
        table([_row(e, spec.n_gpus) for e in result.feasible[:top]]),
        "",
        "Pareto front (feasible, non-dominated: throughput vs mean staleness vs discarded share):",
        table([_row(e, spec.n_gpus) for e in result.front]),
        "",
        "samples/h of the full runs against mean staleness (o infeasible, # feasible, F front, * best):",
        ascii_front(result),
    ]
    if best is not None:
        out += ["", f"recommended: {best.design.label(spec.n_gpus)}", scenario_code(spec, best.design)]
    if result.sensitivity:
        out += ["", "sensitivity (the best designs re-run in full):"]
        for s in result.sensitivity:
            move = (
                "recommendation unchanged"
                if s["best_after"] == s["recommended"]
                else f"best becomes {s['best_after']} ({_fmt(s['best_after_throughput'])} samples/h)"
                if s["best_after"]
                else "none of the best designs stays feasible"
            )
            out.append(
                f"  {s['variant']}: {_fmt(s['throughput_before'])} -> "
                f"{_fmt(s['throughput_after'])} samples/h "
                f"({s['change']:+.1%}{'' if s['still_feasible'] else ', infeasible'}); {move}"
            )
    return "\n".join(out)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def _entry(e: Evaluated, n_gpus: int) -> dict[str, Any]:
    return {
        "label": e.design.label(n_gpus),
        "design": e.design.as_dict(),
        "steps": e.steps,
        "feasible": e.feasible,
        "metrics": {k: whole(k, v) for k, v in e.metrics.items()},
    }


def as_json(result: PlanResult) -> dict[str, Any]:
    spec, best = result.spec, result.best
    n = spec.n_gpus
    return _clean(
        {
            **provenance(result),
            "cluster": {"gpu": spec.gpu.name, "n_gpus": n},
            "model": spec.model.name,
            "batch_size": spec.batch_size,
            "constraints": vars(spec.constraints),
            "method": result.method,
            "candidates": result.n_candidates,
            "rungs": [{"steps": s, "designs": k} for s, k in result.rungs],
            "first_cut": result.cut.as_dict(),
            "runs": result.runs,
            "elapsed_s": result.elapsed_s,
            "recommended": None
            if best is None
            else {**_entry(best, n), "code": scenario_code(spec, best.design)},
            "front": [_entry(e, n) for e in result.front],
            "full": [_entry(e, n) for e in result.full],
            "screened": [_entry(e, n) for e in result.screened],
            "sensitivity": result.sensitivity,
        }
    )


def _write(text: str, path: str) -> None:
    """``text`` to the file ``path``, or to standard output when ``path`` is ``-``."""
    if path == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    else:
        write_text_atomic(path, text)  # whole or not at all: an interrupt leaves the old file


def write_json(result: PlanResult, path: str) -> None:
    """The plan as JSON (:func:`as_json`) to ``path`` (``-``: standard output)."""
    _write(json.dumps(as_json(result), indent=1), path)


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
            "full, infeasible",
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
                        for e in evals
                    ],
                    hoverinfo="text+x+y",
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
                ),
                row=1,
                col=col,
            )
        if result.best is not None:
            b = result.best
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
                    hoverinfo="text+x+y",
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="mean staleness (versions)", row=1, col=1)
    fig.update_xaxes(title_text="discarded / generated tokens", tickformat=".0%", row=1, col=2)
    fig.update_yaxes(title_text="trained samples per hour", row=1, col=1)
    fig.update_layout(height=520, template="plotly_white", legend=dict(orientation="h", y=-0.2))
    return fig


def _html_table(rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADER)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_html(result: PlanResult, path: str) -> None:
    """The report: the figure (plotly.js embedded once, no CDN), the tables, the recommendation;
    to ``path`` (``-``: standard output)."""
    spec = result.spec
    n = spec.n_gpus
    fig_html = figure(result).to_html(full_html=False, include_plotlyjs=True)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>pipesim plan</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:13px}"
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td:first-child{text-align:left}"
        "pre{background:#f6f6f6;padding:1em}</style></head><body>",
        f"<h1>pipesim plan: {html.escape(spec.model.name)} on {n} x {html.escape(spec.gpu.name)}</h1>",
        f"<pre>{html.escape(text(result).split(chr(10) + chr(10))[0])}</pre>",
        fig_html,
        "<h2>Best feasible designs</h2>",
        _html_table([_row(e, n) for e in result.feasible[:12]]),
        "<h2>Pareto front</h2>",
        _html_table([_row(e, n) for e in result.front]),
    ]
    if result.best is not None:
        parts += [
            f"<h2>Recommended: {html.escape(result.best.design.label(n))}</h2>",
            f"<pre>{html.escape(scenario_code(spec, result.best.design))}</pre>",
        ]
    if result.sensitivity:
        parts.append(
            "<h2>Sensitivity</h2><pre>" + html.escape(text(result).split("sensitivity")[-1]) + "</pre>"
        )
    parts.append("</body></html>")
    _write("\n".join(parts), path)
