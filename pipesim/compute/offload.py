"""The switching cost of a colocated step (:class:`Offload`, used by
:class:`pipesim.compute.cluster.Cluster`): on colocated GPUs the engine must give the trainer its
memory and take it back at every step, as verl does it -- ``verl/workers/sharding_manager/
fsdp_vllm.py``: leaving generation calls vLLM's ``sleep(level=1)`` (weights copied to host
memory, KV cache discarded); entering it calls ``wake_up(tags=["weights"])``, loads the new
weights, offloads the FSDP model and then ``wake_up(tags=["kv_cache"])``; ``verl/workers/
fsdp_workers.py`` with ``param_offload`` / ``optimizer_offload`` loads the actor's parameters
and optimizer state to the GPU before ``update_actor`` and offloads them after. Each GPU moves
its own shard over its own host link, all in parallel, so one step's switching cost is::

    switch_s = fixed_s + 2 * (engine weights per GPU   [sleep level 1; level 2 discards them,
                                                        and the weight sync refills them]
                              + trainer state per GPU  [trainer_offload: fp32 master weights and
                                                        Adam moments, 12 bytes/param, sharded]
                             ) / host_bandwidth

(2: out and back). The KV cache is discarded, not copied. The host bandwidth is one direction of
the GPU's PCIe x16 link (Gen5 63 GB/s, Gen4 31.5 GB/s: 32 or 16 GT/s per lane, 128b/130b) times
``host_link_efficiency`` (0.8, what pinned ``cudaMemcpy`` reaches; a guess, override it), or
``host_bandwidth_bytes_per_s``. The kernel adds it to the colocated training pause, so a
synchronous colocated step grows by exactly ``switch_s``; ``run_compute(switch_time_s=...)``
overrides it (0 turns it off). Not modelled: GPUs sharing a PCIe switch or the CPU's lanes, the
allocator's and CUDA graphs' own costs (put them in ``fixed_s``), and the KV cache of sequences
left in flight across a colocated training step (an asynchronous colocated design keeps them
paused with their cache; copying it out and back is not charged).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pipesim.compute.cost import EngineConfig
from pipesim.compute.gpus import GPUSpec
from pipesim.core.errors import FieldError, check_number, shown
from pipesim.core.validate import refuse

__all__ = ["DEFAULT_HOST_LINK_EFFICIENCY", "HOST_PCIE_GEN", "PCIE_X16_BYTES_PER_S", "Offload"]

PCIE_X16_BYTES_PER_S: dict[int, float] = {4: 16e9 * 16 * 128 / 130 / 8, 5: 32e9 * 16 * 128 / 130 / 8}
"""One direction of a PCIe x16 link by generation (line rate after 128b/130b encoding)."""

HOST_PCIE_GEN: dict[str, int] = {
    "h100-sxm": 5,
    "h100-pcie": 5,
    "h800": 5,
    "h200": 5,
    "h20": 5,
    "a100-80gb": 4,
    "b200": 5,  # the GPU speaks Gen6, but HGX B200 hosts (x86) link at Gen5
    "l40s": 4,
}
"""The host link's PCIe generation per catalog GPU (the datasheets); an unknown GPU gets Gen4."""

DEFAULT_HOST_LINK_EFFICIENCY = 0.8
"""Pinned host-device copies reach about this share of the PCIe line rate (a guess; override it)."""


@dataclass(frozen=True, kw_only=True)
class Offload:
    """The switching cost of a colocated step (see the module docstring): offload and reload."""

    sleep_level: int = 1
    """vLLM's sleep level: 1 copies the weights to host memory and back, 2 discards them."""
    trainer_offload: bool = True
    """verl's FSDP ``param_offload`` and ``optimizer_offload``: the trainer's state leaves the GPU."""
    trainer_offload_bytes_per_param: float = 12.0
    """fp32 master weights (4) and Adam's two moments (8); gradients are freed, not moved."""
    host_bandwidth_bytes_per_s: float | None = None
    """One direction of one GPU's host link; None: from the GPU's PCIe generation."""
    host_link_efficiency: float = DEFAULT_HOST_LINK_EFFICIENCY
    fixed_s: float = 0.0
    """Seconds added per step (allocator, CUDA graphs, process coordination)."""

    def __post_init__(self) -> None:
        if type(self.sleep_level) is not int or self.sleep_level not in (1, 2):
            raise refuse(
                "sleep_level", f"must be 1 or 2 (vLLM's sleep levels), got {shown(self.sleep_level)}"
            )
        if not isinstance(self.trainer_offload, bool):
            raise refuse("trainer_offload", f"must be a bool, got {shown(self.trainer_offload)}")
        check_number("trainer_offload_bytes_per_param", self.trainer_offload_bytes_per_param, 0.0)
        if self.host_bandwidth_bytes_per_s is not None:
            check_number("host_bandwidth_bytes_per_s", self.host_bandwidth_bytes_per_s, 0.0, strict=True)
        check_number("host_link_efficiency", self.host_link_efficiency, 0.0, strict=True)
        if self.host_link_efficiency > 1:
            raise refuse("host_link_efficiency", f"must be in (0, 1], got {shown(self.host_link_efficiency)}")
        check_number("fixed_s", self.fixed_s, 0.0)

    def host_bandwidth(self, gpu: GPUSpec) -> float:
        """Bytes per second one GPU moves to or from host memory."""
        if self.host_bandwidth_bytes_per_s is not None:
            return float(self.host_bandwidth_bytes_per_s)
        gen = HOST_PCIE_GEN.get(gpu.name.lower(), 4)
        return PCIE_X16_BYTES_PER_S[gen] * self.host_link_efficiency

    def bytes_per_gpu(self, engine: EngineConfig, trainer_gpus: int) -> float:
        """Bytes one GPU moves one way: its engine weight shard and its trainer state shard."""
        engine_bytes = engine.weight_bytes_per_gpu if self.sleep_level == 1 else 0.0
        trainer = engine.model.n_params * self.trainer_offload_bytes_per_param / trainer_gpus
        return engine_bytes + (trainer if self.trainer_offload else 0.0)

    def switch_time_s(self, engine: EngineConfig, trainer_gpus: int) -> float:
        """Seconds per colocated step: every byte out and back, plus ``fixed_s``."""
        t = self.fixed_s + 2.0 * self.bytes_per_gpu(engine, trainer_gpus) / self.host_bandwidth(engine.gpu)
        if not t < math.inf:
            raise FieldError(
                f"the offload's switch time is not finite ({shown(t)} s): check host_bandwidth_bytes_per_s "
                f"({shown(self.host_bandwidth(engine.gpu))}) and fixed_s ({shown(self.fixed_s)})",
                "host_bandwidth_bytes_per_s",
            )
        return t
