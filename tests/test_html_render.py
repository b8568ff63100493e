"""The HTML pages pipesim writes, read as a user reads them: each test is a finding of a visual
review (every page rendered in headless Chromium and looked at) that failed before its fix.

* Every page a command writes holds plotly.js once and loads nothing over the network.
* ``pipesim run --html`` (slot and compute runs) heads its views with the numbers the command
  printed; a compute run's page shows its cluster, not the scenario fields it does not read.
* ``pipesim sweep --html`` shows the table the command printed, and hover text reads in decimal
  notation (``.3g`` wrote a throughput of 2,110 as ``2.11e+3``).
* The report's seconds read as the chapter prints them (97.7, not 98; 623.6 beside 623.6).
* The timeline's legend keeps every version inside the figure (v12-v14 of 20 ran off its right
  edge); the aggregate view's two legends sit beside their panels without overlapping.
* The plan's figure shows a design at 0 whole (it was cut in half by the axis).

The browser tests measure the drawn page (legend boxes, hover text) through a script added to it,
read back with ``--dump-dom``; they skip without Chromium unless ``CI`` is set.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim
from pipesim.io.cli import main
from pipesim.io.html import COMPUTE_HEADLINE_KEYS, HEADLINE_KEYS
from pipesim.io.registry import get_scenario
from pipesim.io.report import external_urls

SMALL = ["--set", "n_slots=16", "--set", "batch_size=16", "--set", "steps=3"]
BANNER = "* plotly.js v"  # the first line of the plotly.js bundle: one per copy inlined


def offline_once(page: str) -> None:
    assert page.count(BANNER) == 1, f"plotly.js inlined {page.count(BANNER)} times"
    assert external_urls(page) == [], external_urls(page)


def headline(page: str) -> dict[str, float]:
    """The run page's headline table (label -> number), as drawn."""
    first = page.split("<table", 2)[2].split("</table>", 1)[0]  # the outer table's first cell's table
    cells = re.findall(r"<th[^>]*>([^<]+)</th><td[^>]*>([^<]+)</td>", first)
    out = {}
    for label, value in cells:
        with contextlib.suppress(ValueError):  # a text cell (a pool's note)
            out[label] = float(value.replace(",", ""))
    return out


