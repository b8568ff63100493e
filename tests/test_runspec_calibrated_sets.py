"""``--set`` on a table value that the run spec's ``[calibration.values]`` overrides is refused,
naming the key and the calibration key that changes the run: it ran unchanged, silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipesim.plan import runspec
from pipesim.plan.checks import PlanError
from pipesim.plan.runspec_calibration import CALIBRATED_OVER

SPEC = Path("examples/run_verl_8gpu.toml")
VALUE = {"mfu": "0.3", "response_median_tokens": "900", "response_sigma": "0.5"}
VALUE |= {"drift_per_version": "0.001", "sync_time_s": "2.0"}


@pytest.mark.parametrize(("key", "cal_key"), sorted(CALIBRATED_OVER.items()))
def test_a_set_the_calibration_overrides_is_refused_naming_both(
    key: str, cal_key: str, tmp_path: Path
) -> None:
    spec = tmp_path / "cal.toml"
    spec.write_text(SPEC.read_text() + f"\n[calibration.values]\n{cal_key} = {VALUE[cal_key]}\n")
    runspec.load(spec)  # the calibrated spec loads
    with pytest.raises(PlanError) as e:
        runspec.load(spec, [f"{key}={VALUE[cal_key]}"])
    assert e.value.field == key and f"calibration.values.{cal_key}" in str(e.value)
    runspec.load(spec, [f"calibration.values.{cal_key}={VALUE[cal_key]}"])  # the way that works
