"""What the HTML pages of a run show (a walkthrough that rendered each page in Chromium):

* the staleness heatmap's colour bar runs from 0 to its fullest cell (plotly ignores ``zmin``
  alone: a synchronous run's cells, all equal, drew the scale's middle colour and no ticks);
* time axes print thousands separators (``2,500``, not plotly's ``2.5k``);
* the eta line's label lies right of the heatmap (it sat on its cells and on its ticks), and the
  share panel's axis title has room above the heatmap's title;
* a saved compute run's page has its cluster (from the run spec meta.json keeps), says that the
  per-replica views are not saved, and shows none of the stand-in scenario's placeholders;
* a slot run labels its truncated row "timed out", as ``pipesim.compare`` does, whatever its
  timeout; a compute run "cut at the response cap";
* the QQ plot's log axes label full values, never a minor tick's single digit.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import pipesim
from pipesim.io.cli import main
from pipesim.io.registry import get_scenario
from pipesim.io.viz import run_page
from pipesim.io.viz.aggregate import aggregate_view
from pipesim.io.viz.timeline import timeline

SPEC = Path(__file__).resolve().parent.parent / "examples" / "run_verl_8gpu.toml"


@pytest.fixture(scope="module")
def sync_run() -> object:
    return pipesim.run(get_scenario("synchronous").with_(n_slots=8, batch_size=8, steps=3))


@pytest.fixture(scope="module")
def async_run() -> object:
    return pipesim.run(get_scenario("async-eta2").with_(n_slots=16, batch_size=8, steps=12))


@pytest.fixture(scope="module")
def saved_compute(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("htmlfix") / "v"
    assert main(["run", str(SPEC), "--set", "run.steps=3", "--save", str(out)]) == 0
    return out


def _heatmap(fig: object) -> object:
    (heat,) = [t for t in fig.data if t.type == "heatmap"]  # type: ignore[attr-defined]
    return heat


def _counts(run: object) -> np.ndarray:
    tr = run.trained  # type: ignore[attr-defined]
    return tr.groupby(["step", "staleness"]).size().to_numpy()


@pytest.mark.parametrize("which", ["sync_run", "async_run"])
def test_the_heatmap_scale_runs_from_zero_to_the_fullest_cell(
    which: str, request: pytest.FixtureRequest
) -> None:
    run = request.getfixturevalue(which)
    heat = _heatmap(aggregate_view(run))
    counts = _counts(run)
    assert heat.zmin == 0 and heat.zmax == counts.max()
    assert heat.colorbar.tick0 == 0 and 0 < heat.colorbar.dtick <= heat.zmax  # a tick past 0 at least


def test_every_batch_at_one_staleness_draws_the_darkest_not_the_middle(sync_run: object) -> None:
    heat = _heatmap(aggregate_view(sync_run))
    z = np.asarray(heat.z, dtype=np.float64)
    drawn = z[np.isfinite(z)]
    assert len(set(drawn.tolist())) == 1  # every cell alike: the case the scale lost its ends
    assert (drawn - heat.zmin) / (heat.zmax - heat.zmin) == pytest.approx(1.0)


def _time_axes(fig: object) -> list[object]:
    layout = fig.layout  # type: ignore[attr-defined]
    return [layout[k] for k in layout if k.startswith("xaxis") and layout[k].title.text != "training step"]


def test_time_axes_print_thousands_separators(async_run: object) -> None:
    for fig in (timeline(async_run), aggregate_view(async_run)):
        axes = _time_axes(fig)
        assert axes
        for axis in axes:
            assert axis.tickformat and axis.tickformat.startswith(","), axis.tickformat
            assert "s" not in axis.tickformat  # an SI suffix: 2.5k


def test_the_eta_label_lies_right_of_the_heatmap_and_the_axis_title_has_room(async_run: object) -> None:
    fig = aggregate_view(async_run)
    labels = [a for a in fig.layout.annotations if "bound" in (a.text or "")]
    assert len(labels) == 1
    (label,) = labels
    assert label.xref == "x4 domain" and label.x >= 1 and label.xanchor == "left"  # off the cells and ticks
    assert label.yref == "y4" and label.y == pytest.approx(async_run.scenario.pipeline.max_staleness + 0.5)
    lay = fig.layout
    under_share = lay.yaxis3.domain[0] - lay.yaxis4.domain[1]  # holds "simulated seconds" and a title
    under_buffer = lay.yaxis2.domain[0] - lay.yaxis3.domain[1]  # holds tick labels and a title
    assert lay.xaxis3.title.text == "simulated seconds" and not lay.xaxis2.title.text
    assert under_share > under_buffer


def _tables(page: str) -> str:
    """The page's tables: its body up to the first figure (plotly.js is inlined in its head)."""
    return page.split("</head>", 1)[1].split("<script", 1)[0]


def _table(page: str, caption: str) -> dict[str, str]:
    """The rows (label -> text) of the page's table captioned ``caption``."""
    head = _tables(page)
    at = head.index(f">{caption}</caption>")
    body = head[at:].split("</table>", 1)[0]
    return dict(re.findall(r"<th[^>]*>([^<]+)</th><td[^>]*>([^<]*)</td>", body))


