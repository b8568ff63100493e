"""How close kernels get to the datasheet roofline: :class:`Efficiency`, its defaults and the
bound on a fixed cost per kernel (:data:`MAX_FIXED_COST_S`).

Split out of :mod:`pipesim.compute.roofline`, which times kernels with these constants and
re-exports every name here (``from pipesim.compute.roofline import Efficiency`` still works). How
the defaults were chosen, and checked against Vidur's profiles, is the roofline's module docstring
and ``docs/decode.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from pipesim.core.errors import FieldError, shown
from pipesim.core.validate import refuse

__all__ = [
    "DEFAULT_EFFICIENCY",
    "GEMM_ONLY_EFFICIENCY",
    "MAX_FIXED_COST_S",
    "MEASURED_EFFICIENCY",
    "Efficiency",
    "decode_attention_efficiency",
]

MAX_FIXED_COST_S = 3600.0
"""The largest fixed cost per kernel, decode iteration or collective a configuration may give (an
hour): beyond it a run's times overflow the clock's floats or the summary's sums, which is a typing
error (seconds for microseconds), not a GPU."""


@dataclass(frozen=True)
class Efficiency:
    """How close kernels get to the datasheet roofline; one set for all models and GPUs.

    Defaults (chosen as :mod:`pipesim.compute.roofline` says, not fitted per model or GPU):

    * ``flop_fraction = 0.75`` -- sustained bf16 GEMM throughput over peak dense;
    * ``bandwidth_fraction = 0.80`` -- sustained HBM streaming bandwidth over peak;
    * ``kernel_overhead_s = 5e-6`` -- fixed cost per kernel (launch, prologue/epilogue, a tail
      wave), as CUDA-event timing of a single GEMM sees it;
    * ``combine_exponent = 1.5`` -- the ``p`` of the smooth maximum of compute and memory time.

    Attention and mixture-of-experts kernels (``docs/decode.md`` has the checks and their numbers;
    the attention defaults are the values checked against Vidur's A100 attention profile, and
    :data:`GEMM_ONLY_EFFICIENCY` runs attention at the GEMMs' fractions, the defaults before these):

    * ``attention_flop_fraction = 0.5`` -- a prefill attention kernel's sustained FLOPs over peak
      dense (``None``: ``flop_fraction``);
    * ``attention_bandwidth_fraction = 0.9`` -- a decode attention kernel's streaming bandwidth
      over peak (it reads the KV cache once, in long contiguous blocks; ``None``:
      ``bandwidth_fraction``);
    * ``attention_block_s = 40e-9`` -- fixed seconds per (sequence, KV head) of a decode attention
      kernel: its work units (thread blocks), each of which looks up its block table and reduces
      its softmax whatever the sequence's length; what makes many short sequences slower than
      their bytes;
    * ``moe_gemm_fraction`` -- a fused-MoE grouped GEMM's time is the dense roofline's divided by
      this (1.0: no measurement to set it from; see ``docs/decode.md``).
    """

    flop_fraction: float = 0.75
    bandwidth_fraction: float = 0.80
    kernel_overhead_s: float = 5e-6
    combine_exponent: float = 1.5
    attention_flop_fraction: float | None = 0.5
    attention_bandwidth_fraction: float | None = 0.9
    attention_block_s: float = 40e-9
    moe_gemm_fraction: float = 1.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name.startswith("attention_") and f.name.endswith("_fraction"):
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
                raise refuse(f.name, f"must be a number, got {shown(value)}")
        for name in (
            "flop_fraction",
            "bandwidth_fraction",
            "attention_flop_fraction",
            "attention_bandwidth_fraction",
            "moe_gemm_fraction",
        ):
            if getattr(self, name) is not None and not 0 < getattr(self, name) <= 1:
                raise refuse(name, f"must be in (0, 1], got {getattr(self, name)}")
        for name in ("kernel_overhead_s", "attention_block_s"):
            if not 0 <= getattr(self, name) <= MAX_FIXED_COST_S:
                raise FieldError(
                    f"{name} must be in [0, {MAX_FIXED_COST_S:g}] s (a fixed cost per kernel or "
                    f"block), got {getattr(self, name)}",
                    name,
                )
        if not 1 <= self.combine_exponent < math.inf:
            raise refuse("combine_exponent", f"must be at least 1 and finite, got {self.combine_exponent}")

    @property
    def attention_flops(self) -> float:
        """The prefill attention kernel's FLOP fraction (``attention_flop_fraction`` or the GEMMs')."""
        return self.flop_fraction if self.attention_flop_fraction is None else self.attention_flop_fraction

    @property
    def attention_bandwidth(self) -> float:
        """The decode attention kernel's bandwidth fraction (``attention_bandwidth_fraction`` or
        the GEMMs')."""
        return (
            self.bandwidth_fraction
            if self.attention_bandwidth_fraction is None
            else self.attention_bandwidth_fraction
        )


DEFAULT_EFFICIENCY = Efficiency()
"""The global constants, with the attention constants checked against Vidur's A100 profile of
Llama-2-7B attention (``docs/decode.md``): decode attention streams the KV cache at 90% of peak
bandwidth and pays 40 ns per (sequence, KV head); prefill attention runs at half of peak FLOPs.
Round values inside the physical ranges (streaming 80-95%, FlashAttention-2's forward at 35-70% of
peak, tens of nanoseconds per thread block), chosen on a coarse grid over them: decode error 8.9%
median against 20.4% with the GEMM constants (A40, held out: 8.6% against 16.9%), prefill 56.7%
against 70.4%; the linear layers' error is the same (the GEMM constants did not move)."""

MEASURED_EFFICIENCY = DEFAULT_EFFICIENCY
"""The name the measured attention constants had while they were not the default."""

GEMM_ONLY_EFFICIENCY = Efficiency(
    attention_flop_fraction=None, attention_bandwidth_fraction=None, attention_block_s=0.0
)
"""The defaults before the measured attention constants: attention kernels at the GEMMs'
fractions, no per-block cost (the check's point of comparison, ``docs/decode.md``)."""


def decode_attention_efficiency(eff: Efficiency) -> Efficiency:
    """``eff`` with the attention kernels' fractions in place of the GEMMs' (what
    :func:`~pipesim.compute.roofline.kernel_time_s` of a decode attention kernel is given)."""
    if (eff.attention_flops, eff.attention_bandwidth) == (eff.flop_fraction, eff.bandwidth_fraction):
        return eff
    return replace(eff, flop_fraction=eff.attention_flops, bandwidth_fraction=eff.attention_bandwidth)
