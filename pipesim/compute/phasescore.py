"""Score the phase and sync models on published rows that set none of their constants.

``python -m pipesim.compute.phasescore`` prints two Markdown tables (``docs/compute.md``):
verl's ``fully_async_policy`` README rows other than the calibration row (the trainer's phases of
``fsdp2-dense`` at each row's trainer GPUs, with the calibration's tokens per sample, since no row
states its length), and its checkpoint-engine ablation (the sync model, checkpoint engine on).
Setups the README leaves out are assumed once, here: the Megatron layout of each profile and the
engine's tensor parallelism (4 for the 7B and 30B models, 8 for the 235B one).
"""

from __future__ import annotations

import dataclasses

from pipesim.compute.catalog import MODELS
from pipesim.compute.cost import EngineConfig
from pipesim.compute.gpus import GPUS
from pipesim.compute.models import ModelSpec
from pipesim.compute.profiles import (
    CALIBRATION_SAMPLES,
    CALIBRATION_TOKENS_PER_SAMPLE,
    _calibration_config,
    profile,
)
from pipesim.compute.sync import SyncModel

SRC = "volcengine/verl verl/experimental/fully_async_policy/README.md"

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


def trainer_table() -> list[str]:
    base = _calibration_config(profile("fsdp2-dense"))
    tokens = CALIBRATION_SAMPLES * CALIBRATION_TOKENS_PER_SAMPLE
    out = [
        "| row | trainer GPUs | phase | published s | predicted s | ratio |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for row, gpus, phase, published in TRAINER_ROWS:
        config = dataclasses.replace(base, n_gpus=gpus)
        got = config.phase_times_s(tokens, CALIBRATION_SAMPLES)[phase]
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


def main() -> int:
    print(f"Trainer phases (fsdp2-dense) on {SRC}, rows other than the calibration row:\n")
    print("\n".join(trainer_table()))
    print(f"\nWeight sync on {SRC}, checkpoint-engine ablation (on):\n")
    print("\n".join(sync_table()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
