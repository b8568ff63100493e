"""Megatron's distributed-optimizer traffic (:func:`pipesim.compute.phases._optimizer_comm_s`)
stays within a pipeline stage's ``G / pp`` GPUs: with ``G / pp`` within a node it crosses NVLink
even when the whole trainer spans several nodes."""

from __future__ import annotations

import dataclasses

import pytest

from pipesim.compute.catalog import MODELS
from pipesim.compute.gpus import GPUS
from pipesim.compute.phases import GPUS_PER_NODE, _optimizer_comm_s, batching, optimizer_bytes_per_rank
from pipesim.compute.profiles import profile
from pipesim.compute.trainer import TrainerConfig


def test_optimizer_comm_of_a_pipeline_stage_within_a_node_uses_nvlink() -> None:
    gpu = GPUS["h100-sxm"]
    prof = dataclasses.replace(profile("megatron-dense"), pp=2)
    n_gpus = 16
    assert n_gpus // prof.pp <= GPUS_PER_NODE < n_gpus
    assert gpu.nvlink_bandwidth_per_direction_bytes_per_s != gpu.network_bandwidth_bytes_per_s
    t = TrainerConfig(model=MODELS["qwen3-8b"], gpu=gpu, n_gpus=n_gpus, profile=prof)
    dp = batching(t, 512 * 2000.0, 512).dp
    want = sum(optimizer_bytes_per_rank(t, dp)) / gpu.nvlink_bandwidth_per_direction_bytes_per_s
    assert want > 0
    assert _optimizer_comm_s(t, dp) == pytest.approx(want, rel=1e-12)
