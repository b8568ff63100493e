"""The viz API's bad inputs, the sweep page's categorical axes, the run page's overrides, the
tail note's digits and the views' hover and legend numbers (a walkthrough's findings).

Bad input is a TypeError or ValueError whose ``field`` names the argument (``results``,
``result``, ``n_bins``, ``figures``, ``title``), never an AttributeError from inside; one run where
a list is expected is drawn as a list of one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

import pipesim
from pipesim.io import viz
from pipesim.io.cli import main
from pipesim.io.registry import build, resolve
from pipesim.io.sweep_outputs import TAIL_NOTE_SHARE, tail_note


def _run(name: str, *sets: str) -> Any:
    scen, _ = build(resolve(name), list(sets))
    return pipesim.run(scen)


@pytest.fixture(scope="module")
def run() -> Any:
    return _run("async-eta1", "steps=3")


BAD: list[tuple[str, Callable[[Any], Any], str]] = [
    ("timelines(None)", lambda r: viz.timelines(None), "results"),  # type: ignore[arg-type]
    ("timelines(path)", lambda r: viz.timelines("runs/qwen"), "results"),
    ("timelines(3)", lambda r: viz.timelines(3), "results"),  # type: ignore[arg-type]
    ("timelines([run, 3])", lambda r: viz.timelines([r, 3]), "results[1]"),
    ("timelines({'a': None})", lambda r: viz.timelines({"a": None}), "results['a']"),
    ("timelines(height='x')", lambda r: viz.timelines(r, height="x"), "height"),  # type: ignore[arg-type]
    ("timelines(webgl='yes')", lambda r: viz.timelines(r, webgl="yes"), "webgl"),  # type: ignore[arg-type]
    ("aggregate_view(path)", lambda r: viz.aggregate_view("runs/qwen"), "result"),
    ("aggregate_view(Path)", lambda r: viz.aggregate_view(Path("runs/qwen")), "result"),
    ("aggregate_view(None)", lambda r: viz.aggregate_view(None), "result"),
    ("aggregate_view(df)", lambda r: viz.aggregate_view(r.events), "result"),
    ("aggregate_view(n_bins=0)", lambda r: viz.aggregate_view(r, n_bins=0), "n_bins"),
    ("aggregate_view(n_bins=-5)", lambda r: viz.aggregate_view(r, n_bins=-5), "n_bins"),
    ("aggregate_view(n_bins=1.5)", lambda r: viz.aggregate_view(r, n_bins=1.5), "n_bins"),  # type: ignore[arg-type]
    ("aggregate_view(n_bins='x')", lambda r: viz.aggregate_view(r, n_bins="x"), "n_bins"),  # type: ignore[arg-type]
    ("aggregate_view(n_bins=None)", lambda r: viz.aggregate_view(r, n_bins=None), "n_bins"),  # type: ignore[arg-type]
    ("aggregate_view(n_bins=True)", lambda r: viz.aggregate_view(r, n_bins=True), "n_bins"),
    ("aggregate_view(n_bins=10**9)", lambda r: viz.aggregate_view(r, n_bins=10**9), "n_bins"),
    ("figures_to_html(str)", lambda r: viz.figures_to_html("fig"), "figures"),  # type: ignore[arg-type]
    ("figures_to_html(None)", lambda r: viz.figures_to_html(None), "figures"),  # type: ignore[arg-type]
    ("figures_to_html([fig, 3])", lambda r: viz.figures_to_html([go.Figure(), 3]), "figures[1]"),
    ("figures_to_html(title=None)", lambda r: viz.figures_to_html([], title=None), "title"),  # type: ignore[arg-type]
    ("figures_to_html(preamble=1)", lambda r: viz.figures_to_html([], preamble=1), "preamble"),  # type: ignore[arg-type]
    ("run_page(run, None)", lambda r: viz.run_page(r, None), "title"),  # type: ignore[arg-type]
    ("run_page(path)", lambda r: viz.run_page("runs/qwen"), "result"),
    ("run_page(name=3)", lambda r: viz.run_page(r, name=3), "name"),  # type: ignore[arg-type]
    ("run_page(overrides=3)", lambda r: viz.run_page(r, overrides=3), "overrides"),  # type: ignore[arg-type]
    ("run_views(None)", lambda r: viz.run_views(None), "result"),
    ("run_views(aggregate='no')", lambda r: viz.run_views(r, aggregate="no"), "aggregate"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("call, field", [(c, f) for _, c, f in BAD], ids=[i for i, _, _ in BAD])
def test_bad_input_names_the_argument(run: Any, call: Callable[[Any], Any], field: str) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        call(run)
    assert getattr(info.value, "field", None) == field


def test_one_run_where_a_list_is_expected_is_a_list_of_one(run: Any) -> None:
    one = viz.timelines(run)
    assert [t.name for t in one.data] == [t.name for t in viz.timeline(run).data]
    page = viz.figures_to_html(viz.timeline(run))
    assert page.count('id="fig-') == 1  # one figure's div
    both = viz.timelines([run, run])  # one scenario name twice: both runs drawn, not the last alone
    titles = [a.text for a in both.layout.annotations if a.text]
    assert len(titles) == 2 and len(set(titles)) == 2


def _agg(x_values: list[Any], by_values: list[Any]) -> pd.DataFrame:
    rows = []
    for b in by_values:
        for i, x in enumerate(x_values):
            m = 100.0 + 10 * i + b
            rows.append(
                dict(design="d", eta=b, x=x, n_seeds=3, **{"throughput_per_hour_mean": m})
                | {"throughput_per_hour_lo": m - 5, "throughput_per_hour_hi": m + 5}
            )
    return pd.DataFrame(rows)[
        ["design", "eta", "x", "n_seeds", *(f"throughput_per_hour_{s}" for s in ("mean", "lo", "hi"))]
    ]


POLICIES = ["PartialRollout()", "Drain()", "AbortRestart(restart=True)"]


@pytest.mark.parametrize("by_values", [[1], [0, 1, 2]])
def test_a_categorical_x_is_points_with_error_bars(by_values: list[int]) -> None:
    fig = viz.lines_figure(_agg(POLICIES, by_values), "x", "throughput_per_hour", by="eta")
    assert len(fig.data) == len(by_values)  # no band polygons
    for t in fig.data:
        assert t.mode == "markers"  # no line between unordered categories
        assert t.fill is None
        assert list(t.x) == POLICIES
        hi = np.asarray(t.error_y.array)
        lo = np.asarray(t.error_y.arrayminus)
        assert np.allclose(hi, 5.0) and np.allclose(lo, 5.0)  # the 95% interval as error bars
    assert fig.layout.scattermode == "group"  # several lines' points side by side


def test_a_number_x_keeps_its_line_and_band() -> None:
    fig = viz.lines_figure(_agg([1, 2, 4], [0, 1]), "x", "throughput_per_hour", by="eta")
    assert {t.mode for t in fig.data if t.showlegend is not False} == {"lines+markers"}
    assert sum(t.fill == "toself" for t in fig.data) == 2


def _figure_specs(page: str) -> list[dict[str, str]]:
    return [
        {"mode": m.group(1), "name": m.group(2)}
        for m in re.finditer(r'"mode":"([^"]*)","name":"([^"]*)"', page.split("</head>", 1)[1])
    ]


def test_the_sweep_page_over_policies_draws_points_named_by_what_varies(tmp_path: Path) -> None:
    page = tmp_path / "sw.html"
    argv = ["sweep", "async-eta1", "--over", "weight_update=PartialRollout,Drain,AbortRestart"]
    assert main([*argv, "--set", "steps=2", "--seeds", "2", "--quiet", "--html", str(page)]) == 0
    text = page.read_text()
    specs = _figure_specs(text)
    assert specs and all(s["mode"] == "markers" for s in specs)
    assert all("partial" not in s["name"] for s in specs)  # not the preset's base policy
    assert all("weight_update" in s["name"] and "steps=2" in s["name"] for s in specs)
    assert '"fill":"toself"' not in text.split("</head>", 1)[1]


def test_the_run_page_lists_the_overrides_and_not_the_presets_policy(tmp_path: Path) -> None:
    page = tmp_path / "run.html"
    argv = ["run", "async-eta2", "--set", "weight_update=AbortRestart", "--set", "steps=3"]
    assert main([*argv, "--html", str(page)]) == 0
    body = page.read_text().split("</head>", 1)[1]
    base = _run("async-eta2", "steps=3").scenario.name
    assert "partial" in base  # the preset's own name claims the policy the --set replaced
    assert base not in body
    assert "with weight_update=AbortRestart, steps=3" in body
    assert "pipesim run async-eta2 with weight_update=AbortRestart" in body


def test_run_page_overrides_name_the_tables_and_figures(run: Any) -> None:
    page = viz.run_page(run, "t", name="async-eta1", overrides={"weight_update": "Drain"})
    body = page.split("</head>", 1)[1]
    assert run.scenario.name not in body  # tables and figures: "async-eta1 with weight_update=Drain"
    assert body.count("async-eta1 with weight_update=Drain") >= 3
    assert run.scenario.name == "async eta=1, partial"  # the caller's result is left as it was


@pytest.mark.parametrize(
    "shares, T",
    [([0.1035] + [0.0] * 23, None), ([0.1004, 0.2, 0.1001], None), ([0.1035], 1000.0), ([0.10004], 50.0)],
)
def test_the_tail_note_shows_its_worst_share_above_the_threshold(shares: list[float], T: Any) -> None:
    note = tail_note(shares, T)
    assert note is not None
    pct = re.search(r"up to ([\d.]+)%" if T is None else r"note: ([\d.]+)% of the run", note)
    assert pct is not None
    assert float(pct.group(1)) > TAIL_NOTE_SHARE * 100  # "up to" above "more than"
    assert float(pct.group(1)) == pytest.approx(max(shares) * 100, abs=0.05)


@pytest.fixture(scope="module")
def long_run() -> Any:
    return _run("synchronous", "steps=139", "batch_size=2", "n_slots=2")  # 141 colours: bands of 3


def test_legend_bands_end_at_the_newest_version(long_run: Any) -> None:
    newest = int(long_run.events["version"].max())
    for fig in (viz.timeline(long_run), viz.aggregate_view(long_run)):
        ends = [int(m.group(1)) for t in fig.data if (m := re.fullmatch(r"v\d+-v(\d+)", t.name or ""))]
        assert ends and max(ends) <= newest


def test_hover_times_have_thousands_separators_and_empty_cells_no_hover(long_run: Any) -> None:
    templates = [t.hovertemplate for t in viz.timeline(long_run).data if t.hovertemplate]
    assert templates
    for text in templates:
        assert not re.search(r":\.1f\}", text)  # every time and duration as ,.1f
    heat = [t for t in viz.aggregate_view(long_run).data if t.type == "heatmap"]
    assert heat and all(t.hoverongaps is False for t in heat)
