"""Command-line values where a mutation audit found no test watching: ``--workers`` at its limit,
a tuple given as ``lo:hi``, the parameters of a factory without annotations (typed by their
defaults, a ``None`` default taking any value), and the field a too-large ``steps`` is refused by.

Each test fails on one mutant of ``pipesim/io`` and passes on the real code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import pipesim
from pipesim.core.validate import FieldError
from pipesim.io.cli_options import max_workers, workers_problem
from pipesim.io.overrides import apply_overrides, parse_value
from pipesim.io.registry import build, resolve
from pipesim.workload.durations import AgentDurations
from tests.test_refusals_core import check_refusal


def _scenario() -> pipesim.Scenario:
    return pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=2, steps=3), durations=AgentDurations()
    )


def test_the_most_workers_is_accepted_and_one_more_refused() -> None:
    most = max_workers()
    assert workers_problem(most) is None
    problem = workers_problem(most + 1)
    assert problem is not None and "--workers" in problem


@pytest.mark.parametrize("text", ["100:600", "100,600", "(100, 600)"])
def test_a_tuple_reads_colon_and_comma(text: str) -> None:
    durations = parse_value(_scenario(), "durations.tokens_per_turn", text)
    assert durations.tokens_per_turn == (100.0, 600.0)


FACTORY = '''
import pipesim


def make(cap=None, k=3):
    """cap: None or a step count; k: the steps (no annotations: typed by the defaults)."""
    steps = k if cap is None else cap
    return pipesim.Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=2, steps=steps))
'''


@pytest.fixture
def factory(tmp_path: Path) -> str:
    path = tmp_path / "mkit_factory.py"
    path.write_text(FACTORY)
    return f"{path}:make"


def test_a_parameter_defaulting_to_none_takes_a_value(factory: str) -> None:
    """A default of None says nothing of the type: ``cap=5`` reaches the factory as 5 (not read
    as a NoneType, which no text is)."""
    scenario, given = build(resolve(factory), ["cap=5"])
    assert scenario.pipeline.steps == 5
    assert given == {"cap": "5"}


def test_a_parameter_is_typed_by_its_default(factory: str) -> None:
    """``k=3``: an int; 2.5 is refused naming k, and 4 reaches the factory."""
    err = check_refusal(lambda: build(resolve(factory), ["k=2.5"]), FieldError, "k")
    assert "expected int" in str(err)
    scenario, _ = build(resolve(factory), ["k=4"])
    assert scenario.pipeline.steps == 4


def test_a_steps_too_large_for_the_pool_is_refused_naming_steps() -> None:
    """The pool that ``steps`` derives is too large: the field the user gave is blamed, as
    ``--set steps=0`` names it (``pipeline.steps``), not the derived ``pool_size``."""
    check_refusal(lambda: apply_overrides(_scenario(), ["steps=1000000000"]), FieldError, "pipeline.steps")
    check_refusal(lambda: apply_overrides(_scenario(), ["steps=0"]), FieldError, "pipeline.steps")
