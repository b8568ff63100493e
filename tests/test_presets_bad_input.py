"""The system presets and ``pipesim.compare`` refuse what they cannot honour, by name, at once
(the refusals' rows, type and ``err.field``: tests/test_refusals_policies.py; this file keeps what
the presets run and the overrides that settle ``max_staleness``).

Found by a probe of the presets: ``max_staleness=`` was a ``TypeError`` from inside
``dataclasses.replace``; slime's fully asynchronous worker stalled mid-run at a batch it can
never form; ``areal(samples_per_prompt=-3)`` ran; the string ``'False'`` switched a bool flag
on; verl's errors named its internal ``k``. ``compare`` split a metric string into characters,
read a typo as a row of NaN and dropped one of two designs named ``1`` and ``"1"``.
"""

from __future__ import annotations

from typing import Any

import pytest

import pipesim
from pipesim import PipelineConfig, Scenario
from pipesim.core.validate import FieldError
from pipesim.io.registry import apply_overrides, build, resolve
from scenarios.systems import PRESETS
from tests.test_refusals_core import check_refusal


def test_slime_runs_a_batch_below_twice_its_cap() -> None:
    """The refusal stops at 2 x cap: 15 of 8 slots forms (up to 2 cap - 1 finish after the stop)."""
    run = pipesim.run(PRESETS["slime_fully_async"](n_slots=8, batch_size=15, steps=3))
    assert run.summary()["episodes_trained"] == 3 * 15


@pytest.fixture(scope="module")
def two_runs() -> dict[str, Any]:
    return {"a": pipesim.run(PRESETS["areal"](steps=2)), "b": pipesim.run(PRESETS["roll"](steps=2))}


def test_compare_keeps_every_design(two_runs: dict[str, Any]) -> None:
    """(Two designs whose names read the same, once one dropped: tests/test_refusals_policies.py.)"""
    table = pipesim.compare(two_runs, metrics=("gen_util", "episodes_trained")).table
    assert list(table.columns) == ["a", "b"] and table.shape == (2, 2)
    assert table.iloc[1].tolist() == [128.0, 128.0]  # episodes trained: 2 steps of 64


def test_a_busy_share_is_never_above_one() -> None:
    """AReaL's slots are never idle: the sum of busy intervals read 1.0000000000000004 on one
    machine (taken back to 1) and 0.9999999999999996 on another (the draws' floating point
    differs between CPUs), so the test holds the bound and the rounding, not one value."""
    s = pipesim.run(PRESETS["areal"]()).summary()
    assert 1 - 1e-12 <= s["gen_util_total"] <= 1.0 and 0 <= s["gen_util"] <= s["gen_util_total"]


OWN_BOUND = ["verl_fully_async", "slime_fully_async", "openrlhf_async", "roll", "pipelinerl"]
"""The presets whose admission rule bounds staleness itself (an ``OwnStalenessBound``)."""


@pytest.mark.parametrize("how", ["with_", "set", "build"])
@pytest.mark.parametrize("preset", OWN_BOUND)
def test_a_preset_refuses_a_max_staleness_its_rule_never_reads(preset: str, how: str) -> None:
    """From a probe: ``with_``, ``--set`` and a sweep changed max_staleness, recorded it and ran the
    same design (the rule has its own bound); each path now refuses pipeline.max_staleness, and the
    message names the rule (the knob it reads instead is the rule's ``staleness_knob``)."""
    sc = PRESETS[preset](n_slots=8, batch_size=8, steps=2)
    call = {
        "with_": lambda: sc.with_(max_staleness=2),
        "set": lambda: apply_overrides(sc, ["max_staleness=2"]),
        "build": lambda: build(resolve(f"systems:{preset}"), ["max_staleness=2"]),
    }[how]
    err = check_refusal(call, FieldError, "pipeline.max_staleness")
    assert type(sc.admission).__name__ in str(err)
    assert sc.with_(max_staleness=0, steps=3).pipeline.steps == 3  # an unchanged value is no change


