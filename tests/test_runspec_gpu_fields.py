"""A custom GPU table's bad rate is named by its own key (``cluster.gpu.KEY``), as docs/runspec.md
says of every field of the table: the trainer's check named the whole table, ``cluster.gpu``, so
with several rates in one table the user could not tell which was wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipesim.plan import runspec
from pipesim.plan.checks import PlanError

SPEC = Path(__file__).resolve().parents[1] / "examples" / "run_verl_8gpu.toml"
GOOD = {
    "bf16_flops_per_s": 1e15,
    "hbm_bytes": 85899345920,
    "hbm_bandwidth_bytes_per_s": 3e12,
    "nvlink_bandwidth_bytes_per_s": 4.5e11,
    "network_bandwidth_bytes_per_s": 1e10,
}
# the rates the trainer reads, checked as the spec loads (the HBM bandwidth is checked as the run
# starts, the network only where a run crosses it: roofline.check_gpu_rates)
RATES = ["bf16_flops_per_s", "nvlink_bandwidth_bytes_per_s"]


def _gpu(**over: float) -> str:
    fields = ", ".join(f"{k}={v!r}" for k, v in {**GOOD, **over}.items())
    return f'cluster.gpu={{name="x", {fields}}}'


def test_a_good_custom_gpu_loads() -> None:
    assert runspec.load(SPEC, [_gpu()]) is not None


@pytest.mark.parametrize("key", RATES)
def test_a_rate_below_the_floor_is_named_by_its_key(key: str) -> None:
    with pytest.raises(PlanError) as info:
        runspec.load(SPEC, [_gpu(**{key: 1e3})])
    assert info.value.field == f"cluster.gpu.{key}", info.value.field
    assert f": cluster.gpu.{key} (1000.0) is below" in str(info.value), str(info.value)
