"""A calibration's held-out prediction is the overhead solver's last run (a run of the whole log at
the fitted overhead), not one more: the same calibration, one simulation fewer."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

import pipesim.calibrate as cal_mod
from pipesim.calibrate import MIN_HOLDOUT_STEPS, calibrate, read_log
from pipesim.plan.runspec import load

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
LOG, SPEC = EXAMPLES / "verl_sample_log.csv", EXAMPLES / "run_verl_8gpu.toml"


def _runs(lines: list[str], steps: int) -> int:
    return sum(ln.startswith(f"simulating {steps:,} steps at") for ln in lines)


def test_the_held_out_prediction_reuses_the_solvers_last_run() -> None:
    log, rs = read_log(LOG), load(SPEC)
    n = len(log)
    assert n >= MIN_HOLDOUT_STEPS  # so a validation part runs and predicts its held-out steps
    reused: list[str] = []
    got = calibrate(log, rs, progress=reused.append)
    fresh: list[str] = []
    with pytest.MonkeyPatch.context() as mp:  # no run kept: each simulation runs
        mp.setattr(cal_mod, "reusing", contextlib.nullcontext)
        want = calibrate(log, rs, progress=fresh.append)
    assert got.table() == want.table(), "the same calibration, to the digit"
    assert got.residuals and got.held_out == want.held_out
    sims = [ln for ln in reused if ln.startswith("simulating") and "deal" not in ln]
    assert len(sims) == len([ln for ln in fresh if ln.startswith("simulating") and "deal" not in ln]) - 1
    # the validation part runs the whole log once (the solver's check, which is the prediction)
    part = reused[: reused.index(f"fitting all {n} steps")]
    assert _runs(part, n) == 1
