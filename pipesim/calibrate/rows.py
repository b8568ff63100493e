"""How many trainer steps a log's row covers: one, or the ``trigger_parameter_sync_step`` of verl's
fully-async trainer, which logs one row per parameter version (``docs/calibrate.md``).

verl's fully-async trainer (volcengine/verl at ``b178a3c``, 2026-01-29, the lines of that commit;
``recipe/fully_async_policy/`` before commit ``031de42``) does not log its steps:
``verl/experimental/fully_async_policy/fully_async_trainer.py``, ``fit``, hands each trainer step's
metrics to a ``MetricsAggregator`` (lines 331-334), and ``_trigger_parameter_sync_after_step``
(lines 525-541), once ``trigger_parameter_sync_step`` steps have been added, logs their aggregate
at ``step=current_param_version`` (the parameter version, counted from 1) and resets it; then it
times ``timing_s/wait_last_valid`` and ``timing_s/param_sync`` and logs them at the same step
(lines 542-567): one sync per row, not aggregated. The aggregation,
``verl/experimental/fully_async_policy/detach_utils.py`` ``MetricsAggregator`` (lines 197-347):

* which rule (``_get_aggregation_type``, lines 249-269): first the explicit rules (``time_sum``:
  ``perf/time_per_step``; ``min``, ``avg``, ``max``: the agent loop's ``tool_calls`` timings;
  ``last``: the ``fully_async/count/*`` counters and ``training/global_step``), then by substring
  of the lower-cased name, in this order: ``timing_s/`` a sum (lines 256-257); ``mean``, ``avg``,
  ``average`` a mean; ``max`` the maximum; ``min`` the minimum; ``sum``, ``total`` a sum; anything
  else a mean;
* how (``_aggregate_single_metric``, lines 271-308): ``time_sum`` and ``sum`` add the steps' values
  (lines 294-295), ``avg`` is their plain mean (every step trains ``required_samples`` samples, so it
  is the sample-weighted mean too);
* afterwards (``_special_metrics_aggergate``, lines 329-347): ``perf/throughput`` recomputed as
  ``perf/total_num_tokens`` (summed: ``total``) over ``perf/time_per_step`` (summed) times the GPUs,
  ``trainer/idle_ratio`` as the summed ``gen`` over the summed ``step``.

So of the columns a calibration reads (:data:`~pipesim.calibrate.log.COLUMNS`), a row of ``K``
trainer steps holds: ``timing_s/step``, ``gen``, ``old_log_prob``, ``ref``, ``update_actor`` summed
over the ``K`` steps (:data:`~pipesim.calibrate.log.SUMMED`); ``response_length/mean``,
``prompt_length/mean`` and ``response_length/clip_ratio`` (no keyword: a mean) their means;
``response_length/max`` their maximum; ``timing_s/param_sync`` the one sync that follows them.

A calibration reads such a log with ``trainer_steps_per_row=K`` (``pipesim calibrate
--trainer-steps-per-row K``), as its rows were written:

* a summed column per trainer step, the row's sum over ``K``
  (:meth:`pipesim.calibrate.log.TrainingLog.col`, the one place): what the trainer's phases, the
  remainder and the simulated means are fitted and validated on;
* ``param_sync`` as logged, one sync a row: ``sync_time_s`` is the mean of the syncs, and the
  simulated sync is the mean over the steps that synced (a design that syncs every ``K`` steps, as
  verl's ``trigger_parameter_sync_step = K`` does, syncs once a row). Where the step holds the sync
  (:mod:`pipesim.calibrate.steptime`), each of the row's steps holds ``1/K`` of it
  (:func:`sync_per_step`), as the simulated steps' mean does;
* ``response_length/max`` as the maximum of ``K x batch`` responses (:func:`max_draws`), the lengths'
  means as they are (a mean of the steps' means);
* the step numbers: row ``s`` covers the trainer steps ``s K .. s K + K - 1`` (:func:`trainer_steps`),
  as a row per step ``s`` is the spec's run's step ``s``: the simulations run ``rows x K`` steps and
  the held-out rows are predicted over their steps; the length trajectory is fitted on each row's
  middle step (:func:`centres`); a row's phases are the mean of its ``K`` steps, each dealt to the
  ranks as the spec's run dealt it, sharing the row's tokens as that run's steps did
  (:func:`pipesim.calibrate.trainer.row_members`; :func:`pipesim.compute.phasefit.fit_profile`
  fits each row as a group).
  The log keeps no step's own tokens, so the trainer's efficiencies and its micro-batch cost are
  told apart less well than from a row per step (a mean of whole micro-batch counts follows the
  tokens nearly in proportion); their sum, what a prediction uses, is not.

verl numbers its rows by parameter version from 1 (a per-step log by ``global_steps`` from 1); a
row numbered ``s`` is read as above whatever the origin, as a per-step log's step ``s`` is the
run's step ``s``.

The spec does not decide ``K``: a split design's ``sync_every`` is verl's
``trigger_parameter_sync_step`` (:mod:`pipesim.plan.keys`), but a log of that run may be one row a
step (pipesim's :func:`~pipesim.calibrate.sample.sample_log`, another framework's logger, a log
divided by hand, as ``examples/published/`` divides the README's). So ``K`` is 1 unless given;
:func:`row_note` says how the rows were read, and where ``K`` was not given but every row holds
a sync that a split design makes every ``sync_every > 1`` steps, says the log looks aggregated.
"""

