"""A run's subplot title is one centred line: a long name (a preset with its ``--set`` pairs) ran
off both sides of the page; the name is cut with an ellipsis and the run's numbers kept."""

from __future__ import annotations

import pipesim
from pipesim.io.viz.palette import TITLE_NAME_CHARS, short_title
from pipesim.io.viz.timeline import timelines


def _run() -> pipesim.RunResult:
    return pipesim.run(pipesim.Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=2)))


def test_a_long_name_is_cut_and_the_numbers_kept() -> None:
    name = "async-eta2 with " + ", ".join(f"knob_{i}=value_{i}" for i in range(12))
    fig = timelines({name: _run()})
    (title,) = [a.text for a in fig.layout.annotations if a.text]
    head, numbers = title.split(": ", 1)
    assert head.endswith("…") and len(head) <= TITLE_NAME_CHARS and name.startswith(head[:-1])
    assert numbers.startswith("2 steps in") and numbers.endswith("episodes/h")


def test_a_short_name_is_kept_whole() -> None:
    assert short_title("synchronous") == "synchronous"
    fig = timelines({"synchronous": _run()})
    assert any(a.text.startswith("synchronous: 2 steps") for a in fig.layout.annotations)
