"""The best feasible design shown honestly (issue 43 item 2) and the agent workload's keys (item
4): the paired test on shared seeds, ties reported as ties, identical designs merged, the
baseline, the columns; env workers, tool KV, over-sampling as a count, a price, Hugging Face ids,
``config.json`` paths and GPU aliases in the spec."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import tomllib
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim.plan as plan
from pipesim.compute import GPUS, MODELS
from pipesim.compute.catalog import HF_CONFIGS
from pipesim.plan import report
from pipesim.plan.code import scenario_code, wrap_code
from pipesim.plan.stats import merge_duplicates, paired, tied_with_best
from tests.test_refusals_core import check_refusal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plan import small_spec  # noqa: E402

values = st.lists(st.floats(1e3, 1e6, allow_nan=False), min_size=3, max_size=6)


@settings(max_examples=200, deadline=None)
@given(
    a=values,
    shift=st.sampled_from([0.0]) | st.floats(1, 1e5) | st.floats(-1e5, -1),
    noise=st.lists(st.floats(-1e5, 1e5), min_size=6, max_size=6),
)
def test_paired_test_ignores_noise_the_seeds_share_and_is_symmetric(
    a: list[float], shift: float, noise: list[float]
) -> None:
    """Adding the same per-seed term to both designs (the workload a seed draws) changes nothing;
    a constant difference on every seed is never a tie unless it is zero; a design is tied with
    itself; the verdict does not depend on the order."""
    b = [x + shift for x in a]
    base = paired(a, b)
    common = noise[: len(a)]
    moved = paired([x + c for x, c in zip(a, common)], [y + c for y, c in zip(b, common)])
    assert moved.tied == base.tied
    assert base.tied == (shift == 0)  # the same difference on every seed: sd 0, separated
    assert paired(a, a).tied
    assert paired(b, a).tied == base.tied


def test_a_noisy_difference_within_its_interval_is_a_tie_and_a_clear_one_is_not() -> None:
    assert paired([100.0, 200.0, 150.0], [120.0, 170.0, 160.0]).tied  # diffs -20, 30, -10
    assert not paired([100.0, 200.0, 150.0], [90.0, 189.0, 141.0]).tied  # diffs 10, 11, 9


@pytest.fixture(scope="module")
def grid() -> plan.PlanResult:
    spec = small_spec(method="grid", seeds=3, baseline=plan.Design(4, 1, 1, "drain"))
    return plan.plan(spec, with_sensitivity=False)


def test_identical_designs_are_merged_and_ties_are_shown_as_ties(grid: plan.PlanResult) -> None:
    merged = merge_duplicates(grid.feasible)
    assert len(merged) < len(grid.feasible)  # eta 0: drain, partial and abort-reprefill coincide
    for first, same in merged:
        for other in same:
            assert [r["throughput_per_hour"] for r in other.runs] == [
                r["throughput_per_hour"] for r in first.runs
            ]
    text = report.text(grid)
    assert " = " in text.split("Pareto front")[0]
    ties = tied_with_best(grid)
    assert grid.best is not None
    for e in ties:  # every design reported tied is one the paired test cannot separate
        assert paired(
            [r["throughput_per_hour"] for r in grid.best.runs], [r["throughput_per_hour"] for r in e.runs]
        ).tied
    if ties:
        assert "tied" in text and "tied with the best" in text
    else:
        assert "separated from every other feasible design" in text


def test_the_baseline_runs_in_full_and_every_design_is_compared_with_it(grid: plan.PlanResult) -> None:
    b = grid.baseline
    assert b is not None and b.design == plan.Design(4, 1, 1, "drain") and b.steps == grid.spec.steps
    assert len(b.runs) == 3
    text = report.text(grid)
    assert "baseline (your design): split 4:4 tp1 eta=1 drain" in text and "vs baseline" in text
    data = json.loads(json.dumps(report.as_json(grid)))
    assert data["baseline"]["label"] == "split 4:4 tp1 eta=1 drain"
    assert "tok/s/GPU" in text and "GPU-h/Mtok" in text


def test_recommended_code_wraps_and_still_runs(grid: plan.PlanResult) -> None:
    assert grid.best is not None
    code = wrap_code(scenario_code(grid.spec, grid.best.design))
    assert max(len(line) for line in code.splitlines()) <= 100
    scope: dict[str, object] = {}
    exec(code.replace(f"steps={grid.spec.steps}", "steps=2"), scope)  # noqa: S102 - the printed code
    assert scope["run"] is not None


AGENT = """
[cluster]
gpu = "NVIDIA H100 80GB HBM3"
n_gpus = 16
env_workers = 64
cost_per_gpu_hour = 2.5
[model]
name = "Qwen/Qwen3-0.6B"
max_model_len = 8192
tool_kv = "drop"
[workload]
prompts_per_step = 8
samples_per_prompt = 4
prompt_tokens = 256
response = { median_tokens = 100, sigma = 0.5 }
max_response_tokens = 512
agent = { turns = 3, tool_latency_s = 1.0, observation_tokens = 64 }
[constraints]
cost_per_mtok = 1000.0
[space]
placement = [0, 8]
eta = [0, 1]
update = ["drain"]
oversample_prompts = [8, 10]
[baseline]
placement = "colocated"
eta = 0
update = "drain"
[search]
method = "grid"
screen_steps = 1
steps = 2
seeds = 3
"""


def test_the_spec_covers_the_agent_workload(tmp_path: Path) -> None:
    p = tmp_path / "agent.toml"
    p.write_text(AGENT)
    spec = plan.load(p)
    assert spec.gpu == GPUS["h100-sxm"] and spec.model == MODELS["qwen3-0.6b"]
    assert spec.env_workers == 64 and spec.tool_kv == "drop" and spec.cost_per_gpu_hour == 2.5
    assert spec.space.oversample == (1.0, 1.25)  # 10 prompts launched for 8 trained
    assert spec.baseline == plan.Design(0, 1, 0, "drain")
    result = plan.plan(spec, with_sensitivity=False)
    for e in result.full:
        assert e.metrics["cost_per_mtok"] == pytest.approx(e.metrics["gpu_hours_per_mtok"] * 2.5)
    # fewer sandboxes than calls make tool calls wait: a run with 1 env worker is slower
    from pipesim.plan.evaluate import run_design

    d = plan.Design(8, 1, 1, "drain")
    from pipesim.plan.evaluate import priced

    raw = run_design(spec, d, 2, 0)  # a run's own metrics carry no price: the budget is not judged
    assert "cost_per_mtok" not in spec.constraints.violations(raw)
    assert spec.constraints.violations(priced(raw, 2.5))["cost_per_mtok"] == pytest.approx(
        raw["gpu_hours_per_mtok"] * 2.5 - 1000.0
    )
    assert (
        run_design(spec.with_(env_workers=1), d, 2, 0)["throughput_per_hour"]
        < run_design(spec, d, 2, 0)["throughput_per_hour"]
    )


def test_a_config_json_path_is_a_model(tmp_path: Path) -> None:
    cfg = dict(HF_CONFIGS["qwen3-0.6b"])
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(cfg))
    data = tomllib.loads(AGENT.replace('"Qwen/Qwen3-0.6B"', '"ckpt/config.json"'))
    spec = plan.from_dict(data, tmp_path)
    assert spec.model.n_params == MODELS["qwen3-0.6b"].n_params
    spec_dir = plan.from_dict(tomllib.loads(AGENT.replace('"Qwen/Qwen3-0.6B"', '"ckpt"')), tmp_path)
    assert spec_dir.model.n_params == spec.model.n_params


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("gpu", '"h10"', "cluster.gpu"),
        ("name", '"Qwen/Qwen9-8B"', "model.name"),
        ("name", '"missing/config.json"', "model.name"),
        ("tool_kv", '"discard"', "model.tool_kv"),
        ("env_workers", "0", "cluster.env_workers"),
        ("oversample_prompts", "[4]", "space.oversample_prompts[0]"),
    ],
)
def test_bad_agent_keys_name_the_field(tmp_path: Path, key: str, value: str, field: str) -> None:
    text = AGENT
    for line in AGENT.splitlines():
        if line.startswith(f"{key} ="):
            text = text.replace(line, f"{key} = {value}")
    check_refusal(lambda: plan.from_dict(tomllib.loads(text), tmp_path), plan.PlanError, field)


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("h100", "h100-sxm"),
        ("A100", "a100-80gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("H100 SXM5", "h100-sxm"),
    ],
)
def test_gpu_aliases_as_vidur_and_vendors_spell_them(alias: str, name: str) -> None:
    from pipesim.compute import gpu

    assert gpu(alias) is GPUS[name]
    assert plan.space.resolve_gpu(alias) is GPUS[name]


def test_the_key_map_covers_every_spec_key_and_only_those(capsys: pytest.CaptureFixture[str]) -> None:
    from pipesim.plan.keys import KEYS, markdown
    from pipesim.plan.specfile import _TABLES

    spec_keys = {f"{table}.{key}" for table, keys in _TABLES.items() for key in keys}
    assert spec_keys == set(KEYS)
    for key, (*names, _note) in KEYS.items():
        assert len(names) == 4 and all(isinstance(n, str) and n for n in names), key
    assert plan.main(["--explain-keys"]) == 0
    out = capsys.readouterr().out
    assert "rollout.max_head_offpolicyness" in out and "--over-sampling-batch-size" in out
    assert all(f"`{k}`" in markdown() for k in spec_keys)
    docs = (Path(__file__).resolve().parent.parent / "docs" / "plan.md").read_text()
    assert all(f"`{k}`" in docs for k in spec_keys)  # the docs' table is the map
    lines = set(docs.splitlines())
    drifted = [row.split(" | ")[0] for row in markdown().splitlines()[2:] if row not in lines]
    assert not drifted, f"docs/plan.md's rows differ from pipesim.plan.keys (--explain-keys): {drifted}"
