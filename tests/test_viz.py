"""Timelines and sweep figures: structure that a reader relies on (every segment, sync, mark)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest

from pipesim import DropStale, Timeout, run
from pipesim.core.validate import FieldError
from pipesim.io.registry import FIG13_1, get_scenario
from pipesim.io.viz import (
    design_comparison_figure,
    figures_to_html,
    lines_figure,
    segments_frame,
    staleness_throughput_figure,
    timeline,
    timelines,
)
from tests.test_refusals_core import check_refusal


@pytest.fixture(scope="module")
def fig13_1() -> dict:
    return {"synchronous": run(get_scenario("fig13.1-sync")), "async": run(get_scenario("fig13.1-async"))}


def _version_bars(fig: go.Figure, axis: str = "y") -> list[go.Bar]:
    return [t for t in fig.data if t.type == "bar" and str(t.name).startswith("v") and t.yaxis == axis]


def test_side_by_side_shares_time_axis_and_draws_every_segment(fig13_1: dict) -> None:
    fig = timelines(fig13_1)
    # each run has two rows (trainer and sync lanes, then the slots), all on one time axis
    assert {fig.layout[f"xaxis{i}"].matches for i in ("", 2, 3)} == {"x4"}
    for axis, res in zip(("y2", "y4"), fig13_1.values()):
        bars = _version_bars(fig, axis)
        n_bars = sum(len(b.base) for b in bars)
        assert n_bars == len(res.events.query("kind == 'gen'"))
        # one colour per version: every bar of a trace has the trace's version
        for b in bars:
            assert all(row[3] == int(b.name[1:]) for row in b.customdata)
    # sync bands across the slots: one path per run (one shape per sync was quadratic to build),
    # on the run's slot rows, with one rectangle per sync
    assert [(s.type, s.yref) for s in fig.layout.shapes] == [("path", "y2"), ("path", "y4")]
    for band, res in zip(fig.layout.shapes, fig13_1.values()):
        assert band.path.count("M") == band.path.count("Z") == len(res.sync_log)
        a, b, _ = res.sync_log[0]
        assert band.path.startswith(f"M{a:.6f},-0.5H{b:.6f}V")
    title = fig.layout.annotations[0].text
    assert f"{fig13_1['synchronous'].sim_time_s:,.0f} s" in title


def test_partial_rollout_shows_segments_of_two_versions_and_a_pause(fig13_1: dict) -> None:
    res = fig13_1["async"]
    seg = segments_frame(res)
    multi = seg.groupby("episode_id")["version"].nunique()
    assert (multi > 1).any(), "async eta=1 with partial rollouts must have an episode spanning two versions"
    fig = timeline(res)
    pause = [t for t in fig.data if t.name == "paused (sync)"]
    assert pause and len(pause[0].base) == len(res.events.query("kind == 'pause'")) > 0
    # the synchronous run never pauses an episode
    assert not [t for t in timeline(fig13_1["synchronous"]).data if t.name == "paused (sync)"]


def test_hover_carries_episode_task_duration_versions_and_staleness(fig13_1: dict) -> None:
    res = fig13_1["async"]
    fig = timeline(res)
    tr = res.trained.set_index("episode_id")
    bar = _version_bars(fig, "y2")[0]
    assert "episode %{customdata[0]}" in bar.hovertemplate and "staleness at training" in bar.hovertemplate
    for row in bar.customdata:
        ep = int(row[0])
        if ep in tr.index:
            assert row[6] == str(int(tr.loc[ep, "staleness"]))
        else:
            assert row[6] == "not trained"


def test_dropped_and_timed_out_episodes_are_marked() -> None:
    # a stale episode dropped, and episodes cut at a 100 s timeout (records are not edited: an
    # archived episode is rebuilt from arrays at each access, so editing one would change nothing)
    sc = dataclasses.replace(get_scenario("fig13.1-async"), batching=DropStale(), timeout=Timeout(100.0))
    res = run(sc)
    gen = res.events[res.events["kind"] == "gen"]
    last_end = gen.groupby("episode_id")["end_s"].max()  # where each episode's last bar ends

    dropped = sorted(last_end[e.id] for e in res.episodes if e.status == "discarded")
    cut = sorted(last_end[e.id] for e in res.episodes if e.truncated)
    assert dropped and cut
    fig = timeline(res)
    names = {t.name: t for t in fig.data}
    assert sorted(names["dropped"].x) == dropped
    assert sorted(names["timed out"].x) == cut
    assert not [n for n in names if str(n).startswith("staleness > eta")]  # DropStale trains none staler
    res = run(get_scenario("fig13.1-async"))  # partial rollouts: those above eta continued across updates
    over = {t.name: t for t in timeline(res).data}.get("staleness > eta (continued across updates)")
    eta = res.scenario.pipeline.max_staleness
    assert over is not None and len(over.x) == int((res.trained["staleness"] > eta).sum())


def test_webgl_at_scale() -> None:
    # 1,024 slots x 20 steps: segments must be WebGL traces, a bounded number of them
    scen = get_scenario("async-eta1").with_(n_slots=1024, batch_size=1024, pool_size=None)
    res = run(scen)
    fig = timeline(res)
    kinds = {t.type for t in fig.data if str(t.name).startswith("v")}
    assert kinds == {"scattergl"}
    assert len(fig.data) <= res.scenario.pipeline.steps + 10
    html = figures_to_html([fig])
    assert len(html) < 20e6


def test_forced_webgl_matches_svg_segments(fig13_1: dict) -> None:
    fig = timeline(fig13_1["async"], webgl=True)
    hover = [t for t in fig.data if t.name == "segment (hover)"][0]
    assert len(hover.x) == len(fig13_1["async"].events.query("kind == 'gen'"))


@pytest.mark.parametrize(
    ("results", "field"), [({"bad": {}}, "results['bad']"), ({}, "results"), ([], "results")]
)
def test_timelines_rejects_non_results(results: object, field: str) -> None:
    check_refusal(lambda: timelines(results), FieldError, field)  # type: ignore[arg-type]


def _agg(n_seeds: int) -> pd.DataFrame:
    rows = []
    for wu in ("PartialRollout", "Drain"):
        for eta in range(3):
            row = {"weight_update": wu, "max_staleness": eta, "design": wu, "n_seeds": n_seeds}
            for m in ("throughput_per_hour", "staleness_mean", "staleness_max", "gen_util", "length_bias"):
                v = 100.0 * (eta + 1) if wu == "PartialRollout" else 50.0
                half = 5.0 if n_seeds > 1 else 0.0
                row.update({f"{m}_mean": v, f"{m}_lo": v - half, f"{m}_hi": v + half})
            rows.append(row)
    return pd.DataFrame(rows)


def test_sweep_figures_draw_bands_only_over_several_seeds() -> None:
    fig = staleness_throughput_figure(_agg(3))
    bands = [t for t in fig.data if t.fill == "toself"]
    assert len(bands) == 4  # partial + drain throughput, mean + max staleness
    assert not [t for t in staleness_throughput_figure(_agg(1)).data if t.fill == "toself"]
    lines = lines_figure(_agg(3), "max_staleness", "throughput_per_hour", by="weight_update")
    assert {t.name for t in lines.data if t.mode == "lines+markers"} == {"PartialRollout", "Drain"}
    comp = design_comparison_figure(_agg(2).drop_duplicates("design"))
    assert len([t for t in comp.data if t.type == "bar"]) == 4


def test_sweep_figure_names_missing_columns() -> None:
    agg = _agg(2).drop(columns=["throughput_per_hour_lo"])
    check_refusal(
        lambda: lines_figure(agg, "max_staleness", "throughput_per_hour"),
        FieldError,
        "agg.throughput_per_hour_lo",
    )


def test_html_embeds_plotlyjs_once_and_loads_nothing(fig13_1: dict) -> None:
    from pipesim.io.report import external_urls

    html = figures_to_html([timeline(r) for r in fig13_1.values()])
    assert html.count('<script type="text/javascript">/**') <= 1
    assert html.count("Plotly.newPlot") == 2
    assert external_urls(html) == []
    assert "cdn.plot.ly/plotly" not in html.split("</head>")[1]


def test_fig13_1_config_is_the_chapters() -> None:
    p = get_scenario("fig13.1-async").pipeline
    assert dataclasses.asdict(p) | FIG13_1 == dataclasses.asdict(p)


# -- views that work at scale (issue 21) -----------------------------------------------------------
def test_lanes_are_named_as_in_the_events_table_and_trainer_lanes_keep_their_height(fig13_1: dict) -> None:
    from pipesim.io.viz.timeline import LANE_ROW_PX, LEGEND_TITLE

    res = fig13_1["async"]
    fig = timeline(res)
    assert list(fig.layout.yaxis2.ticktext) == sorted(set(res.events.query("kind == 'gen'")["lane"]))
    assert list(fig.layout.yaxis.ticktext) == ["trainer", "sync"]
    assert fig.layout.legend.title.text == LEGEND_TITLE
    for n_slots in (8, 1024):
        big = res.scenario.with_(n_slots=n_slots, batch_size=8, steps=1)
        f = timeline(run(big))
        lane = f.layout.yaxis.domain
        plot_px = f.layout.height - f.layout.margin.t - f.layout.margin.b
        assert (lane[1] - lane[0]) * plot_px == pytest.approx(LANE_ROW_PX, rel=0.05), n_slots


def test_failed_and_retried_episodes_are_marked_in_their_own_colours() -> None:
    from pipesim import RetryFailed, Timeout
    from pipesim.io.viz.timeline import MARKS

    scen = get_scenario("fig13.1-async").with_(
        failures=RetryFailed(hazard_per_s=0.003), timeout=Timeout(cap_s=150.0), pool_size=600
    )
    res = run(scen)
    names = {t.name: t for t in timeline(res).data}
    eps = res.episode_table
    failed = names["failed (worker)"]
    assert sorted(failed.x) == sorted(eps.loc[eps["status"] == "failed", "end_s"])
    retried = names["retry of a failed or aborted episode"]
    assert len(retried.x) == int(res.summary()["episodes_restarted"])
    colours = [c for _, _, c in MARKS.values()]
    assert len(set(colours)) == len(colours)  # dropped, timed out, failed... all distinct


def test_aggregate_view_counts_agree_with_the_tables(fig13_1: dict) -> None:
    import numpy as np

    from pipesim.io.viz import aggregate_view, run_views
    from pipesim.io.viz.aggregate import busy_share, in_flight

    res = fig13_1["async"]
    fig = aggregate_view(res)
    stacked = [t for t in fig.data if t.type == "scatter" and t.stackgroup == "flight"]
    gen = res.events.query("kind == 'gen'")
    assert {t.name for t in stacked} == {f"v{v}" for v in gen["version"].unique()}
    t = np.array([10.0, 200.0, 400.0])
    total = sum(in_flight(res.events, t).values())
    for ti, n in zip(t, total):
        assert n == int(((gen["start_s"] <= ti) & (gen["end_s"] > ti)).sum())
    util = {tr.name: np.asarray(tr.y) for tr in fig.data if tr.name in ("slots generating", "trainer busy")}
    for y in util.values():
        assert y.min() >= 0 and y.max() <= 1
    # the bins' mean utilisation is the run's generation share (segments, pauses excluded)
    edges = np.linspace(0, res.sim_time_s, 401)
    share = busy_share(
        edges, gen["start_s"].to_numpy(), gen["end_s"].to_numpy(), res.scenario.pipeline.n_slots
    )
    expect = float((gen["end_s"] - gen["start_s"]).sum()) / (res.scenario.pipeline.n_slots * res.sim_time_s)
    assert share.mean() == pytest.approx(expect, rel=1e-6)
    heat = [tr for tr in fig.data if tr.type == "heatmap"][0]
    assert np.nansum(np.asarray(heat.z, dtype=float)) == len(res.trained)
    assert len(run_views(res)) == 2  # a small run: the timeline and the aggregate view


def test_sweep_legends_are_titled_ticks_integer_and_shares_clipped() -> None:
    agg = _agg(3)
    agg["gen_util_mean"], agg["gen_util_lo"], agg["gen_util_hi"] = 0.98, 0.9, 1.06
    fig = lines_figure(agg, "max_staleness", "gen_util", by="weight_update")
    assert fig.layout.legend.title.text == "weight_update"
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2]
    band = [t for t in fig.data if t.fill == "toself"][0]
    assert max(band.y) == 1.0
    st = staleness_throughput_figure(agg)
    assert st.layout.legend.title.text.startswith("weight update")
    assert list(st.layout.xaxis.tickvals) == [0, 1, 2]
    comp = design_comparison_figure(agg.drop_duplicates("design"))
    util_bar = [t for t in comp.data if t.name == "gen_util"][0]
    assert max(util_bar.y + util_bar.error_y.array) <= 1.0 + 1e-12


def test_compute_view_shows_kv_occupancy_and_tokens_per_replica() -> None:
    import numpy as np

    from pipesim import PipelineConfig, Scenario
    from pipesim.compute import GPUS, MODELS
    from pipesim.compute.cluster import Cluster, run_compute
    from pipesim.compute.cost import EngineConfig
    from pipesim.compute.workload import LogNormalLengths, TokenWorkload
    from pipesim.io.viz import compute_view, run_views
    from pipesim.io.viz.compute import binned_mean

    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096, max_num_seqs=16)
    wl = TokenWorkload(response=LogNormalLengths(300.0, 0.5), prompt=100, max_response_tokens=1000)
    sc = Scenario(pipeline=PipelineConfig(batch_size=16, steps=2))
    crun = run_compute(sc, Cluster(engine=eng, n_gpus=3, trainer_gpus=1), wl, record=True)
    fig = compute_view(crun)
    kv = [t for t in fig.data if t.yaxis == "y"]
    assert len(kv) == len(crun.engines) == 2
    for t in kv:
        assert min(t.y) >= 0 and max(t.y) <= 1 and max(t.y) > 0
    assert len(run_views(crun)) == 3  # timeline, aggregate, compute
    # the binned mean of a step function: 2 on [0, 1), then 4 -> bins [0, 2) and [2, 4)
    assert list(binned_mean(np.array([0.0, 1.0]), np.array([2.0, 4.0]), np.array([0.0, 2.0, 4.0]))) == [
        3.0,
        4.0,
    ]


def test_a_run_of_many_episodes_gets_the_aggregate_view_alone(
    fig13_1: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 256-slot run of 1,000 steps drew its timeline: an 88 MB page of one solid block, because
    the choice read the slots alone. Above ``AGGREGATE_EPISODES`` episodes the page is the
    aggregate view, whose size does not grow with the run."""
    import pipesim.io.viz as viz

    res = fig13_1["async"]
    n = res.columns.n
    monkeypatch.setattr(viz, "AGGREGATE_EPISODES", n)
    assert len(viz.run_views(res)) == 2  # at the limit: the timeline too
    monkeypatch.setattr(viz, "AGGREGATE_EPISODES", n - 1)
    views = viz.run_views(res)
    assert len(views) == 1 and views[0].to_json() == viz.aggregate_view(res).to_json()
    assert len(viz.run_views(res, aggregate=False)) == 2  # the caller may still ask for the timeline


def test_the_same_run_writes_the_same_page(tmp_path: Path) -> None:
    """plotly names each figure's div with a random id: two ``pipesim run --html`` of the same run
    differed in those alone, so a page could not be diffed or cached by its bytes."""
    from pipesim.io.cli import main

    pages = [tmp_path / "a.html", tmp_path / "b.html"]
    for p in pages:
        assert main(["run", "synchronous", "--set", "steps=2", "--html", str(p)]) == 0
    assert pages[0].read_bytes() == pages[1].read_bytes()
