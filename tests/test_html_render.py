"""The HTML pages pipesim writes, read as a user reads them: each test is a finding of a visual
review (every page rendered in headless Chromium and looked at) that failed before its fix.

* Every page a command writes holds plotly.js once and loads nothing over the network.
* ``pipesim run --html`` (slot and compute runs) heads its views with the numbers the command
  printed; a compute run's page shows its cluster, not the scenario fields it does not read.
* ``pipesim sweep --html`` shows the table the command printed, and hover text reads in decimal
  notation (``.3g`` wrote a throughput of 2,110 as ``2.11e+3``).
* The report's seconds read as the chapter prints them (97.7, not 98; the pool's maximum
  623.650391 and the chapter's 623.650 both 623.7).
* The timeline's legend keeps every version inside the figure (v12-v14 of 20 ran off its right
  edge); the aggregate view's two legends sit beside their panels without overlapping.
* The plan's figure shows a design at 0 whole (it was cut in half by the axis).
* A compute run of many replicas draws their median and min-max band, not a line each (48 lines
  and a scrolling 48-entry legend).
* The staleness heatmap's eta line and the timeline's over-eta marks say what eta bounds: under
  a partial rollout an episode continued across updates trains above an admission bound by design.
* The starvation figure has the white plot of the others, and its two lines at 0 both show.
* The offpolicy, cosim and mismatch pages have a ``<title>``; cosim's bands no longer wear markers;
  the mismatch figure takes the window's width.

The browser tests measure the drawn page (legend boxes, hover text) through a script added to it,
read back with ``--dump-dom``; they skip without Chromium unless ``CI`` is set.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim
from pipesim.compute import GPUS, MODELS, Cluster, EngineConfig, LogNormalLengths, TokenWorkload, run_compute
from pipesim.io.cli import main
from pipesim.io.html import COMPUTE_HEADLINE_KEYS, HEADLINE_KEYS
from pipesim.io.registry import get_scenario
from pipesim.io.report import external_urls
from tests.test_report_browser import chromium_or_skip, offline_flags

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
    assert ["max", "623.7", "623.7"] in [cells[i : i + 3] for i in range(0, len(cells), 3)]  # not 623.6
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


def _compute_run(n_replicas: int) -> Any:

    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096, max_num_seqs=16)
    wl = TokenWorkload(response=LogNormalLengths(300.0, 0.5), prompt=100, max_response_tokens=1000)
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=16 * n_replicas, steps=2))
    return run_compute(sc, Cluster(engine=eng, n_gpus=n_replicas + 1, trainer_gpus=1), wl, record=True)


def test_many_replicas_draw_their_median_and_band_not_a_line_each() -> None:
    import numpy as np

    from pipesim.io.viz import compute_view
    from pipesim.io.viz.compute import PER_REPLICA_MAX

    n = PER_REPLICA_MAX + 4
    crun = _compute_run(n)
    fig = compute_view(crun)
    for axis in ("y", "y2"):  # each metric: low edge, band, median; 12 lines before
        assert len([t for t in fig.data if t.yaxis == axis]) == 3, axis
    assert [t.name for t in fig.data if t.showlegend] == [
        f"min to max of {n} replicas",
        f"median of {n} replicas",
    ]
    assert all(f"median of {n} replicas" in a.text for a in fig.layout.annotations)  # both panels say so
    lines = compute_view(crun, per_replica=True)  # the same series, a line each
    assert len(lines.data) == 2 * n
    for axis in ("y", "y2"):
        each = np.vstack([t.y for t in lines.data if t.yaxis == axis])
        lo, hi, med = (t for t in fig.data if t.yaxis == axis)
        assert np.allclose(med.y, np.median(each, axis=0)) and np.allclose(lo.y, each.min(axis=0))
        assert np.allclose(hi.y, each.max(axis=0)) and hi.fill == "tonexty"
        assert (np.asarray(med.customdata)[:, 3] < n).all()  # the replica at the max, by number
    rate = next(t for t in fig.data if t.yaxis == "y2" and t.hovertemplate)
    assert "replica %{customdata[3]}" in rate.hovertemplate and ":,.4~r}" in rate.hovertemplate
    few = compute_view(_compute_run(2))  # at or below the threshold: a line per replica
    assert [t.name for t in few.data if t.showlegend] == ["replica 0", "replica 1"]
    assert compute_view(crun, per_replica=False).data[2].name == f"median of {n} replicas"


def _eta_texts(res: Any) -> tuple[list[str], dict[str, Any]]:
    from pipesim.io.viz import aggregate_view, timeline

    line = [a.text for a in aggregate_view(res).layout.annotations if "eta =" in (a.text or "")]
    return line, {str(t.name): t for t in timeline(res).data if "eta" in str(t.name)}


def test_eta_line_and_marks_say_what_eta_bounds() -> None:
    """Staleness counts from the version an episode started under: a partial rollout continues
    an episode across updates, past an admission bound by design (it read as a broken bound)."""
    res = pipesim.run(get_scenario("fig13.1-async"))  # the count throttle with partial rollouts
    line, marks = _eta_texts(res)
    assert line == ["admission bound eta = 1"]
    (over,) = marks.values()
    assert over.name == "staleness > eta (continued across updates)"
    staler = res.trained[res.trained["staleness"] > 1]
    assert len(over.x) == len(staler) > 0
    gen = res.events[res.events["kind"] == "gen"]
    versions = gen.groupby("episode_id")["version"].nunique()
    assert (versions.loc[staler["episode_id"]] > 1).all()  # each did continue across an update
    line, marks = _eta_texts(pipesim.run(get_scenario("fig13.1-async").with_(weight_update=pipesim.Drain())))
    assert line == ["staleness bound eta = 1"] and marks == {}  # drain + count throttle promise it
    own = pipesim.run(get_scenario("systems:verl_fully_async").with_(steps=6))  # eta 0, never read
    assert own.trained["staleness"].max() > 0
    assert _eta_texts(own) == ([], {})  # no line at 0.5 and no mark on every stale episode


def test_starvation_figure_is_white_and_shows_both_lines_at_zero() -> None:
    from scenarios.starvation import starvation_figure

    df = pd.DataFrame(
        [
            {"design": d, "eta": e, "long_never_trained_share": y, "never_trained_share": 0.0}
            | {"throughput_per_hour": 1234.0}
            for d, y in (("drop+requeue", 0.9), ("pacing", 0.0), ("pacing, partial", 0.0))
            for e in (0, 1, 2)
        ]
    )
    fig = starvation_figure(df)
    assert fig.layout.plot_bgcolor == "white"  # plotly's grey default, unlike the report's others
    lines = {t.name: t for t in fig.data}
    assert lines["pacing, partial"].line.dash == "dash" and lines["pacing"].line.dash == "dot"
    assert lines["drop+requeue"].line.dash == "solid"  # only where two lines coincide
    (note,) = fig.layout.annotations
    assert "pacing, partial" in note.text and "lies on pacing" in note.text
    assert ":,.0f}" in lines["pacing"].hovertemplate  # episodes/hour with a thousands separator


def one_title(page: str) -> str:
    """The page's one ``<title>`` (plotly.js carries an SVG title of its own, in its script)."""
    outside = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)
    titles = re.findall(r"<title>([^<]*)</title>", outside)
    assert len(titles) == 1, titles
    assert page.index("<title>") < page.index("</head>")
    return titles[0]