from __future__ import annotations

import numpy as np

from pipesim.calibrate.log import TrainingLog
from pipesim.plan.runspec import RunSpec

__all__ = ["centres", "max_draws", "row_note", "sync_per_step", "trainer_steps"]


def trainer_steps(log: TrainingLog) -> np.ndarray:
    """The trainer steps of each row, ``(rows, K)``: row ``s`` covers ``s K .. s K + K - 1``."""
    k = log.per_row
    return np.asarray(log.steps, dtype=np.int64)[:, None] * k + np.arange(k)[None, :]


def centres(log: TrainingLog) -> np.ndarray:
    """Each row's middle trainer step (``s K + (K - 1) / 2``): where its mean length sits on the
    length trajectory."""
    return np.asarray(trainer_steps(log), float).mean(axis=1)


def sync_per_step(log: TrainingLog) -> np.ndarray:
    """Each row's ``param_sync`` per trainer step: the row's one sync spread over its ``K`` steps
    (what a step that holds the sync holds of it, on average); as logged for a row per step."""
    return log.col("timing_s/param_sync") / log.per_row


def max_draws(log: TrainingLog, batch: int) -> int:
    """The responses a row's ``response_length/max`` is the maximum of: ``K x batch``."""
    return log.per_row * batch


def row_note(log: TrainingLog, rs: RunSpec) -> str | None:
    """How the log's rows were read (where ``K`` was given), or that they look like verl's
    fully-async rows of ``sync_every`` steps though ``K`` was not given; None: a row per step, and
    nothing says otherwise."""
    k, every = log.trainer_steps_per_row, rs.design.sync_every
    split = not rs.design.colocated
    if k is not None:
        note = (
            f"rows: each read as {k} trainer step{'s' if k > 1 else ''} (trainer_steps_per_row, "
            "--trainer-steps-per-row), as verl's fully-async trainer logs a parameter version "
            "(MetricsAggregator: timing_s/* summed, read per step; lengths averaged; param_sync one "
            f"sync a row); row s covers the run's steps s*{k} to s*{k}+{k - 1}"
        )
        if split and k != every:
            note += (
                f"; the spec syncs every {every} step{'s' if every > 1 else ''} (design.sync_every), and "
                f"verl logs one row per sync: is it the logged run's?"
            )
        return note
    if not (split and every > 1 and log.has("timing_s/param_sync")):
        return None
    synced = log.col("timing_s/param_sync") > 0
    if len(synced) >= 3 and bool(synced[1:].all()):
        return (
            f"rows: every row holds a weight sync, but the spec syncs every {every} steps "
            "(design.sync_every): verl's fully-async trainer logs one row per sync, its timing_s/* "
            f"summed over the {every} steps; read so with --trainer-steps-per-row {every} "
            "(trainer_steps_per_row); read here as one step a row"
        )
    return None
