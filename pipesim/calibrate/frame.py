"""The checks of a :class:`~pipesim.calibrate.log.TrainingLog` built in Python, and of the
calibration's arguments: what :func:`~pipesim.calibrate.log.read_log` refuses of a file's cells,
refused of a DataFrame (each a :class:`~pipesim.calibrate.log.LogError` naming the argument or the
column), so that a log the fits accept gives no NaN and no negative time.

A frame holds a ``step`` column and any of :data:`~pipesim.calibrate.log.COLUMNS`, each of an int or
float dtype (no bools, no objects: ``frame.astype(float)`` converts), complete (a NaN is an empty
cell: drop the column, as ``read_log`` does), with the cells' rules of ``read_log``; its steps are
distinct and sorted; a trainer phase (:data:`~pipesim.calibrate.cells.PHASES`) is not 0 s at any step;
a step's ``response_length/max`` is not below its mean (a file read by ``read_log`` too); at most
:data:`MAX_LOG_STEPS` steps, the last numbered below it (a log's step ``s`` is the run's step ``s``, and
every simulation runs the run through the last: :func:`reach_error`). ``path`` is a string (or a
path), ``sha256`` 64 hex digits, ``notes`` a tuple of strings.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pipesim.calibrate.cells import COLUMNS, PHASES, LogError, first_bad, not_a_column
from pipesim.calibrate.log import MIN_STEPS, STEPS_NEEDED
from pipesim.core.validate import shown

if TYPE_CHECKING:
    from pipesim.calibrate.log import TrainingLog

__all__ = [
    "MAX_LOG_STEPS",
    "reach_error",
    "too_many",
    "check_calibrate_args",
    "check_calibration",
    "check_fitted",
    "check_kind",
    "check_log_args",
    "check_series",
    "check_spec",
    "check_steps",
]

MAX_LOG_STEPS = 5000
"""The most steps a log may hold: a calibration simulates the log's length a few times (about 25 ms
a step for ``examples/run_verl_8gpu.toml``: 5,000 steps is two to three minutes); a longer log is
cut to the steps to fit (``--steps A:B``, :meth:`~pipesim.calibrate.log.TrainingLog.select`)."""
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


def check_log_args(log: TrainingLog) -> tuple[str, str, pd.DataFrame, tuple[str, ...]]:
    """``log``'s path, SHA-256, frame (a float copy, indexed 0, 1, ...) and notes, checked."""
    path = log.path
    if not isinstance(path, str | os.PathLike):
        raise LogError(f"path must be a string (the log's file, or a name), got {shown(path)}", "path")
    path = os.fspath(path)
    if not isinstance(path, str):
        raise LogError(f"path must be a string (the log's file, or a name), got {shown(path)}", "path")
    if not isinstance(log.sha256, str) or not _SHA256.fullmatch(log.sha256):
        raise LogError(
            f"sha256 must be 64 hex digits (the log file's SHA-256), got {shown(log.sha256)}", "sha256"
        )
    notes = log.notes
    if not isinstance(notes, tuple | list) or not all(isinstance(n, str) for n in notes):
        raise LogError(f"notes must be a tuple of strings, got {shown(notes)}", "notes")
    return path, log.sha256, check_log_frame(path, log.frame), tuple(notes)


