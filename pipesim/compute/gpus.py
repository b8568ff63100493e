"""The GPU catalog: one frozen :class:`GPUSpec` per accelerator, from the vendors' datasheets.

Every figure is the datasheet's, converted to SI units with the unit in the field's name, so a
reader never has to guess whether a number is TB/s or TiB/s:

* ``bf16_flops_per_s`` -- peak *dense* BF16 tensor-core throughput. NVIDIA's headline figures
  are "with sparsity" (2:4 structured); the dense figure is half of it, and dense is what a
  transformer's GEMMs get.
* ``hbm_bytes`` -- device memory capacity. The datasheets' "80 GB" and "141 GB" are the
  addressable capacity in binary units (``nvidia-smi`` reports 79.6 GiB usable on an H100 80GB and
  about 139 GiB on an H200), so capacity is stored as ``GB * 2**30``.
* ``hbm_bandwidth_bytes_per_s`` -- peak memory bandwidth, decimal (3.35 TB/s = 3.35e12 B/s).
* ``nvlink_bandwidth_bytes_per_s`` -- GPU-to-GPU bandwidth inside a node, the *total of both
  directions* as NVIDIA quotes it (900 GB/s on an H100 SXM is 450 GB/s each way; see
  :attr:`GPUSpec.nvlink_bandwidth_per_direction_bytes_per_s`). For a PCIe card without an NVLink
  switch (L40S) it is the PCIe link's figure, also both directions.
* ``network_bandwidth_bytes_per_s`` -- inter-node bandwidth *per GPU and per direction*: the
  reference systems (DGX/HGX) give each GPU one NIC, 400 Gb/s ConnectX-7 = 50 GB/s on Hopper and
  Blackwell, 200 Gb/s HDR = 25 GB/s on A100.

Sources (NVIDIA product datasheets): *NVIDIA H100 Tensor Core GPU* (H100 SXM5 and PCIe; 989.4 /
756 TFLOPS dense BF16, 3.35 / 2.0 TB/s), *NVIDIA H200 Tensor Core GPU* (141 GB HBM3e, 4.8 TB/s),
*NVIDIA H800* (the export variant of the H100 SXM: same compute and memory, NVLink cut to
400 GB/s), *NVIDIA H20* (148 TFLOPS dense BF16, 96 GB HBM3, 4.0 TB/s, 900 GB/s NVLink),
*NVIDIA A100 Tensor Core GPU* (80GB SXM: 312 TFLOPS BF16, 2,039 GB/s, 600 GB/s NVLink),
*NVIDIA HGX B200 / DGX B200* (per GPU: 2.25 PFLOPS dense BF16, 180 GB HBM3e, 8 TB/s, fifth-generation
NVLink 1.8 TB/s) and *NVIDIA L40S* (362 TFLOPS dense BF16, 48 GB GDDR6, 864 GB/s, PCIe Gen4 x16).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType

from pipesim.core.errors import FieldError, shown

_GIB = 2**30
_GB = 10**9
_TB = 10**12
_TFLOPS = 1e12


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator's datasheet figures (see the module docstring for units and sources)."""

    name: str
    bf16_flops_per_s: float
    hbm_bytes: int
    hbm_bandwidth_bytes_per_s: float
    nvlink_bandwidth_bytes_per_s: float
    network_bandwidth_bytes_per_s: float

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise FieldError(f"name must be a non-empty string, got {shown(self.name)}", "name")
        for f in fields(self):
            if f.name == "name":
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise FieldError(f"{f.name} must be a number, got {shown(value)}", f.name)
            if not value > 0 or value == float("inf"):
                raise FieldError(f"{f.name} must be positive and finite, got {shown(value)}", f.name)

    @property
    def nvlink_bandwidth_per_direction_bytes_per_s(self) -> float:
        """Half the quoted NVLink figure: what one direction of a ring all-reduce gets."""
        return self.nvlink_bandwidth_bytes_per_s / 2

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity (FLOP per HBM byte) above which a kernel is compute bound."""
        return self.bf16_flops_per_s / self.hbm_bandwidth_bytes_per_s


def _spec(
    name: str, tflops: float, hbm_gb: float, hbm_tb_s: float, nvlink_gb_s: float, net_gb_s: float
) -> GPUSpec:
    return GPUSpec(
        name=name,
        bf16_flops_per_s=tflops * _TFLOPS,
        hbm_bytes=int(hbm_gb * _GIB),
        hbm_bandwidth_bytes_per_s=hbm_tb_s * _TB,
        nvlink_bandwidth_bytes_per_s=nvlink_gb_s * _GB,
        network_bandwidth_bytes_per_s=net_gb_s * _GB,
    )


GPUS: Mapping[str, GPUSpec] = MappingProxyType(
    {
        s.name: s
        for s in (
            #     name         TFLOPS  HBM GB  TB/s   NVLink GB/s  net GB/s
            _spec("h100-sxm", 989.4, 80, 3.35, 900, 50),
            _spec("h100-pcie", 756.0, 80, 2.0, 600, 50),
            _spec("h800", 989.4, 80, 3.35, 400, 50),
            _spec("h200", 989.4, 141, 4.8, 900, 50),
            _spec("h20", 148.0, 96, 4.0, 900, 50),
            _spec("a100-80gb", 312.0, 80, 2.039, 600, 25),
            _spec("b200", 2250.0, 180, 8.0, 1800, 50),
            _spec("l40s", 362.05, 48, 0.864, 64, 25),
        )
    }
)
"""Every catalogued GPU by lowercase name; read-only."""


GPU_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        # Vidur's DeviceSKUType names (microsoft/vidur, vidur/config/device_sku_config.py: "h100" is
        # its 80 GB, 1,000 TFLOPS part, the SXM one; "a100" its 80 GB part)
        "h100": "h100-sxm",
        "a100": "a100-80gb",
        # vendors' and nvidia-smi's spellings (after normalize_gpu_name: lowercase, "nvidia "
        # dropped, spaces and underscores as "-")
        "h100-sxm5": "h100-sxm",
        "h100-sxm5-80gb": "h100-sxm",
        "h100-80gb-hbm3": "h100-sxm",
        "h100-sxm-80gb": "h100-sxm",
        "h100-pcie-80gb": "h100-pcie",
        "a100-sxm4-80gb": "a100-80gb",
        "a100-sxm-80gb": "a100-80gb",
        "a100-80gb-sxm": "a100-80gb",
        "h200-sxm": "h200",
        "h200-141gb-hbm3e": "h200",
        "h800-sxm": "h800",
        "h800-80gb-hbm3": "h800",
        "b200-sxm": "b200",
        "l40s-48gb": "l40s",
    }
)
"""Other spellings of catalogued GPUs (Vidur's, the vendors', nvidia-smi's) -> the catalog's name."""

NOT_CATALOGUED: Mapping[str, str] = MappingProxyType(
    {
        # it was an alias of h100-pcie: a 94 GB HBM3 card at about 3.9 TB/s read as 80 GB at
        # 2.0 TB/s, and a plan's step came out some 20% slower with one header line to say so
        "h100-nvl": "the H100 NVL (94 GB HBM3, about 3.9 TB/s) is neither catalogued H100 "
        "(h100-pcie: 80 GB at 2.0 TB/s; h100-sxm: 80 GB at 3.35 TB/s)",
    }
)
"""GPUs often named that the catalog does not hold, and why none of its entries stands in."""


OWN_GPU = (
    "a GPU outside the catalog takes its datasheet figures: in Python a GPUSpec(name=..., "
    "bf16_flops_per_s=..., hbm_bytes=..., hbm_bandwidth_bytes_per_s=..., nvlink_bandwidth_bytes_per_s=..., "
    "network_bandwidth_bytes_per_s=...) (docs/compute.md), in a run or plan spec file [cluster] gpu as "
    "an inline table of those fields (docs/runspec.md)"
)
"""How to give a GPU the catalog does not hold, both ways; said where a name is not catalogued."""


def normalize_gpu_name(name: str) -> str:
    """``name`` as the catalog and :data:`GPU_ALIASES` spell keys: lowercase, without a leading
    ``nvidia``, spaces and underscores as ``-`` (``"NVIDIA H100 80GB HBM3"`` -> ``h100-80gb-hbm3``)."""
    key = " ".join(name.strip().lower().replace("_", " ").split())
    if key.startswith("nvidia "):
        key = key[len("nvidia ") :]
    key = key.replace(" ", "-")
    return GPU_ALIASES.get(key, key)


def gpu(name: str) -> GPUSpec:
    """The catalogued :class:`GPUSpec` called ``name`` (case-insensitive; Vidur's and the vendors'
    spellings too, :data:`GPU_ALIASES`).

    An unknown name raises ``ValueError`` listing the valid ones.
    """
    key = normalize_gpu_name(name) if isinstance(name, str) else name
    try:
        return GPUS[key]
    except (KeyError, TypeError):
        why = NOT_CATALOGUED.get(key, "") if isinstance(key, str) else ""
        own = f"{why}; " if why else ""
        raise FieldError(
            f"unknown GPU {shown(name)}; {own}valid names: {', '.join(sorted(GPUS))}; {OWN_GPU}", "gpu"
        ) from None
