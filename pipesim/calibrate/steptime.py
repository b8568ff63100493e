"""Whether a log's ``timing_s/step`` holds the weight sync: as the trainer that wrote it times it.

pipesim's own step (:func:`pipesim.compute.series.step_breakdown`, what a calibration simulates)
runs from the end of the previous step's training to the end of its own, so it holds the weight
sync before its training (``timing_s/param_sync``), in every design. verl's trainers do not all
time it so (volcengine/verl at ``b178a3c``, 2026-01-29, the lines of that commit):

* the colocated (hybrid-engine) trainer, ``verl/trainer/ppo/ray_trainer.py``, ``fit``: the
  weight sync from the trainer to the rollout (``checkpoint_manager.update_weights()``, under its
  own ``update_weights`` timer, lines 1610-1611) runs inside ``marked_timer("step", ...)`` (line
  1388): **the step holds the sync**;
* the fully-async trainer, ``verl/experimental/fully_async_policy/fully_async_trainer.py``
  (``recipe/fully_async_policy/`` before commit ``031de42``), ``fit``: the ``step`` timer (lines
  320-329: ``gen`` is the wait for samples from the message queue, then the batch's phases) closes
  before ``_trigger_parameter_sync_after_step`` is called (line 343), which times
  ``timing_s/wait_last_valid`` and ``timing_s/param_sync`` on their own (lines 542-567): **the step
  leaves the sync out**;
* the one-step-off-policy trainer, ``verl/experimental/one_step_off_policy/ray_trainer.py``,
  ``fit``: ``sync_rollout_weights`` is timed inside the ``step`` timer (lines 499-510): the step
  holds the sync.

Which one a log is read as (:func:`includes_sync`): the log's ``step_includes_sync`` where given
(``pipesim calibrate --step-includes-sync yes|no``, :func:`pipesim.calibrate.calibrate`'s
``step_includes_sync``), else the spec's design as verl runs it: a colocated design is verl's
hybrid-engine trainer (the step holds the sync), a split one its fully-async trainer (it does not;
pipesim's split placement is verl's fully-async ``rollout.n_gpus_per_node``,
:mod:`pipesim.plan.keys`). A split run logged by a trainer whose step holds the sync (verl's
one-step-off-policy trainer, another framework's) needs ``--step-includes-sync yes``; the
calibration's notes say which reading was used (:func:`step_note`).

The two meanings meet here only, in both directions:

* the log's side, :func:`trainer_span_s`: what the trainer took, ``step - gen - offload/reload``
  less ``param_sync`` only where the step holds it (where the log does not time the sync, the
  spec's simulated sync, :func:`spec_sync_s`) (the remainder of
  :func:`pipesim.calibrate.trainer.remainder` and the scale of :mod:`pipesim.calibrate.scale`);
  before, ``param_sync`` was always subtracted, so a fully-async log's remainder came out short by
  the sync;
* the simulated side, :func:`simulated_step_s`: the simulated step in the log's meaning, less the
  step's simulated sync where the log's step leaves it out (what ``timing_s/step`` is fitted and
  validated against, :mod:`pipesim.calibrate.simulated`).

verl's fully-async trainer logs one row per parameter version, each ``timing_s/*`` summed over its
``trigger_parameter_sync_step`` trainer steps and one ``param_sync`` (``MetricsAggregator`` in
``verl/experimental/fully_async_policy/detach_utils.py``, lines 256-257 and 294-295): such a log
(``trainer_steps_per_row``) is read per trainer step (:mod:`pipesim.calibrate.rows`), so the step
here is a row's mean step and, where it holds the sync, holds its share of the row's one sync.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from pipesim.calibrate.log import TrainingLog
from pipesim.calibrate.rows import sync_per_step
from pipesim.plan.runspec import RunSpec

__all__ = [
    "VERL_COMMIT",
    "includes_sync",
    "simulated_step_s",
    "spec_sync_s",
    "step_note",
    "sync_note",
    "timed_sync",
    "trainer_span_s",
]

VERL_COMMIT = "b178a3c"
"""The volcengine/verl commit whose trainers the two readings follow (the module docstring)."""


def includes_sync(log: TrainingLog, rs: RunSpec) -> bool:
    """Whether ``log``'s ``timing_s/step`` holds the weight sync: its ``step_includes_sync`` where
    given, else as verl times the spec's design (colocated: yes; split, fully async: no)."""
    given = log.step_includes_sync
    return bool(rs.design.colocated) if given is None else given


