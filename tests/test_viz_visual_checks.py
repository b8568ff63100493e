"""What a reader sees in the HTML outputs, checked on the figures' structure (found by rendering
every page headless and looking): a shared time axis that holds every run, legends that name every
mark drawn, one colour per version across views, slot labels that do not overlap, heatmap cells
that stay visible, axis titles with units, subplot titles that fit, bars coloured as their lines,
lines that are not hidden under others, pages that fit the window and no NaN in a table."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from pipesim import run
from pipesim.io.registry import get_scenario
from pipesim.io.viz import aggregate_view, design_comparison_figure, lines_figure, timeline, timelines
from pipesim.io.viz.aggregate import STALENESS_SCALE
from pipesim.io.viz.sweep import DESIGN_PANELS, policy_words, staleness_throughput_figure
from pipesim.io.viz.timeline import LABEL_PX, slot_rows_px, tick_step


@pytest.fixture(scope="module")
def fig13_1() -> dict[str, Any]:
    return {"synchronous": run(get_scenario("fig13.1-sync")), "async": run(get_scenario("fig13.1-async"))}


@pytest.fixture(scope="module")
def run64() -> Any:
    return run(get_scenario("async-eta2").with_(steps=2))


def _axes(fig: go.Figure, prefix: str) -> Iterator[Any]:
    for name in fig.layout:
        if name.startswith(prefix):
            yield fig.layout[name]


def test_a_shared_time_axis_holds_the_longest_run(fig13_1: dict[str, Any]) -> None:
    # the synchronous run takes 1,130 s, the async one 493 s: the axis was cut at 498 s
    fig = timelines(fig13_1)
    longest = max(r.sim_time_s for r in fig13_1.values())
    assert longest > 2 * min(r.sim_time_s for r in fig13_1.values())
    for ax in _axes(fig, "xaxis"):
        assert ax.range[1] >= longest


def test_the_legend_names_every_mark_once_whichever_run_draws_it(fig13_1: dict[str, Any]) -> None:
    fig = timelines(fig13_1)
    drawn = {t.name for t in fig.data if t.showlegend is not False or t.name != "segment (hover)"}
    drawn.discard("segment (hover)")
    in_legend = [t.name for t in fig.data if t.showlegend]
    assert sorted(in_legend) == sorted(set(in_legend))  # each once
    assert set(in_legend) == drawn
    # the second run's pauses and over-bound marks are the ones the first run lacks
    assert {"paused (sync)", "staleness > eta (continued across updates)"} <= set(in_legend)


def test_a_version_has_one_colour_in_every_run_and_view(fig13_1: dict[str, Any]) -> None:
    fig = timelines(fig13_1)
    colours: dict[str, set[str]] = {}
    for t in fig.data:
        if t.type == "bar" and str(t.name).startswith("v"):
            colours.setdefault(t.name, set()).add(t.marker.color)
    assert colours and all(len(c) == 1 for c in colours.values())
    res = fig13_1["async"]
    bars = {
        t.name: t.marker.color for t in timeline(res).data if t.type == "bar" and str(t.name).startswith("v")
    }
    areas = {
        t.name: t.fillcolor
        for t in aggregate_view(res).data
        if t.type == "scatter" and t.stackgroup == "flight"
    }
    assert areas and all(bars[v] == c for v, c in areas.items())


def test_slot_labels_are_spaced_for_their_text(run64: Any) -> None:
    fig = timeline(run64)
    n_slots = run64.scenario.pipeline.n_slots
    ticks = fig.layout.yaxis2.tickvals
    assert len(ticks) > 1
    assert slot_rows_px(n_slots) / len(ticks) >= LABEL_PX  # 64 labels in 508 px overlapped
    assert ticks[0] == 0 and len(set(np.diff(ticks))) == 1
    assert tick_step(8, slot_rows_px(8)) == 1  # small runs keep every label
    for n in (64, 200, 1024, 12_288):
        px = slot_rows_px(n)
        assert px / math.ceil(n / tick_step(n, px)) >= LABEL_PX


def test_the_staleness_heatmap_shows_its_smallest_count_and_labels_the_bound(run64: Any) -> None:
    fig = aggregate_view(run64)
    (heat,) = [t for t in fig.data if t.type == "heatmap"]
    assert heat.zmin == 0 and heat.colorscale[0][1] == STALENESS_SCALE[0][1]
    lowest = STALENESS_SCALE[0][1].lstrip("#")
    assert sum(int(lowest[i : i + 2], 16) for i in (0, 2, 4)) < 3 * 235  # not white (no episodes)
    eta = run64.scenario.pipeline.max_staleness
    assert any(s.y0 == eta + 0.5 for s in fig.layout.shapes)
    assert any(str(eta) in (a.text or "") for a in fig.layout.annotations if a.yref and "y4" in a.yref)
    assert fig.layout.yaxis4.range[1] > eta + 0.5  # the line inside the panel, not on its edge
    assert max(fig.layout.yaxis4.tickvals) <= int(run64.trained["staleness"].max())


def _agg() -> pd.DataFrame:
    rows = []
    for d in ("a", "b"):
        for x in (0, 1, 2):
            row: dict[str, Any] = {"design": d, "max_staleness": x, "n_seeds": 2}
            for m in ("throughput_per_hour", "gen_util", "staleness_mean", "staleness_max", "length_bias"):
                row |= {f"{m}_mean": 1.0 + x, f"{m}_lo": 0.5 + x, f"{m}_hi": 1.5 + x}
            rows.append(row)
    return pd.DataFrame(rows)


def test_sweep_axes_say_what_and_in_which_unit() -> None:
    for metric in ("throughput_per_hour", "staleness_mean", "gen_util"):
        title = lines_figure(_agg(), "max_staleness", metric).layout.yaxis.title.text
        assert title and title != metric and "_" not in title
    assert lines_figure(_agg(), "max_staleness", "gen_util", ytitle="mine").layout.yaxis.title.text == "mine"


def test_figure_13_2_names_its_policies_in_words() -> None:
    """Its legend read ``weight_update`` over ``PartialRollout()`` and ``Drain()`` (the cell labels)
    beside the staleness lines: now words, and a title saying which panel is which."""
    agg = _agg().assign(weight_update=lambda d: d["design"].map({"a": "PartialRollout()", "b": "Drain()"}))
    fig = staleness_throughput_figure(agg)
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert {"partial rollout", "drain"} <= set(names) and not any("(" in n for n in names)
    assert "_" not in fig.layout.legend.title.text
    assert policy_words("AReaLThrottle()") == "AReaLThrottle"  # an acronym keeps its spelling
    assert policy_words("InFlightUpdate(load_time_s=0.5)") == "InFlightUpdate(load_time_s=0.5)"


def test_design_panel_titles_fit_their_quarter() -> None:
    fig = design_comparison_figure(_agg().query("max_staleness == 0"))
    titles = [a.text for a in fig.layout.annotations]
    assert len(titles) == len(DESIGN_PANELS)
    # four panels in about 1,000 px: ~250 px a title, ~7 px a character at 16 px
    assert max(len(line) for t in titles for line in t.split("<br>")) <= 32


def test_mismatch_bars_wear_their_lines_colours() -> None:
    from mismatch.figure import mismatch_figure

    keys = ["k1", "k2", "k3"]
    result = {
        "model": {"label": "tiny"},
        "comparisons": [{"key": k, "name": f"comparison {k}"} for k in keys],
        "samples": {"d": {k: [[0.0, 1e-3 * (i + 1), 2e-3]] for i, k in enumerate(keys)}},
        "bins": [
            {"lo": lo, "hi": hi, "n_tokens": 3, "mean_abs_d": {k: 1e-3 for k in keys}}
            for lo, hi in ((0.0, 0.5), (0.5, 1.0))
        ],
    }
    fig = mismatch_figure(result)
    lines = {t.legendgroup: t.line.color for t in fig.data if t.type == "scatter"}
    bars = {t.legendgroup: t.marker.color for t in fig.data if t.type == "bar"}
    assert set(bars) == set(keys) and bars == lines
    assert len(set(lines.values())) == len(keys)


def test_the_dotted_pacing_line_shows_round_the_line_drawn_over_it() -> None:
    from scenarios.starvation import starvation_figure

    df = pd.DataFrame(
        [
            {"design": d, "eta": e, "long_never_trained_share": s, "never_trained_share": 0.0}
            | {"throughput_per_hour": 1.0}
            for d, s in (("drop+requeue", 1.0), ("pacing", 0.0), ("pacing, partial", 0.0))
            for e in (0, 1)
        ]
    )
    fig = starvation_figure(df)
    order = [t.name for t in fig.data]
    pacing, partial = (next(t for t in fig.data if t.name == n) for n in ("pacing", "pacing, partial"))
    assert order.index("pacing") < order.index("pacing, partial")  # drawn under it
    assert pacing.line.dash == "dot" and pacing.line.width > 2 * partial.line.width
    assert pacing.marker.size > partial.marker.size and pacing.marker.symbol.endswith("-open")


def _capture_write_html(monkeypatch: pytest.MonkeyPatch) -> list[tuple[go.Figure, dict[str, Any]]]:
    seen: list[tuple[go.Figure, dict[str, Any]]] = []
    monkeypatch.setattr(go.Figure, "write_html", lambda self, *a, **k: seen.append((self, k)))
    return seen


def test_the_cosim_figure_fits_the_window_with_every_correction(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from scenarios.cosim_report import write_html

    evals = [{"sim_h": 0.1 * i, "step": i, "pass_rate": 0.2 + 0.1 * i} for i in range(3)]
    records = [
        {"design": d, "correction": c, "seed": 0, "batch_size": 8, "evals": evals}
        for d in ("sync", "async-eta2")
        for c in ("none", "tis", "mis", "seq-tis")
    ]
    seen = _capture_write_html(monkeypatch)
    write_html(records, tmp_path / "f.html", 0.5)
    ((fig, kw),) = seen
    assert fig.layout.width is None  # 600 px a correction made 2,480 px for four
    assert kw.get("default_width") == "100%" and kw.get("include_plotlyjs") is True
    assert len([s for s in fig.layout.shapes if s.y0 == 0.5]) == 8
    assert sum(1 for a in fig.layout.annotations if "0.5" in (a.text or "")) == 8  # the target named


def test_reward_figure_ticks_whole_training_steps(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from offpolicy.experiment import write_reward_figure

    def fake(lag: int, seed: int, steps: int) -> dict[str, Any]:
        hist = [{"step": s, "reward": (0.1 * s + 0.01 * seed) / 5} for s in range(steps)]  # shares: in [0, 1]
        return {"lag": lag, "correction": "none", "seed": seed, "history": hist}

    seen = _capture_write_html(monkeypatch)
    write_reward_figure([fake(0, s, 2) for s in range(2)], tmp_path / "f.html", ("lag",), "t")
    write_reward_figure([fake(0, s, 40) for s in range(2)], tmp_path / "g.html", ("lag",), "t")
    (few, _), (many, _) = seen
    assert few.layout.xaxis.dtick == 1 and few.layout.xaxis.tickformat == "d"
    assert many.layout.xaxis.dtick is None and many.layout.xaxis.tickformat == "d"
    band, line = few.data[:2]
    assert band.legendgroup == line.legendgroup  # the band hides with its line


def test_report_tables_show_no_nan() -> None:
    from pipesim.io.report import table_html

    page = table_html(pd.DataFrame({"design": ["a", "b"], "share": [0.5, np.nan]}), "t")
    assert "NaN" not in page and "nan" not in page and page.count("<td>") == 4


def test_plan_page_wraps_long_preformatted_lines(tmp_path: Path) -> None:
    import pipesim.plan as plan
    from pipesim.plan.report_html import write_html

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_plan import small_spec

    out = tmp_path / "plan.html"
    write_html(plan.plan(small_spec(method="grid", seeds=1), with_sensitivity=False), str(out))
    style = out.read_text().split("<style>", 1)[1].split("</style>", 1)[0]
    pre = style.split("pre{", 1)[1].split("}", 1)[0]
    assert "white-space:pre-wrap" in pre  # the summary's first line ran off the page