def check_log_frame(path: str, frame: object) -> pd.DataFrame:
    """``frame`` as a log's steps, a float copy indexed 0, 1, ... (module docstring)."""
    if not isinstance(frame, pd.DataFrame):
        raise LogError(
            f"{path}: frame must be a pandas DataFrame (a step column and verl's columns), got "
            f"{type(frame).__name__} {shown(frame)}",
            "frame",
        )
    valid = ("step", *COLUMNS)
    for c in frame.columns:
        if c not in valid:
            name = c if isinstance(c, str) else shown(c)
            raise LogError(f"{path}: frame column {name}: {not_a_column(c)}", str(name))
    dup = frame.columns[frame.columns.duplicated()]
    if len(dup):
        raise LogError(f"{path}: frame column {dup[0]!r} is given twice", str(dup[0]))
    if "step" not in frame.columns:
        raise LogError(f"{path}: frame has no 'step' column (one row per step needs its number)", "step")
    if len(frame) == 0:
        raise LogError(
            f"{path}: frame has no steps; a calibration takes {MIN_STEPS} to {MAX_LOG_STEPS:,}", "steps"
        )
    if len(frame) > MAX_LOG_STEPS:
        raise LogError(too_many(path, len(frame)), "steps")
    out = {}
    for c in frame.columns:
        col = frame[c]
        if col.dtype.kind not in "iuf":
            raise LogError(
                f"{path}: frame column {c!r} must hold numbers (an int or float dtype), got dtype "
                f"{col.dtype} (frame.astype(float) converts numbers)",
                c,
            )
        x = col.to_numpy(dtype=float)
        where = ~np.isfinite(x)
        if where.any():
            i = int(np.flatnonzero(where)[0])
            raise LogError(
                f"{path}: frame column {c!r}, row {i}: {x[i]} is not a finite number (a column with an "
                "empty cell is left out: drop it, as read_log does)",
                c,
            )
        problem = first_bad(c, x)
        if problem is not None:
            i, why = problem
            raise LogError(f"{path}: frame column {c!r}, row {i}: {x[i]:g} {why}", c)
        out[c] = x
    steps = out["step"]
    if len(steps) > 1 and not (np.diff(steps) > 0).all():
        i = int(np.flatnonzero(np.diff(steps) <= 0)[0]) + 1
        what = "is given twice" if steps[i] in steps[:i] else "comes after a later step"
        raise LogError(
            f"{path}: frame column 'step', row {i}: step {steps[i]:g} {what} (steps are distinct and "
            "sorted: frame.sort_values('step'))",
            "step",
        )
    if steps[-1] + 1 > MAX_LOG_STEPS:  # every simulation runs the run through the last step
        raise reach_error(path, int(steps[-1]))
    for c in PHASES:
        if c in out and (out[c] == 0).any():
            i = int(np.flatnonzero(out[c] == 0)[0])
            every = (out[c] == 0).all()
            why = "at every step (a phase not timed: drop the column)" if every else "where others time it"
            raise LogError(f"{path}: frame column {c!r}, step {steps[i]:g}: 0 s {why}", c)
    if "response_length/max" in out and "response_length/mean" in out:
        mx, mean = out["response_length/max"], out["response_length/mean"]
        below = mx * (1 + 1e-9) + 1e-6 < mean  # a CSV's rounding may put them a hair apart, not more
        if below.any():
            i = int(np.flatnonzero(below)[0])
            raise LogError(
                f"{path}: column 'response_length/max', step {steps[i]:g}: {mx[i]:g} tokens is below the "
                f"step's response_length/mean, {mean[i]:g} (the longest response is at least the mean)",
                "response_length/max",
            )
    return pd.DataFrame(out, columns=list(frame.columns))


def too_many(path: str | os.PathLike[str], n: int) -> str:
    """What a log of ``n`` steps, more than :data:`MAX_LOG_STEPS`, is told (its field: ``steps``).
    Before: "200000 steps; a log holds 1 to 5,000 (a calibration at least 3; ...)"."""
    return (
        f"{path}: {n:,} steps: a calibration takes {MIN_STEPS} to {MAX_LOG_STEPS:,}, numbered below "
        f"{MAX_LOG_STEPS:,} (it simulates the run through the last); pick a window with --steps A:B"
    )


def reach_error(
    path: str | os.PathLike[str],
    last: int,
    per_row: int = 1,
    most: int = MAX_LOG_STEPS,
    why: str = "",
    cut: str | None = None,
    first_step: int = 0,
    field: str = "steps",
) -> LogError:
    """The LogError (naming ``field``) of a log whose last step ``last`` (the run's number, the
    log's less ``first_step``; rows of ``per_row`` trainer steps) takes every simulation past
    ``most`` steps: a log's step ``s`` is the run's step ``s``, and the simulations run the run from
    its step 0 through it. ``why``: what sets ``most`` (default: :data:`MAX_LOG_STEPS`, a
    calibration's time); ``cut``: the ``--steps`` that kept the steps. Before, ``--steps 199900:``
    of a long log was refused as ``run.steps (199,975): the run draws a task pool ...``, a key the
    user never set, and a log numbered up to 4,100 simulated 4,100 steps without a word."""
    need = (last + 1) * per_row
    said = f"--steps {cut} keeps steps up to" if cut else "the log's steps run to"
    said += f" {last + first_step:,}"
    if first_step:
        said += f", the run's step {last:,} (--first-step {first_step})"
    run = f"steps 0 to {last:,}"
    if per_row > 1:
        run = f"trainer steps 0 to {need - 1:,} (trainer_steps_per_row {per_row}: rows of {per_row})"
    why = why or f"a calibration simulates at most {most:,}"
    return LogError(
        f"{path}: {said}, and a log's step s is the run's step s: every simulation would run the run's "
        f"{run}, {need:,} steps, where {why}. Fit steps below {most // per_row + first_step:,} "
        "(--steps A:B), or write the rows to fit to a file of their own, numbered as the run's steps "
        "they stand for (docs/calibrate.md, 'The log')",
        field,
    )


