"""Discard and requeue starves long tasks; pacing admission trains them. ``python -m scenarios.starvation``.

A design that drops episodes staler than eta when the trainer consumes them and puts their task
back in the queue (the task is relaunched under fresh weights) looks harmless: the task mix is
kept. But a task is the same problem every time it is relaunched, so it takes as long every
time. A task whose rollout always takes longer than the time eta versions take to pass is
dropped, requeued, regenerated and dropped again: it is never trained, and its slot time is lost
over and over. Users of Tinker's asynchronous RL reported exactly this and moved to pacing the
admission instead (start work only as far ahead as the staleness bound allows, and train what
finishes).

Here tasks have identity and their own length: the duration pool is indexed by task id, and a
requeued task keeps its id, hence its duration (``Pipeline.launch``). Two designs at each eta:

* ``drop+requeue`` -- the engine is kept busy (:class:`~pipesim.policies.admission.QueueAhead`: in flight
  + buffered below slots + B), in-flight work pauses for each sync, and the trainer discards
  episodes staler than eta and requeues their tasks (:class:`~pipesim.policies.batching.DropStale`).
* ``pacing`` -- the count throttle admits at most eta batches ahead and the sync drains
  (:class:`~pipesim.policies.base.CountThrottle` + :class:`~pipesim.policies.base.Drain`): the same
  promise, staleness <= eta, kept by admission, and nothing is discarded.
* ``pacing, partial`` -- AReaL's throttle with in-flight work paused across syncs
  (:class:`~pipesim.policies.admission.AReaLThrottle` +
  :class:`~pipesim.policies.base.PartialRollout`): faster,
  nothing discarded, but a straggler may be trained staler than eta.

The metric is the share of tasks never trained among those first launched in the first half of
the run whose rollout finished at least once (so a task is not charged for want of time), overall
and among the *long* tasks: those longer than eta + 1 mean step periods of the drop+requeue run
(the same bar for every design).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np
import pandas as pd

from pipesim import PipelineConfig, Scenario, run
from pipesim.core.errors import MAX_POOL_TASKS
from pipesim.core.validate import refuse
from pipesim.policies.admission import AReaLThrottle, QueueAhead
from pipesim.policies.base import CountThrottle, Drain, PartialRollout
from pipesim.policies.batching import DropStale
from pipesim.results.run import RunResult
from scenarios.outputs import check_output

DESIGNS = ("drop+requeue", "pacing", "pacing, partial")
BASE: dict[str, Any] = dict(n_slots=64, batch_size=32, train_time_s=60.0, sync_time_s=10.0, steps=40)
COLUMN_LABELS = {
    "design": "design",
    "eta": "staleness bound eta (versions)",
    "long_s": "long task threshold (s)",
    "tasks": "tasks counted",
    "long_tasks": "long tasks counted",
    "never_trained_share": "tasks never trained (%)",
    "long_never_trained_share": "long tasks never trained (%)",
    "max_launches_per_task": "most launches of one task",
    "throughput_per_hour": "throughput (episodes trained / hour)",
    "staleness_max": "max staleness (versions)",
    "discarded_share": "episodes discarded (%)",
}
"""The header a reader sees for each column of :func:`starvation_table` (words, with units)."""
REPORT_COLUMNS = ("design", "eta", "long_never_trained_share", "never_trained_share", "throughput_per_hour")
"""The columns of :func:`starvation_table` that the report's table shows."""


def task_durations(n_tasks: int, median_s: float = 60.0, sigma: float = 1.0, seed: int = 0) -> np.ndarray:
    """One generation length per task id: log-normal, median ``median_s``, log-space spread ``sigma``."""
    rng = np.random.default_rng(seed)
    return median_s * np.exp(sigma * rng.standard_normal(n_tasks))


def scenario(design: str, eta: int, **pipeline: Any) -> Scenario:
    """The ``design`` (one of :data:`DESIGNS`) at staleness bound ``eta``."""
    cfg = PipelineConfig(**{**BASE, **pipeline, "max_staleness": eta})
    if design == "drop+requeue":
        busy = (cfg.n_slots + cfg.batch_size) / cfg.batch_size  # every slot busy, one batch queued
        return Scenario(
            pipeline=cfg,
            admission=QueueAhead(busy),
            weight_update=PartialRollout(),
            batching=DropStale(requeue=True),
            name=f"drop+requeue eta={eta}",
        )
    if design == "pacing":
        return Scenario(
            pipeline=cfg, admission=CountThrottle(), weight_update=Drain(), name=f"pacing eta={eta}"
        )
    if design == "pacing, partial":
        return Scenario(
            pipeline=cfg,
            admission=AReaLThrottle(),
            weight_update=PartialRollout(),
            name=f"pacing, partial eta={eta}",
        )
    raise refuse("design", f"must be one of {DESIGNS}, got {design!r}")


