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
only the cells that really kill their worker are reported failed. ``timeout_s`` bounds each cell:
in a worker process an alarm stops the cell (the worker lives on); a worker that does not stop is
killed and the other unfinished cells are rerun. A sweep in which every cell fails raises
:class:`SweepError` listing the failures.

A process pool re-imports the main script in each worker (``spawn`` and ``forkserver`` both do), so
a script that calls :func:`sweep` at top level would start a sweep in every worker. :func:`sweep`
checks this before starting a pool and says so in one line (:class:`SweepError`).
"""

from __future__ import annotations

import ast
import itertools
import math
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import FrameType
from typing import Any

import pandas as pd

from pipesim.config import Scenario

MetricsFn = Callable[[Scenario], Mapping[str, float]]

# two-sided 95% Student t quantiles by degrees of freedom (1..30); 1.96 beyond
_T975 = [
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
]

# how long a cell in a process pool may look "running" before its worker is killed: a future
# counts as running once it is in the pool's call queue (workers + 1 deep), so it may wait behind
# two rounds of cells (each stopped by the alarm at timeout_s) before it really starts
_KILL_ROUNDS = 3
_KILL_GRACE_S = 2.0
_POLL_S = 0.05


class SweepError(RuntimeError):
    """A sweep that cannot give a table: every cell failed, or it was started unguarded from a script.

    ``result`` holds the :class:`SweepResult` when there is one (every cell failed).
    """

    def __init__(self, message: str, result: SweepResult | None = None) -> None:
        super().__init__(message)
        self.result = result


class CellTimeout(BaseException):
    """Raised inside a worker when its cell passes ``timeout_s`` (a BaseException, so that a
    metrics function's ``except Exception`` cannot swallow it)."""


def run_summary(scenario: Scenario) -> dict[str, float]:
    """The default cell function: ``run(scenario).summary()`` plus ``length_bias_excess``.

    ``length_bias`` is the summary's, trained mean duration / launched mean duration (below 1 when
    the trainer sees shorter episodes than were started: the chapter's oldest-finished-first bias);
    ``length_bias_excess`` is the same as a signed deviation, ``length_bias - 1``.
    """
    from pipesim.io.api import run

    s = dict(run(scenario).summary())
    s["length_bias_excess"] = s["length_bias"] - 1
    return s


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise CellTimeout


def _cell(index: int, scenario: Scenario, fn: MetricsFn, alarm_s: float | None = None) -> dict[str, Any]:
    """Top-level (picklable) worker: run one cell, turning an exception into a failed row.

    ``alarm_s``: stop the cell with SIGALRM after that many seconds (only in a worker process's
    main thread, where a signal can interrupt it; elsewhere the caller enforces the deadline).
    """
    alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    alarm = alarm and alarm_s is not None
    previous: Any = None
    try:
        if alarm and alarm_s is not None:
            previous = signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, alarm_s)
        try:
            out: dict[str, Any] = dict(fn(scenario))
        finally:
            if alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
        out.update(_index=index, status="ok", error="")
    except CellTimeout:
        out = {"_index": index, "status": "failed", "error": _timeout_error(alarm_s)}
    except Exception as exc:  # a bad cell must not take the sweep down
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" at {tb[-1].filename}:{tb[-1].lineno}" if tb else ""
        out = {"_index": index, "status": "failed", "error": f"{type(exc).__name__}: {exc}{where}"}
    return out


def _timeout_error(timeout_s: float | None, killed: bool = False) -> str:
    msg = f"timed out: the cell ran longer than timeout_s={timeout_s:g} s"
    return msg + (" and did not stop, so its worker was killed" if killed else "")


@dataclass(frozen=True)
class Cell:
    """One run of a sweep: its labels (design, grid values, seed) and the scenario to run."""

    index: int
    labels: dict[str, Any]
    scenario: Scenario


def t975(n: int) -> float:
    """The 97.5% quantile of Student's t with ``n - 1`` degrees of freedom (nan for n < 2)."""
    if n < 2:
        return float("nan")
    return _T975[n - 2] if n - 1 <= len(_T975) else 1.96


@dataclass(frozen=True)
class SweepResult:
    """``runs``: one row per cell (labels, status, error, metrics); ``keys``: the grid's label columns."""

    runs: pd.DataFrame
    keys: tuple[str, ...]
    metrics: tuple[str, ...] = field(default=())

    @property
    def failures(self) -> pd.DataFrame:
        """The failed cells with their error, for reporting."""
        return self.runs[self.runs["status"] != "ok"][[*self.keys, "seed", "error"]]

    @cached_property
    def aggregate(self) -> pd.DataFrame:
        """Per grid cell over seeds: ``<metric>_mean``, ``_lo``, ``_hi`` (95% t interval), ``n_seeds``."""
        return aggregate(self.runs, self.keys, self.metrics)