def check_calibrate_args(log: Any, rs: Any, seed: Any = 0, min_steps: int = MIN_STEPS) -> None:
    """LogError naming ``log``, ``rs`` or ``seed`` where it is not a :class:`TrainingLog` of at
    least ``min_steps`` steps, a run spec, an integer in [0, 2**32). For a calibration
    (``min_steps`` the default), a LogError naming ``steps`` where the log's last step takes the
    simulations past the steps a run of the spec's design may draw (its task pool,
    :func:`pipesim.plan.pools.max_steps`): before, the run refused it as ``run.steps``."""
    from pipesim.calibrate.log import TrainingLog
    from pipesim.plan.runspec import RunSpec

    if not isinstance(log, TrainingLog):
        raise LogError(f"log must be a TrainingLog (read_log reads one), got {shown(log)}", "log")
    if not isinstance(rs, RunSpec):
        raise LogError(f"rs must be a RunSpec (pipesim.plan.runspec.load reads one), got {shown(rs)}", "rs")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise LogError(f"seed must be an integer in [0, 2**32), got {shown(seed)}", "seed")
    if len(log) < min_steps:
        need = STEPS_NEEDED if min_steps == MIN_STEPS else f"at least {min_steps} needed"
        raise LogError(f"{log.path}: {len(log)} step{'' if len(log) == 1 else 's'}; {need}", "steps")
    if min_steps == MIN_STEPS:
        _check_pool(log, rs)


def _check_pool(log: TrainingLog, rs: Any) -> None:
    """LogError naming ``steps`` where a calibration's simulations, the run from its step 0 through
    the log's last trainer step (at least 4, as :func:`pipesim.calibrate.fitspec.fit_spec` runs),
    draw a task pool past what a run of ``rs``'s design may (:func:`reach_error`)."""
    from pipesim.plan.build import design_cluster
    from pipesim.plan.pools import max_steps

    last = int(log.steps.max())
    need = max((last + 1) * log.per_row, 4)
    _, cluster = design_cluster(rs.plan, rs.design, rs.engine)
    top = max_steps(rs.plan, rs.design, cluster.n_slots)
    if need > top:
        why = f"a run of this spec's design runs at most {top:,} (its task pool)"
        raise reach_error(log.path, last, log.per_row, top, why)


def check_spec(rs: Any) -> None:
    """LogError naming ``rs`` unless it is a run spec."""
    from pipesim.plan.runspec import RunSpec

    check_kind("rs", rs, RunSpec, "a RunSpec (pipesim.plan.runspec.load reads one)")


def check_steps(steps: object, n: int | None) -> np.ndarray:
    """``steps`` as ``n`` step numbers (integers from 0 to ``MAX_STEP``; ``n`` None: one, not in a
    sequence), or a LogError naming ``steps``: the rows of the spec's dealing they take (a negative
    step took a row counted from the dealing's end)."""
    from pipesim.calibrate.cells import MAX_STEP

    seq = np.ndarray | pd.Series | list | tuple | range
    one = n is None and isinstance(steps, int | np.integer) and not isinstance(steps, bool)
    arr = np.asarray([steps] if one else steps) if one or (n is not None and isinstance(steps, seq)) else None
    x = arr.astype(float) if arr is not None and arr.dtype.kind in "iuf" else None
    if x is None or x.shape != (n or 1,) or not ((x == np.round(x)) & (x >= 0) & (x <= MAX_STEP)).all():
        what = "a step number" if n is None else f"{n} step numbers (one per step)"
        said = f"integers from 0 to {MAX_STEP:.0e}"
        raise LogError(f"steps must be {what}, {said}, got {shown(steps)}", "steps")
    return x.astype(np.int64)


def check_kind(name: str, value: object, kind: type | tuple[type, ...], what: str) -> None:
    """LogError naming ``name`` unless ``value`` is a ``kind`` (``what`` says which)."""
    if not isinstance(value, kind):
        raise LogError(f"{name} must be {what}, got {shown(value)}", name)


