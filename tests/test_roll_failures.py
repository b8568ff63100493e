"""ROLL's agentic preset with failures. The group queue waits for the oldest groups whole, so it
refuses DropFailed, which loses a sample for good (the run stalled at the first failure, its error
naming no failure), from ``Scenario.with_`` and the command line alike. A task run again after a
failure fills its own group: the supply counts tasks, not starts (counted by starts, RetryFailed
spent the supply and stalled the preset at version 10 of 20, RequeueFailed at its first failure)."""

from __future__ import annotations

import pytest

from pipesim import run
from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.policies.faults import DropFailed, RequeueFailed, RetryFailed
from pipesim.policies.systems import RollGroupExpiry, RollGroupQueue
from pipesim.testing import check_invariants, run_trace
from scenarios import systems

SMALL = {"n_slots": 8, "batch_size": 8, "steps": 6}


@pytest.mark.parametrize("ratio", [0, 1, 2])
def test_a_failure_that_loses_a_sample_is_refused_naming_failures(ratio: int) -> None:
    failures = DropFailed(1e-3)
    scen = systems.roll(async_generation_ratio=ratio, **SMALL).with_(failures=failures)
    assert isinstance(scen.batching, RollGroupQueue)
    with pytest.raises(FieldError) as info:
        run(scen)
    assert info.value.field == "failures"
    assert type(failures).__name__ in str(info.value) and "RollGroupExpiry" in str(info.value)


def test_the_command_line_says_so_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "systems:roll", "--set", "steps=4", "--set", "failures=DropFailed(hazard_per_s=0.001)"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "failures" in err and "DropFailed" in err and "Traceback" not in err


@pytest.mark.parametrize("failures", [RetryFailed(1e-3), RequeueFailed(1e-3)])
@pytest.mark.parametrize("ratio", [0, 1, 2])
def test_a_task_run_again_fills_its_own_group_and_the_run_keeps_its_promises(failures, ratio: int) -> None:
    """The preset at chapter size with failures that run a task again: every step trains its own
    groups (tasks k B .. (k + 1) B - 1), nothing is discarded, staleness stays within the ratio."""
    scen = systems.roll(async_generation_ratio=ratio, steps=12).with_(failures=failures)
    r = run(scen)
    check_invariants(r)
    s = r.summary()
    assert s["episodes_failed"] > 0  # the failures happened
    assert s["episodes_trained"] == 12 * 64 and s["episodes_discarded"] == 0
    assert s["staleness_max"] <= ratio
    tasks = r.episode_table.set_index("episode_id")["task_id"]
    t = r.trained.assign(task_id=lambda d: tasks.loc[d["episode_id"]].to_numpy())
    assert sorted(t["task_id"]) == list(range(12 * 64))
    assert (t["task_id"] // 64 == t["step"]).all()


def test_without_failures_the_supply_is_the_same_trace() -> None:
    """No relaunch: the next task is the number of starts, so the trace is the one counted by
    starts (the preset's default at chapter size: 889 episodes/h over seeds 0-4, docs/policies.md)."""
    from pipesim.policies.roll_agentic import RollGroupAdmission

    class ByStarts(RollGroupAdmission):
        def admits(self, p):  # type: ignore[no-untyped-def]
            return p.started < (p.version + 1 + self.ratio) * p.batch_size

    for ratio in (0, 1, 2):
        scen = systems.roll(async_generation_ratio=ratio, steps=8)
        old = scen.with_(admission=ByStarts(ratio))
        assert run_trace(scen) == run_trace(old)


def test_the_expiry_order_still_takes_drops() -> None:
    """RollGroupExpiry trains the first groups to finish and expires stragglers: a lost sample's
    group is one of them, so DropFailed runs there (the refusal points to it)."""
    scen = systems.roll(**SMALL).with_(batching=RollGroupExpiry(1), failures=DropFailed(1e-3))
    assert run(scen).summary()["episodes_trained"] == 6 * 8
