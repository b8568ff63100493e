"""The policies, the policy catalog, the system presets and ``compare`` refuse bad input with a
:class:`FieldError` naming the field (rows: id, call, exception type, ``err.field``; never the
sentence). A policy written as text goes through the catalog (``--set admission=...``, scenario
files), which keeps the constructor's field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import pipesim
from pipesim import PipelineConfig, Scenario
from pipesim.core.validate import FieldError
from pipesim.policies.catalog import parse_policy
from scenarios.systems import PRESETS, april, areal, slime, verl_fully_async
from tests.test_refusals_core import check_refusal

CATALOG: list[tuple[str, str]] = [  # a policy written as text, and the field it must name
    ("AReaLThrottle(max_concurrent=0)", "max_concurrent"),
    ("QueueAhead(batches_ahead=0.5)", "batches_ahead"),
    ("AsyncRatio(ratio=-1)", "ratio"),
    ("LagBound(max_lag_samples=0)", "max_lag_samples"),
    ("StaleFraction(staleness_threshold=-1)", "staleness_threshold"),
    ("StaleFraction(sync_every=0)", "sync_every"),
    ("OverSample(factor=0.5)", "factor"),
    ("WindowedFIFO(window=0)", "window"),
    ("DropStale(requeue=1)", "requeue"),
    ("EvictStalest(capacity=0)", "capacity"),
    ("Timeout(cap_s=0)", "cap_s"),
    ("Timeout()", "cap_s"),  # a required argument left out
    ("Timeout(limit_s=3)", "cap_s"),  # a misspelt one: the one required is named
    ("RetryFailed(hazard_per_s=0)", "hazard_per_s"),
    ("DropFailed(hazard_per_s=-1)", "hazard_per_s"),
    ("RequeueFailed(hazard_per_s=0)", "hazard_per_s"),
    ("GroupAffinity(group_size=0)", "group_size"),
    ("GroupAffinity(2, fallback=3)", "fallback"),
    ("Replicas(n_replicas=0)", "n_replicas"),
    ("PerReplicaSync(sync_times_s=(-1.0,))", "sync_times_s[0]"),
    ("RollGroupAdmission(ratio=-1)", "ratio"),
    ("RollGroupExpiry(samples_per_group=0)", "samples_per_group"),
    ("PipelineRLLag(max_lag=-1)", "max_lag"),
    ("PipelineRLLag(attempts=0)", "attempts"),
    ("SlimeAsyncWorker(max_concurrent=0)", "max_concurrent"),
    ("OpenRLHFBatches(queue_size=0)", "queue_size"),
    ("AbortRestart(restart=1)", "restart"),
    ("InFlightUpdate(load_time_s=-1)", "load_time_s"),
    ("SyncEveryK(k=0)", "k"),
    ("VerlRollouter(staleness_threshold=-1)", "staleness_threshold"),
    ("VerlRollouter(trigger_parameter_sync_step=0)", "trigger_parameter_sync_step"),
    ("VerlRollouter(max_concurrent=0)", "max_concurrent"),
    ("VerlRollouter(max_queue_size=0)", "max_queue_size"),
    ("VerlMessageQueue(samples_per_group=0)", "samples_per_group"),
    ("WholeGroups(samples_per_group=0)", "samples_per_group"),
    ("WholeGroups(4, filter_rate=1.0)", "filter_rate"),
    ("WholeGroups(4, seed=-1)", "seed"),
    ("WholeGroups(4, drop_stale=1)", "drop_stale"),
    ("WholeGroups(4, requeue=True, drop_stale=False)", "requeue"),
]


@pytest.mark.parametrize(("text", "field"), CATALOG, ids=[c[0] for c in CATALOG])
def test_a_policy_from_the_catalog_names_the_constructors_field(text: str, field: str) -> None:
    check_refusal(lambda: parse_policy(text), FieldError, field)


TEXT: list[tuple[str, str | None, str]] = [  # text that is no policy of the slot, the slot, the field
    ("", "admission", "admission"),
    ("Drain", "admission", "admission"),  # a policy of another slot
    ("Drain(", "weight_update", "weight_update"),  # not Python
    ("Drain(x=os.system)", "weight_update", "weight_update"),  # not a literal
    ("[1, 2]", "batching", "batching"),  # not a call
    ("Nope", None, "type"),  # not in the catalog
    ("Nope(1)", "admission", "type"),
]


@pytest.mark.parametrize(("text", "kind", "field"), TEXT, ids=[f"{t[0]!r}-{t[1]}" for t in TEXT])
def test_text_that_is_no_policy_of_the_slot_names_the_slot(text: str, kind: str | None, field: str) -> None:
    """The field is the slot the text was given for (its caller's message names it: ``admission=...``)."""
    with pytest.raises(FieldError) as info:
        parse_policy(text, kind)
    assert info.value.field == field


def test_a_module_that_cannot_be_registered_is_named() -> None:
    from pipesim.policies.catalog import register_module

    for name in ("no_such_module_here", "json"):  # not importable; no policy class in it
        check_refusal(lambda name=name: register_module(name), FieldError, "module")


Row = tuple[str, Callable[[], Any], type[BaseException], str]


def _two_runs() -> dict[str, Any]:
    sc = Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=2))
    return {"a": pipesim.run(sc), "b": pipesim.run(sc.with_(max_staleness=1))}