def check_series(name: str, values: object, n: int | None = None, positive: bool = False) -> np.ndarray:
    """``values`` as a 1-D float array (``n`` long, where given) of finite numbers ``>= 0`` (``> 0``
    where ``positive``), or a LogError naming ``name``: a per-step series a fit takes directly."""
    kinds = "iuf"
    arr = np.asarray(values) if isinstance(values, np.ndarray | pd.Series | list | tuple) else None
    if arr is None or arr.ndim != 1 or arr.dtype.kind not in kinds or not 1 <= len(arr) <= MAX_LOG_STEPS:
        got = f"{arr.dtype} of shape {arr.shape}" if arr is not None else shown(values)
        raise LogError(
            f"{name} must be a 1-D array of numbers, one per step (1 to {MAX_LOG_STEPS:,}), got {got}", name
        )
    if n is not None and len(arr) != n:
        raise LogError(f"{name} must hold {n} numbers (one per step of the log), got {len(arr)}", name)
    x = arr.astype(float)
    bad = ~np.isfinite(x) | (x <= 0 if positive else x < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        need = "> 0" if positive else ">= 0"
        raise LogError(f"{name}[{i}] must be a finite number {need}, got {x[i]}", name)
    return x


def check_batches(batches: object) -> list[tuple[int, ...]]:
    """``batches`` (what :func:`dealt` returns: per step, each sample's tokens) as that, or a
    LogError naming ``batches``: a list of non-empty tuples of integers >= 1, at most
    MAX_LOG_STEPS of them."""

    def tokens_ok(row: object) -> bool:
        return (
            isinstance(row, tuple | list)
            and 0 < len(row) <= 10**7
            and all(isinstance(v, int | np.integer) and not isinstance(v, bool) and v >= 1 for v in row)
        )

    rows = batches if isinstance(batches, list | tuple) else None
    if rows is None or not 1 <= len(rows) <= MAX_LOG_STEPS:
        raise LogError(
            f"batches must be a list of steps (1 to {MAX_LOG_STEPS:,}), each a tuple of every "
            f"sample's tokens, as dealt() returns; got {shown(batches)}",
            "batches",
        )
    for i, row in enumerate(rows):
        if not tokens_ok(row):
            raise LogError(
                f"batches[{i}] must be a non-empty tuple of each sample's tokens (integers >= 1), "
                f"got {shown(row)}",
                "batches",
            )
    return [tuple(int(v) for v in row) for row in rows]


def check_fitted(values: object) -> None:
    """LogError naming ``values`` (or its key) unless it is a dict of names to Fitted values."""
    from pipesim.calibrate.fit import Fitted

    check_kind("values", values, dict, "a dict of Fitted values (Calibration.values)")
    assert isinstance(values, dict)
    for k, v in values.items():
        check_kind(f"values[{k!r}]", v, Fitted, "a Fitted value")


def check_calibration(cal: Any) -> None:
    """LogError naming the field of a :class:`~pipesim.calibrate.Calibration` built in Python that
    :meth:`~pipesim.calibrate.Calibration.table` cannot write as a run spec's ``[calibration]``: its
    ``values`` a dict of calibrated keys (:data:`~pipesim.plan.runspec_calibration.CALIBRATED`) to
    Fitted values in their range, ``not_identified`` strings, ``residuals`` a dict of names to dicts
    of finite numbers, ``log`` a TrainingLog, ``held_out`` step numbers, ``seed`` in [0, 2**32)."""
    from pipesim.calibrate.log import TrainingLog
    from pipesim.plan.runspec_calibration import CALIBRATED, value_range

    check_fitted(cal.values)
    for k, v in cal.values.items():
        if k not in CALIBRATED:
            raise LogError(
                f"values[{k!r}]: not a calibrated value ({', '.join(CALIBRATED)})", f"values[{k!r}]"
            )
        lo, hi, open_below = value_range(k)
        if not (lo < v.value if open_below else lo <= v.value) or not v.value <= hi:
            bounds = f"{'(' if open_below else '['}{lo:g}, {hi:g}]"
            raise LogError(f"values[{k!r}] must lie in {bounds}, got {v.value:g}", f"values[{k!r}]")
    notes = cal.not_identified
    if not isinstance(notes, list | tuple) or not all(isinstance(n, str) for n in notes):
        raise LogError(f"not_identified must be a list of strings, got {shown(notes)}", "not_identified")
    res = cal.residuals
    ok = isinstance(res, dict) and all(
        isinstance(k, str)
        and isinstance(r, dict)
        and all(
            isinstance(m, str) and isinstance(x, int | float) and not isinstance(x, bool) and np.isfinite(x)
            for m, x in r.items()
        )
        for k, r in res.items()
    )
    if not ok:
        raise LogError(
            f"residuals must be a dict of names to dicts of finite numbers, got {shown(res)}", "residuals"
        )
    check_kind("log", cal.log, TrainingLog, "a TrainingLog (read_log reads one)")
    held = cal.held_out
    if not isinstance(held, list | tuple) or not all(
        isinstance(s, int | np.integer) and not isinstance(s, bool) for s in held
    ):
        raise LogError(f"held_out must be a list of step numbers (integers), got {shown(held)}", "held_out")
    seed = cal.seed
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise LogError(f"seed must be an integer in [0, 2**32), got {shown(seed)}", "seed")