def never_trained(result: RunResult, durations: np.ndarray, long_s: float) -> dict[str, float]:
    """Shares of tasks never trained, among the tasks first launched in the first half of the run
    whose rollout finished at least once (trained or discarded): the work was done, and the
    question is whether the trainer ever learnt from it. A task still on its first rollout at the
    end is not counted, so a long task is not charged to a design for want of time."""
    eps = result.episode_table
    first = eps.groupby("task_id")["start_s"].min()
    finished = set(eps.loc[eps["status"].isin(["trained", "discarded"]), "task_id"])
    early = first.index[first <= result.sim_time_s / 2].to_numpy()
    eligible = np.array([t for t in early if t in finished], dtype=np.int64)
    trained = set(eps.loc[eps["status"] == "trained", "task_id"])
    is_long = durations[eligible] > long_s
    missed = np.array([t not in trained for t in eligible], dtype=bool)
    relaunches = eps.groupby("task_id").size()
    return {
        "tasks": float(len(eligible)),
        "long_tasks": float(is_long.sum()),
        "never_trained_share": float(missed.mean()) if len(eligible) else 0.0,
        "long_never_trained_share": float(missed[is_long].mean()) if is_long.any() else math.nan,
        "max_launches_per_task": float(relaunches.max()),
    }


def starvation_table(
    etas: tuple[int, ...] = (0, 1, 2, 4), seed: int = 0, sigma: float = 1.0, **pipeline: Any
) -> pd.DataFrame:
    """One row per (design, eta): shares of tasks never trained, throughput and discarded work."""
    cfg = PipelineConfig(**{**BASE, **pipeline})
    rows = []
    for eta in etas:
        # enough tasks for every launch; requeued tasks reuse their id, so only new tasks draw
        n_tasks = 4 * ((cfg.steps + eta + 2) * cfg.batch_size + cfg.n_slots)
        durations = task_durations(n_tasks, sigma=sigma, seed=seed)
        pool = durations.tolist()
        results = {d: run(scenario(d, eta, **pipeline).with_(pool_size=n_tasks), pool) for d in DESIGNS}
        # long: longer than eta + 1 of drop+requeue's mean step periods, the same bar for every design
        long_s = (eta + 1) * results["drop+requeue"].sim_time_s / cfg.steps
        for design, r in results.items():
            s = r.summary()
            row: dict[str, Any] = {"design": design, "eta": eta, "long_s": long_s}
            row.update(never_trained(r, durations, long_s))
            row.update(
                throughput_per_hour=s["throughput_per_hour"],
                staleness_max=s["staleness_max"],
                discarded_share=s["episodes_discarded"] / s["episodes_launched"],
            )
            rows.append(row)
    return pd.DataFrame(rows)


def readable_table(df: pd.DataFrame, columns: tuple[str, ...] = REPORT_COLUMNS) -> pd.DataFrame:
    """``columns`` of a :func:`starvation_table` as a reader sees them: headers in words with their
    units (:data:`COLUMN_LABELS`), shares as percentages. A copy: ``df`` keeps its names and shares."""
    out = df[list(columns)].copy()
    for col in out.columns:
        if str(col).endswith("_share"):
            out[col] = 100 * out[col]
    return out.rename(columns=COLUMN_LABELS)


def page_table(df: pd.DataFrame, caption: str) -> str:
    """``df`` as an HTML table for the ``--html`` page: the report's table
    (:func:`pipesim.io.report.table_html`) with its own style, the page having no report CSS."""
    from pipesim.io.report import table_html

    return PAGE_CSS + table_html(df, caption)


PAGE_CSS = """<style>.tbl{border-collapse:collapse;margin:1em;font:14px sans-serif}
.tbl td,.tbl th{padding:4px 10px;border-bottom:1px solid #eee;text-align:right}
.tbl caption{text-align:left;font-weight:600;padding:4px 0}</style>"""


TABLE_CAPTION = "Share of tasks never trained against eta"


def report_section(figure_div: Any, table_html: Any) -> list[str]:
    """The report's section (registered in the ``pipesim.report`` entry-point group)."""
    df = starvation_table()
    shown = readable_table(df)
    return [
        "<h2>Discard and requeue starves long tasks</h2>",
        "<p class=note>64 slots, B = 32, 40 steps, log-normal task lengths (median 60 s, sigma 1); a "
        "requeued task keeps its id and so its length. Dropping episodes staler than eta at "
        "consumption and requeuing them never trains the long tasks; pacing admission does "
        "(<code>python -m scenarios.starvation</code>).</p>",
        figure_div(starvation_figure(df), "fig-starvation"),
        table_html(shown, TABLE_CAPTION),
    ]


