"""The best-designs table says how many rows it shows: the text shows the fastest 8, the HTML page
the fastest 12, and each heading names its own count (the page's said nothing, so a reader
comparing the two saw 12 designs where the text listed 8)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pipesim.plan as plan
from pipesim.plan.report import text
from pipesim.plan.report_html import HTML_TOP, write_html

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plan import small_spec  # noqa: E402


def test_each_best_table_heading_counts_the_rows_it_shows(tmp_path: Path, monkeypatch: Any) -> None:
    """On a small plan (6 feasible designs) with the text cut at 3 rows and the page at 4."""
    import pipesim.plan.report_html as report_html

    result = plan.plan(small_spec(method="grid", seeds=1))
    n = len(result.feasible)
    assert n > 4  # both tables cut the list: the counts differ
    lines = text(result, top=3).splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("best feasible designs"))
    assert "the fastest 3 shown" in lines[at]
    body = []  # after the heading and the column names: one row a design, each led by its label
    for ln in lines[at + 3 :]:  # the heading, the column names, the rule
        if not ln.startswith(("colocated ", "split ")):
            break
        body.append(ln)
    assert len(body) == 3, lines[at : at + 8]
    monkeypatch.setattr(report_html, "HTML_TOP", 4)
    out = tmp_path / "plan.html"
    write_html(result, str(out))
    page = out.read_text(encoding="utf-8")
    section = page[page.index("<h2>Best feasible designs</h2>") :]
    section = section[: section.index("</table>")]
    assert "the fastest 4 shown" in section
    assert len(re.findall(r"<tr>", section)) - 1 == 4  # less the header row
    assert HTML_TOP == 12  # the page's own count, which its heading now says
