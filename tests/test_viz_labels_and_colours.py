"""What a reader reads and tells apart in the HTML outputs: tables and hovers say their columns in
words (with units), never as the snake_case names of the data, while the data keeps those names;
48 engine replicas get 48 colours far enough apart to tell, while ten or fewer keep the colours
they had; and the timeline module, split in three, still answers every import made of it."""

from __future__ import annotations

import importlib
import itertools
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pipesim.io.viz import design_comparison_figure, lines_figure
from pipesim.io.viz.palette import PALETTE, delta_e, replica_colors
from pipesim.io.viz.sweep import DESIGN_PANELS
from scenarios import starvation

VIZ = Path(__file__).resolve().parent.parent / "pipesim" / "io" / "viz"


class _Headers(HTMLParser):
    """The text of every ``<th>`` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.headers: list[str] = []
        self._in = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Any]]) -> None:
        if tag == "th":
            self._in = True
            self.headers.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "th":
            self._in = False

    def handle_data(self, data: str) -> None:
        if self._in:
            self.headers[-1] += data


def _headers(page: str) -> list[str]:
    parser = _Headers()
    parser.feed(page)
    return [h.strip() for h in parser.headers]


def _check_headers(headers: list[str], columns: list[str]) -> None:
    assert len(headers) == len(columns) and headers
    for h, col in zip(headers, columns):
        assert "_" not in h and h, (h, col)  # words, not the column's identifier
        if col.endswith("_share"):
            assert "%" in h or "share" in h, h  # a share says so
        if col.endswith(("_s", "_per_hour")):
            assert "(s)" in h or "hour" in h, h  # and a time its unit


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return starvation.starvation_table(etas=(0, 2), steps=8)


def test_the_reports_starvation_table_has_human_headers_and_the_data_keeps_its_names() -> None:
    """Through the report's own path: the section's table, as ``pipesim report`` renders it."""
    from pipesim.io import viz
    from pipesim.io.report import contributed_sections, table_html

    shown: list[pd.DataFrame] = []

    def recording_table(df: pd.DataFrame, caption: str) -> str:
        shown.append(df)
        return table_html(df, caption)

    page = "\n".join(contributed_sections(viz.figure_div, recording_table))
    assert shown, "the starvation section shows a table"
    headers = _headers(page)
    assert headers and not [h for h in headers if "_" in h], headers  # it showed the frame's names
    _check_headers(headers, list(starvation.REPORT_COLUMNS))
    for df in shown:
        assert all("_" not in str(c) for c in df.columns)
    # the data other code reads keeps its names and its shares in [0, 1]
    raw = starvation.starvation_table(etas=(1,), steps=6)
    assert set(starvation.REPORT_COLUMNS) <= set(raw.columns)
    assert raw["never_trained_share"].between(0, 1).all()


def test_the_readable_table_is_a_relabelled_copy(table: pd.DataFrame) -> None:
    before = table.copy()
    cols = tuple(table.columns)
    shown = starvation.readable_table(table, cols)
    pd.testing.assert_frame_equal(table, before)  # the caller's frame is untouched
    assert list(shown.columns) == [starvation.COLUMN_LABELS[c] for c in cols]
    assert len(set(shown.columns)) == len(cols)  # no two columns read the same
    for c in cols:
        got, raw = shown[starvation.COLUMN_LABELS[c]], table[c]
        if c.endswith("_share"):
            pd.testing.assert_series_equal(got, 100 * raw, check_names=False)  # shown as %
        else:
            pd.testing.assert_series_equal(got, raw, check_names=False)


def test_the_html_page_carries_the_table_with_human_headers(tmp_path: Path) -> None:
    out = tmp_path / "starvation.html"
    starvation.main(["--etas", "1", "--steps", "6", "--html", str(out)])
    page = out.read_text()
    assert starvation.TABLE_CAPTION in page
    _check_headers(_headers(page), list(starvation.COLUMN_LABELS))


def _agg(x: str, metrics: tuple[str, ...]) -> pd.DataFrame:
    rows = []
    for d in ("a", "b"):
        for v in (1.0, 10.0, 30.0):
            row: dict[str, Any] = {"design": d, x: v, "n_seeds": 2}
            for m in metrics:
                row |= {f"{m}_mean": 0.5, f"{m}_lo": 0.4, f"{m}_hi": 0.6}
            rows.append(row)
    return pd.DataFrame(rows)


def _visible(template: str) -> str:
    """A hover template less its placeholders (``%{x}``, ``%{customdata[0]:.3g}``)."""
    return re.sub(r"%\{[^}]*\}", "", template)


def test_sweep_hovers_and_default_axis_titles_are_words() -> None:
    """The hover read ``sync_time_s=10`` and ``never_trained_share: 0.5``, and the x axis
    ``sync_time_s`` when no title was given."""
    metric = "never_trained_share"
    fig = lines_figure(_agg("sync_time_s", (metric,)), "sync_time_s", metric)
    assert "_" not in fig.layout.xaxis.title.text and "(s)" in fig.layout.xaxis.title.text
    hovers = [t.hovertemplate for t in fig.data if t.hovertemplate]
    assert hovers
    for h in hovers:
        assert "_" not in _visible(h), h
    panels = [m for m, _ in DESIGN_PANELS]
    comp = design_comparison_figure(
        _agg("max_staleness", (*panels, "staleness_max")).drop_duplicates("design")
    )
    for t in comp.data:
        assert "_" not in _visible(t.hovertemplate), t.hovertemplate


def _compute_run(n_replicas: int) -> Any:
    from pipesim import PipelineConfig, Scenario
    from pipesim.compute import GPUS, MODELS
    from pipesim.compute.cluster import Cluster, run_compute
    from pipesim.compute.cost import EngineConfig
    from pipesim.compute.workload import LogNormalLengths, TokenWorkload

    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096, max_num_seqs=16)
    wl = TokenWorkload(response=LogNormalLengths(300.0, 0.5), prompt=100, max_response_tokens=1000)
    sc = Scenario(pipeline=PipelineConfig(batch_size=16 * n_replicas, steps=2))
    cluster = Cluster(engine=eng, n_gpus=n_replicas + 1, trainer_gpus=1)
    return run_compute(sc, cluster, wl, record=True)


def _replica_colours(fig: Any) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for t in fig.data:
        out.setdefault(t.name, set()).add(t.line.color)
    return out


def test_48_replicas_wear_48_colours_a_reader_can_tell_apart() -> None:
    """With D3's ten colours cycled, replicas 0, 10, 20, 30 and 40 were drawn alike."""
    from pipesim.io.viz import compute_view

    crun = _compute_run(48)
    assert len(crun.engines) == 48
    by_name = _replica_colours(compute_view(crun, per_replica=True))  # a band above PER_REPLICA_MAX
    assert len(by_name) == 48
    assert all(len(c) == 1 for c in by_name.values())  # a replica: one colour in both panels
    colours = [c.pop() for c in by_name.values()]
    assert len(set(colours)) == 48
    closest = min(delta_e(a, b) for a, b in itertools.combinations(colours, 2))
    assert closest >= 10, closest  # apart at a glance, not merely different hex strings
    for t in compute_view(crun, per_replica=True).data:  # and the hover names the replica
        assert t.name in t.hovertemplate


