"""A tensor-parallel group wider than a node crosses the network, not NVLink, and loses vLLM's
custom all-reduce (it refuses a group that spans nodes). Before, the engine's all-reduce used
NVLink at any ``tp``, so decode got faster from tp 8 to 16 to 32 on 8-GPU nodes (312, 348, 370
tokens/s per sequence in a user's walkthrough)."""

from __future__ import annotations

import pytest

from pipesim.compute import GPUS, MODELS
from pipesim.compute.cost import EngineConfig, ReplicaCost
from pipesim.compute.phases import GPUS_PER_NODE
from pipesim.compute.roofline import NCCL_ALLREDUCE_LATENCY_S


def cost(model: str, tp: int) -> ReplicaCost:
    return ReplicaCost(EngineConfig(model=MODELS[model], gpu=GPUS["h100-sxm"], tp=tp, max_model_len=8192))


@pytest.mark.parametrize("model", ["qwen3-8b", "qwen3-32b"])
@pytest.mark.parametrize("batch", [1, 16, 64])
def test_decode_is_slower_with_tp_across_nodes_than_within_one(model: str, batch: int) -> None:
    one_node, two_nodes = cost(model, GPUS_PER_NODE), cost(model, 2 * GPUS_PER_NODE)
    assert two_nodes.iteration_s(batch, batch * 4000.0) > one_node.iteration_s(batch, batch * 4000.0)


def test_the_ring_crosses_the_network_past_a_node_and_nvlink_within_it() -> None:
    g = GPUS["h100-sxm"]
    hidden = MODELS["qwen3-8b"].hidden_size
    for tp in (2, 4, 8, 16, 32):
        link = (
            g.nvlink_bandwidth_per_direction_bytes_per_s
            if tp <= GPUS_PER_NODE
            else g.network_bandwidth_bytes_per_s
        )
        c = cost("qwen3-8b", tp)
        per_token = c._allreduce_s(1001) - c._allreduce_s(1)
        assert per_token == pytest.approx(2 * 1000 * 2.0 * (tp - 1) / tp * 2 * hidden / link, rel=1e-9)
        within = c.config.allreduce_latency_s  # vLLM's custom all-reduce, one node
        assert c._allreduce_lat == (within if tp <= GPUS_PER_NODE else NCCL_ALLREDUCE_LATENCY_S)
