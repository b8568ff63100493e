"""A timeline bar's colour is the version its segment generated under; its text is the version its
episode started under (docs/viz.md: "coloured by the version it generated under and labelled with
the version that started it"; staleness counts from the start). A partial rollout's continued
segment, coloured v3, reads "v2": the docs and the module docstring say so, and this pins it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pipesim import run
from pipesim.io.registry import get_scenario
from pipesim.io.viz import palette, timeline
from pipesim.io.viz.timeline import HOVER_COLS

SEGMENT, STARTED = HOVER_COLS.split().index("version"), HOVER_COLS.split().index("version_episode")


@pytest.fixture(scope="module")
def res() -> Any:
    return run(get_scenario("fig13.1-async"))


def test_bar_colour_is_the_segments_version_and_its_text_the_episodes_start(res: Any) -> None:
    fig = timeline(res)
    colors = palette.version_colors(palette.n_versions_of(res.events))
    bars = [t for t in fig.data if t.type == "bar" and str(t.name).startswith("v")]
    continued = 0
    for t in bars:
        cd = np.asarray(t.customdata)
        segment, started = cd[:, SEGMENT].astype(int), cd[:, STARTED].astype(int)
        assert set(segment) == {int(t.name[1:])}  # one trace a version, named by it
        assert t.marker.color == colors[int(t.name[1:])]
        assert list(t.text) == [f"v{v}" for v in started]
        continued += int((segment != started).sum())
    assert continued > 0  # the run has continued segments, where text and colour differ


def test_the_text_names_a_version_the_episode_generated_under_first(res: Any) -> None:
    """The label is the version of the episode's first segment, the one its staleness counts from."""
    fig = timeline(res)
    first = res.events.query("kind == 'gen'").sort_values("start_s").groupby("episode_id")["version"].first()
    for t in fig.data:
        if t.type == "bar" and str(t.name).startswith("v"):
            ids = np.asarray(t.customdata)[:, 0].astype(int)
            assert list(t.text) == [f"v{first[i]}" for i in ids]
