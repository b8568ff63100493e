"""The tensor-parallel all-reduce: its fixed cost and its ring time over NVLink.

The roofline (:mod:`pipesim.compute.roofline`) times what one GPU computes; the all-reduce that
follows a layer's row-parallel projections is communication between the ``tp`` GPUs of a replica,
priced by the link and a fixed latency rather than by FLOPs and HBM bytes. It is apart for that
reason: two latency constants (vLLM's custom all-reduce, a round figure, and NCCL's, measured;
:func:`~pipesim.compute.knobs.allreduce_latency_s` picks one for a replica) and the ring formula
that ``pipesim check-roofline`` scores against Vidur's NCCL tables
(:mod:`pipesim.compute.measured`). The names are still importable from ``roofline``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipesim.core.errors import check_int

if TYPE_CHECKING:
    from pipesim.compute.gpus import GPUSpec

__all__ = ["DEFAULT_ALLREDUCE_LATENCY_S", "NCCL_ALLREDUCE_LATENCY_S", "allreduce_time_s"]

DEFAULT_ALLREDUCE_LATENCY_S = 8e-6
"""Fixed seconds of one tensor-parallel all-reduce through vLLM's custom all-reduce, which vLLM uses
for decode-sized messages under CUDA graphs unless ``disable_custom_all_reduce`` is set
(``EngineConfig.allreduce_latency_s``'s default). A round figure: no public per-kernel
measurement of the custom all-reduce was found (``docs/decode.md``)."""

NCCL_ALLREDUCE_LATENCY_S = 40e-6
"""Fixed seconds of one tensor-parallel all-reduce through NCCL, what vLLM runs when
``disable_custom_all_reduce`` is set (``EngineConfig.disable_custom_all_reduce``). Measured, not
chosen: the pooled median of Vidur's NCCL all-reduce kernel times of one node (A100 and H100 DGX,
2/4/8 GPUs, the 60 rows of 2 KiB to 2 MiB in ``tests/data/vidur/all_reduce_*_dgx.csv``) less
their ring bandwidth term is 37.9 us (A100 43.0 us, H100 37.2 us), rounded to 10 us. These are
kineto's GPU-side kernel times, so they hold what a CUDA graph keeps (the NCCL kernel's protocol
and its wait for the other ranks) and not the host launch it removes. One constant for every GPU;
``tests/test_decode_checks.py`` scores it, ``docs/decode.md`` has an end-to-end cross-check."""


def allreduce_time_s(
    gpu: GPUSpec, size_bytes: float, n_gpus: int, latency_s: float = DEFAULT_ALLREDUCE_LATENCY_S
) -> float:
    """Seconds of a ring all-reduce of ``size_bytes`` over ``n_gpus`` GPUs of one NVLink domain:
    ``latency_s + 2 (n - 1) / n * size_bytes / (NVLink one way)``; zero on one GPU."""
    check_int("n_gpus", n_gpus, 1)
    if n_gpus == 1:
        return 0.0
    ring = 2.0 * (n_gpus - 1) / n_gpus * size_bytes
    return latency_s + ring / gpu.nvlink_bandwidth_per_direction_bytes_per_s