def starvation_figure(df: pd.DataFrame) -> Any:
    """The share of long tasks never trained against eta, one line per design (a plotly figure).

    A design whose line lies on one drawn before it (pacing with and without partial rollouts
    train every long task: both lines lie at 0%) is dashed over it, the one under it wide and
    dotted with rings round its points, and a note on the figure says so: drawn alike, the later
    line hid the other."""
    import plotly.graph_objects as go

    fig = go.Figure()
    lines = {
        str(d): [float(y) for y in rows.sort_values("eta")["long_never_trained_share"]]
        for d, rows in df.groupby("design", sort=False)
    }
    drawn: dict[str, list[float]] = {}
    for design, rows in df.groupby("design", sort=False):
        rows = rows.sort_values("eta")
        ys = lines[str(design)]
        same = next((d for d, prior in drawn.items() if prior == ys), None)
        drawn[str(design)] = ys
        under = not same and list(lines.values()).count(ys) > 1  # a dashed line is drawn over it
        fig.add_trace(
            go.Scatter(
                x=rows["eta"],
                y=ys,
                mode="lines+markers",
                name=str(design),
                line=dict(dash="dot" if under else "dash" if same else "solid", width=6 if under else 2),
                marker=dict(symbol="circle-open" if under else "circle", size=14 if under else 7),
                customdata=rows[["never_trained_share", "throughput_per_hour"]].to_numpy(),
                hovertemplate="eta=%{x}<br>long tasks never trained: %{y:.0%}"
                "<br>all tasks never trained: %{customdata[0]:.1%}"
                "<br>episodes/hour: %{customdata[1]:,.0f}<extra>%{fullData.name}</extra>",
            )
        )
        if same:  # said on the figure too: the legend alone showed two lines and the plot one
            fig.add_annotation(
                x=float(rows["eta"].mean()),
                y=ys[len(ys) // 2],
                text=f"{design} (dashed) lies on {same} (dotted)",
                showarrow=False,
                yshift=14,
                font=dict(size=12, color="#444"),
            )
    fig.update_layout(
        title="Discard and requeue starves long tasks",
        xaxis_title="staleness bound eta",
        xaxis_tickmode="array",
        xaxis_tickvals=sorted(df["eta"].unique().tolist()),  # integer bounds: no 0.5 ticks
        legend_title_text="design",
        yaxis_title="share of long tasks never trained",
        yaxis_tickformat=".0%",
        yaxis_range=[-0.05, 1.05],
        plot_bgcolor="white",  # as the other figures of the report
    )
    fig.update_xaxes(showgrid=True, gridcolor="#eee", zeroline=False)
    fig.update_yaxes(showgrid=True, gridcolor="#eee", zeroline=False)
    return fig


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m scenarios.starvation", description=__doc__.split("\n\n")[0])
    ap.add_argument("--etas", type=int, nargs="+", default=[0, 1, 2, 4])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sigma", type=float, default=1.0, help="log-space spread of task lengths")
    ap.add_argument("--steps", type=int, default=BASE["steps"])
    ap.add_argument(
        "--html", metavar="FILE", help="also write the figure and its table to a self-contained HTML page"
    )
    args = ap.parse_args(argv)
    if min(args.etas) < 0:
        ap.error(f"--etas: a staleness bound must be >= 0, got {min(args.etas)}")
    if args.steps < 1:
        ap.error(f"--steps must be at least 1, got {args.steps}")
    if args.seed < 0:
        ap.error(f"--seed must be >= 0, got {args.seed}")
    if not (math.isfinite(args.sigma) and args.sigma >= 0):
        ap.error(f"--sigma must be a finite number >= 0, got {args.sigma}")
    if len(set(args.etas)) != len(args.etas):  # each design would run and print twice
        ap.error(f"--etas: values must be distinct, got {args.etas}")
    check_output(ap, "--html", args.html)  # before the runs
    most = 4 * ((args.steps + max(args.etas) + 2) * BASE["batch_size"] + BASE["n_slots"])
    if most > MAX_POOL_TASKS:  # the pool of task lengths drawn up front: 10^8 steps asked for 95 GiB
        ap.error(
            f"--steps {args.steps:,} with --etas up to {max(args.etas):,}: the runs would draw {most:,} "
            f"task lengths, more than the {MAX_POOL_TASKS:,} a run may; fewer steps or smaller etas"
        )
    with np.errstate(over="ignore"):  # the overflow is the error below, not a warning
        longest = float(task_durations(most, sigma=args.sigma, seed=args.seed).max())
    if not math.isfinite(longest):  # exp(sigma z) overflowed: the runs would refuse an inf length
        ap.error(f"--sigma {args.sigma}: a task length overflows to inf; give a smaller sigma")
    df = starvation_table(tuple(args.etas), seed=args.seed, sigma=args.sigma, steps=args.steps)
    with pd.option_context("display.width", 160, "display.max_columns", 20, "display.precision", 3):
        print(df.to_string(index=False))
    if args.html:
        from pipesim.io.viz import figures_to_html

        page = figures_to_html([starvation_figure(df)], title="starvation")
        table = page_table(readable_table(df, tuple(COLUMN_LABELS)), TABLE_CAPTION)
        with open(args.html, "w", encoding="utf-8") as fh:
            fh.write(page.replace("</body>", table + "</body>", 1))  # the table below the figure
        print(f"figure and table written to {args.html}")


if __name__ == "__main__":
    from pipesim.io.interrupts import reader_may_leave

    raise SystemExit(reader_may_leave(main))
