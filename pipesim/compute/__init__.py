"""The hardware and model layer of a compute-grounded engine: pure data and small pure functions.

* :mod:`pipesim.compute.gpus` -- :class:`GPUSpec` and the datasheet catalog :data:`GPUS`;
* :mod:`pipesim.compute.models` -- :class:`ModelSpec` (shapes, parameter and byte counts,
  ``from_hf_config``);
* :mod:`pipesim.compute.catalog` -- :data:`MODELS`, the shipped specs;
* :mod:`pipesim.compute.roofline` -- :class:`Efficiency` and kernel times from a roofline, checked
  against Vidur's H100 measurements.

Nothing here imports ``torch`` or ``transformers``.
"""

from __future__ import annotations

from pipesim.compute.catalog import HF_CONFIGS, MODELS, model
from pipesim.compute.gpus import GPUS, GPUSpec, gpu
from pipesim.compute.models import DTYPE_BYTES, ModelSpec, dtype_bytes
from pipesim.compute.roofline import (
    DEFAULT_EFFICIENCY,
    Efficiency,
    decode_attention_time_s,
    experts_touched,
    gemm_time_s,
    kernel_time_s,
    linear_time_s,
    linear_times_s,
)

__all__ = [
    "DEFAULT_EFFICIENCY",
    "DTYPE_BYTES",
    "GPUS",
    "HF_CONFIGS",
    "MODELS",
    "Efficiency",
    "GPUSpec",
    "ModelSpec",
    "decode_attention_time_s",
    "dtype_bytes",
    "experts_touched",
    "gemm_time_s",
    "gpu",
    "kernel_time_s",
    "linear_time_s",
    "linear_times_s",
    "model",
]
