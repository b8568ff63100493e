"""The colours the views share, in one place so that one thing has one colour in every view.

* Lines: :data:`PALETTE` (plotly's D3), one colour per design or policy in the sweep figures.
* Versions: :func:`version_colors`, light to dark, sized by :func:`n_versions_of`; the timeline
  (:mod:`pipesim.io.viz.timeline`) and the aggregate view (:mod:`pipesim.io.viz.aggregate`) both
  use it, so version 3 has the same colour in both. Past :data:`MAX_VERSION_LEGEND` versions both
  list bands of consecutive versions in their legends (:func:`version_band`), the same bands in
  both, each in the one colour :func:`band_color` gives it (its first version's): the timeline's
  legend swatch and the aggregate view's stacked band (which had the band's middle version's).
* The timeline's lanes and marks: :data:`TRAIN_COLOR`, :data:`SYNC_COLOR`, :data:`PAUSE_COLOR`,
  :data:`MARKS` and the legend's title :data:`LEGEND_TITLE`.
* Replicas: :func:`replica_colors`, the D3 colours for up to ten replicas (as before), then, for
  more, colours picked one by one as far (CIE L*a*b* distance) from those already taken as the
  candidates allow, so that 48 replicas get 48 colours a reader can tell apart, not D3 five times.

It was split out of the timeline module (which had grown past the project's 400 lines) along this
seam: these are decisions about colour, not about how a run is laid out.
"""

from __future__ import annotations

import colorsys
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import pandas as pd
from plotly.colors import qualitative, sample_colorscale

__all__ = [
    "TITLE_NAME_CHARS",
    "short_title",
    "LEGEND_TITLE",
    "MARKS",
    "MAX_VERSION_LEGEND",
    "PALETTE",
    "PAUSE_COLOR",
    "SYNC_COLOR",
    "TRAIN_COLOR",
    "band_color",
    "delta_e",
    "n_versions_of",
    "replica_colors",
    "version_band",
    "version_colors",
    "version_entries",
]

PALETTE = qualitative.D3
TRAIN_COLOR, SYNC_COLOR, PAUSE_COLOR = "#17becf", "#f2c80f", "#c8c8c8"
MARKS = {  # status -> (legend label, marker symbol, colour); each its own colour
    "discarded": ("dropped", "x", "#d62728"),
    "aborted": ("aborted", "x-thin-open", "#8b0000"),
    "truncated": ("timed out", "line-ns-open", "#ff7f0e"),
    "failed": ("failed (worker)", "star-triangle-down", "#8c564b"),
    "retried": ("retry of a failed or aborted episode", "triangle-right-open", "#e377c2"),
    "over_bound": ("staleness > eta", "diamond-open", "#9467bd"),
}
LEGEND_TITLE = "colour = version that generated the segment"


def version_colors(n_versions: int) -> list[str]:
    """One colour per version, light to dark (the chapter shades bars by version)."""
    if n_versions <= 1:
        return sample_colorscale("Blues", [0.6])
    return sample_colorscale("Viridis", list(np.linspace(0.95, 0.05, n_versions)))


MAX_VERSION_LEGEND = 64
"""Version entries a legend lists at most. Past it, consecutive versions share one entry (a
band): a run of 2,000 versions listed 2,000 entries, a timeline's legend longer than the page,
and an 8,000-version aggregate view took Chromium 26 s to render. No reader tells 2,000 shades
apart; each segment keeps its version's colour and hover."""


def version_band(version: int, n_versions: int) -> tuple[int, int, str]:
    """The legend band of ``version`` in a palette of ``n_versions``: ``(first, last, label)``.
    Bands are ``ceil(n_versions / MAX_VERSION_LEGEND)`` versions wide from version 0, so there are
    at most :data:`MAX_VERSION_LEGEND` of them, and a palette of that many versions or fewer has
    one band a version, labelled ``v3`` as before; a wider band is labelled ``v64-v127``."""
    width = _band_width(n_versions)
    first = int(version) // width * width
    last = max(min(first + width, int(n_versions)) - 1, int(version))  # the last band may be short
    return first, last, f"v{first}" if width == 1 else f"v{first}-v{last}"