def aggregate(runs: pd.DataFrame, keys: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """Mean and 95% interval over seeds of each metric, one row per combination of ``keys``.

    With no successful cell the table is empty but keeps its columns.
    """
    ok = runs[runs["status"] == "ok"]
    columns = [*keys, "n_seeds", *(f"{m}_{s}" for m in metrics for s in ("mean", "lo", "hi"))]
    rows = []
    groups = ok.groupby(list(keys), sort=False, dropna=False) if keys else [((), ok)]
    for key, g in groups:
        if len(g) == 0:
            continue
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(keys, key))
        n = len(g)
        row["n_seeds"] = n
        for m in metrics:
            col = g[m].astype(float)
            mean = float(col.mean())
            half = t975(n) * float(col.std(ddof=1)) / math.sqrt(n) if n > 1 else 0.0
            row[f"{m}_mean"], row[f"{m}_lo"], row[f"{m}_hi"] = mean, mean - half, mean + half
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def cell_label(value: Any) -> Any:
    """A grid value's label: numbers, strings and None as they are, anything else by its repr.

    Policy objects are dataclasses, so their repr names the class and its arguments:
    ``InFlightUpdate(load_time_s=0.5)`` and ``InFlightUpdate(load_time_s=30.0)`` are two cells.
    """
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return repr(value)


def _check_unique(what: str, values: Sequence[Any], labels: Sequence[Any]) -> None:
    for i, lab in enumerate(labels):
        # equality, not identity: 1 and 1.0 would share a row of the table just the same
        for j in range(i):
            if labels[j] == lab:
                same = "" if values[j] is values[i] else f" ({values[j]!r} and {values[i]!r})"
                raise ValueError(
                    f"{what} holds {labels[j]!r} twice{same}: each value may appear once, since cells "
                    f"are labelled by value and a repeat would count the same runs twice"
                )


def grid(
    scenarios: Scenario | Mapping[str, Scenario],
    over: Mapping[str, Sequence[Any]] | None = None,
    seeds: int | Sequence[int] = 1,
) -> list[Cell]:
    """The cells of a sweep: designs x product of ``over`` values x seeds.

    ``seeds`` as an int ``n`` means ``base.seed + i`` for ``i < n``. Values in ``over`` may be typed
    values or policy objects; the label columns hold readable labels (see :func:`cell_label`).
    A bad key, or a value or seed given twice, fails here, before anything is submitted.
    """
    designs = {scenarios.name: scenarios} if isinstance(scenarios, Scenario) else dict(scenarios)
    if not designs:
        raise ValueError("scenarios must hold at least one Scenario")
    over = dict(over or {})
    for k, vs in over.items():
        if isinstance(vs, str | bytes) or not isinstance(vs, Sequence) or len(vs) == 0:
            raise ValueError(f"over[{k!r}] must be a non-empty list of values, got {vs!r}")
        _check_unique(f"over[{k!r}]", vs, [cell_label(v) for v in vs])
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {seeds}")
    elif not (isinstance(seeds, Sequence) and seeds and all(isinstance(s, int) for s in seeds)):
        raise ValueError(f"seeds must be a count >= 1 or a non-empty list of integers, got {seeds!r}")
    else:
        _check_unique("seeds", seeds, seeds)
    cells: list[Cell] = []
    for design, base in designs.items():
        seed_list = list(range(base.seed, base.seed + seeds)) if isinstance(seeds, int) else list(seeds)
        for combo in itertools.product(*over.values()):
            changes = dict(zip(over, combo))
            for seed in seed_list:
                scen = base.with_(**changes, seed=seed)
                labels = {"design": design, **{k: cell_label(v) for k, v in changes.items()}, "seed": seed}
                cells.append(Cell(len(cells), labels, scen))
    return cells


def default_executor(workers: int | None = None) -> ProcessPoolExecutor:
    """A local process pool (forkserver, ``pipesim.io.api`` preloaded); ``workers`` defaults to the CPUs."""
    n = workers or os.cpu_count() or 1
    ctx = multiprocessing.get_context("forkserver")
    # torch only serves the chapter's draws (AgentDurations); a missing torch is skipped here
    ctx.set_forkserver_preload(["pipesim.io.api", "torch"])
    return ProcessPoolExecutor(max_workers=n, mp_context=ctx)


