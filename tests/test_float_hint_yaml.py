"""A float given where an integer belongs is refused with a way to write it, and that way is an
integer in every format a spec is read from: it offered ``100_000``, which YAML reads as text, so
a YAML user followed the hint into another refusal."""

from __future__ import annotations

import re

import pytest
import yaml

from pipesim.plan.checks import PlanError, integer


@pytest.mark.parametrize("value", [8.0, 1e5, 123456.0, 1e12])
def test_the_suggested_integer_reads_as_one_in_yaml(value: float) -> None:
    with pytest.raises(PlanError) as info:
        integer("run.steps", value)
    found = re.search(r"write (\S+)\)", str(info.value))
    assert found, str(info.value)
    text = found.group(1)
    assert yaml.safe_load(f"steps: {text}")["steps"] == int(value)
    assert text.isdigit()  # digits alone: an integer in TOML and in --set too
