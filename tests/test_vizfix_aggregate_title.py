"""The aggregate view's first panel title ran off both sides of the page for a long run name (a
preset with its ``--set`` pairs): the name is cut as the timeline's is, on a line of its own, and
the panel's own description below it is kept whole."""

from __future__ import annotations

import pytest

import pipesim
from pipesim.io.viz.aggregate import aggregate_view
from pipesim.io.viz.palette import TITLE_NAME_CHARS

DESCRIPTION = "episodes in flight by version"


@pytest.fixture(scope="module")
def run() -> pipesim.RunResult:
    return pipesim.run(pipesim.Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=2)))


def _first_title(fig: object) -> tuple[str, str]:
    head, description = fig.layout.annotations[0].text.split("<br>")  # type: ignore[attr-defined]
    return head, description


@pytest.mark.parametrize("n_pairs", [1, 12, 200])
def test_the_name_is_bounded_and_the_description_kept(run: pipesim.RunResult, n_pairs: int) -> None:
    name = "async-eta2 with " + ", ".join(f"knob_{i}=value_{i}" for i in range(n_pairs))
    head, description = _first_title(aggregate_view(run, title=name))
    assert len(head) <= TITLE_NAME_CHARS
    if len(name) > TITLE_NAME_CHARS:
        assert head.endswith("…") and name.startswith(head[:-1])
    else:
        assert head == name
    assert description.startswith(DESCRIPTION) and description.endswith("4 slots)")


def test_the_scenario_name_is_the_default(run: pipesim.RunResult) -> None:
    head, description = _first_title(aggregate_view(run))
    assert head == run.scenario.name and description.startswith(DESCRIPTION)
