"""The trainer's batch knobs in plan and run specs (``model.ppo_mini_batch_samples``,
``micro_batch_tokens``, ``log_prob_micro_batch_tokens``, ``sequence_parallel``): they reach the
trainer, survive an export, appear in the recommended code, and split placements."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import tomli_w

from pipesim import plan
from pipesim.io.cli import main
from pipesim.plan.build import placements, trainer_config
from pipesim.plan.code import scenario_code
from pipesim.plan.runspec import load, read

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPEC = EXAMPLES / "run_verl_8gpu.toml"
KNOBS = {
    "ppo_mini_batch_samples": 32,
    "micro_batch_tokens": 8192,
    "log_prob_micro_batch_tokens": 12288,
    "sequence_parallel": 2,
}
SETS = [f"model.{k}={v}" for k, v in KNOBS.items()]


def test_the_knobs_reach_the_trainer_and_survive_an_export(tmp_path: Path) -> None:
    rs = load(SPEC, SETS)
    tcfg = trainer_config(rs.plan, rs.design)
    assert {k: getattr(tcfg, k) for k in KNOBS} == KNOBS
    # a synchronous colocated step hands its batch over in prompt order
    assert rs.design.colocated and rs.design.eta == 0 and tcfg.batch_order == "submission"
    base = tmp_path / "knobs.toml"
    data = read(SPEC)
    data["model"].update(KNOBS)
    base.write_bytes(tomli_w.dumps(data).encode())
    out = tmp_path / "exported.toml"
    assert main(["export", str(base), "--out", str(out)]) == 0
    assert {k: read(out)["model"].get(k) for k in KNOBS} == KNOBS
    assert trainer_config(load(out).plan, load(out).design) == tcfg


def test_without_knobs_the_trainer_keeps_its_defaults_and_the_export_writes_none() -> None:
    rs = load(SPEC)
    tcfg = trainer_config(rs.plan, rs.design)
    assert (tcfg.ppo_mini_batch_samples, tcfg.micro_batch_tokens, tcfg.sequence_parallel) == (None, None, 1)
    from pipesim.plan.runspec_export import spec_tables

    assert not set(KNOBS) & set(spec_tables(rs.plan)["model"])


def test_the_recommended_code_builds_the_same_trainer() -> None:
    rs = load(SPEC, SETS)
    code = scenario_code(rs.plan, rs.design)
    scope: dict[str, object] = {}
    exec(code.split("\nrun = ")[0], scope)  # everything but the run itself
    assert scope["trainer"] == trainer_config(rs.plan, rs.design)


@pytest.mark.parametrize("sp", [1, 2, 4])
def test_a_splits_trainer_gpus_are_a_multiple_of_the_sequence_parallel_degree(sp: int) -> None:
    spec = load(SPEC, [f"model.sequence_parallel={sp}"]).plan
    for tp in (1, 2):
        got = placements(spec, tp)
        assert got and all(t % sp == 0 for t in got if t)
        widest = placements(load(SPEC).plan, tp)
        assert set(got) == {t for t in widest if t % sp == 0}
    with pytest.raises(plan.PlanError) as e:
        load(SPEC, ["model.sequence_parallel=0"])
    assert e.value.field == "model.sequence_parallel"


@pytest.mark.parametrize(
    "sets",
    [["model.sequence_parallel=3"], ["model.sequence_parallel=2", "design.placement=3"]],
    ids=["colocated-8-by-3", "split-3-by-2"],
)
def test_a_run_spec_whose_trainer_gpus_sequence_parallel_does_not_divide_names_the_key(
    sets: list[str],
) -> None:
    with pytest.raises(plan.PlanError) as e:
        load(SPEC, sets)
    assert e.value.field == "model.sequence_parallel"


def test_a_plan_whose_sequence_parallel_fits_no_trainer_says_so() -> None:
    """8 GPUs, Ulysses 16: no split and not colocated; the refusal names the knob."""
    spec = dataclasses.replace(load(SPEC).plan, sequence_parallel=16)
    assert all(not placements(spec, tp) for tp in (1, 2))
    with pytest.raises(plan.PlanError) as e:
        plan.search(spec)
    assert "model.sequence_parallel=16" in str(e.value)


@pytest.mark.parametrize("balance", ["step", "sorted", "mini_batch", "exact"])
def test_model_balance_sets_the_trainers_dealing_and_survives_an_export(tmp_path: Path, balance: str) -> None:
    rs = load(SPEC, [f"model.balance={balance}"])
    tcfg = trainer_config(rs.plan, rs.design)
    assert tcfg.framework.balance == balance
    assert tcfg.framework.name == "fsdp2-dense"  # the profile's constants are kept
    data = read(SPEC)
    data["model"]["balance"] = balance
    base, out = tmp_path / "b.toml", tmp_path / "exported.toml"
    base.write_bytes(tomli_w.dumps(data).encode())
    assert main(["export", str(base), "--out", str(out)]) == 0
    assert read(out)["model"]["balance"] == balance
    scope: dict[str, object] = {}
    exec(scenario_code(rs.plan, rs.design).split("\nrun = ")[0], scope)
    assert scope["trainer"] == tcfg


def test_model_balance_without_a_framework_deals_for_the_one_mfu_trainer() -> None:
    data = read(SPEC)
    data["model"].pop("framework")
    data["model"]["balance"] = "step"
    from pipesim.plan.runspec import from_dict

    rs = from_dict(data)
    tcfg = trainer_config(rs.plan, rs.design)
    assert tcfg.framework.balance == "step" and tcfg.framework.fwd_bwd_efficiency == rs.plan.mfu
    with pytest.raises(plan.PlanError) as e:
        load(SPEC, ["model.balance=sortd"])
    assert e.value.field == "model.balance" and "sorted" in str(e.value)


@pytest.mark.parametrize("knob", ["micro_batch_tokens", "log_prob_micro_batch_tokens"])
@pytest.mark.parametrize("sp", [1, 2, 4])
def test_a_token_budget_must_hold_the_longest_sample_across_the_sequence_parallel_group(
    knob: str, sp: int
) -> None:
    """verl asserts ``max_token_len * ulysses >= the sequence length``: the smallest budget that
    holds the spec's longest sample is accepted, one token less is refused naming the knob."""
    longest = load(SPEC).plan.workload.max_sequence_tokens
    least = -(-longest // sp)
    ok = load(SPEC, [f"model.sequence_parallel={sp}", f"model.{knob}={least}"])
    assert getattr(trainer_config(ok.plan, ok.design), knob) == least
    with pytest.raises(plan.PlanError) as e:
        load(SPEC, [f"model.sequence_parallel={sp}", f"model.{knob}={least - 1}"])
    assert e.value.field == f"model.{knob}" and f"{longest:,}" in str(e.value)


def test_a_reference_model_is_a_spec_key_that_times_the_ref_phase_and_survives_an_export(
    tmp_path: Path,
) -> None:
    """A GRPO log with a KL term times timing_s/ref; no run spec could run one ('unknown key'), so
    the calibrated step was short by it (110.6 s for a logged 119.4 s on a walkthrough's log)."""
    from pipesim.plan.runspec import run

    off, on = load(SPEC, ["run.steps=3"]), load(SPEC, ["run.steps=3", "model.reference_model=true"])
    assert not trainer_config(off.plan, off.design).reference_model
    assert trainer_config(on.plan, on.design).reference_model
    s_off, s_on = run(off).summary(), run(on).summary()
    assert s_off["timing_s/ref"] == 0 < s_on["timing_s/ref"]
    assert s_on["timing_s/step"] > s_off["timing_s/step"]
    base = tmp_path / "ref.toml"
    data = read(SPEC)
    data["model"]["reference_model"] = True
    base.write_bytes(tomli_w.dumps(data).encode())
    out = tmp_path / "exported.toml"
    assert main(["export", str(base), "--out", str(out)]) == 0
    assert read(out)["model"]["reference_model"] is True
