"""The offline HTML report: every table and figure of the chapter's pipeline sections, by pipesim.

What it contains (chapter Sections 13.2, 13.3 and 13.7): the duration pool and straggler table,
the design table (with a design-comparison figure over seeds), Figure 13.1 (timelines of a
synchronous and an async eta=1 partial pipeline, 8 slots), Figure 13.2 (throughput and staleness
against eta, partial vs drain, 64 slots, bands over seeds), the sync-time table (with throughput
against sync time per design) and the timeout table. Each table prints pipesim's number next to
the chapter's.

Tables use the chapter's pool (65,536 durations, seed 0, consumed in order), so they reproduce the
chapter exactly. Figures with bands draw a fresh pool per seed (``Scenario(seed=s)``), so their
bands show how much the chapter's single-pool numbers depend on the draw.

Why the page is self-contained: plotly.js is inlined once in ``<head>`` and every figure is a div
that relies on it (``include_plotlyjs=False``), so the page opens offline and ships one copy of the
library (about 4.8 MB) however many figures it holds.
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from concurrent.futures import Executor
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from pipesim.core.validate import refuse
from pipesim.io.api import run, simulate_pipeline
from pipesim.io.interrupts import write_text_atomic
from pipesim.io.registry import CHAPTER_DESIGNS, chapter_design, get_scenario
from pipesim.io.sweep_exec import DEFAULT_CELL_TIMEOUT_S
from pipesim.policies.base import Drain, PartialRollout
from pipesim.workload.durations import chapter_pool, straggler_ratios

# The chapter's printed numbers (chapter13_expected.json), shown next to pipesim's.
CHAPTER: dict[str, Any] = {
    "pool": {"mean": 95.831, "median": 67.889, "p90": 214.821, "p99": 430.3, "max": 623.65},
    "straggler": {8: 2.615, 64: 4.328, 512: 5.369},
    "designs": {  # throughput, gen_util, staleness mean, staleness max, trained duration
        "synchronous": (450.56, 0.1911, 0.0, 0, 97.73),
        "one step ahead, drain": (505.97, 0.2243, 0.95, 1, 97.73),
        "async eta=1, partial": (1836.46, 0.808, 0.9312, 5, 94.052),
        "async eta=2, partial": (2077.49, 0.9542, 1.4953, 7, 93.182),
        "async eta=4, drain": (490.09, 0.2502, 3.1937, 4, 97.73),
    },
    "sync": {1.0: (458.63, 2260.97), 10.0: (450.56, 2077.49), 60.0: (410.43, 1431.92)},
    "timeout": {"cap": 279.457, "no timeout": (450.56, 0.1911), "timeout": (661.29, 0.2653), "share": 0.05},
    "fig13_1": (1130.0, 493.0),
}


def design_table(durations: torch.Tensor) -> pd.DataFrame:
    """The chapter's design table via :func:`pipesim.simulate_pipeline` (64 slots, B=64, 20 steps)."""
    rows = []
    for name, (eta, drain) in CHAPTER_DESIGNS.items():
        r = simulate_pipeline(durations, 64, 64, 60.0, 10.0, max_staleness=eta, interrupt=not drain, steps=20)
        ch = CHAPTER["designs"][name]
        rows.append(
            {
                "design": name,
                "episodes/hour": r["throughput"],
                "chapter episodes/hour": ch[0],
                "slot util": r["gen_util"],
                "chapter slot util": ch[1],
                "staleness mean": r["staleness_mean"],
                "staleness max": r["staleness_max"],
                "chapter staleness mean, max": f"{ch[2]:.2f}, {ch[3]}",
                "trained episode mean (s)": r["trained_duration"],
                "chapter trained mean (s)": ch[4],
            }
        )
    return pd.DataFrame(rows)


def format_design_table(df: pd.DataFrame) -> str:
    """The design table as the chapter prints it, with the chapter's numbers in brackets."""
    lines = [f"{'design':<22} | episodes/hour | slot util | staleness mean, max | trained episode mean (s)"]
    for r in df.to_dict("records"):
        lines.append(
            f"{r['design']:<22} | {r['episodes/hour']:6.0f} [{r['chapter episodes/hour']:4.0f}] |"
            f" {r['slot util']:4.2f} [{r['chapter slot util']:.2f}] | {r['staleness mean']:5.2f}, "
            f"{r['staleness max']:2d} [{r['chapter staleness mean, max']}] |"
            f" {r['trained episode mean (s)']:5.1f}"
            f" [{r['chapter trained mean (s)']:.1f}]"
        )
    return "\n".join(lines)