def step_note(log: TrainingLog, rs: RunSpec) -> str:
    """The note that says how the log's ``timing_s/step`` was read, and why."""
    holds = includes_sync(log, rs)
    what = "holding the weight sync" if holds else "leaving out the weight sync (timing_s/param_sync)"
    if log.step_includes_sync is not None:
        flag = "yes" if holds else "no"
        return f"timing_s/step: read as {what}, as given (step_includes_sync, --step-includes-sync {flag})"
    if holds:
        return (
            f"timing_s/step: read as {what}, as verl's colocated trainer times it (ray_trainer.py: "
            "update_weights inside the step timer); a trainer that times it apart: --step-includes-sync no"
        )
    return (
        f"timing_s/step: read as {what}, as verl's fully-async trainer times it for a split design "
        "(fully_async_trainer.py: param_sync after the step timer closes); a trainer that times it "
        "inside the step (verl's one_step_off_policy): --step-includes-sync yes"
    )


def timed_sync(log: TrainingLog) -> bool:
    """Whether ``log`` times the weight sync: a ``timing_s/param_sync`` column above 0 at some step
    (a column of 0 s at every step is a sync that was not timed)."""
    return log.has("timing_s/param_sync") and bool((log.col("timing_s/param_sync") > 0).any())


def spec_sync_s(log: TrainingLog, rs: RunSpec) -> np.ndarray:
    """Each row's weight sync per trainer step as the spec's run simulates it: its sync seconds
    (``run.sync_time_s``, else the cluster's, times ``sync_scale``, as
    :func:`pipesim.plan.runspec.run` takes them) at each trainer step ``s >= 1`` with ``s %
    sync_every == 0`` (the first step has no sync before it), a row's mean over its trainer steps
    (:mod:`pipesim.calibrate.rows`). What a step that holds the sync holds where the log has no
    ``param_sync`` column to take out (:func:`trainer_span_s`)."""
    from pipesim.plan.build import design_cluster, sync_seconds

    spec, d = rs.plan, rs.design
    sync = sync_seconds(spec, d, design_cluster(spec, d)[1])
    k, every = log.per_row, max(int(d.sync_every), 1)
    steps = np.asarray(log.steps, dtype=np.int64)[:, None] * k + np.arange(k)[None, :]
    return sync * ((steps >= 1) & (steps % every == 0)).mean(axis=1)


def sync_note(log: TrainingLog, rs: RunSpec) -> str | None:
    """The note for a step that holds the sync in a log that does not time it (:func:`trainer_span_s`
    takes the spec's simulated sync out); None otherwise."""
    both = log.has("timing_s/step") and log.has("timing_s/gen")  # what trainer_span_s reads
    if not (both and includes_sync(log, rs)) or timed_sync(log):
        return None
    per = spec_sync_s(log, rs)
    what = (
        "no timing_s/param_sync column"
        if not log.has("timing_s/param_sync")
        else "timing_s/param_sync 0 s at every step"
    )
    return (
        f"timing_s/step: holds the weight sync, and the log has {what}: the spec's simulated sync "
        f"({float(per.max(initial=0.0)):.4g} s a step that syncs) is taken out of each step before the "
        "trainer's remainder (step_s), which would otherwise hold it and a prediction count it twice"
    )


def trainer_span_s(
    log: TrainingLog, holds_sync: bool, switch_s: float, spec_sync: np.ndarray | None = None
) -> np.ndarray | None:
    """Each step's seconds of training, ``timing_s/step`` less ``gen``, a colocated engine's offload
    and reload (``switch_s``) and, where the step holds it (``holds_sync``), the sync: the log's
    ``param_sync`` (per trainer step where a row covers several: :mod:`pipesim.calibrate.rows`),
    else, where the log does not time it (no column, or 0 s at every step: :func:`timed_sync`),
    ``spec_sync`` (:func:`spec_sync_s`, what the simulated step holds). None without a ``step``
    and a ``gen`` column. Before, a sync the step holds and the log does not time was counted as
    training, and counted again by the simulated step: a log of a run with a 10 s sync and no
    ``param_sync`` column fitted ``step_s`` 11.5 s for a true 2.0 and predicted its step 73.5 s
    for 63.9; an all-zero column on the shipped sample, 2.116 [2.066, 2.165]."""
    if not (log.has("timing_s/step") and log.has("timing_s/gen")):
        return None
    span = log.col("timing_s/step") - log.col("timing_s/gen") - switch_s  # per trainer step (rows)
    if holds_sync and timed_sync(log):
        span = span - sync_per_step(log)  # a row of K steps holds one sync: 1/K of it a step
    elif holds_sync and spec_sync is not None:
        span = span - np.asarray(spec_sync, float)
    return np.asarray(span, float)


def simulated_step_s(breakdown: pd.DataFrame, holds_sync: bool) -> np.ndarray:
    """Each simulated step's ``timing_s/step`` in the log's meaning: pipesim's step
    (:func:`~pipesim.compute.series.step_breakdown`, which holds the sync) less its
    ``timing_s/param_sync`` where the log's step leaves the sync out."""
    step = breakdown["timing_s/step"].to_numpy(dtype=float)
    return step if holds_sync else step - breakdown["timing_s/param_sync"].to_numpy(dtype=float)