def band_color(version: int, colors: Sequence[str]) -> str:
    """The colour of the legend band of ``version`` in the palette ``colors`` (one a version,
    :func:`version_colors`): its first version's colour. Both views ask it, so a band has one
    colour in both; a band of one version is that version's colour."""
    return colors[version_band(version, len(colors))[0] % len(colors)]


def version_entries(n_versions: int) -> int:
    """How many legend entries (bands) a palette of ``n_versions`` versions lists."""
    return -(-int(n_versions) // _band_width(n_versions))


def _band_width(n_versions: int) -> int:
    return max(1, -(-int(n_versions) // MAX_VERSION_LEGEND))


def n_versions_of(events: pd.DataFrame) -> int:
    """How many version colours a run needs: its newest version + 2 (the timeline and the
    aggregate view both size their palette with it, so a version has one colour in both)."""
    return int(max(events["version"].max() if len(events) else 0, 0)) + 2


def _lab(colors: list[str]) -> np.ndarray:
    """CIE L*a*b* (D65) of ``#rrggbb`` colours, one row each."""
    rgb = np.array([[int(c[i : i + 2], 16) for i in (1, 3, 5)] for c in colors], dtype=np.float64) / 255
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = lin @ m.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.column_stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])])


def delta_e(a: str, b: str) -> float:
    """CIE76 colour difference of two ``#rrggbb`` colours (about 2.3 is just noticeable; lines a
    reader tells apart at a glance are some 10 or more apart)."""
    la, lb = _lab([a, b])
    return float(np.linalg.norm(la - lb))


def _candidates(hue_step: int = 6) -> list[str]:
    """Saturated colours that read on white: hues every ``hue_step`` degrees at a few lightnesses
    and saturations, L* 30..78 (about 340 at 6 degrees, 2,000 at 1)."""
    out = []
    for h in range(0, 360, hue_step):
        for light in (0.3, 0.42, 0.55, 0.68):
            for sat in (0.65, 0.95):
                r, g, b = colorsys.hls_to_rgb(h / 360, light, sat)
                out.append(f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}")
    out = list(dict.fromkeys(out))
    lab = _lab(out)
    return [c for c, row in zip(out, lab) if 30 <= row[0] <= 78]


@lru_cache(maxsize=8)
def _replica_palette(n: int) -> tuple[str, ...]:
    chosen = list(PALETTE[:n])
    if n <= len(PALETTE):
        return tuple(chosen)
    cands = _candidates(6 if n <= 300 else 1)  # the same candidates (so colours) up to 300 replicas
    cand_lab = _lab(cands)
    nearest = np.min(np.linalg.norm(cand_lab[:, None, :] - _lab(chosen)[None, :, :], axis=-1), axis=1)
    while len(chosen) < n:  # farthest-point: each new colour as far as it can be from those taken
        k = int(np.argmax(nearest))
        chosen.append(cands[k])
        nearest = np.minimum(nearest, np.linalg.norm(cand_lab - cand_lab[k], axis=1))
    return tuple(chosen)


def replica_colors(n_replicas: int) -> list[str]:
    """One distinct colour per replica: D3 up to ten (replica ``i`` keeps D3's ``i``-th colour
    whatever the count up to 300), then colours as far from the others as possible (see the module
    docstring); no colour repeats up to some 2,000 replicas. Beyond a few dozen, colour alone tells
    replicas apart less well: the views name the replica in the legend and the hover too."""
    return list(_replica_palette(max(int(n_replicas), 0)))


TITLE_NAME_CHARS = 72
"""A run's name in its one-line subplot title is cut here (with its ``--set`` pairs it ran off
both sides of the page); the page's heading and run table keep the whole name."""


def short_title(name: str) -> str:
    """``name`` cut to :data:`TITLE_NAME_CHARS` characters, an ellipsis ending the cut."""
    return name if len(name) <= TITLE_NAME_CHARS else name[: TITLE_NAME_CHARS - 1].rstrip(" ,") + "…"
