"""The Python code ``pipesim plan`` prints for its pick runs the design the plan ran: pasted, it
gives the throughput the plan printed above it. It left out the spec's ``env_workers`` (an agent
plan's code ran 18.7x too fast) and a calibrated ``iteration_overhead_s`` (5.2% too fast)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import pipesim.plan as plan
from pipesim.compute import AgentTurns
from pipesim.plan.code import scenario_code
from pipesim.plan.evaluate import run_design
from tests.test_plan import WORK, small_spec

AGENT = dataclasses.replace(
    WORK, max_response_tokens=1024, agent=AgentTurns(turns=3, tool_latency_s=20.0, observation_tokens=64)
)


@pytest.mark.parametrize(
    "changes",
    [
        {"workload": AGENT, "env_workers": 2},  # few sandboxes: the tools queue
        {"iteration_overhead_s": 0.004},  # as pipesim calibrate writes it
        {},
    ],
    ids=["env-workers", "calibrated-overhead", "defaults"],
)
def test_the_printed_code_gives_the_plans_throughput(changes: dict[str, Any]) -> None:
    spec = small_spec(**changes)
    d = next(d for d in plan.candidates(spec) if not d.colocated and d.eta == 1 and d.update == "partial")
    namespace: dict[str, Any] = {}
    exec(scenario_code(spec, d), namespace)  # noqa: S102 -- the code the plan prints for pasting
    pasted = namespace["run"].summary()["throughput_per_hour"]
    assert pasted == pytest.approx(run_design(spec, d, spec.steps, 0)["throughput_per_hour"], rel=1e-9)
