"""A run spec, a plan and calibrate charge the weight sync of the design's own trainer.

``Cluster.sync_time_s(trainer)`` gathers the weights as the trainer's framework profile does (a
Megatron trainer over NVLink, FSDP over the network). ``plan.build.sync_seconds`` called it with no
trainer, so every spec fell back to the default profile: a ``megatron-moe`` run spec charged 7.7 s a
sync where ``run_compute`` with the same trainer and its default sync charged 4.4 s. Here every
named profile's spec charges what ``run_compute`` charges by default, and the profiles' syncs
differ where their gathers do.
"""

from __future__ import annotations

import pytest

from pipesim.compute.profiles import profiles
from pipesim.plan import runspec
from pipesim.plan.build import design_cluster, sync_seconds, trainer_config
from pipesim.plan.code import scenario_code

MOE = {
    "kind": "compute",
    "cluster": {"gpu": "h100-sxm", "n_gpus": 32},
    "model": {"name": "qwen3-30b-a3b", "max_model_len": 16384},
    "workload": {
        "prompts_per_step": 4,
        "samples_per_prompt": 4,
        "prompt_tokens": 256,
        "response": {"median_tokens": 300, "sigma": 0.5},
        "max_response_tokens": 1024,
    },
    "design": {"placement": 16, "tp": 4, "eta": 1, "update": "partial"},
    "run": {"steps": 3, "seed": 0},
}


def _spec(framework: str, **run: object) -> runspec.RunSpec:
    data = {**MOE, "model": {**MOE["model"], "framework": framework}, "run": {**MOE["run"], **run}}
    return runspec.from_dict(data)


def _default_sync(rs: runspec.RunSpec) -> float:
    """What ``run_compute`` charges by default: the cluster's sync from the design's trainer."""
    _, cluster = design_cluster(rs.plan, rs.design)
    return float(cluster.sync_time_s(trainer_config(rs.plan, rs.design)))


@pytest.mark.parametrize("framework", sorted(profiles()))
def test_a_spec_charges_its_trainers_sync(framework: str) -> None:
    rs = _spec(framework)
    _, cluster = design_cluster(rs.plan, rs.design)
    assert sync_seconds(rs.plan, rs.design, cluster) == pytest.approx(_default_sync(rs), rel=1e-12)
    run = runspec.run(rs)
    spans = [b - a for a, b, _ in run.result.sync_log]
    assert spans and all(s == pytest.approx(_default_sync(rs), rel=1e-9) for s in spans)


def test_profiles_that_gather_differently_sync_differently() -> None:
    """The sync follows the profile: Megatron's NVLink gather is faster than FSDP's network one."""
    fsdp, moe = _default_sync(_spec("fsdp2-dense")), _default_sync(_spec("megatron-moe"))
    assert moe < fsdp
    rs = _spec("megatron-moe")
    assert sync_seconds(rs.plan, rs.design, design_cluster(rs.plan, rs.design)[1]) == pytest.approx(moe)


def test_the_recommended_code_scales_the_trainers_sync() -> None:
    """With ``sync_scale`` the code states the seconds: those of the design's trainer, scaled."""
    rs = _spec("megatron-moe")
    spec = rs.plan.with_(sync_scale=2.0)
    code = scenario_code(spec, rs.design)
    assert f"sync_time_s={2.0 * _default_sync(rs)!r}" in code
