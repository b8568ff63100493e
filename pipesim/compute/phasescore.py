"""Score the phase and sync models on published rows that set none of their constants.

``python -m pipesim.compute.phasescore`` prints two Markdown tables (``docs/compute.md``):
verl's ``fully_async_policy`` README rows other than the calibration row (the trainer's phases of
``fsdp2-dense`` at each row's trainer GPUs, on the calibration's seeded draws of the stated
workload, since no row states its length; each mini-batch at its busiest rank), and its
checkpoint-engine ablation (the sync model, checkpoint engine on).
Setups the README leaves out are assumed once, here: the Megatron layout of each profile and the
engine's tensor parallelism (4 for the 7B and 30B models, 8 for the 235B one).
"""

from __future__ import annotations

import dataclasses

from pipesim.compute.catalog import MODELS
from pipesim.compute.cost import EngineConfig
from pipesim.compute.gpus import GPUS
from pipesim.compute.models import ModelSpec
from pipesim.compute.profiles import _calibration_config, calibration_draws, profile
from pipesim.compute.sync import SyncModel

SRC = "volcengine/verl verl/experimental/fully_async_policy/README.md"

ASYNC_STEPS = 4
"""A fully-async README step is ``trigger_parameter_sync_step`` = 4 trainer steps of
``require_batches`` 4 x ``ppo_mini_batch_size`` 32 prompts x 16 (2,048 samples) each."""

TRAINER_ROWS = (  # (row, trainer GPUs, phase, published seconds): "Experiments", Qwen2.5-Math-7B
    ("colocate 32", 32, "old_log_prob", 107.71),
    ("colocate 32", 32, "update_actor", 269.80),
    ("colocate 128", 128, "old_log_prob", 53.92),
    ("colocate 128", 128, "update_actor", 113.81),
    ("fully async 16:16", 16, "update_actor", 313.81),
    ("fully async 32:32", 32, "update_actor", 156.98),
    ("fully async 64:64", 64, "update_actor", 113.16),
    ("stream off-policy 64:64", 64, "update_actor", 98.77),
)

QWEN3_235B = ModelSpec(  # Qwen/Qwen3-235B-A22B config.json
    name="qwen3-235b-a22b",
    n_layers=94,
    hidden_size=4096,
    n_heads=64,
    n_kv_heads=4,
    head_dim=128,
    intermediate_size=12288,
    vocab_size=151936,
    max_context_len=40960,
    qk_norm=True,
    n_experts=128,
    n_active_experts=8,
    expert_intermediate_size=1536,
)


def row_seconds(gpus: int, phase: str, fully_async: bool) -> float:
    """Seconds of ``phase`` per README step at ``gpus`` trainer GPUs: the mean over the
    calibration's seeded draws (:func:`~pipesim.compute.profiles.calibration_draws`, prompt order),
    each dealt to the ranks as one colocated step of 8,192 samples, or, fully async, as
    :data:`ASYNC_STEPS` trainer steps of its consecutive quarters (whole prompts, as they complete)."""
    config = dataclasses.replace(_calibration_config(profile("fsdp2-dense")), n_gpus=gpus)
    total = []
    for per in calibration_draws():
        n = len(per) // ASYNC_STEPS
        chunks = [per[k * n : (k + 1) * n] for k in range(ASYNC_STEPS)]
        parts = chunks if fully_async else [per]
        total.append(sum(config.phase_times_s(sum(c), len(c), c)[phase] for c in parts))
    return sum(total) / len(total)


def trainer_table() -> list[str]:
    out = [
        "| row | trainer GPUs | phase | published s | predicted s | ratio |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for row, gpus, phase, published in TRAINER_ROWS:
        got = row_seconds(gpus, phase, fully_async=not row.startswith("colocate"))
        out.append(f"| {row} | {gpus} | {phase} | {published:.2f} | {got:.2f} | {got / published:.2f} |")
    return out


def sync_table() -> list[str]:
    rows = (  # (row, model, trainer GPUs = rollout GPUs, engine tp, profile, published s): ablation, on
        ("Qwen2.5-Math-7B 4:4", MODELS["qwen2.5-math-7b"], 4, 4, "megatron-dense", 0.02),
        ("Qwen3-30B-A3B 16:16 (calibration)", MODELS["qwen3-30b-a3b"], 16, 4, "megatron-moe", 4.38),
        ("Qwen3-235B-A22B 64:64", QWEN3_235B, 64, 8, "megatron-moe", 23.70),
    )
    out = [
        "| row | weights GB | gather s | transfer s | load s | predicted s | published s | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    sync = SyncModel()
    for row, model, gpus, tp, name, published in rows:
        engine = EngineConfig(model=model, gpu=GPUS["h20"], tp=tp, max_model_len=4096)
        p = sync.parts_s(engine, profile(name), gpus, False, 2 * gpus)
        got = sync.sync_time_s(engine, profile(name), gpus, False, 2 * gpus)
        out.append(
            f"| {row} | {model.weight_bytes('bf16') / 1e9:.1f} | {p['gather']:.2f} | {p['transfer']:.2f} | "
            f"{p['load']:.3f} | {got:.2f} | {published:.2f} | {got / published:.2f} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    doc = (__doc__ or "").splitlines()[0]
    argparse.ArgumentParser(prog="python -m pipesim.compute.phasescore", description=doc).parse_args(argv)
    print(f"Trainer phases (fsdp2-dense) on {SRC}, rows other than the calibration row:\n")
    print("\n".join(trainer_table()))
    print(f"\nWeight sync on {SRC}, checkpoint-engine ablation (on):\n")
    print("\n".join(sync_table()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
