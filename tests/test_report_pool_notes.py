"""The demo report's Figure 13.2 and timeout table say what they are: the figure averaged fresh
pools and read 6 at eta 2 and beyond where the chapter's pool (the tables') gives 7, with no note
on it; the timeout table's "truncated share" was the pool's where ``pipesim run`` prints the
trained episodes' share under the same name."""

from __future__ import annotations

from pathlib import Path

from pipesim.io import report


def test_the_timeout_table_says_its_share_is_the_pools() -> None:
    table = report.timeout_table(report.chapter_pool())
    assert "truncated share of the pool" in table.columns and "truncated share" not in table.columns
    row = table.iloc[1]
    assert 0.045 < row["truncated share of the pool"] < 0.055  # a cap at the pool's p95


def test_figure_13_2_says_it_is_over_fresh_pools(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    report.build_report(out, seeds=1, progress=False, etas=(0, 1))
    page = out.read_text()
    after = page.split("Figure 13.2", 1)[1]
    note = after.split("</p>", 1)[0]
    assert "fresh pool" in note and "not the chapter's pool" in note and "scenarios.chapter13" in note
    assert "not the chapter's pool" in page.split("<h2>", 1)[0]  # the header says it too
