"""A misspelt run-spec-only ``[model]`` key (``kv_policy``, ``max_num_batched_tokens``, ...) is
refused with the right suggestion, and the list of valid keys holds the run spec's own: the plan
spec's reader used to answer, suggesting ``micro_batch_tokens`` and listing none of them."""

from __future__ import annotations

import pytest

from pipesim.plan import runspec
from pipesim.plan.checks import PlanError

SPEC = "examples/run_qwen3_8b.toml"


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("max_num_batched_token=8192", "max_num_batched_tokens"),
        ("kv_polcy=reserve", "kv_policy"),
        ("episodes_per_replca=512", "episodes_per_replica"),
        ("enforce_eagr=true", "enforce_eager"),
    ],
)
def test_a_misspelt_run_spec_model_key_suggests_it(typo: str, meant: str) -> None:
    with pytest.raises(PlanError) as e:
        runspec.load(SPEC, [f"model.{typo}"])
    assert e.value.field == f"model.{typo.split('=')[0]}"
    assert f"did you mean '{meant}'" in str(e.value)
    valid = str(e.value).split("valid keys of model:")[1]
    assert all(k in valid for k in runspec.ENGINE_KEYS)
