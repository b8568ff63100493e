"""The offline report: chapter numbers in its tables, and a real headless Chromium drawing its plots.

The browser test skips (with the reason) when no Chromium is installed and ``CI`` is unset; with
``CI`` set a missing browser is a failure, since ``.ci/run`` installs it. Chromium runs with every
host name mapped to NOTFOUND, so any network load would fail: the plots must come from the page.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from pipesim.io.report import build_report, chapter_pool, design_table, external_urls

EXPECTED = json.loads((Path(__file__).parent / "data" / "chapter13_expected.json").read_text())


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    return build_report(out, seeds=2, workers=2, progress=False, etas=(0, 1, 2, 4))


def test_design_table_matches_chapter() -> None:
    df = design_table(chapter_pool()).set_index("design")
    for name, d in EXPECTED["designs"].items():
        assert df.loc[name, "episodes/hour"] == pytest.approx(d["result"]["throughput"], rel=1e-3)
        assert df.loc[name, "slot util"] == pytest.approx(d["result"]["gen_util"], abs=1e-3)
        assert df.loc[name, "staleness max"] == d["result"]["staleness_max"]


def test_report_is_self_contained_with_every_section(report: Path) -> None:
    page = report.read_text()
    assert external_urls(page) == []
    # designs, Figure 13.1, Figure 13.2, sync time, and the starvation figure (a pipesim.report section)
    assert page.count("Plotly.newPlot") == 5
    assert page.count('<script type="text/javascript">/**') == 1  # plotly.js inlined once
    for heading in (
        "Figure 13.1",
        "Figure 13.2",
        "Design table",
        "Straggler table",
        "weight synchronisation",
        "timeout at the 95th percentile",
    ):
        assert heading in page, heading
    assert f"{EXPECTED['designs']['async eta=2, partial']['result']['throughput']:,.0f}" in page


def _find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_or_skip() -> str:
    """The Chromium to draw with; without one the test fails under CI (.ci/run installs it) and is
    skipped elsewhere."""
    path = _find_chromium()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but no chromium is installed (.ci/run installs it with apt)")
        pytest.skip("no chromium/chrome on PATH (install with `apt-get install chromium`); CI unset")
    return path


def offline_flags(browser: str, profile: str) -> list[str]:
    """Headless Chromium with a fresh profile that resolves no host: a page that asks for anything
    over the network fails to load it (docs/viz.md's flags)."""
    return [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ]


def render(browser: str, page: Path, shot: Path, window: str, *extra: str, budget_ms: int = 20000) -> None:
    """Screenshot ``page`` in headless Chromium, offline (the flags of docs/viz.md); assert that a
    screenshot was written and that the page asked for nothing over the network."""
    with tempfile.TemporaryDirectory() as profile:
        cmd = [
            *offline_flags(browser, profile),
            "--enable-logging=stderr",
            "--v=0",
            f"--screenshot={shot}",
            f"--window-size={window}",
            *extra,
            "--hide-scrollbars",
            f"--virtual-time-budget={budget_ms}",
            page.resolve().as_uri(),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert shot.exists(), f"chromium wrote no screenshot (rc {proc.returncode}): {proc.stderr[-2000:]}"
    assert "ERR_NAME_NOT_RESOLVED" not in proc.stderr, "the page tried to load something over the network"


def _png_pixels(path: Path) -> np.ndarray:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) -> uint8 [h, w, 3]."""
    data, pos, idat = path.read_bytes(), 8, b""
    w = h = ch = 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, "unexpected PNG format"
            ch = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride = zlib.decompress(idat), w * ch
    out = np.zeros((h, stride), dtype=np.uint8)
    prev = bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if f == 1:
            for i in range(ch, stride):
                line[i] = (line[i] + line[i - ch]) & 255
        elif f == 2:
            line = bytearray((np.frombuffer(line, np.uint8) + np.frombuffer(prev, np.uint8)).tobytes())
        elif f == 3:
            for i in range(stride):
                left = line[i - ch] if i >= ch else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - ch] if i >= ch else 0
                b, c = prev[i], prev[i - ch] if i >= ch else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out[y] = np.frombuffer(line, np.uint8)
        prev = line
    return out.reshape(h, w, ch)[:, :, :3]


@pytest.mark.browser
def test_report_draws_plots_offline_in_headless_chromium(report: Path) -> None:
    browser = chromium_or_skip()
    shot = report.parent / "report.png"
    render(browser, report, shot, "1400,3000", "--force-device-scale-factor=0.5", budget_ms=15000)
    px = _png_pixels(shot).astype(int)
    nonwhite = (px.min(axis=-1) < 235).mean()
    assert nonwhite > 0.04, f"only {nonwhite:.1%} of the screenshot is not white: plots were not drawn"
    # plot colours: saturated pixels (not grey text), bucketed; the timelines alone use several
    sat = px.max(axis=-1) - px.min(axis=-1) > 60
    colours = {tuple(c) for c in (px[sat] // 32).tolist()}
    assert len(colours) >= 4, f"only {len(colours)} plot colour(s) on the page"