def test_a_saved_compute_runs_report_has_its_cluster_and_no_stand_in(
    saved_compute: Path, tmp_path: Path
) -> None:
    out = tmp_path / "rep.html"
    assert main(["report", str(saved_compute), "--out", str(out)]) == 0
    page = out.read_text()
    saved = pipesim.load(saved_compute)
    spec = saved.runspec["runspec"]
    cluster = _table(page, "Cluster")
    assert cluster["model"] == spec["model"]["name"] and cluster["gpu"] == spec["cluster"]["gpu"]
    assert int(cluster["n_gpus"].replace(",", "")) == spec["cluster"]["n_gpus"]
    head = _tables(page)
    assert "policies as run" not in head and "AgentDurations" not in head and "train_time_s" not in head
    assert "stand-in" not in head  # the run's name, not the stand-in's
    assert "(stand-in" not in page  # nor in the figures' titles
    assert "not saved" in head and "tokens/s" in head  # the per-replica views: said, not silently missing


def test_a_saved_compute_runs_cluster_says_so_without_a_spec(saved_compute: Path) -> None:
    from pipesim.io.html import saved_cluster_pairs

    assert saved_cluster_pairs(None) == [("run spec", "not kept in meta.json (saved before pipesim kept it)")]
    spec = pipesim.load(saved_compute).runspec["runspec"]
    broken = {**spec, "cluster": {**spec["cluster"], "n_gpus": -1}}  # no longer builds: said, keys kept
    rows = dict(saved_cluster_pairs({"runspec": broken}))
    assert rows["model"] == spec["model"]["name"] and "n_gpus" in rows["note"]


def _truncated_row(page: str) -> str:
    labels = _table(page, _tables(page).split("<caption", 1)[1].split(">", 1)[1].split("<", 1)[0])
    (label,) = [k for k in labels if k in ("timed out", "cut at the response cap")]
    return label


def test_a_slot_pages_truncated_row_reads_as_compare_labels_it(sync_run: object, saved_compute: Path) -> None:
    with_timeout = pipesim.run(
        get_scenario("synchronous").with_(n_slots=8, batch_size=8, steps=3, timeout=pipesim.Timeout(60.0))
    )
    table = pipesim.compare({"a": sync_run, "b": with_timeout}).table
    (slot_label,) = [k for k in table.index if k in ("timed out", "cut at the response cap")]
    for run in (sync_run, with_timeout):  # with no timeout as with one: the slot engine has no cap
        assert _truncated_row(run_page(run)) == slot_label == "timed out"
    saved = pipesim.load(saved_compute)
    ctable = pipesim.compare({"a": saved, "b": saved}).table
    (compute_label,) = [k for k in ctable.index if k in ("timed out", "cut at the response cap")]
    assert _truncated_row(run_page(saved)) == compute_label == "cut at the response cap"


def test_the_qq_plot_labels_full_values_on_its_log_axes() -> None:
    from pipesim.io.fit import fit_values, qq_figure

    x = np.random.default_rng(0).lognormal(np.log(50.0), 0.8, 2_000)  # some 5 s to 500 s
    fig = qq_figure(fit_values(x, seed=0))
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        assert axis.type == "log" and axis.tickmode == "array"
        values = [float(t.replace(",", "")) for t in axis.ticktext]
        assert values == pytest.approx(list(axis.tickvals))  # 500 reads 500, not "5"
        assert any(v >= 100 for v in values) and any(v < 10 for v in values)


@pytest.mark.parametrize("chars", [2, 3, 5, 11])
def test_the_version_legend_draws_the_rows_it_planned_at_any_wider_page(chars: int) -> None:
    """Each entry a share of the plot's width: plotly.js starts a new row where the next entry
    (its share plus a 5 px gap) passes the plot's width, so a row holds ``per_row`` entries on
    every plot from the planned 720 px up (sized in pixels, a wide page packed more a row and
    left the rows planned for it blank: some 100 px under a 63-entry legend)."""
    from pipesim.io.viz.aggregate import LEGEND_WIDTH_PX, legend_per_row, legend_rows, legend_share

    text_px, _ = legend_rows(64, chars)
    per_row = legend_per_row(text_px)
    for width in (LEGEND_WIDTH_PX, 1_000, 1_200, 1_800, 3_000):
        entry = legend_share(text_px) * width + 5
        assert per_row * entry <= width < (per_row + 1) * entry, width
        assert entry >= text_px + 40  # the symbol and the text fit the share and its gap


def test_the_aggregate_legend_is_sized_in_shares_of_the_plot(async_run: object) -> None:
    from pipesim.io.viz.aggregate import legend_rows, legend_share

    fig = aggregate_view(async_run)
    names = [t.name for t in fig.data if t.type == "scatter" and t.stackgroup == "flight"]
    text_px, _ = legend_rows(len(names), max(len(n) for n in names))
    assert fig.layout.legend.entrywidthmode == "fraction"
    assert fig.layout.legend.entrywidth == pytest.approx(legend_share(text_px))