PRESET_ROWS: list[Row] = [
    ("areal-max-staleness", lambda: PRESETS["areal"](max_staleness=1), FieldError, "max_staleness"),
    (
        "one-step-max-staleness",
        lambda: PRESETS["verl_one_step_off_policy"](max_staleness=2),
        FieldError,
        "max_staleness",
    ),
    ("roll-max-staleness", lambda: PRESETS["roll"](max_staleness=2), FieldError, "max_staleness"),
    (
        "slime-fully-async-max-staleness",
        lambda: slime("fully_async", max_staleness=2),
        FieldError,
        "max_staleness",
    ),
    (
        "slime-batch-never-forms",
        lambda: PRESETS["slime_fully_async"](n_slots=8, batch_size=16),
        FieldError,
        "batch_size",
    ),
    (
        "slime-batch-max-concurrent",
        lambda: PRESETS["slime_fully_async"](max_concurrent=4, batch_size=8),
        FieldError,
        "batch_size",
    ),
    ("slime-mode", lambda: slime("nope"), FieldError, "mode"),
    ("areal-samples", lambda: areal(samples_per_prompt=-3), FieldError, "samples_per_prompt"),
    ("april-carry-over", lambda: april(carry_over="False"), FieldError, "carry_over"),
    ("april-partial", lambda: april(partial_rollout="False"), FieldError, "partial_rollout"),
    ("april-n", lambda: april(n_samples_per_prompt=0), FieldError, "n_samples_per_prompt"),
    ("april-n-old", lambda: april(samples_per_prompt=0), FieldError, "samples_per_prompt"),
    ("april-factor-old", lambda: april(oversample_factor=0.5), FieldError, "oversample_factor"),
    (
        "april-over-float",
        lambda: april(over_sampling_batch_size=96.0),
        FieldError,
        "over_sampling_batch_size",
    ),
    (  # slime samples at least --rollout-batch-size prompts: 64 samples / 4 = 16
        "april-over-below-batch",
        lambda: april(over_sampling_batch_size=15, n_samples_per_prompt=4, batch_size=64),
        FieldError,
        "over_sampling_batch_size",
    ),
    (  # one knob under both names
        "april-over-twice",
        lambda: april(over_sampling_batch_size=96, oversample_factor=1.5),
        FieldError,
        "over_sampling_batch_size",
    ),
    (
        "april-partial-twice",
        lambda: april(partial_rollout=False, carry_over=False),
        FieldError,
        "partial_rollout",
    ),
    (
        "april-n-twice",
        lambda: april(n_samples_per_prompt=4, samples_per_prompt=4),
        FieldError,
        "n_samples_per_prompt",
    ),
    ("verl-partial", lambda: verl_fully_async(partial_rollout="False"), FieldError, "partial_rollout"),
    ("verl-require-bool", lambda: verl_fully_async(require_batches=True), FieldError, "require_batches"),
    ("verl-require-neg", lambda: verl_fully_async(require_batches=-2), FieldError, "require_batches"),
    (
        "verl-k-numpy",
        lambda: verl_fully_async(trigger_parameter_sync_step=np.int64(2)),
        FieldError,
        "trigger_parameter_sync_step",
    ),
    (
        "verl-k-zero",
        lambda: verl_fully_async(trigger_parameter_sync_step=0),
        FieldError,
        "trigger_parameter_sync_step",
    ),
]