# -- the main-module guard ---------------------------------------------------------------------------


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either side of the ``==``)."""
    if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)):
        return False
    t = node.test
    if len(t.ops) != 1 or not isinstance(t.ops[0], ast.Eq):
        return False
    sides = [t.left, t.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(consts) == 1


def _guarded(body: Sequence[ast.stmt], line: int) -> bool | None:
    """Whether ``line`` of a module lies inside an ``if __name__ == "__main__":`` block (None: not found)."""
    for node in body:
        if not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        if _is_main_guard(node):
            assert isinstance(node, ast.If)
            inside = any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in node.body)
            return True if inside else _guarded(node.orelse, line)
        for attr in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, attr, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt | ast.excepthandler):
                found = _guarded([s for s in inner if isinstance(s, ast.stmt)], line)
                if found:
                    return True
        return False
    return None


_GUARD_ADVICE = (
    'put the code that runs the sweep under `if __name__ == "__main__":` (a process pool re-imports '
    "the main script in every worker), or pass executor=ThreadPoolExecutor(...)"
)


def _check_main_guard() -> None:
    """Raise :class:`SweepError` when a process pool's workers would re-run this very sweep.

    That is the case when the sweep is started from a main script's top level outside
    ``if __name__ == "__main__":``, or from inside a worker that is re-importing the main script.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise SweepError(
            f"pipesim.sweep was called while a worker process imported the main script: {_GUARD_ADVICE}"
        )
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path:
        return  # interactive or -c: nothing is re-imported
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "<module>" and frame.f_globals is vars(main)):
        frame = frame.f_back
    if frame is None:
        return
    try:
        tree = ast.parse(Path(path).read_text(), str(path))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return
    if _guarded(tree.body, frame.f_lineno) is False:
        raise SweepError(
            f"pipesim.sweep was started at {path}:{frame.f_lineno} outside "
            f'`if __name__ == "__main__":`: {_GUARD_ADVICE}'
        )


def _reimports_main(ex: Executor) -> bool:
    if not isinstance(ex, ProcessPoolExecutor):
        return False
    ctx = getattr(ex, "_mp_context", None)
    method = ctx.get_start_method() if ctx is not None else multiprocessing.get_start_method()
    return method != "fork"


# -- running cells -----------------------------------------------------------------------------------


def _progress(total: int, enabled: bool | None) -> Any:
    from tqdm.auto import tqdm

    if enabled is None:
        enabled = total >= 20 and sys.stderr.isatty()
    return tqdm(total=total, desc="sweep", unit="run", disable=not enabled)


def _kill_workers(ex: Executor) -> None:
    """Kill a process pool's workers (Python 3.11 has no public call; 3.14 adds kill_workers)."""
    for proc in list(getattr(ex, "_processes", {}).values()):
        proc.kill()


def _run_cells(
    ex: Executor,
    cells: Sequence[Cell],
    fn: MetricsFn,
    timeout_s: float | None,
    own: bool,
    results: dict[int, dict[str, Any]],
    bar: Any,
) -> list[Cell]:
    """Submit ``cells`` to ``ex`` and fill ``results``; returns the cells lost to a broken pool of ours.

    With ``timeout_s``, a cell that looks running for longer than its deadline is reported failed;
    on our process pool its worker is then killed (so the pool breaks and the other unfinished
    cells come back as lost, to be rerun), elsewhere the future is abandoned.
    """
    procs = isinstance(ex, ProcessPoolExecutor)
    alarm_s = timeout_s if procs else None
    deadline_s = (
        None if timeout_s is None else (_KILL_ROUNDS * timeout_s + _KILL_GRACE_S if procs else timeout_s)
    )
    pending: dict[Future[dict[str, Any]], Cell] = {
        ex.submit(_cell, c.index, c.scenario, fn, alarm_s): c for c in cells
    }
    started: dict[Future[dict[str, Any]], float] = {}
    lost: list[Cell] = []
    while pending:
        done, _ = wait(pending, timeout=None if deadline_s is None else _POLL_S, return_when=FIRST_COMPLETED)
        for fut in done:
            cell = pending.pop(fut)
            bar.update(1)
            exc = fut.exception()
            if isinstance(exc, BrokenProcessPool) and own:
                lost.append(cell)
            elif exc is not None:
                results[cell.index] = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
            else:
                results[cell.index] = fut.result()
        if deadline_s is None:
            continue
        now = time.monotonic()
        for fut, cell in list(pending.items()):
            if fut.running():
                started.setdefault(fut, now)
            if fut in started and now - started[fut] > deadline_s:
                del pending[fut]
                bar.update(1)
                results[cell.index] = {
                    "status": "failed",
                    "error": _timeout_error(timeout_s, killed=own and procs),
                }
                if own and procs:
                    _kill_workers(ex)
                else:
                    fut.cancel()  # a thread cannot be stopped: its worker stays busy until it returns
    return lost