def pool_tables(d: torch.Tensor) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Section 13.2: pool statistics and the straggler table (E[slowest of B] / mean)."""
    q = d.quantile(torch.tensor([0.5, 0.9, 0.99]))
    ours = {
        "mean": d.mean().item(),
        "median": q[0].item(),
        "p90": q[1].item(),
        "p99": q[2].item(),
        "max": d.max().item(),
    }
    stats = pd.DataFrame(
        [{"statistic": k, "pipesim (s)": v, "chapter (s)": CHAPTER["pool"][k]} for k, v in ours.items()]
    )
    ratios = straggler_ratios(d)
    mean = d.mean().item()
    strag = pd.DataFrame(
        [
            {
                "B": b,
                "expected slowest (s)": r * mean,
                "x mean": f"{r:.3f}",  # three decimals: 2.615 vs 2.6147 must not print as 2.62 vs 2.61
                "chapter x mean": f"{CHAPTER['straggler'][b]:.3f}",
            }
            for b, r in ratios.items()
        ]
    )
    return stats, strag


def sync_table(d: torch.Tensor) -> pd.DataFrame:
    """Section 13.7: throughput against sync time, synchronous vs async eta=2 partial."""
    rows = []
    for st, (ch_sync, ch_async) in CHAPTER["sync"].items():
        s = simulate_pipeline(d, 64, 64, 60.0, st, max_staleness=0, steps=20)["throughput"]
        a = simulate_pipeline(d, 64, 64, 60.0, st, max_staleness=2, steps=20)["throughput"]
        rows.append(
            {
                "sync time (s)": st,
                "synchronous": s,
                "chapter synchronous": ch_sync,
                "async eta=2, partial": a,
                "chapter async eta=2": ch_async,
            }
        )
    return pd.DataFrame(rows)


def timeout_table(d: torch.Tensor) -> pd.DataFrame:
    """Section 13.7: a synchronous pipeline with and without a timeout at the pool's p95."""
    cap = d.quantile(0.95).item()
    rows = []
    for name, pool in [("no timeout", d), (f"timeout at p95 ({cap:.0f} s)", d.clamp(max=cap))]:
        r = simulate_pipeline(pool, 64, 64, 60.0, 10.0, max_staleness=0, steps=20)
        ch = CHAPTER["timeout"]["no timeout" if pool is d else "timeout"]
        assert isinstance(ch, tuple)
        rows.append(
            {
                "synchronous": name,
                "episodes/hour": r["throughput"],
                "chapter episodes/hour": ch[0],
                "slot util": r["gen_util"],
                "chapter slot util": ch[1],
                "truncated share of the pool": float((d > cap).float().mean()) if pool is not d else 0.0,
            }
        )
    return pd.DataFrame(rows)


def table_html(df: pd.DataFrame, caption: str) -> str:
    """``df`` as the report's HTML table (class ``tbl``): numbers to 3 figures, NaN as a dash."""

    def fmt(x: float) -> str:
        return f"{x:,.3g}" if abs(x) < 10 else f"{x:,.0f}"

    def seconds(x: float) -> str:  # as the demo prints durations: 97.7, not 98 (the chapter's 97.73)
        if x != x:
            return "\u2013"
        # rounded to 3 decimals first, as the chapter prints them, then half up in decimal: the
        # pool's 623.650391 and the chapter's 623.650 both read 623.7 (the chapter's 624). Binary
        # rounding of 623.650 gives 623.6 (it is 623.6499... as a double), so the half-up step is
        # what keeps both columns equal and correctly rounded.
        x = round(float(x), 3)
        if x.is_integer():
            return f"{x:,.0f}"
        return f"{Decimal(f'{x:.3f}').quantize(Decimal('0.1'), rounding=ROUND_HALF_UP):,}"

    timed: dict[Any, Any] = {
        c: seconds for c in df.columns if str(c).endswith("(s)") and pd.api.types.is_float_dtype(df[c])
    }
    table = df.to_html(
        index=False, float_format=fmt, formatters=timed, border=0, classes="tbl", na_rep="\u2013"
    )  # no NaN
    return table.replace(">", f"><caption>{html.escape(caption)}</caption>", 1)


