"""The README's scenario example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_scenario_example_runs() -> None:
    text = README.read_text()
    section = text.split("## Composing a scenario", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "the README lost its scenario example"
    namespace: dict = {}
    exec(compile(code.group(1), "README.md", "exec"), namespace)
    result = namespace["result"]
    s = result.summary()
    assert s["episodes_trained"] == 64 * 20
    assert s["staleness_max"] >= 2  # the count throttle does not bound the maximum
    assert {"gen", "pause", "train", "sync"} <= set(result.events["kind"])
