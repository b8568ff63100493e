"""A GPU the catalog does not hold is refused, never read as another: ``h100-nvl`` was an alias of
``h100-pcie`` (80 GB at 2.0 TB/s for a 94 GB, 3.9 TB/s card), a plan's step some 20% slow."""

from __future__ import annotations

import pytest

from pipesim.compute.gpus import GPU_ALIASES, GPUS, NOT_CATALOGUED, gpu
from pipesim.core.validate import FieldError


@pytest.mark.parametrize("name", ["h100-nvl", "NVIDIA H100 NVL", "h100_nvl"])
def test_an_uncatalogued_gpu_is_refused_naming_the_field_and_the_way_out(name: str) -> None:
    with pytest.raises(FieldError) as err:
        gpu(name)
    assert err.value.field == "gpu" and "GPUSpec" in str(err.value) and "h100-pcie" in str(err.value)


def test_no_alias_stands_in_for_a_gpu_known_to_differ() -> None:
    assert not set(NOT_CATALOGUED) & set(GPU_ALIASES) and not set(NOT_CATALOGUED) & set(GPUS)
    assert all(target in GPUS for target in GPU_ALIASES.values())
