"""A failed cell's error: a refusal (FieldError, PipelineError) reads as its message, which names
its field; a bug (any other exception, a user's policy's) keeps where it was raised."""

from __future__ import annotations

import pytest

import pipesim
from pipesim.core.errors import PipelineError
from pipesim.core.validate import FieldError
from pipesim.io.sweep_exec import run_cell


def _raising(exc: Exception):  # type: ignore[no-untyped-def]
    def fn(scenario: pipesim.Scenario) -> dict[str, float]:
        raise exc

    return fn


@pytest.mark.parametrize(
    ("exc", "located"),
    [
        (FieldError("cycle: the trace holds 1 durations", "cycle"), False),
        (PipelineError("the pipeline stalled"), False),
        (ZeroDivisionError("division by zero"), True),
        (KeyError("x"), True),
    ],
)
def test_a_refusal_reads_as_its_message_and_a_bug_keeps_its_place(exc: Exception, located: bool) -> None:
    row = run_cell(0, pipesim.Scenario(), _raising(exc))
    assert row["status"] == "failed" and str(exc) in row["error"]
    assert (" at " in row["error"] and ".py:" in row["error"]) is located
