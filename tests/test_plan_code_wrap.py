"""The recommended design's code (``pipesim plan`` prints it, ``--json`` and ``--html`` carry it)
parses: :func:`pipesim.plan.code.wrap_code` breaks long lines at top-level commas only, and none
inside a string literal. A framework profile's ``source`` (``"volcengine/verl fully_async_policy
README, colocate sync, 64 GPUs (docs/compute.md, 'The trainer in phases')"``) was split at its
commas, and every design of ``examples/run_verl_8gpu.toml`` printed code that did not parse."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pipesim.plan as plan
from pipesim.plan.code import scenario_code, wrap_code
from pipesim.plan.runspec import load

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "line",
    [
        "x = f(a=1, source=\"one, two (three, 'four')\", b=[1, 2])",
        "x = f(a='it\\'s, (odd', b=\"[\", c=2)",
        "    trainer=TrainerConfig(name='a, b', n=3, profile=P(source=\"c, d)\", k=1)),",
    ],
)
def test_wrapping_keeps_string_literals_whole(line: str) -> None:
    wrapped = wrap_code(line, width=20)
    assert wrapped != line  # it did wrap
    body = wrapped if not line.startswith(" ") else "f(\n" + wrapped + "\n)"
    assert ast.dump(ast.parse(body)) == ast.dump(
        ast.parse(line if not line.startswith(" ") else "f(\n" + line + "\n)")
    )


def test_every_design_of_a_spec_with_a_framework_profile_prints_code_that_parses() -> None:
    rs = load(ROOT / "examples" / "run_verl_8gpu.toml")
    designs = plan.candidates(rs.plan)
    assert designs
    for d in designs[:: max(1, len(designs) // 25)]:
        code = scenario_code(rs.plan, d)
        assert "," in code and "source=" in code  # the profile's source, with its commas, is there
        ast.parse(wrap_code(code))
