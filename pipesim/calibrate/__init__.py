"""``pipesim calibrate``: a run spec fitted to a training log, values with intervals, checked on
held-out steps (``docs/calibrate.md``).

``pipesim calibrate LOG --spec RUN.toml --out CALIBRATED.toml [--columns MAP.toml] [--steps A:B]``
reads a verl-style log (:mod:`pipesim.calibrate.log`: one row per step, verl's metric names) of a
run made with the design of ``RUN.toml`` (:mod:`pipesim.plan.runspec`) and fits what the log's
columns identify:

* the response lengths (``response_length/*``): median and log-space sigma, closed-form
  (:func:`~pipesim.calibrate.fit.fit_lengths`), and, for a synchronous design (``eta = 0``), their
  trajectory (``drift_per_version``, :func:`~pipesim.calibrate.fit.fit_drift`, kept where its
  interval excludes 0, the median then taken back to the first logged step; where a step is
  clipped, the median, sigma and drift are fitted together with the cap from every step's mean and
  clip ratio, :func:`~pipesim.calibrate.trajfit.fit_trajectory`); then corrected once
  by simulation for the length bias of the trained batch when the design is asynchronous
  (``eta > 0``: short samples are trained first): the median is scaled by the logged mean over the
  simulated trained mean, and the sigma by itself over the sigma the same fit finds on the
  simulated run's per-step trained mean and clip share (:func:`pipesim.calibrate.fitspec._sigma_bias`);
  for a multi-turn (agent) spec, a turn's, from the episode verl logs (:mod:`pipesim.calibrate.agent`);
* the trainer: the constants of the spec's framework profile (``model.framework``; none named: the
  one-MFU ``ideal`` profile at ``model.mfu``) that ``timing_s/update_actor``, ``old_log_prob``,
  ``ref`` and the step's remainder identify, by weighted least squares through
  :func:`pipesim.compute.phasefit.fit_profile` (:mod:`pipesim.calibrate.trainer`), which deals each
  step's samples to the ranks as the spec's run at the fitted lengths deals them (refitted once the
  lengths are bias-corrected, so the calibrated spec deals what its trainer was fitted on);
* the weight sync (``timing_s/param_sync``): its mean, with a t interval; whether the logged
  ``timing_s/step`` holds it follows verl's trainers (colocated: yes; split, fully async: no) or
  ``step_includes_sync`` (:mod:`pipesim.calibrate.steptime`, which converts between the log's
  meaning and the simulated step's; a note says which was used);
* the decode overhead (``timing_s/gen``, else ``timing_s/step``): the engine's
  ``iteration_overhead_s``, by simulation (:mod:`pipesim.calibrate.simulated`) -- the design run
  for the log's number of steps at :data:`OVERHEAD_PROBE_S` = (0, 10 ms) per iteration, the logged
  mean interpolated between the two simulated means (``gen`` is affine in the overhead: every
  iteration pays it once). Its interval maps the bootstrap interval of the logged mean, widened
  for a short log (:func:`~pipesim.calibrate.fit.small_sample`) and for the simulation's own
  noise (its mean is one draw at the calibration's seed; the fitted lengths' is not in it). Fitted
  to the step, it holds every second the model
  misses (said in a note). Not identified when the column barely moves with it (a trainer-bound
  asynchronous design, whose ``gen`` is the trainer's wait).

**Validation**: with at least :data:`MIN_HOLDOUT_STEPS` steps, the last quarter (at least two) is
held out, everything is fitted on the rest, and the held-out steps are predicted: the trainer per
step (from its tokens), ``gen``, ``step``, ``param_sync`` and the response mean as means over the
same steps of a simulated run (a simulation draws its own lengths, so single steps do not pair
up; the trainer's phases are predicted step by step from the step's tokens). The residuals are
relative: ``(logged - predicted) / logged``. The values written are then
fitted on every step. A spec whose held-out step or response mean is off by more than 25% and more
than the steps' spread explains is said in a warning, printed and written into the spec (the
held-out guard, :mod:`pipesim.calibrate.result`).

The parts: :mod:`~pipesim.calibrate.fitspec` fits (in order) and validates, this module runs it
twice (held out, then whole) and :mod:`~pipesim.calibrate.result` holds what comes back.

**Rows of several trainer steps**: verl's fully-async trainer logs one row per parameter version,
its ``timing_s/*`` summed over ``trigger_parameter_sync_step`` trainer steps and one
``param_sync``; ``trainer_steps_per_row=K`` (``--trainer-steps-per-row K``) reads each row as its
``K`` steps (:mod:`pipesim.calibrate.rows`): the sums per step, the sync once a row, the
simulations ``K`` steps a row, and a note says so.

The calibrated spec is ``RUN.toml`` with a ``[calibration]`` table: ``values`` (what a run applies,
:data:`pipesim.plan.runspec.CALIBRATED`), ``intervals``, ``method``, ``residuals``, the log's path
and ``log_sha256``, the steps used, ``not_identified`` and the simulation ``seed``. ``pipesim run``
and ``pipesim plan`` read it. Simulations use their own ``seed`` (default 0), not the spec's run
seed; where the two are equal (the shipped sample: a log pipesim wrote from the spec at its seed
0), the simulations replay the log's own draws, and the held-out response mean and the decode
overhead come out closer than an independent run gets (docs/calibrate.md; ``--seed`` to differ).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from pipesim.calibrate.checks import check_log, implausible, in_range
from pipesim.calibrate.fit import Fitted
from pipesim.calibrate.fitspec import fit_spec, validate, with_lengths
from pipesim.calibrate.frame import check_calibrate_args, check_kind
from pipesim.calibrate.log import COLUMNS, LogError, TrainingLog, parse_steps, read_columns_map, read_log
from pipesim.calibrate.result import HELD_OUT_LIMIT, MIN_HOLDOUT_STEPS, Calibration
from pipesim.calibrate.rows import trainer_steps
from pipesim.calibrate.simulated import report, reporting, reusing
from pipesim.calibrate.trainer import dealing_spread, tokens
from pipesim.core.errors import shown
from pipesim.plan.runspec import RunSpec

__all__ = [
    "COLUMNS",
    "HELD_OUT_LIMIT",
    "MIN_HOLDOUT_STEPS",
    "Calibration",
    "Fitted",
    "LogError",
    "TrainingLog",
    "calibrate",
    "calibrated_spec",
    "check_log",
    "parse_steps",
    "read_columns_map",
    "read_log",
    "with_lengths",
]


def calibrate(
    log: TrainingLog,
    rs: RunSpec,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    step_includes_sync: bool | None = None,
    trainer_steps_per_row: int | None = None,
) -> Calibration:
    """Fit ``rs`` to ``log`` and validate on held-out steps (see the module docstring); a log that
    cannot come from a run of ``rs`` is refused first (:func:`check_log`), as are arguments of the
    wrong kind and a log of fewer than 3 steps (:func:`~pipesim.calibrate.frame.check_calibrate_args`),
    each a :class:`LogError` naming the argument.
    ``progress`` is called with one line as each part and each simulation starts (the CLI prints
    them on stderr). ``step_includes_sync``: whether the log's ``timing_s/step`` holds the weight
    sync; None (the default): the log's own ``step_includes_sync``, else as verl times the spec's
    design, colocated yes, split (fully async) no (:mod:`pipesim.calibrate.steptime`; a note says
    which was used). ``trainer_steps_per_row``: how many trainer steps each row covers, ``K`` for
    verl's fully-async trainer (one row per parameter version, its ``timing_s/*`` summed over
    ``trigger_parameter_sync_step = K`` steps, one ``param_sync``); None (the default): the log's
    own, else one (:mod:`pipesim.calibrate.rows`; a note says how the rows were read). ``seed``:
    the simulations' and the bootstrap's (module docstring: equal to the spec's run seed, it
    replays a log pipesim wrote from the spec)."""
    check_calibrate_args(log, rs, seed)
    if progress is not None and not callable(progress):
        raise LogError(
            f"progress must be a callable taking one str (print, list.append), or None; "
            f"got {shown(progress)}",
            "progress",
        )
    if step_includes_sync is not None:
        log = dataclasses.replace(log, step_includes_sync=step_includes_sync)  # checked: a LogError
    if trainer_steps_per_row is not None:
        log = dataclasses.replace(log, trainer_steps_per_row=trainer_steps_per_row)  # checked likewise
    if step_includes_sync is not None or trainer_steps_per_row is not None:
        check_calibrate_args(log, rs, seed)  # again: the rows' trainer steps reach the pool check
    check_log(log, rs)
    with reporting(progress), reusing():
        return _calibrate(log, rs, seed)


def _calibrate(log: TrainingLog, rs: RunSpec, seed: int) -> Calibration:
    residuals: dict[str, dict[str, float]] = {}
    held: list[int] = []
    n = len(log)
    if n >= MIN_HOLDOUT_STEPS:
        k = max(2, round(0.25 * n))
        part, rest = log.select(np.arange(n) < n - k), log.select(np.arange(n) >= n - k)
        held = [int(s) for s in rest.steps]
        report(f"validation: fitting the first {n - k:,} steps, predicting the last {k:,} (held out)")
        vals, _, pred = fit_spec(part, rs, seed, predict=trainer_steps(rest).ravel())
        residuals = validate(rest, rs, vals, pred)
    report(f"fitting all {n:,} steps")
    values, notes, _ = fit_spec(log, rs, seed, means=False)  # its means are not used
    t = tokens(log, rs)
    if t is not None and (spread := dealing_spread(log, with_lengths(rs, values), t, values)) is not None:
        notes.append(spread)
    values = {k: in_range(k, v) for k, v in values.items()}
    notes += implausible(values)
    return Calibration(values, notes, residuals, log, held, seed)


def calibrated_spec(rs: RunSpec, cal: Calibration) -> dict[str, Any]:
    """The run spec's data with the ``[calibration]`` table (what ``--out`` writes)."""
    check_kind("rs", rs, RunSpec, "a RunSpec (pipesim.plan.runspec.load reads one)")
    check_kind("cal", cal, Calibration, "a Calibration (calibrate returns one)")
    data = copy.deepcopy(rs.data)
    data["calibration"] = cal.table()
    return data