def _drawn(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures plotly's write_html draws (it still writes them)."""
    import plotly.graph_objects as go

    seen: list[Any] = []
    original = go.Figure.write_html

    def spy(self: Any, *a: Any, **k: Any) -> Any:
        seen.append(self)
        return original(self, *a, **k)

    monkeypatch.setattr(go.Figure, "write_html", spy)
    return seen


def test_offpolicy_cosim_and_mismatch_pages_have_a_title(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mismatch.figure import write_html as mismatch_html
    from offpolicy.experiment import write_reward_figure
    from scenarios.cosim_report import write_html as cosim_html

    drawn = _drawn(monkeypatch)
    runs = [
        {
            "lag": 0,
            "correction": "none",
            "seed": s,
            "history": [{"step": i, "reward": 0.1 * i} for i in range(5)],
        }
        for s in range(2)
    ]
    write_reward_figure(runs, tmp_path / "o.html", ("lag",), "TinyAgent reward <under> stale sampling")
    page = (tmp_path / "o.html").read_text(encoding="utf-8")
    offline_once(page)
    assert one_title(page) == "TinyAgent reward &lt;under&gt; stale sampling"

    evals = [{"sim_h": 0.1 * i, "step": i, "pass_rate": 0.2 + 0.1 * i} for i in range(3)]
    records = [
        {"design": d, "correction": "none", "seed": s, "batch_size": 8, "evals": evals}
        for d in ("sync", "async-eta2")
        for s in (0, 1)
    ]
    cosim_html(records, tmp_path / "c.html", 0.5)
    page = (tmp_path / "c.html").read_text(encoding="utf-8")
    offline_once(page)
    assert "co-simulated" in one_title(page)
    bands = [t for t in drawn[-1].data if t.fill == "toself"]
    assert len(bands) == 4 and all(t.mode == "lines" for t in bands)  # 6 points: plotly added markers

    result = {
        "model": {"label": "tiny"},
        "comparisons": [{"key": "k", "name": "comparison k"}],
        "samples": {"d": {"k": [[0.0, 1e-3, 2e-3]]}},
        "bins": [{"lo": 0.0, "hi": 1.0, "n_tokens": 3, "mean_abs_d": {"k": 1e-3}}],
    }
    mismatch_html(result, str(tmp_path / "m.html"))
    page = (tmp_path / "m.html").read_text(encoding="utf-8")
    offline_once(page)
    assert one_title(page) == "Training-inference mismatch: tiny"
    assert drawn[-1].layout.width is None and "width:100%" in page  # the window's width, not 1,250 px


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
    var bars = Array.from(gd.querySelectorAll('.bartext, .textpoint')).map(function (n) {
      return n.textContent; });
    out.push({left: svg.left, right: svg.right, legends: legends, hover: hover, bars: bars});
  });
  var pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 500); });</script>"""


@pytest.fixture(scope="module")
def browser() -> str:
    return chromium_or_skip()


def measure(browser: str, page: str, tmp_path: Path, width: int = 1400) -> list[dict[str, Any]]:
    """Open ``page`` offline in headless Chromium and return what :data:`PROBE` measured, per figure."""
    offline_once(page)
    html = tmp_path / "probe.html"
    html.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        cmd = [
            *offline_flags(browser, profile),
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
    staleness = b.summary()["staleness_mean"]  # its bar reads as the table writes it (0.6250)
    assert "0" in compare["bars"]  # a zero bar is a visible 0
    assert any(t and "e" not in t and abs(float(t) - staleness) < 5e-5 for t in compare["bars"])


def test_truncated_episodes_are_named_by_what_cut_them() -> None:
    """A slot run truncates only at its timeout's cap; a compute run at the response cap. The page's
    headline and the timeline's mark say which (a compute run's page read 'timed out')."""
    from pipesim.io.viz import run_page
    from pipesim.io.viz.timeline import timelines
    from pipesim.policies.faults import Timeout

    engine = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=1024)
    work = TokenWorkload(
        response=LogNormalLengths(300, 1.0), prompt=64, samples_per_prompt=4, max_response_tokens=256
    )
    scen = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=8, steps=2, max_staleness=1))
    crun = run_compute(scen, Cluster(engine=engine, n_gpus=2, trainer_gpus=1), work, seed=0, record=True)
    slot = pipesim.run(
        get_scenario("synchronous").with_(n_slots=8, batch_size=8, steps=2, timeout=Timeout(30.0))
    )
    for run, label, other in ((crun, "cut at the response cap", "timed out"), (slot, "timed out", "cut at")):
        n = run.summary()["episodes_truncated"]
        assert n > 0
        page = run_page(run, "run")
        assert headline(page)[label] == n
        assert other not in page.split("<script", 1)[0]
        inner = run.result if hasattr(run, "timelines") else run
        names = {t.name for t in timelines({"r": inner}).data}
        assert label in names and not any(str(x).startswith(other) for x in names)
