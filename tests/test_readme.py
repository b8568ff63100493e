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


def test_the_plan_guides_printed_recommendation_is_a_whole_program() -> None:
    """docs/plan.md shows what ``pipesim plan`` prints: copied as it stands, it must build its
    engine, cluster, workload, scenario and trainer (it once left out the imports and the
    workload: a NameError). The run itself is 12 steps on 64 GPUs, so ``run_compute`` is stood
    in for by one that records its arguments."""
    text = (README.parent / "docs" / "plan.md").read_text()
    section = text.split("The printed recommendation:", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "docs/plan.md lost its printed recommendation"
    import pipesim
    import pipesim.compute as pc

    calls: list[tuple] = []
    source = code.group(1).replace("from pipesim.compute import *\n", "")
    namespace: dict = {name: getattr(pc, name) for name in pc.__all__}
    namespace["run_compute"] = lambda *args, **kwargs: calls.append((args, kwargs))
    exec(compile(source, "docs/plan.md", "exec"), namespace)
    (scenario, cluster, workload), kwargs = calls[0]
    assert isinstance(scenario, pipesim.Scenario) and isinstance(cluster, pc.Cluster)
    assert isinstance(workload, pc.TokenWorkload) and workload.samples_per_prompt == 16
    assert isinstance(kwargs["trainer"], pc.TrainerConfig)
    assert "import pipesim" in code.group(1) and "from pipesim.compute import *" in code.group(1)
