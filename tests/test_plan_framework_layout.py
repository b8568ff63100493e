"""A plan whose framework has a parallel layout (Megatron's tp x pp x ep) skips the placements the
layout refuses: every candidate's trainer can be built. Without the profile the placement check
built the one-MFU trainer, and the plan stopped at the first design whose trainer GPUs the layout
refuses ('n_gpus (6) must be a multiple of tp x pp x ep (8)')."""

from __future__ import annotations

import pytest

from pipesim.plan import specfile
from pipesim.plan.build import candidates, trainer_config

SPEC = "examples/plan_qwen3_8b.toml"


@pytest.mark.parametrize(
    ("model", "framework", "n_gpus"),
    [
        ("qwen3-30b-a3b", "megatron-moe", 12),
        ("qwen3-30b-a3b", "megatron-moe", 24),
        ("qwen3-8b", "megatron-dense", 12),
    ],
)
def test_every_candidate_trainer_fits_the_frameworks_layout(model: str, framework: str, n_gpus: int) -> None:
    spec = specfile.load(
        SPEC, [f'model.name="{model}"', f'model.framework="{framework}"', f"cluster.n_gpus={n_gpus}"]
    )
    designs = candidates(spec)
    assert designs
    for d in designs:
        trainer_config(spec, d)  # raises where the layout refuses the design's trainer GPUs


@pytest.mark.parametrize("framework", ["megatron-moe"])
def test_a_profile_the_model_cannot_use_is_named_not_reported_as_capacity(framework: str) -> None:
    """Every placement skipped read as 'no trainer of at least 8 GPUs holds qwen3-8b'."""
    from pipesim.plan.checks import PlanError

    with pytest.raises(PlanError) as err:
        candidates(specfile.load(SPEC, ['model.name="qwen3-8b"', f'model.framework="{framework}"']))
    assert err.value.field == "model.framework" and "dense" in str(err.value)
