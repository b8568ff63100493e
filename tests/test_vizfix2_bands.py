"""A band of versions has one colour in every view, and each view names the same versions.

Before: past ``MAX_VERSION_LEGEND`` versions the timeline's legend showed a band in its first
drawn version's colour and the aggregate view stacked it in its middle version's ("v0-v5":
rgb(221,227,40) in one, rgb(192,223,42) in the other). One function now decides,
:func:`pipesim.io.viz.palette.band_color`; where a band's first version has no segment of its own
the timeline lists the band with a legend-only entry in that colour.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from pipesim import run
from pipesim.io.registry import get_scenario
from pipesim.io.viz import aggregate_view, palette, timeline


@pytest.fixture(scope="module")
def many_versions() -> Any:
    return run(get_scenario("async-eta1").with_(n_slots=4, batch_size=4, steps=40, pool_size=None))


@pytest.fixture
def seven(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(palette, "MAX_VERSION_LEGEND", 7)


def timeline_legend(fig: Any) -> dict[str, str]:
    """Each version band the timeline's legend lists, and the colour it lists it in."""
    shown = [t for t in fig.data if t.type == "bar" and str(t.name).startswith("v")]
    return {t.name: t.marker.color for t in shown if t.showlegend is not False}


def stack_colours(fig: Any) -> dict[str, str]:
    flight = [t for t in fig.data if t.type == "scatter" and t.stackgroup == "flight"]
    assert all(t.fillcolor == t.line.color for t in flight)
    return {t.name: t.fillcolor for t in flight}


def test_a_band_has_one_colour_in_the_timeline_and_the_aggregate_view(
    many_versions: Any, seven: None
) -> None:
    tl, ag = timeline_legend(timeline(many_versions)), stack_colours(aggregate_view(many_versions))
    assert len(tl) == len(ag) == 7 and tl.keys() == ag.keys()
    colors = palette.version_colors(palette.n_versions_of(many_versions.events))
    for name in tl:
        first = int(name.split("-")[0][1:])
        assert tl[name] == ag[name] == colors[first], name  # the band's first version's
        assert tl[name] == palette.band_color(first, colors), name


def test_a_version_band_of_one_is_its_versions_colour(many_versions: Any) -> None:
    """Up to MAX_VERSION_LEGEND versions nothing changes: v3 is version 3's colour in both."""
    colors = palette.version_colors(palette.n_versions_of(many_versions.events))
    tl, ag = timeline_legend(timeline(many_versions)), stack_colours(aggregate_view(many_versions))
    for name in ag:
        assert tl[name] == ag[name] == colors[int(name[1:])]


class WithoutVersion:
    """A run whose generation segments of one version are left out (its other tables as they are)."""

    def __init__(self, res: Any, version: int) -> None:
        ev = res.events
        self.events = ev[~((ev["kind"] == "gen") & (ev["version"] == version))].reset_index(drop=True)
        self._res = res

    def __getattr__(self, name: str) -> Any:
        return getattr(self._res, name)


def test_a_band_whose_first_version_drew_nothing_keeps_its_colour(many_versions: Any, seven: None) -> None:
    """Band v6-v11 with no v6 segment: the legend lists it in v6's colour (the band's), not v7's,
    in an entry that draws nothing, and every segment keeps its own version's colour."""
    res = WithoutVersion(many_versions, 6)
    colors = palette.version_colors(palette.n_versions_of(many_versions.events))
    fig = timeline(res)
    assert timeline_legend(fig)["v6-v11"] == colors[6] != colors[7]
    assert palette.band_color(6, colors) == colors[6]
    entry = [t for t in fig.data if t.name == "v6-v11" and t.showlegend is not False]
    assert len(entry) == 1 and list(entry[0].x) == [None]
    drawn = [t for t in fig.data if t.name == "v6-v11" and t.showlegend is False]
    assert {t.marker.color for t in drawn} == {colors[v] for v in range(7, 12)}


def test_version_groups_asks_a_legend_entry_only_where_the_band_needs_one() -> None:
    from pipesim.io.viz.segments import version_groups

    colors = palette.version_colors(14)
    seg = pd.DataFrame({"version": [1, 2, 3, 3, 7, 9]})
    got = [(v, label, swatch) for v, _, label, swatch in version_groups(seg, colors)]
    assert got == [(1, "v1", None), (2, "v2", None), (3, "v3", None), (7, "v7", None), (9, "v9", None)]
    palette_width_2 = palette.version_colors(palette.MAX_VERSION_LEGEND * 2)
    seg = pd.DataFrame({"version": [1, 2, 3, 5]})
    got = [(v, label, swatch) for v, _, label, swatch in version_groups(seg, palette_width_2)]
    assert got == [
        (1, "v0-v1", palette_width_2[0]),  # the band's first version, v0, drew nothing
        (2, "v2-v3", None),
        (3, "v2-v3", None),
        (5, "v4-v5", palette_width_2[4]),
    ]


def test_the_last_band_ends_at_the_newest_version_in_both_views(many_versions: Any, seven: None) -> None:
    newest = int(many_versions.events["version"].max())
    for names in (timeline_legend(timeline(many_versions)), stack_colours(aggregate_view(many_versions))):
        last = max(names, key=lambda n: int(n.split("-")[0][1:]))
        assert "-" in last and last.endswith(f"-v{newest}"), last
