"""fp8 engines in plan and run specs: ``model.weight_dtype`` and ``model.kv_dtype`` (a user's
walkthrough: ``EngineConfig(weight_dtype="fp8", kv_dtype="fp8")`` worked from Python while no spec
could say it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pipesim.plan as plan
from pipesim.plan import runspec
from pipesim.plan.build import engine_config
from pipesim.plan.code import scenario_code
from pipesim.plan.runspec_export import spec_tables
from tests.test_refusals_core import check_refusal

ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "examples" / "plan_qwen3_8b.toml"
RUN = ROOT / "examples" / "run_qwen3_8b.toml"


def test_set_weight_and_kv_dtype_reach_the_engine() -> None:
    base = plan.load(PLAN)
    fp8 = plan.load(PLAN, ["model.weight_dtype=fp8", "model.kv_dtype=fp8"])
    assert (base.weight_dtype, base.kv_dtype) == ("bf16", "bf16")
    a, b = engine_config(base, 1), engine_config(fp8, 1)
    assert (b.weight_dtype, b.kv_dtype) == ("fp8", "fp8")
    # half the bytes per weight and per cached token: more room for KV, each token smaller
    assert b.weight_bytes_per_gpu < a.weight_bytes_per_gpu
    assert b.kv_budget_tokens > a.kv_budget_tokens
    code = scenario_code(fp8, plan.Design(trainer_gpus=16, tp=1, eta=1, update="partial"))
    assert re.search(r"weight_dtype=.fp8.", code) and re.search(r"kv_dtype=.fp8.", code)
    assert spec_tables(fp8)["model"]["weight_dtype"] == "fp8"  # a plan's design exported keeps it


def test_a_run_spec_takes_them_and_writes_them_back() -> None:
    rs = runspec.load(RUN, ["model.kv_dtype=fp8"])
    assert rs.plan.kv_dtype == "fp8" and rs.plan.weight_dtype == "bf16"
    assert runspec.from_dict(rs.data).plan.kv_dtype == "fp8"


@pytest.mark.parametrize("key", ["weight_dtype", "kv_dtype"])
@pytest.mark.parametrize("value", ["fp9", "3", "true"])
def test_a_bad_dtype_names_the_key(key: str, value: str) -> None:
    check_refusal(lambda: plan.load(PLAN, [f"model.{key}={value}"]), plan.PlanError, f"model.{key}")
