"""The system presets and ``pipesim.compare`` refuse what they cannot honour, by name, at once.

Found by a probe of the presets: ``max_staleness=`` was a ``TypeError`` from inside
``dataclasses.replace``; slime's fully asynchronous worker stalled mid-run at a batch it can
never form; ``areal(samples_per_prompt=-3)`` ran; the string ``'False'`` switched a bool flag
on; verl's errors named its internal ``k``. ``compare`` split a metric string into characters,
read a typo as a row of NaN and dropped one of two designs named ``1`` and ``"1"``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pipesim
from pipesim import PipelineConfig, Scenario
from pipesim.io.registry import apply_overrides, build, resolve
from scenarios.systems import PRESETS, april, areal, slime, verl_fully_async

BAD: list[tuple[str, Callable[[], Any], str]] = [
    (
        "areal-max-staleness",
        lambda: PRESETS["areal"](max_staleness=1),
        r"^AReaL: max_staleness is not",
    ),
    (
        "one-step-max-staleness",
        lambda: PRESETS["verl_one_step_off_policy"](max_staleness=2),
        r"its staleness bound is fixed at 1",
    ),
    ("roll-max-staleness", lambda: PRESETS["roll"](max_staleness=2), r"is async_generation_ratio$"),
    (
        "slime-batch-never-forms",
        lambda: PRESETS["slime_fully_async"](n_slots=8, batch_size=16),
        r"batch_size 16 can never form with max_concurrent \(n_slots\) 8",
    ),
    (
        "slime-batch-max-concurrent",
        lambda: PRESETS["slime_fully_async"](max_concurrent=4, batch_size=8),
        r"batch_size 8 can never form with max_concurrent 4",
    ),
    ("areal-samples", lambda: areal(samples_per_prompt=-3), r"^samples_per_prompt must be an integer >= 1"),
    ("april-carry-over", lambda: april(carry_over="False"), r"^carry_over must be a bool"),
    ("verl-partial", lambda: verl_fully_async(partial_rollout="False"), r"^partial_rollout must be a bool"),
    (
        "verl-require-bool",
        lambda: verl_fully_async(require_batches=True),
        r"^require_batches must be",
    ),
    (
        "verl-require-neg",
        lambda: verl_fully_async(require_batches=-2),
        r"^require_batches must be",
    ),
    (
        "verl-k-numpy",
        lambda: verl_fully_async(trigger_parameter_sync_step=np.int64(2)),
        r"^trigger_parameter_sync_step must be an integer >= 1 \(a Python int",
    ),
    ("verl-k-zero", lambda: verl_fully_async(trigger_parameter_sync_step=0), r"^trigger_parameter_sync_step"),
]


@pytest.mark.parametrize(("build", "match"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_preset_refuses_what_it_cannot_honour(build: Callable[[], Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build()


def test_slime_runs_a_batch_below_twice_its_cap() -> None:
    """The refusal stops at 2 x cap: 15 of 8 slots forms (up to 2 cap - 1 finish after the stop)."""
    run = pipesim.run(PRESETS["slime_fully_async"](n_slots=8, batch_size=15, steps=3))
    assert run.summary()["episodes_trained"] == 3 * 15


@pytest.fixture(scope="module")
def two_runs() -> dict[str, Any]:
    return {"a": pipesim.run(PRESETS["areal"](steps=2)), "b": pipesim.run(PRESETS["roll"](steps=2))}


@pytest.mark.parametrize(
    ("metrics", "match"),
    [
        ("gen_util", r"^metrics must be a non-empty list of summary keys, got 'gen_util'"),
        ([], r"^metrics must be a non-empty list"),
        (["gen_utl"], r"^metrics: unknown summary key\(s\) \['gen_utl'\]"),
    ],
)
def test_compare_names_a_bad_metric(two_runs: dict[str, Any], metrics: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pipesim.compare(two_runs, metrics=metrics)


def test_compare_keeps_every_design(two_runs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"design names must be distinct as text"):
        pipesim.compare({1: two_runs["a"], "1": two_runs["b"]})
    table = pipesim.compare(two_runs, metrics=("gen_util", "episodes_trained")).table
    assert list(table.columns) == ["a", "b"] and table.shape == (2, 2)
    assert table.iloc[1].tolist() == [128.0, 128.0]  # episodes trained: 2 steps of 64


def test_a_busy_share_is_never_above_one() -> None:
    """AReaL's slots are never idle: the sum of busy intervals read 1.0000000000000004 on one
    machine (taken back to 1) and 0.9999999999999996 on another (the draws' floating point
    differs between CPUs), so the test holds the bound and the rounding, not one value."""
    s = pipesim.run(PRESETS["areal"]()).summary()
    assert 1 - 1e-12 <= s["gen_util_total"] <= 1.0 and 0 <= s["gen_util"] <= s["gen_util_total"]


OWN_BOUND = [  # preset, its admission rule, the knob that bounds its staleness instead
    ("verl_fully_async", "VerlRollouter", "staleness_threshold"),
    ("slime_fully_async", "SlimeAsyncWorker", "none: the worker has no version bound"),
    ("openrlhf_async", "OpenRLHFBatches", "async_queue_size"),
    ("roll", "RollGroupAdmission", "async_generation_ratio"),
    ("pipelinerl", "PipelineRLLag", r"max_lag \(in samples\)"),
]


@pytest.mark.parametrize(("preset", "rule", "knob"), OWN_BOUND, ids=[o[0] for o in OWN_BOUND])
def test_a_preset_refuses_a_max_staleness_its_rule_never_reads(preset: str, rule: str, knob: str) -> None:
    """From a probe: ``with_``, ``--set`` and a sweep changed max_staleness, recorded it and ran the
    same design (the rule has its own bound); each now names the rule and its knob."""
    sc = PRESETS[preset](n_slots=8, batch_size=8, steps=2)
    match = rf"max_staleness is not a knob of {rule} \(it never reads it\); its staleness bound is {knob}"
    with pytest.raises(ValueError, match=rf"^{re.escape(sc.name)}: {match}"):
        sc.with_(max_staleness=2)
    with pytest.raises(ValueError, match=rf"^max_staleness=2: .*{match}"):
        apply_overrides(sc, ["max_staleness=2"])
    with pytest.raises(ValueError, match=match):
        build(resolve(f"systems:{preset}"), ["max_staleness=2"])
    assert sc.with_(max_staleness=0, steps=3).pipeline.steps == 3  # an unchanged value is no change


def test_slime_fully_async_refuses_max_staleness_it_only_recorded() -> None:
    """Its worker has no version bound: a recorded eta of 2 labelled an unbounded run."""
    with pytest.raises(ValueError, match=r"^slime fully async: max_staleness is not a knob of this preset"):
        slime("fully_async", max_staleness=2)


def test_a_scenario_built_with_a_max_staleness_its_policies_never_read_is_refused() -> None:
    """From a probe: a scenario file of ROLL edited to max_staleness = 3, or a rule swapped in
    under an eta it never reads, ran the same design under the label; the check is at
    construction now, so every path (files, --set, with_, Scenario(...)) meets it."""
    from pipesim.policies.systems import RollGroupAdmission

    cfg = PipelineConfig(n_slots=8, batch_size=8, steps=2, max_staleness=3)
    with pytest.raises(ValueError, match=r"leave max_staleness at 0 \(got 3\)"):
        Scenario(pipeline=cfg, admission=RollGroupAdmission(1))
    base = Scenario(pipeline=cfg)  # CountThrottle reads it
    with pytest.raises(ValueError, match="is not a knob of RollGroupAdmission"):
        base.with_(admission=RollGroupAdmission(1))
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
            admissions_=[RollGroupAdmission(1)],
            batchings_=[EvictStalest(40)],
            weight_updates_=[SyncEveryK(3, pipesim.PartialRollout())],
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
    with pytest.raises(
        ValueError, match=r"^admission=RollGroupAdmission\(1\): .*leave max_staleness at 0 \(got 2\)"
    ):
        apply_overrides(eta2, ["admission=RollGroupAdmission(1)", "steps=3"])