OWN_BOUND = ["verl_fully_async", "slime_fully_async", "openrlhf_async", "roll", "pipelinerl"]
PRESET_ROWS += [
    (
        f"{preset}-with-max-staleness",
        (lambda preset=preset: PRESETS[preset](n_slots=8, batch_size=8, steps=2).with_(max_staleness=2)),
        FieldError,
        "pipeline.max_staleness",
    )
    for preset in OWN_BOUND
]


@pytest.mark.parametrize(
    ("call", "kind", "field"), [r[1:] for r in PRESET_ROWS], ids=[r[0] for r in PRESET_ROWS]
)
def test_a_preset_names_the_field_it_cannot_honour(
    call: Callable[[], Any], kind: type[BaseException], field: str
) -> None:
    check_refusal(call, kind, field)


def test_the_chapters_scripts_name_the_argument_they_refuse() -> None:
    """The starvation study's design, and the co-simulation's episode surgery (pipesim's FieldError)."""
    from offpolicy.gym import build_tokenizer, make_tasks
    from offpolicy.rollout import new_episode
    from scenarios.cosim_episodes import batch_advantages, truncate
    from scenarios.starvation import scenario as starvation_scenario

    check_refusal(lambda: starvation_scenario("nope", 1), FieldError, "design")
    tok = build_tokenizer()
    task = make_tasks("train", "defect")[0]
    check_refusal(lambda: truncate(new_episode(task, tok), 5, tok, 4), FieldError, "n_tokens")
    rewards = torch.zeros(3)
    check_refusal(lambda: batch_advantages(rewards, [(0, 0)] * 2), FieldError, "groups")
    check_refusal(lambda: batch_advantages(rewards, [(1, 0), (0, 0), (0, 0)]), FieldError, "groups")


def test_the_testing_kit_names_the_argument_it_refuses() -> None:
    """Handed the wrong kind of object: a TypeError (FieldTypeError) whose field is the argument."""
    from pipesim.core.validate import FieldTypeError
    from pipesim.testing import check_invariants, check_promises, promised_staleness_bound, run_trace

    sc = Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=2))
    r = pipesim.run(sc)
    for call, field in (
        (lambda: check_invariants(sc), "result"),  # type: ignore[arg-type]
        (lambda: check_invariants(r, "sc"), "scenario"),  # type: ignore[arg-type]
        (lambda: check_promises(r), "scenario"),  # type: ignore[arg-type]
        (lambda: run_trace({}), "scenario"),  # type: ignore[arg-type]
        (lambda: promised_staleness_bound(None), "result"),  # type: ignore[arg-type]
    ):
        err = check_refusal(call, FieldTypeError, field)
        assert isinstance(err, TypeError)


@pytest.fixture(scope="module")
def two_runs() -> dict[str, Any]:
    return _two_runs()


@pytest.mark.parametrize(
    ("designs", "metrics", "field"),
    [
        ("ab", "gen_util", "metrics"),  # a string is not a list of keys
        ("ab", [], "metrics"),
        ("ab", ["gen_utl"], "metrics"),  # a typo, read as a row of NaN before
        ("one", None, "designs"),
        ("clash", None, "designs"),  # 1 and "1" are the same column
        ("not-a-run", None, "designs['x']"),
    ],
    ids=["metrics-string", "metrics-empty", "metrics-typo", "one-design", "names-clash", "not-a-run"],
)
def test_compare_names_the_argument_it_refuses(
    two_runs: dict[str, Any], designs: str, metrics: Any, field: str
) -> None:
    given = {
        "ab": two_runs,
        "one": {"a": two_runs["a"]},
        "clash": {1: two_runs["a"], "1": two_runs["b"]},
        "not-a-run": {"a": two_runs["a"], "x": 3},
    }[designs]
    check_refusal(lambda: pipesim.compare(given, metrics=metrics), FieldError, field)