def test_a_scenario_built_with_a_max_staleness_its_policies_never_read_is_refused() -> None:
    """From a probe: a scenario file of ROLL edited to max_staleness = 3, or a rule swapped in
    under an eta it never reads, ran the same design under the label; the check is at
    construction now, so every path (files, --set, with_, Scenario(...)) meets it."""
    from pipesim.policies.systems import RollGroupAdmission

    cfg = PipelineConfig(n_slots=8, batch_size=8, steps=2, max_staleness=3)
    check_refusal(
        lambda: Scenario(pipeline=cfg, admission=RollGroupAdmission(1)), FieldError, "pipeline.max_staleness"
    )
    base = Scenario(pipeline=cfg)  # CountThrottle reads it
    check_refusal(lambda: base.with_(admission=RollGroupAdmission(1)), FieldError, "pipeline.max_staleness")
    assert base.with_(max_staleness=0, admission=RollGroupAdmission(1)).pipeline.max_staleness == 0


def test_a_policy_of_the_users_may_read_max_staleness_beside_a_rule_with_its_own_bound() -> None:
    """pipesim cannot know what a user's batch policy reads (this one drops by eta without
    declaring a promise), so the field is left to it, and it changes the run."""
    from pipesim.policies.systems import RollGroupAdmission

    class DropByEta:
        def min_items(self, p: Any) -> int:
            return int(p.batch_size)

        def select(self, buffer: list[Any], p: Any) -> tuple[list[Any] | None, list[Any]]:
            stale = [e for e in buffer if p.version - e.version > p.max_staleness]
            for e in stale:
                buffer.remove(e)
            if len(buffer) < p.batch_size:
                return None, stale
            batch = buffer[: p.batch_size]
            del buffer[: p.batch_size]
            return batch, stale

    cfg = PipelineConfig(n_slots=8, batch_size=4, steps=4, max_staleness=0)
    sc = Scenario(pipeline=cfg, admission=RollGroupAdmission(3), batching=DropByEta(), pool_size=2000)
    runs = [pipesim.run(sc.with_(max_staleness=k)).summary()["staleness_max"] for k in (0, 3)]
    assert runs[0] == 0 and runs[1] > 0


def test_the_policy_strategy_pins_a_rule_with_its_own_bound() -> None:
    """From a probe: policy_scenarios raised when the admission was pinned to such a rule (it
    raised eta for EvictStalest); it now leaves eta at 0 there."""
    from hypothesis import HealthCheck, given, settings

    from pipesim.policies.batching import EvictStalest
    from pipesim.policies.systems import RollGroupAdmission
    from pipesim.policies.updates import SyncEveryK
    from pipesim.testing.strategies import policy_scenarios

    seen = []

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(
        policy_scenarios(
            admissions=[RollGroupAdmission(1)],
            batchings=[EvictStalest(40)],
            weight_updates=[SyncEveryK(3, pipesim.PartialRollout())],
        )
    )
    def check(sc: Scenario) -> None:
        seen.append(sc.pipeline.max_staleness)

    check()
    assert seen and set(seen) == {0}


def test_overrides_that_settle_max_staleness_together_apply_in_either_order() -> None:
    """From a probe: on ROLL, --set max_staleness=2 --set admission=CountThrottle() was refused
    (the first override alone leaves eta unread) while the reverse order ran."""
    roll = PRESETS["roll"](n_slots=8, batch_size=8, steps=2)
    for pairs in (
        ["max_staleness=2", "admission=CountThrottle()"],
        ["admission=CountThrottle()", "max_staleness=2"],
    ):
        sc, given = apply_overrides(roll, pairs)
        assert sc.pipeline.max_staleness == 2 and type(sc.admission).__name__ == "CountThrottle"
        assert list(given) == [p.split("=")[0] for p in pairs]
    eta2 = Scenario(pipeline=PipelineConfig(n_slots=8, batch_size=8, steps=2, max_staleness=2))
    sc, _ = apply_overrides(eta2, ["admission=RollGroupAdmission(1)", "max_staleness=0"])
    assert sc.pipeline.max_staleness == 0
    check_refusal(
        lambda: apply_overrides(eta2, ["admission=RollGroupAdmission(1)", "steps=3"]),
        FieldError,
        "pipeline.max_staleness",
    )
