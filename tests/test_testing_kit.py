"""The property-testing kit: the documented example runs as written, and the kit catches broken policies."""

from __future__ import annotations

import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import pipesim
from pipesim.testing import InvariantError, check_invariants

DOC = Path(__file__).resolve().parent.parent / "README.md"


def readme_example() -> str:
    text = DOC.read_text()
    m = re.search(
        r"<!-- readme-example:start -->\n```python\n(.*?)```\n<!-- readme-example:end -->", text, re.S
    )
    assert m, "docs/policies.md lost its example block"
    return m.group(1)


def test_the_documented_example_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("readme_example")  # a real module, as the user's test file would be
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(readme_example(), str(DOC), "exec"), module.__dict__)
    ns: dict[str, Any] = module.__dict__
    tests = [fn for name, fn in ns.items() if name.startswith("test_")]
    assert tests
    for fn in tests:
        fn()
    throttle = ns["HeadroomThrottle"]
    with pytest.raises(ValueError, match="headroom"):
        throttle(-1)


def test_the_example_is_short() -> None:
    src = readme_example()
    policy = src[src.index("@dataclass") : src.index("@settings")]
    assert len([line for line in policy.splitlines() if line.strip()]) <= 16


def test_the_kit_catches_a_broken_promise() -> None:
    @dataclass(frozen=True)
    class Lies:
        def admits(self, p: pipesim.Pipeline) -> bool:
            return p.started < (p.version + 3) * p.batch_size

        def staleness_bound(self, scenario: pipesim.Scenario) -> int:
            return 0

    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(n_slots=8, batch_size=4, steps=4), admission=Lies())
    r = pipesim.run(sc)
    with pytest.raises(InvariantError, match="promised staleness bound"):
        check_invariants(r, sc)
    with pytest.raises(InvariantError, match="scenario matches"):
        check_invariants(r, sc.with_(seed=1))