def sweep(
    scenarios: Scenario | Mapping[str, Scenario],
    over: Mapping[str, Sequence[Any]] | None = None,
    seeds: int | Sequence[int] = 1,
    *,
    executor: Executor | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    fn: MetricsFn = run_summary,
    timeout_s: float | None = None,
) -> SweepResult:
    """Run every cell of ``grid(scenarios, over, seeds)`` on ``executor`` and collect a tidy table.

    ``executor``: any ``concurrent.futures.Executor``, e.g. ``Client(...).get_executor()`` for
    Dask. When None, a local process pool of ``workers`` processes is created and shut down here.
    ``fn`` maps a scenario to a flat dict of metrics and must be a picklable top-level function.
    ``progress`` shows a tqdm bar (None: only for >= 20 cells on a terminal).
    ``timeout_s`` bounds each cell's seconds: a cell past it is a failed row ("timed out") and the
    others still run. On a process pool an alarm stops the cell inside its worker, and a worker
    that ignores it is killed; on threads or Dask the late cell is abandoned (its thread cannot be
    stopped and stays busy until the cell returns), and the deadline counts from when the
    executor reports the cell running.

    Raises :class:`SweepError` when every cell fails (the message lists them) and when a process
    pool would re-import an unguarded main script that starts this sweep.
    """
    if timeout_s is not None and not (
        isinstance(timeout_s, int | float)
        and not isinstance(timeout_s, bool)
        and math.isfinite(timeout_s)
        and timeout_s > 0
    ):
        raise ValueError(f"timeout_s must be a finite number of seconds > 0, got {timeout_s!r}")
    cells = grid(scenarios, over, seeds)
    own = executor is None
    if own or (executor is not None and _reimports_main(executor)):
        _check_main_guard()
    ex: Executor = default_executor(workers) if executor is None else executor
    results: dict[int, dict[str, Any]] = {}
    bar = _progress(len(cells), progress)
    try:
        suspects = _run_cells(ex, cells, fn, timeout_s, own, results, bar)
    finally:
        ex.shutdown(wait=True, cancel_futures=True) if own else None
    # a dead worker broke our pool: rerun the unfinished cells one by one so only the culprits fail
    for cell in sorted(suspects, key=lambda c: c.index):
        with default_executor(1) as solo:
            if _run_cells(solo, [cell], fn, timeout_s, True, results, _NoBar()):
                results[cell.index] = {
                    "status": "failed",
                    "error": "worker process died (it exited or was killed)",
                }
    bar.close()
    res = _collect(cells, results)
    if not (res.runs["status"] == "ok").any():
        raise SweepError(_all_failed(res), res)
    return res


class _NoBar:
    def update(self, n: int) -> None:
        pass


def _all_failed(res: SweepResult, limit: int = 20) -> str:
    f = res.failures
    lines = [f"every cell of the sweep failed ({len(f)} of {len(res.runs)}):"]
    for _, row in f.head(limit).iterrows():
        where = ", ".join(f"{k}={row[k]!r}" for k in (*res.keys, "seed"))
        lines.append(f"  {where}: {row['error']}")
    if len(f) > limit:
        lines.append(f"  ... and {len(f) - limit} more (SweepError.result.failures)")
    return "\n".join(lines)


def _collect(cells: list[Cell], results: Mapping[int, Mapping[str, Any]]) -> SweepResult:
    rows = []
    metrics: list[str] = []
    for c in cells:
        res = dict(results.get(c.index, {"status": "failed", "error": "no result"}))
        res.pop("_index", None)
        for k, v in res.items():
            if k not in ("status", "error") and k not in metrics and isinstance(v, int | float):
                metrics.append(k)
        rows.append({**c.labels, "status": res.pop("status"), "error": res.pop("error"), **res})
    keys = tuple(k for k in cells[0].labels if k != "seed")
    runs = pd.DataFrame(rows)
    return SweepResult(runs=runs, keys=keys, metrics=tuple(metrics))
