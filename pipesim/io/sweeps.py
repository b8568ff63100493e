"""Sweeps: a grid of scenarios x seeds on any :class:`concurrent.futures.Executor`.

Why an Executor: it is the smallest interface that a local process pool, a thread pool and a Dask
cluster (``distributed.Client(...).get_executor()``) all provide, so the same call scales from a
laptop to a cluster without a second code path. The default is a local process pool using the
``forkserver`` start method with :mod:`pipesim.io.api` (and torch, when installed, for the chapter's
draws) preloaded: heavy modules are imported once in the server instead of once per worker, and
no worker is forked from a parent whose OpenMP threads may already be running (a classic fork hang).

Every cell is a pure function of its scenario (the duration pool is drawn from ``scenario.seed``),
so a sweep gives the same numbers on any executor and in any completion order: rows are sorted
by cell index at the end. A cell is labelled by its values: numbers and strings as they are,
policy objects by their repr with arguments (``InFlightUpdate(load_time_s=0.5)``), so two cells
never share a row unless they are the same design; a value twice in one axis is an error.

Failures do not lose results. An exception inside a run is caught in the worker and returned as a
failed row with its error. A worker process that dies breaks a process pool and fails every
unfinished future; if the pool is ours, those cells are rerun one at a time on fresh pools, so
only the cells that really kill their worker are reported failed. ``timeout_s`` bounds each cell,
:data:`DEFAULT_CELL_TIMEOUT_S` (an hour) unless lifted with ``timeout_s=None``: in a worker process
an alarm stops the cell at the limit from its own start (the worker lives on); a worker that does
not stop is killed and the other unfinished cells are rerun. An executor that cannot stop a cell
(threads, Dask) is refused a limit up front, so there ``timeout_s=None`` must be said (see
:mod:`pipesim.io.sweep_exec` for why). A sweep in which every cell fails raises :class:`SweepError`
listing the failures.

Interrupts keep what was done: Ctrl-C (KeyboardInterrupt; ``pipesim sweep`` turns SIGTERM into
one) stops the sweep, kills our pool's workers, cancels the queued cells, and raises
:class:`SweepInterrupted`, a KeyboardInterrupt whose ``result`` holds the cells that finished.

A process pool re-imports the main script in each worker (``spawn`` and ``forkserver`` both do), so
a script that calls :func:`sweep` at top level would start a sweep in every worker. :func:`sweep`
checks this before starting a pool and says so in one line (:class:`SweepError`).

The parts: :mod:`pipesim.io.sweep_grid` plans the cells and builds the tables (:func:`grid`,
:class:`SweepResult`, the aggregate); :mod:`pipesim.io.sweep_exec` runs cells on an executor
(the default pool, timeouts, dead workers, the main-script guard). This module joins them in
:func:`sweep` and re-exports their public names, where callers have always found them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from typing import Any

from pipesim.config import Scenario
from pipesim.core.errors import check_int, shown
from pipesim.core.validate import FieldError, refuse
from pipesim.io.sweep_exec import (
    DEFAULT_CELL_TIMEOUT_S,
    MAX_CELL_TIMEOUT_S,
    SIGNED_SUMMARY,
    CellTimeout,
    MetricsFn,
    NoBar,
    default_executor,
    main_guard_problem,
    progress_bar,
    reimports_main,
    run_cells,
    run_summary,
    stop_pool,
    timeout_refusal,
)
from pipesim.io.sweep_grid import (
    Cell,
    SweepResult,
    aggregate,
    all_failed_message,
    cell_label,
    collect,
    grid,
    t975,
)

__all__ = [
    "DEFAULT_CELL_TIMEOUT_S",
    "Cell",
    "CellTimeout",
    "MetricsFn",
    "SweepError",
    "SweepInterrupted",
    "SweepResult",
    "aggregate",
    "cell_label",
    "default_executor",
    "grid",
    "run_summary",
    "sweep",
    "t975",
]


class SweepError(RuntimeError):
    """A sweep that cannot give a table: every cell failed, or it was started unguarded from a script.

    ``result`` holds the :class:`SweepResult` when there is one (every cell failed).
    """

    def __init__(self, message: str, result: SweepResult | None = None) -> None:
        super().__init__(message)
        self.result = result


class SweepInterrupted(KeyboardInterrupt):
    """A sweep stopped by an interrupt (Ctrl-C): ``result`` holds the cells that finished before it
    (None when none had), ``total`` the number of cells the sweep had. A KeyboardInterrupt, so that
    a caller that does not look for it still stops as before."""

    def __init__(self, result: SweepResult | None, total: int) -> None:
        done = 0 if result is None else len(result.runs)
        super().__init__(f"the sweep was interrupted after {done} of {total} cells finished")
        self.result = result
        self.total = total


def sweep(
    scenarios: Scenario | Mapping[str, Scenario],
    over: Mapping[str, Sequence[Any]] | None = None,
    seeds: int | Sequence[int] = 1,
    *,
    executor: Executor | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    fn: MetricsFn = run_summary,
    timeout_s: float | None = DEFAULT_CELL_TIMEOUT_S,
    label: str = "sweep",
    done: Mapping[int, Mapping[str, Any]] | None = None,
) -> SweepResult:
    """Run every cell of ``grid(scenarios, over, seeds)`` on ``executor`` and collect a tidy table.

    ``executor``: any ``concurrent.futures.Executor``, e.g. ``Client(...).get_executor()`` for
    Dask. When None, a local process pool of ``workers`` processes is created and shut down here.
    ``fn`` maps a scenario to a flat dict of metrics and must be a picklable top-level function.
    ``progress`` shows a tqdm bar (None: only for >= 20 cells on a terminal), headed ``label``
    (say what the sweep is for where a script runs several).
    ``timeout_s`` bounds each cell's seconds, counted from the cell's own start; a cell past it is a
    failed row ("timed out") and the others still run. The default is
    :data:`DEFAULT_CELL_TIMEOUT_S`; None means no limit. Only a process pool can enforce a limit (an
    alarm stops the cell inside its worker, and a worker that ignores it is killed); on any other
    executor (threads, Dask) a limit, the default included, is a ValueError naming the executor,
    so there pass ``timeout_s=None``.

    ``done``: the result rows of cells that already ran (a resumed sweep: ``pipesim sweep
    --resume`` reads them back from an interrupted sweep's table), by cell index in the grid (the
    :class:`Cell` ``index``); they are not run again, and are collected as if they had been.

    Raises :class:`SweepError` when every cell fails (the message lists them) and when a process
    pool would re-import an unguarded main script that starts this sweep, and
    :class:`SweepInterrupted` (a KeyboardInterrupt) holding the finished cells when interrupted.
    """
    if timeout_s is not None and not (
        isinstance(timeout_s, int | float)
        and not isinstance(timeout_s, bool)
        and 0 < timeout_s <= MAX_CELL_TIMEOUT_S
    ):
        raise refuse(
            "timeout_s",
            f"must be seconds in (0, {MAX_CELL_TIMEOUT_S:,.0f}] or None (no limit), got {shown(timeout_s)}",
        )
    if executor is not None and not isinstance(executor, Executor):
        raise refuse("executor", f"must be a concurrent.futures.Executor or None, got {shown(executor)}")
    if executor is not None and (refusal := timeout_refusal(executor, timeout_s)) is not None:
        raise FieldError(refusal, "timeout_s")
    if workers is not None:
        from pipesim.io.cli_options import max_workers

        check_int("workers", workers, 1, max_workers(), "CPU-bound runs: 4 processes per CPU at most")
    cells = grid(scenarios, over, seeds)
    own = executor is None
    if own or (executor is not None and reimports_main(executor)):
        problem = main_guard_problem()
        if problem is not None:
            raise SweepError(problem)
    results = _done_rows(done, len(cells))
    todo = [c for c in cells if c.index not in results]
    signed = SIGNED_SUMMARY if fn is run_summary else None
    if not isinstance(label, str):
        raise refuse("label", f"must be a string, got {shown(label)}")
    bar = progress_bar(len(todo), progress, label)
    try:
        suspects: list[Cell] = []
        if todo:
            ex: Executor = default_executor(workers) if executor is None else executor
            suspects = _run_on(ex, own, todo, fn, timeout_s, results, bar)
        # a dead worker broke the pool: rerun the unfinished cells one by one so only the culprits fail
        for cell in sorted(suspects, key=lambda c: c.index):
            if _run_on(default_executor(1), True, [cell], fn, timeout_s, results, NoBar()):
                results[cell.index] = {
                    "status": "failed",
                    "error": "worker process died (it exited or was killed)",
                }
    except KeyboardInterrupt:
        finished = [c for c in cells if c.index in results]
        raise SweepInterrupted(collect(finished, results, signed) if finished else None, len(cells)) from None
    finally:
        bar.close()
    res = collect(cells, results, signed)
    if not (res.runs["status"] == "ok").any():
        raise SweepError(all_failed_message(res), res)
    return res


def _done_rows(done: Mapping[int, Mapping[str, Any]] | None, n: int) -> dict[int, dict[str, Any]]:
    """``done`` checked: cell indexes of the grid, each a row with its ``status`` and ``error``."""
    rows: dict[int, dict[str, Any]] = {}
    if done is None:
        return rows
    if not isinstance(done, Mapping):
        raise refuse("done", f"must be a mapping of cell index to result row, got {shown(done)}")
    for i, row in done.items():
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n:
            raise FieldError(f"done: {shown(i)} is no cell index of this grid (0..{n - 1})", "done")
        if not isinstance(row, Mapping) or "status" not in row or "error" not in row:
            msg = f"done[{i}] must be a result row with status and error, got {shown(row)}"
            raise FieldError(msg, "done")
        rows[i] = dict(row)
    return rows


def _run_on(
    ex: Executor,
    own: bool,
    cells: list[Cell],
    fn: MetricsFn,
    timeout_s: float | None,
    results: dict[int, dict[str, Any]],
    bar: Any,
) -> list[Cell]:
    """:func:`run_cells` on ``ex``, shutting down a pool of ours after; when the run is cut short
    (an interrupt) its workers are killed first, since shutting down would wait for their cells,
    and the pool is given a bounded time to end (:func:`~pipesim.io.pools.stop_pool`)."""
    try:
        lost = run_cells(ex, cells, fn, timeout_s, results, bar)
    except BaseException:
        if own:
            stop_pool(ex)
        raise
    if own:
        ex.shutdown(wait=True, cancel_futures=True)
    return lost
