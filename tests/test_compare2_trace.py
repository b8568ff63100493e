"""The trace's size refusals name a step count only where it is known to fit: the bound asked
before a run is a lower bound, so it names none (its hint was followed and refused after the run);
the refusal after a run knows the run's events per step and names a count which, run, is traced.

The bound (:data:`pipesim.io.trace_bounds.MAX_TRACE_EVENTS`, where it is read) is monkeypatched
low, so every run is small.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pipesim
import pipesim.io.trace_bounds as bounds_mod
from pipesim.io.cli import main
from pipesim.io.registry import get_scenario
from pipesim.io.trace import TooManyEvents, check_run_events, min_events, write_trace
from pipesim.plan import runspec
from tests.test_runspec import SPEC

SLOTS = ["--set", "n_slots=8", "--set", "batch_size=8"]


def test_the_bound_before_a_run_names_no_step_count() -> None:
    with pytest.raises(TooManyEvents) as info:
        check_run_events(2_000, 512)
    err = info.value
    assert isinstance(err, ValueError) and err.field == "events"
    assert err.steps_that_fit is None and err.events == min_events(2_000, 512)


@pytest.mark.parametrize(("steps", "bound"), [(10, 100), (20, 200), (20, 300), (20, 500)])
def test_the_count_named_after_a_run_is_traced(
    steps: int,
    bound: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(bounds_mod, "MAX_TRACE_EVENTS", bound)
    assert min_events(steps, 8) <= bound  # the bound before the run lets it run
    scen = get_scenario("async-eta2").with_(n_slots=8, batch_size=8, steps=steps)
    with pytest.raises(TooManyEvents) as info:
        write_trace(pipesim.run(scen), tmp_path / "x.json")
    fit = info.value.steps_that_fit
    assert info.value.field == "events" and fit is not None and 1 <= fit < steps
    out = tmp_path / "t.json"
    argv = ["run", "async-eta2", *SLOTS, "--set", f"steps={steps}", "--trace", str(out)]
    assert main(argv) == 2 and not out.exists()
    assert f"steps={fit}" in capsys.readouterr().err  # the command names the same count
    argv[argv.index(f"steps={steps}")] = f"steps={fit}"
    assert main(argv) == 0 and json.loads(out.read_text())["traceEvents"]


def test_a_run_spec_is_told_its_run_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = {**SPEC, "run": {**SPEC["run"], "steps": 10}}
    result = runspec.run(runspec.from_dict(data)).result
    monkeypatch.setattr(bounds_mod, "MAX_TRACE_EVENTS", len(result.events) // 2)
    with pytest.raises(TooManyEvents) as info:
        write_trace(result, tmp_path / "x.json")
    fit = info.value.steps_that_fit
    assert fit is not None and f"run.steps={fit}" in str(info.value)
    again = runspec.run(runspec.from_dict({**data, "run": {**SPEC["run"], "steps": fit}})).result
    write_trace(again, tmp_path / "t.json")
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
