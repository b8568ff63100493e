"""Write examples/verl_sample_log.csv: a verl-style log that pipesim itself generated from a known
setup, for `pipesim calibrate` to recover (docs/calibrate.md). Not a measurement of any cluster.

The setup is examples/run_verl_8gpu.toml with the constants below in place of its guesses; the log
is a 20-step run of it (seed 7) with 3% multiplicative noise on every timing (generator seed 11),
written by pipesim.calibrate.sample.sample_log. Run from the repository root:

    python examples/make_verl_sample_log.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipesim.calibrate.sample import sample_log
from pipesim.plan.runspec import from_dict, read

HERE = Path(__file__).resolve().parent
TRUE_VALUES = {
    "mfu": 0.3,  # the trainer's model FLOP utilisation
    "step_overhead_s": 2.5,  # the trainer's fixed seconds per step
    "iteration_overhead_s": 0.004,  # the engine's fixed seconds per decode iteration
    "response_median_tokens": 700.0,
    "response_sigma": 0.7,
}
STEPS, RUN_SEED, NOISE_SEED = 20, 7, 11


def main() -> None:
    data = read(HERE / "run_verl_8gpu.toml")
    data["calibration"] = {"values": dict(TRUE_VALUES)}
    data["run"] = {"steps": STEPS, "seed": RUN_SEED}
    log = sample_log(from_dict(data), np.random.default_rng(NOISE_SEED))
    log.round(6).to_csv(HERE / "verl_sample_log.csv", index=False)
    print(f"wrote {HERE / 'verl_sample_log.csv'} ({len(log)} steps)")


if __name__ == "__main__":
    main()
