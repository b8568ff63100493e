"""A verl-style training log written by pipesim itself, from a known setup: what the calibration is
tested on (it must recover the constants the log was made with) and what ``examples/`` ships.

:func:`sample_log` runs a run spec (:func:`pipesim.plan.runspec.run`) and writes one row per
training step in verl's names (:data:`pipesim.calibrate.log.COLUMNS`):

* ``timing_s/gen`` and ``timing_s/param_sync``: :func:`pipesim.compute.series.step_breakdown`
  (the trainer's wait for data, and the weight sync inside it);
* ``timing_s/old_log_prob`` (when the trainer recomputes them), ``timing_s/ref`` (when it has a
  reference model) and ``timing_s/update_actor``: the trainer's phases
  (:mod:`pipesim.compute.phases`, ``ComputeRun.phase_log``), timed by the spec's framework profile
  with its calibrated constants;
* ``timing_s/step``: the sum of those and of what no column holds: the phases' remainder (reward,
  advantages, the driver: ``step_s + samples x sample_s``) and a colocated engine's offload and
  reload; without ``param_sync`` where the trainer verl runs the design with times its sync apart
  (a split design: verl's fully-async trainer; :mod:`pipesim.calibrate.steptime`), or as
  ``step_includes_sync`` says;
* ``response_length/mean``: the trained batch's tokens over its samples, less the prompt (exact for
  a fixed prompt, which is all this writer accepts; for an agent workload, the whole episode, every
  turn's response and the observations between them, as verl counts it: :mod:`pipesim.calibrate.agent`);
  ``response_length/clip_ratio``: the share of the batch truncated at ``max_response_tokens``
  (single-turn only: verl's is the share of episodes filling the response window, which the run
  does not record); ``prompt_length/mean``.

No ``response_length/max`` (the run's tables keep no per-sample lengths): a log with missing
columns, as real ones are.

Measurement noise: each timing (and the unlogged rest of the step, once) is multiplied by
``exp(noise * z)``, ``z`` standard normal from the generator passed in (default ``noise`` 0.03: a
few percent, as step times of a real cluster vary), so that the fitted intervals have a width to
narrow; ``noise=0`` gives the model's times exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipesim.compute.series import step_breakdown
from pipesim.core.errors import check_number, shown
from pipesim.plan.build import trainer_config
from pipesim.plan.runspec import RunSpec, run

__all__ = ["DEFAULT_NOISE", "sample_log"]

DEFAULT_NOISE = 0.03
"""Log-space spread of the multiplicative noise on each timing (a round figure, not a measurement)."""


def sample_log(
    rs: RunSpec,
    rng: np.random.Generator,
    noise: float = DEFAULT_NOISE,
    step_includes_sync: bool | None = None,
) -> pd.DataFrame:
    """The verl-style log of a run of ``rs`` (see the module docstring), one row per trained step;
    its ``timing_s/step`` holds the weight sync where ``step_includes_sync`` says so, None: as verl
    times the design (colocated: yes; split, fully async: no)."""
    if not isinstance(rs, RunSpec):
        raise ValueError(f"rs must be a RunSpec, got {shown(rs)}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy Generator, got {shown(rng)}")
    check_number("noise", noise, 0)
    if step_includes_sync is not None and not isinstance(step_includes_sync, bool):
        raise ValueError(f"step_includes_sync must be True, False or None, got {shown(step_includes_sync)}")
    holds = rs.design.colocated if step_includes_sync is None else step_includes_sync
    wl = rs.plan.workload
    if not isinstance(wl.prompt, int):
        raise ValueError("sample_log writes workloads with a fixed prompt (workload.prompt_tokens)")
    crun = run(rs)
    steps = step_breakdown(crun.result, crun.phase_log).set_index("step")
    tcfg = trainer_config(rs.plan, rs.design)
    clip = crun.result.trained.groupby("step")["truncated"].mean()
    batch = rs.plan.batch_size
    timed = ["timing_s/gen", "timing_s/param_sync"] + ["timing_s/old_log_prob"] * tcfg.recompute_old_logp
    timed += ["timing_s/ref"] * tcfg.reference_model + ["timing_s/update_actor"]
    unlogged = ("timing_s/offload", "timing_s/remainder")  # in the step, not in a column of their own
    rows = []
    for step, tokens, _ in crun.phase_log:
        if step not in steps.index:
            continue
        row: dict[str, float] = {"step": int(step)}
        for k in timed:
            row[k] = float(steps.loc[step, k]) * float(np.exp(noise * rng.standard_normal()))
        rest = sum(float(steps.loc[step, k]) for k in unlogged) * float(np.exp(noise * rng.standard_normal()))
        row["timing_s/step"] = sum(row[k] for k in timed if holds or k != "timing_s/param_sync") + rest
        row["response_length/mean"] = tokens / batch - wl.prompt
        if wl.agent is None:
            row["response_length/clip_ratio"] = float(clip.get(step, 0.0))
        row["prompt_length/mean"] = float(wl.prompt)
        rows.append(row)
    return pd.DataFrame(rows)
