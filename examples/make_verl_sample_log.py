"""Write examples/verl_sample_log.csv: a verl-style log that pipesim itself generated from a known
setup, for `pipesim calibrate` to recover (docs/calibrate.md). Not a measurement of any cluster.

The setup is examples/run_verl_8gpu.toml (its trainer the fsdp2-dense framework profile) with the
constants below in place of the profile's and the spec's guesses; the log
is a 20-step run of it at the spec's own seed (0; it was 7 before the trainer's ranks waited for the
busiest: calibrate deals each step's samples as the spec's run at its seed does, and a log of that
run is the one whose dealing it knows; docs/calibrate.md gives the seed-7 fit too) with 3%
multiplicative noise on every timing (generator seed 11), written by
pipesim.calibrate.sample.sample_log. Run from the repository root:

    python examples/make_verl_sample_log.py
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipesim.calibrate.sample import sample_log
from pipesim.plan.runspec import from_dict, read

HERE = Path(__file__).resolve().parent
TRUE_VALUES = {  # the trainer: the spec's fsdp2-dense profile with these constants in place
    "fwd_bwd_efficiency": 0.35,  # update_actor's share of peak (fsdp2-dense: 0.91)
    "fwd_efficiency": 0.25,  # old_log_prob's share of peak (fsdp2-dense: 0.37)
    "micro_batch_s": 0.3,  # fixed seconds per micro-batch and pass (fsdp2-dense: 0.05)
    "optimizer_step_s": 1.0,  # fixed seconds per optimizer step (fsdp2-dense: 0.5)
    "step_s": 2.0,  # the remainder's seconds per step (fsdp2-dense: 0)
    "iteration_overhead_s": 0.004,  # the engine's fixed seconds per decode iteration
    "response_median_tokens": 700.0,
    "response_sigma": 0.7,
}
STEPS, RUN_SEED, NOISE_SEED = 20, 0, 11


def main() -> None:
    data = read(HERE / "run_verl_8gpu.toml")
    data["calibration"] = {"values": dict(TRUE_VALUES)}
    data["run"] = {"steps": STEPS, "seed": RUN_SEED}
    log = sample_log(from_dict(data), np.random.default_rng(NOISE_SEED))
    log.round(6).to_csv(HERE / "verl_sample_log.csv", index=False)
    print(f"wrote {HERE / 'verl_sample_log.csv'} ({len(log)} steps)")


if __name__ == "__main__":
    main()
