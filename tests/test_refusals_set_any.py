"""``--set KEY=VALUE`` on any registered scenario: built, or refused naming KEY.

Measured before (a sweep of every registry entry x every key x 34 value strings, about 24,000
builds): no crash or hang, but refusals that named a field the user never set:
``systems:roll --set async_generation_ratio=-1`` said ``ratio``, ``systems:areal --set
max_concurrent_rollouts=0`` said ``max_concurrent``, ``systems:pipelinerl --set batch_size=-1``
said ``max_lag``, ``--set steps=N`` past the pool said ``pool_size``, and ``--set
sync_time_s=Drain()`` said ``sync_cost``. The property: :func:`pipesim.io.overrides.build` either
returns a scenario or raises :class:`FieldError` whose ``field`` holds the key that was set.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pipesim.config import PipelineConfig, Scenario
from pipesim.core.validate import FieldError
from pipesim.io.overrides import build
from pipesim.io.registry import registry
from pipesim.plan import specfile
from pipesim.plan.checks import PlanError

ENTRIES = registry()
SCENARIO_KEYS = sorted(
    {f.name for f in dataclasses.fields(PipelineConfig)} | {f.name for f in dataclasses.fields(Scenario)}
)
TEXTS = [  # values a user types, right and wrong
    *("0", "-1", "1", "2", "0.5", "-0.5", "3.0", "  3 ", "1_000", "0x10", "1e-320"),
    *("1e308", "1e999", "-1e999", "nan", "inf", "-inf", "99999999999999999999999"),
    *("true", "False", "none", "None", "''", "x", "[]", "[1,2]", "{}", "[[[[1]]]]", "{'a': 1}"),
    *("Drain()", "PartialRollout(load_time_s=-1)", "Timeout(cap_s=1e308)", "WeightSyncCost(8.2, 10)"),
]


@st.composite
def settings(draw: st.DrawFn) -> tuple[str, str, str]:
    name = draw(st.sampled_from(sorted(ENTRIES)))
    keys = sorted(set(SCENARIO_KEYS) | set(ENTRIES[name].parameters()))
    key = draw(st.sampled_from(keys))
    text = draw(st.sampled_from(TEXTS) | st.integers(-(10**30), 10**30).map(str) | st.text(max_size=8))
    return name, key, text


@given(settings())
@example(("systems:roll", "async_generation_ratio", "-1"))
@example(("systems:areal", "max_concurrent_rollouts", "0"))
@example(("systems:pipelinerl", "batch_size", "-1"))
@example(("systems:verl_fully_async", "require_batches", "99999999999999999999999"))
@example(("synchronous", "steps", "99999999999999999999999"))
@example(("async-eta2", "steps", "2000"))
@example(("synchronous", "sync_time_s", "Drain()"))
def test_a_set_value_is_taken_or_refused_naming_its_key(case: tuple[str, str, str]) -> None:
    name, key, text = case
    try:
        scenario, given_ = build(ENTRIES[name], [f"{key}={text}"])
    except FieldError as exc:
        assert key in exc.field, (name, key, text, exc.field, str(exc))
        return
    assert isinstance(scenario, Scenario) and list(given_) == [key]


@pytest.mark.parametrize(
    ("name", "pairs", "field"),
    [  # two factory parameters, one of them bad: the bad one is named
        ("systems:roll", ["async_generation_ratio=-1", "samples_per_prompt=4"], "async_generation_ratio"),
        ("systems:roll", ["async_generation_ratio=1", "samples_per_prompt=0"], "samples_per_prompt"),
    ],
)
def test_of_several_parameters_the_refused_one_is_named(name: str, pairs: list[str], field: str) -> None:
    with pytest.raises(FieldError) as info:
        build(ENTRIES[name], pairs)
    assert info.value.field == field


# ``pipesim plan SPEC --set TABLE.KEY=VALUE``: the same property over a plan spec's keys. Measured
# before: steps, prompts_per_step, samples_per_prompt or max_num_seqs set to 1e308 (read as a
# 309-digit int) raised OverflowError from the pool bound's float product; prompt_tokens=1e308 was
# refused as ``workload.prompt`` with all 309 digits in the message.
PLAN_SPEC = Path(__file__).resolve().parents[1] / "examples" / "plan_qwen3_8b.toml"
PLAN_KEYS = sorted(f"{t}.{k}" for t, keys in specfile._TABLES.items() if t != "baseline" for k in keys)
PLAN_TEXTS = [
    *("0", "-1", "1", "2", "0.5", "1e308", "1e999", "nan", "inf", "99999999999999999999999", "1000000"),
    *("true", "x", '""', "[]", "[1,2]", "[0]", "[-1]", "['x']", "{}", "{a = 1}", "[1e999]", "[[1]]"),
]
POOL_PRODUCT = {  # keys whose product sizes the pool: that refusal names search.steps and batch_size
    *("workload.samples_per_prompt", "workload.prompts_per_step", "workload.batch_size", "search.steps")
}


@given(st.sampled_from(PLAN_KEYS), st.sampled_from(PLAN_TEXTS) | st.integers(-(10**30), 10**30).map(str))
@example("search.steps", "1e308")
@example("workload.prompts_per_step", "1e308")
@example("model.max_num_seqs", "1e308")
@example("workload.prompt_tokens", "1e308")
def test_a_plan_spec_value_is_taken_or_refused_naming_its_key(key: str, text: str) -> None:
    try:
        specfile.load(PLAN_SPEC, [f"{key}={text}"])
    except PlanError as exc:
        # its field, or its sentence where it conflicts with another key ("give one of them")
        named = key in (exc.field or "") or key.rsplit(".", 1)[1] in str(exc)
        named = named or (key in POOL_PRODUCT and exc.field == "search.steps")
        assert named, (key, text, exc.field, str(exc))
        assert len(str(exc)) < 1000, str(exc)[:300]