CSS = """body{font-family:system-ui,sans-serif;max-width:1300px;margin:2em auto;color:#222}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd}.tbl{border-collapse:collapse;margin:1em 0}
.tbl td,.tbl th{padding:4px 10px;border-bottom:1px solid #eee;text-align:right}
.tbl caption{caption-side:top;text-align:left;font-weight:600;padding:4px 0}.note{color:#555}"""


REPORT_SWEEPS = {
    "designs": "report 1/3: designs (13.3)",
    "eta": "report 2/3: staleness bound (fig 13.2)",
    "sync": "report 3/3: sync time (13.7)",
}
"""The progress bar's label of each of the report's sweeps: what its runs are for."""


def build_report(
    out: str | Path = "report.html",
    *,
    seeds: int = 3,
    executor: Executor | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    etas: Sequence[int] = tuple(range(9)),
    timeout_s: float | None = DEFAULT_CELL_TIMEOUT_S,
) -> Path:
    """Compute every table and figure and write the self-contained page to ``out``; returns its path.

    ``seeds`` pools per point for the banded figures; ``executor``, ``workers`` and ``timeout_s``
    as in :func:`pipesim.io.sweeps.sweep` (each sweep makes its own pool when no executor is given,
    so that a worker killed for a hung cell, or an interrupt, stops only that pool). The page is
    written whole or not at all: an interrupt leaves the file as it was.
    """
    from pipesim.io import viz
    from pipesim.io.sweeps import sweep

    if seeds < 1:
        raise refuse("seeds", f"must be >= 1, got {seeds}")
    t0 = time.perf_counter()
    d = chapter_pool()
    stats, strag = pool_tables(d)
    designs = design_table(d)
    syncs = sync_table(d)
    timeouts = timeout_table(d)
    fig1 = {
        "synchronous": run(get_scenario("fig13.1-sync")),
        "async eta=1, partial": run(get_scenario("fig13.1-async")),
    }

    run_kw: dict[str, Any] = dict(
        seeds=seeds, executor=executor, workers=workers, progress=progress, timeout_s=timeout_s
    )
    base = {
        k: chapter_design(k, eta, drain).with_(pool_size=None) for k, (eta, drain) in CHAPTER_DESIGNS.items()
    }
    # each bar says which figure its runs are for (three bars all headed "sweep" said nothing)
    sw_designs = sweep(base, **run_kw, label=REPORT_SWEEPS["designs"])
    eta_base = chapter_design("eta sweep", 0).with_(pool_size=None)
    sw_eta = sweep(
        eta_base,
        over={"max_staleness": list(etas), "weight_update": [PartialRollout(), Drain()]},
        **run_kw,
        label=REPORT_SWEEPS["eta"],
    )
    sync_base = {k: base[k] for k in ("synchronous", "async eta=2, partial")}
    sw_sync = sweep(
        sync_base, over={"sync_time_s": [1.0, 10.0, 30.0, 60.0]}, **run_kw, label=REPORT_SWEEPS["sync"]
    )
    failed = pd.concat([s.failures for s in (sw_designs, sw_eta, sw_sync)])

    f_tl = viz.timelines(fig1)
    f_eta = viz.staleness_throughput_figure(sw_eta.aggregate)
    f_design = viz.design_comparison_figure(sw_designs.aggregate)
    f_sync = viz.lines_figure(
        sw_sync.aggregate,
        "sync_time_s",
        "throughput_per_hour",
        title="Throughput against sync time",
        xtitle="sync time (s)",
        ytitle="episodes trained per hour",
    )
    t_sync, t_async = (r.sim_time_s for r in fig1.values())
    bands = (
        f"banded figures show the mean and 95% interval over {seeds} fresh pools (each sized for its "
        f"run, drawn at seeds 0..{seeds - 1}: not the chapter's pool)"
        if seeds > 1
        else "figures show one fresh pool (sized for its run, drawn at seed 0: not the chapter's pool), "
        "so no interval"
    )
    ch1 = CHAPTER["fig13_1"]
    parts: list[str] = [
        "<h1>pipesim: the chapter's rollout-pipeline results, reproduced</h1>",
        "<p class=note>Chapter 13, Sections 13.2, 13.3 and 13.7. "
        f"Tables use the chapter's pool (65,536 agent durations, seed 0); {bands}. "
        "Generated in {elapsed} s.</p>",
        "<h2>13.2 Where the time goes: long-tailed episodes</h2>",
        table_html(stats, "Duration pool"),
        table_html(strag, "Straggler table: expected slowest episode of B"),
        "<h2>13.3 Synchronous, one-step-ahead and asynchronous pipelines</h2>",
        table_html(designs, "Design table (64 slots, B=64, 60 s train, 10 s sync, 20 steps)"),
        # the figure is over fresh pools, the table the chapter's one: say so, or its max markers
        # (a mean over seeds) read as contradicting the table's 7
        f"<p class=note>The same designs over fresh pools: bars are the mean over {seeds} seed(s)"
        + (" with a 95% interval" if seeds > 1 else "")
        + "; a diamond is the mean of each pool's largest staleness.</p>",
        viz.figure_div(f_design, "fig-designs"),
        "<h3>Figure 13.1: timelines, 8 slots, B=8, 4 steps</h3>"
        f"<p class=note>pipesim: synchronous {t_sync:,.0f} s, async eta=1 partial {t_async:,.0f} s "
        f"(chapter: {ch1[0]:,.0f} s and {ch1[1]:,.0f} s). Bars are coloured by "
        "the version each segment generated under and labelled with the version that started the episode; "
        "yellow bands are weight syncs, grey bars are pauses.</p>",
        viz.figure_div(f_tl, "fig-13-1"),
        "<h3>Figure 13.2: throughput and staleness against the staleness bound (64 slots, B=64)</h3>",
        f"<p class=note>Over the same {seeds} fresh pool(s) as the figure above, not the chapter's pool: "
        "its throughput and maximum staleness differ from the chapter's by the draw (the chapter's pool "
        "gives a maximum of 7 at eta 2 and beyond, above the bound up to eta 6; "
        "<code>python -m scenarios.chapter13</code> prints it).</p>",
        viz.figure_div(f_eta, "fig-13-2"),
        "<h2>13.7 Design problems in practice</h2>",
        table_html(syncs, "The cost of weight synchronisation (episodes/hour)"),
        viz.figure_div(f_sync, "fig-sync"),
        table_html(timeouts, "A timeout at the 95th percentile, synchronous pipeline"),
    ]
    parts += contributed_sections(viz.figure_div, table_html)
    if len(failed):
        parts.append(table_html(failed, "Sweep cells that failed"))
    body = "\n".join(parts).replace("{elapsed}", f"{time.perf_counter() - t0:.0f}")
    page = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>pipesim report</title>'
        f"<style>{CSS}</style>{viz.plotlyjs_script()}</head><body>{body}</body></html>"
    )
    path = Path(out)
    write_text_atomic(path, page)  # an interrupt leaves the old page or none, never half of one
    return path


REPORT_GROUP = "pipesim.report"
"""Entry-point group of report sections: each value is a callable ``section(figure_div, table_html)``
returning HTML parts, so a scenario package adds its figures without pipesim importing it."""


def contributed_sections(figure_div: Any, table_html: Any) -> list[str]:
    """The HTML parts of every registered report section, in the entry points' name order."""
    from importlib.metadata import entry_points

    parts: list[str] = []
    for ep in sorted(entry_points(group=REPORT_GROUP), key=lambda e: e.name):
        parts += list(ep.load()(figure_div, table_html))
    return parts


def external_urls(page: str) -> list[str]:
    """http(s) URLs in ``src``/``href`` attributes of a page (script bodies are not attributes)."""
    from html.parser import HTMLParser

    found: list[str] = []

    class _P(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, Any]]) -> None:
            for k, v in attrs:
                if (
                    k in ("src", "href")
                    and isinstance(v, str)
                    and v.strip().lower().startswith(("http:", "https:", "//"))
                ):
                    found.append(v)

    _P().feed(page)
    return found
