"""The decode overhead's 95% interval holds the simulation's own seed-to-seed noise.

``pipesim calibrate`` reads the overhead off a simulation at its ``seed``; the simulated mean
``gen`` is one draw, as noisy as the logged one. Before, the interval mapped only the logged mean's
bootstrap interval, so a log whose ``gen`` barely varies got an interval of about zero width, and the
shipped sample at ``--seed 1`` read 4.59 ms [4.14, 4.97] for the true 4 ms.

Binomial reasoning for both tests: each calibration seed is a trial that a 95% interval holds the
truth with probability at least 0.95; over 6 seeds, P(at least 5 held) = 0.95**6 + 6 * 0.05 *
0.95**5 = 0.967, so a correct interval fails ">= 5 of 6" on under 4% of seed sets (the seeds are
fixed, so the test is deterministic), while one that leaves the simulation's noise out holds a
noiseless log's truth at almost no seed.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import calibrate, read_log
from pipesim.calibrate.simulated import simulate, with_values
from pipesim.plan.runspec import load

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "run_verl_8gpu.toml"
LOG = ROOT / "examples" / "verl_sample_log.csv"
SEEDS = range(1, 7)
NEED = 5  # of 6: module docstring


def _true_values() -> dict[str, float]:
    """The constants the sample log was written with (examples/make_verl_sample_log.py)."""
    spec = importlib.util.spec_from_file_location(
        "make_sample", ROOT / "examples" / "make_verl_sample_log.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return dict(mod.TRUE_VALUES)


def _held(log_path: Path, truth: float) -> list[bool]:
    rs = load(SPEC)
    log = read_log(log_path)
    out = []
    for seed in SEEDS:
        v = calibrate(log, rs, seed=seed).values["iteration_overhead_s"]
        assert v.lo <= v.value <= v.hi
        out.append(v.lo <= truth <= v.hi)
    return out


# The same six-seed coverage of the overhead's interval on another log: the default run keeps
# test_a_noiseless_gen_log_gets_the_simulations_noise (the log the fix is seen on: 0 of 6 before,
# where this one held 5 of 6 before as after); make test-full runs this one too.
@pytest.mark.full
@pytest.mark.usefixtures("dealt_once")  # six calibrations of one log and spec: one run deals them
def test_the_sample_log_overhead_interval_holds_the_truth_at_other_seeds() -> None:
    """The shipped sample, calibrated at seeds 1-6 (not its own run seed 0, which replays the log's
    draws): the true overhead lies in at least 5 of the 6 intervals (before: 5, seed 1 missing)."""
    truth = _true_values()["iteration_overhead_s"]
    held = _held(LOG, truth)
    assert sum(held) >= NEED, held


@pytest.mark.usefixtures("dealt_once")  # six calibrations of one log and spec: one run deals them
def test_a_noiseless_gen_log_gets_the_simulations_noise(tmp_path: Path) -> None:
    """The sample log with every step's ``gen`` set to the expected mean ``gen`` of the true spec
    (the mean over 30 simulated runs at other seeds): the log itself then says the true overhead
    exactly, and all the estimate's error is the simulation's draw at the calibration seed. Its
    intervals must still hold the truth at 5 of 6 seeds (before: zero width, 0 of 6)."""
    true = _true_values()
    truth = true["iteration_overhead_s"]
    rs = load(SPEC)
    spec = with_values(rs, {k: v for k, v in true.items() if k != "iteration_overhead_s"})
    frame = pd.read_csv(LOG)
    n = len(frame)
    expected = float(np.mean([simulate(spec, truth, n, seed)["timing_s/gen"] for seed in range(100, 130)]))
    frame["timing_s/gen"] = expected
    path = tmp_path / "flat_gen.csv"
    frame.to_csv(path, index=False)
    held = _held(path, truth)
    assert sum(held) >= NEED, held