def printed(out: str) -> dict[str, float]:
    """``key  value`` lines of the summary a command printed."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            with contextlib.suppress(ValueError):
                rows[parts[0]] = float(parts[1].replace(",", ""))
    return rows


def assert_same_numbers(page_rows: dict[str, float], summary: dict[str, float], keys: Any) -> int:
    n = 0
    for key, label in keys:
        if key in summary and label in page_rows:
            assert page_rows[label] == pytest.approx(summary[key], rel=1e-3, abs=1e-4), label
            n += 1
    return n


def test_run_page_heads_the_views_with_the_printed_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html = tmp_path / "run.html"
    assert main(["run", "async-eta1", *SMALL, "--html", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    offline_once(page)
    assert assert_same_numbers(headline(page), printed(capsys.readouterr().out), HEADLINE_KEYS) >= 10
    assert page.count("Plotly.newPlot") == 2  # timeline and aggregate view


def test_compute_run_page_shows_its_cluster_and_its_own_numbers() -> None:
    from pipesim.compute import (
        GPUS,
        MODELS,
        Cluster,
        EngineConfig,
        LogNormalLengths,
        TokenWorkload,
        run_compute,
    )
    from pipesim.io.viz import run_page

    engine = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096)
    cluster = Cluster(engine=engine, n_gpus=4, trainer_gpus=2)
    work = TokenWorkload(
        response=LogNormalLengths(300, 0.5), prompt=128, samples_per_prompt=4, max_response_tokens=2048
    )
    scen = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=32, steps=2, max_staleness=1))
    crun = run_compute(scen, cluster, work, seed=0, record=True)
    page = run_page(crun, "compute")
    offline_once(page)
    rows = headline(page)
    assert assert_same_numbers(rows, crun.summary(), HEADLINE_KEYS + COMPUTE_HEADLINE_KEYS) >= 12
    assert rows["mean step (s)"] == pytest.approx(crun.summary()["step_time_s_mean"], rel=1e-3)
    labels = re.findall(r"<th[^>]*>([^<]+)</th>", page)
    assert "train_time_s" not in labels and "durations" not in labels  # not read by the engine
    assert "n_gpus" in labels and "trainer_gpus" in labels
    assert page.count("Plotly.newPlot") == 2  # the aggregate view (512 slots) and the engines' view


def test_sweep_page_shows_the_printed_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "s.html"
    argv = ["sweep", "synchronous", *SMALL, "--set", "pool_size=none", "--over", "max_staleness=0,1"]
    assert main([*argv, "--seeds", "2", "--workers", "2", "--html", str(html), "--quiet"]) == 0
    out = capsys.readouterr().out
    page = html.read_text(encoding="utf-8")
    offline_once(page)
    lines = [ln.split() for ln in out.splitlines() if ln.strip().startswith("synchronous")]
    header = next(ln.split() for ln in out.splitlines() if "throughput_per_hour_mean" in ln)
    col = header.index("throughput_per_hour_mean")
    shown = {ln[col] for ln in lines}
    cells = set(re.findall(r"<td>([^<]+)</td>", page))
    assert len(shown) == 2 and shown <= cells  # the same numbers, formatted as printed


def test_hover_formats_write_no_exponent() -> None:
    """A d3 ``g`` format writes 2110 as 2.11e+3: no hover of a sweep, comparison or QQ figure uses it."""
    from pipesim.io.fit import fit_values, qq_figure
    from pipesim.io.viz import design_comparison_figure, lines_figure

    agg = pd.DataFrame(
        {
            "design": ["a", "b"],
            "max_staleness": [0, 1],
            "n_seeds": [3, 3],
            **{f"{m}_{s}": [2110.0, 28096.0] for m in ("throughput_per_hour",) for s in ("mean", "lo", "hi")},
            **{
                f"{m}_{s}": [0.5, 0.7]
                for m in ("gen_util", "staleness_mean", "staleness_max", "length_bias")
                for s in ("mean", "lo", "hi")
            },
        }
    )
    import numpy as np

    x = np.random.default_rng(0).lognormal(4, 0.8, 600)
    a, b = pipesim.run(get_scenario("fig13.1-sync")), pipesim.run(get_scenario("fig13.1-async"))
    figs = [
        lines_figure(agg, "max_staleness", "throughput_per_hour"),
        design_comparison_figure(agg),
        pipesim.compare({"a": a, "b": b}).figure,
        qq_figure(fit_values(x, source="x", column="duration_s")),
    ]
    for fig in figs:
        for t in fig.data:
            for spec in re.findall(r"%\{[^}:]+:([^}]+)\}", t.hovertemplate or ""):
                assert not spec.endswith(("g", "e")), (t.name, t.hovertemplate)


def test_report_seconds_read_as_the_chapter_prints_them() -> None:
    from pipesim.io.report import design_table, pool_tables, table_html
    from pipesim.workload.durations import chapter_pool

    d = chapter_pool()
    stats, _ = pool_tables(d)
    cells = re.findall(r"<td>([^<]+)</td>", table_html(stats, "pool"))
    for i in range(0, len(cells), 3):  # statistic, pipesim, chapter: equal to 3 decimals, equal drawn
        assert cells[i + 1] == cells[i + 2], cells[i : i + 3]
    designs = table_html(design_table(d), "designs")
    assert "<td>97.7</td>" in designs and "<td>94.1</td>" in designs  # the demo prints 97.7 [97.7]


def test_plan_page_shows_designs_at_zero_whole_and_its_sensitivity(tmp_path: Path) -> None:
    import pipesim.plan as plan
    from pipesim.plan.report_html import figure, write_html

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_plan import small_spec

    result = plan.plan(small_spec(method="grid", seeds=1))
    fig = figure(result)
    for t in fig.data:
        if t.mode == "markers":
            assert t.cliponaxis is False, t.name
    for ax in (fig.layout.xaxis, fig.layout.xaxis2, fig.layout.yaxis):
        assert ax.range[0] < 0 < ax.range[1]  # a point at 0 clears the axis line
    out = tmp_path / "plan.html"
    write_html(result, str(out))
    page = out.read_text(encoding="utf-8")
    offline_once(page)
    assert result.sensitivity
    assert "<h2>Sensitivity</h2><pre>sensitivity (" in page  # the section whole, not from mid-line


# -- in a browser -----------------------------------------------------------------------------------
PROBE = """<script>window.addEventListener('load', function () { setTimeout(function () {
  var out = [];
  document.querySelectorAll('.plotly-graph-div').forEach(function (gd) {
    var svg = gd.querySelector('.main-svg').getBoundingClientRect();
    var legends = Array.from(gd.querySelectorAll('g.infolayer > g[class^=legend]')).map(function (g) {
      var r = g.querySelector('rect.bg').getBoundingClientRect();
      var right = Array.from(g.querySelectorAll('.traces')).map(function (t) {
        return t.getBoundingClientRect().right; });
      return {name: g.getAttribute('class'), left: r.left, right: r.right, top: r.top,
              bottom: r.bottom, n: right.length, entries_right: Math.max.apply(null, right)};
    });
    var hover = [];
    gd.data.forEach(function (t, i) {
      if (t.hovertemplate && t.type === 'scatter' && t.mode === 'lines+markers') {
        Plotly.Fx.hover(gd, [{curveNumber: i, pointNumber: t.x.length - 1}]);
        gd.querySelectorAll('.hovertext').forEach(function (n) { hover.push(n.textContent); });
      }
    });
    var bars = Array.from(gd.querySelectorAll('.bartext')).map(function (n) { return n.textContent; });
    out.push({left: svg.left, right: svg.right, legends: legends, hover: hover, bars: bars});
  });
  var pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 500); });</script>"""


@pytest.fixture(scope="module")
def browser() -> str:
    from tests.test_report_browser import _find_chromium

    path = _find_chromium()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but no chromium is installed (.ci/run installs it with apt)")
        pytest.skip("no chromium/chrome on PATH (install with `apt-get install chromium`); CI unset")
    return path


def measure(browser: str, page: str, tmp_path: Path, width: int = 1400) -> list[dict[str, Any]]:
    """Open ``page`` offline in headless Chromium and return what :data:`PROBE` measured, per figure."""
    offline_once(page)
    html = tmp_path / "probe.html"
    html.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        cmd = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--window-size={width},2400",
            "--virtual-time-budget=10000",
            "--dump-dom",
            html.resolve().as_uri(),
        ]
        dom = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
    found = re.search(r'<pre id="probe">([^<]*)</pre>', dom)
    assert found, "the page did not draw (no probe output)"
    return json.loads(found.group(1).replace("&quot;", '"'))  # type: ignore[no-any-return]


@pytest.mark.browser
def test_every_legend_entry_stays_inside_its_figure(browser: str, tmp_path: Path) -> None:
    from pipesim.io.viz import run_page

    res = pipesim.run(get_scenario("async-eta2").with_(n_slots=16, batch_size=16, steps=20))
    timeline, aggregate = measure(browser, run_page(res), tmp_path)
    (leg,) = timeline["legends"]
    assert leg["n"] >= 24  # 22 versions, the lanes and the marks, in rows under the plot
    assert leg["entries_right"] <= timeline["right"]  # v12-v14 of 22 were past the right edge
    by_name = {g["name"]: g for g in aggregate["legends"]}
    versions, series = by_name["legend"], by_name["legend2"]
    assert series["n"] == 3
    assert versions["bottom"] <= series["top"]  # the versions' legend stops above the series'
    for g in (versions, series):
        assert g["right"] <= aggregate["right"] + 1


@pytest.mark.browser
def test_hover_and_bar_labels_read_as_numbers(browser: str, tmp_path: Path) -> None:
    from pipesim.io.viz import figures_to_html, lines_figure

    agg = pd.DataFrame(
        {
            "design": ["a", "a"],
            "max_staleness": [0, 1],
            "n_seeds": [3, 3],
            "throughput_per_hour_mean": [2110.4, 28096.0],
            "throughput_per_hour_lo": [1957.0, 27000.0],
            "throughput_per_hour_hi": [2262.0, 29000.0],
        }
    )
    a, b = pipesim.run(get_scenario("fig13.1-sync")), pipesim.run(get_scenario("fig13.1-async"))
    cmp = pipesim.compare({"sync": a, "async": b})
    sweep, compare = measure(
        browser,
        figures_to_html([lines_figure(agg, "max_staleness", "throughput_per_hour"), cmp.figure]),
        tmp_path,
    )
    (hover,) = sweep["hover"]
    assert "28,100" in hover and "27,000 to 29,000" in hover and "e+" not in hover
    staleness = f"{b.summary()['staleness_mean']:.4g}"
    assert "0" in compare["bars"] and staleness in compare["bars"]  # a zero bar is a visible 0
