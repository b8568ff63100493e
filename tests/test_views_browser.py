"""Every view drawn by a real headless Chromium: the 8-slot timeline, the 1,024-slot aggregate
view (chosen automatically), a timeline with failures, retries, drops and timeouts, the sweep
figures and ``pipesim.compare``'s figure.

Each page is self-contained (plotly.js inlined once, nothing loaded over the network: every host
name maps to NOTFOUND). Screenshots go to ``$PIPESIM_SCREENSHOTS`` when set (to look at them),
else to the test's temporary directory. Skips without Chromium unless ``CI`` is set.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

import pipesim
from pipesim import DropStale, RetryFailed, Timeout, run
from pipesim.io.registry import get_scenario
from pipesim.io.report import external_urls
from pipesim.io.viz import figures_to_html, lines_figure, run_page, staleness_throughput_figure, timeline
from tests.test_report_browser import _png_pixels, chromium_or_skip, render

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> str:
    return chromium_or_skip()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("PIPESIM_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        return Path(where)
    return tmp_path_factory.mktemp("shots")


def screenshot(browser: str, page: str, shot: Path, height: int = 900, min_ink: float = 0.03) -> np.ndarray:
    """Write ``page`` next to ``shot``, render it headless, return the screenshot's pixels."""
    assert page.count('<script type="text/javascript">/**') == 1, "plotly.js must be inlined once"
    assert external_urls(page) == []
    html = shot.with_suffix(".html")
    html.write_text(page)
    render(browser, html, shot, f"1400,{height}")
    px = _png_pixels(shot).astype(int)
    nonwhite = (px.min(axis=-1) < 235).mean()
    assert nonwhite > min_ink, f"only {nonwhite:.1%} of {shot.name} is not white: nothing was drawn"
    return px


def _colours(px: np.ndarray) -> int:
    sat = px.max(axis=-1) - px.min(axis=-1) > 60
    return len({tuple(c) for c in (px[sat] // 32).tolist()})


@pytest.mark.full  # test_timeline_marks_failures_retries_drops_and_timeouts draws this timeline and more
def test_eight_slot_timeline(browser: str, shots: Path) -> None:
    res = run(get_scenario("fig13.1-async"))
    px = screenshot(browser, figures_to_html([timeline(res)]), shots / "timeline_8_slots.png")
    assert _colours(px) >= 4  # versions, trainer, sync


def test_timeline_marks_failures_retries_drops_and_timeouts(browser: str, shots: Path) -> None:
    scen = get_scenario("fig13.1-async").with_(
        failures=RetryFailed(hazard_per_s=0.003),
        timeout=Timeout(cap_s=150.0),
        batching=DropStale(),
        pool_size=600,
    )
    res = run(scen)
    fig = timeline(res)
    names = {t.name for t in fig.data}
    assert {"failed (worker)", "retry of a failed or aborted episode", "timed out"} <= names
    px = screenshot(browser, figures_to_html([fig]), shots / "timeline_marks.png")
    assert _colours(px) >= 5


def test_1024_slot_run_gets_the_aggregate_view(browser: str, shots: Path) -> None:
    scen = get_scenario("async-eta1").with_(n_slots=1024, batch_size=1024, pool_size=None)
    res = run(scen)
    page = run_page(res, title="async eta=1 at 1,024 slots")
    assert page.count("Plotly.newPlot") == 1  # the aggregate view alone: no wall of bars
    px = screenshot(browser, page, shots / "aggregate_1024_slots.png", height=1300)
    assert _colours(px) >= 4


def test_sweep_and_compare_figures(browser: str, shots: Path) -> None:
    rows = []
    for wu in ("PartialRollout", "Drain"):
        for eta in range(4):
            row: dict[str, object] = {"weight_update": wu, "max_staleness": eta, "n_seeds": 3}
            for m in ("throughput_per_hour", "staleness_mean", "staleness_max", "gen_util"):
                v = (100.0 * (eta + 1) if wu == "PartialRollout" else 60.0) if m != "gen_util" else 0.97
                row.update({f"{m}_mean": v, f"{m}_lo": v * 0.9, f"{m}_hi": v * 1.1})
            rows.append(row)
    agg = pd.DataFrame(rows)
    st = staleness_throughput_figure(agg)
    util = lines_figure(agg, "max_staleness", "gen_util", by="weight_update")
    assert util.layout.legend.title.text == "weight_update"
    assert list(util.layout.xaxis.tickvals) == [0, 1, 2, 3]
    band = [t for t in util.data if t.fill == "toself"][0]
    assert max(band.y) <= 1.0  # 0.97 * 1.1 clipped to a share
    base = pipesim.Scenario().with_(n_slots=8, batch_size=8, steps=3)
    cmp = pipesim.compare({"synchronous": base, "eta=1": base.with_(max_staleness=1)})
    assert isinstance(cmp.figure, go.Figure)
    px = screenshot(
        browser, figures_to_html([st, util, cmp.figure]), shots / "sweep_compare.png", height=1400
    )
    assert _colours(px) >= 3


def test_1024_slot_timeline_keeps_its_trainer_and_sync_lanes(browser: str, shots: Path) -> None:
    scen = get_scenario("async-eta1").with_(n_slots=1024, batch_size=1024, pool_size=None, steps=4)
    fig = timeline(run(scen))
    assert fig.layout.height <= 1200
    px = screenshot(browser, figures_to_html([fig]), shots / "timeline_1024_slots.png", height=1200)
    assert _colours(px) >= 3


def test_qq_plot(browser: str, shots: Path, tmp_path: Path) -> None:
    from pipesim import LogNormalDurations
    from pipesim.io.fit import fit_values, write_qq

    x = LogNormalDurations(median_s=50.0, sigma=0.8).sample(3000, np.random.default_rng(0))
    page = write_qq(fit_values(x, column="duration_s"), tmp_path / "qq.html").read_text()
    px = screenshot(browser, page, shots / "qq_plot.png", height=700, min_ink=0.008)
    assert _colours(px) >= 3


def test_compute_view(browser: str, shots: Path) -> None:
    from pipesim import PipelineConfig, Scenario
    from pipesim.compute import GPUS, MODELS
    from pipesim.compute.cluster import Cluster, run_compute
    from pipesim.compute.cost import EngineConfig
    from pipesim.compute.workload import LogNormalLengths, TokenWorkload
    from pipesim.io.viz import compute_view

    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096, max_num_seqs=64)
    wl = TokenWorkload(response=LogNormalLengths(600.0, 0.7), prompt=200, max_response_tokens=3000)
    sc = Scenario(pipeline=PipelineConfig(batch_size=64, steps=3, max_staleness=1))
    crun = run_compute(sc, Cluster(engine=eng, n_gpus=3, trainer_gpus=1), wl, record=True)
    px = screenshot(
        browser, figures_to_html([compute_view(crun)]), shots / "compute_view.png", height=700, min_ink=0.005
    )
    assert _colours(px) >= 2