def test_a_few_replicas_keep_their_colours_and_a_replica_keeps_its_colour_as_the_count_grows() -> None:
    from pipesim.io.viz import compute_view

    crun = _compute_run(2)
    by_name = _replica_colours(compute_view(crun))
    assert [by_name[f"replica {i}"] for i in range(2)] == [{PALETTE[0]}, {PALETTE[1]}]
    for n in (1, 5, len(PALETTE)):
        assert replica_colors(n) == list(PALETTE[:n])
    many = replica_colors(64)
    for n in (11, 30, 48):
        assert replica_colors(n) == many[:n]
    assert len(set(replica_colors(400))) == 400  # past the coarse candidates, still no repeat


def test_the_split_timeline_module_still_answers_every_import_and_stays_small() -> None:
    aggregate, palette, segments, timeline = (  # the package's ``timeline`` is the function
        importlib.import_module(f"pipesim.io.viz.{m}")
        for m in ("aggregate", "palette", "segments", "timeline")
    )
    for name in ("MARKS", "LEGEND_TITLE", "TRAIN_COLOR", "SYNC_COLOR", "PAUSE_COLOR"):
        assert getattr(timeline, name) is getattr(palette, name)
    for name in ("version_colors", "n_versions_of"):
        assert getattr(timeline, name) is getattr(palette, name) is getattr(aggregate, name)
    assert timeline.segments_frame is segments.segments_frame
    for name in ("LANE_ROW_PX", "LABEL_PX", "WEBGL_THRESHOLD", "slot_rows_px", "tick_step", "timelines"):
        assert hasattr(timeline, name)
    for path in VIZ.glob("*.py"):
        text = path.read_text()
        assert len(text.splitlines()) < 400, path.name
        assert text.startswith('"""'), path.name  # each says what it holds
