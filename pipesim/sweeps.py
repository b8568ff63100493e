"""Sweeps: a grid of scenarios x seeds on any :class:`concurrent.futures.Executor`.

Why an Executor: it is the smallest interface that a local process pool, a thread pool and a Dask
cluster (``distributed.Client(...).get_executor()``) all provide, so the same call scales from a
laptop to a cluster without a second code path. The default is a local process pool using the
``forkserver`` start method with :mod:`pipesim.api` preloaded: torch is imported once in the
server instead of once per worker, and no worker is forked from a parent whose OpenMP threads may
already be running (a classic fork hang).

Every cell is a pure function of its scenario (the duration pool is drawn from ``scenario.seed``),
so a sweep gives the same numbers on any executor and in any completion order: rows are sorted
by cell index at the end.

Failures do not lose results. An exception inside a run is caught in the worker and returned as a
failed row with its error. A worker process that dies breaks a process pool and fails every
unfinished future; if the pool is ours, those cells are rerun one at a time on fresh pools, so
only the cells that really kill their worker are reported failed.
"""

from __future__ import annotations

import itertools
import math
import multiprocessing
import os
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pandas as pd

from pipesim.config import Scenario
from pipesim.registry import label

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


def run_summary(scenario: Scenario) -> dict[str, float]:
    """The default cell function: ``run(scenario).summary()`` plus ``length_bias``.

    ``length_bias`` is trained mean duration / launched mean duration - 1: negative when the
    trainer sees shorter episodes than were started (the chapter's oldest-finished-first bias).
    """
    from pipesim.api import run

    s = dict(run(scenario).summary())
    launched = s.get("launched_duration_mean", 0.0)
    s["length_bias"] = s["trained_duration_mean"] / launched - 1 if launched else 0.0
    return s


def _cell(index: int, scenario: Scenario, fn: MetricsFn) -> dict[str, Any]:
    """Top-level (picklable) worker: run one cell, turning an exception into a failed row."""
    try:
        out: dict[str, Any] = dict(fn(scenario))
        out.update(_index=index, status="ok", error="")
    except Exception as exc:  # a bad cell must not take the sweep down
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" at {tb[-1].filename}:{tb[-1].lineno}" if tb else ""
        out = {"_index": index, "status": "failed", "error": f"{type(exc).__name__}: {exc}{where}"}
    return out


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
    """Mean and 95% interval over seeds of each metric, one row per combination of ``keys``."""
    ok = runs[runs["status"] == "ok"]
    rows = []
    groups = ok.groupby(list(keys), sort=False, dropna=False) if keys else [((), ok)]
    for key, g in groups:
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
    return pd.DataFrame(rows)


def grid(
    scenarios: Scenario | Mapping[str, Scenario],
    over: Mapping[str, Sequence[Any]] | None = None,
    seeds: int | Sequence[int] = 1,
) -> list[Cell]:
    """The cells of a sweep: designs x product of ``over`` values x seeds.

    ``seeds`` as an int ``n`` means ``base.seed + i`` for ``i < n``. Values in ``over`` may be typed
    values or policy objects; the label columns hold readable labels (see ``registry.label``).
    A bad key fails here, before anything is submitted.
    """
    designs = {scenarios.name: scenarios} if isinstance(scenarios, Scenario) else dict(scenarios)
    if not designs:
        raise ValueError("scenarios must hold at least one Scenario")
    over = dict(over or {})
    for k, vs in over.items():
        if isinstance(vs, str | bytes) or not isinstance(vs, Sequence) or len(vs) == 0:
            raise ValueError(f"over[{k!r}] must be a non-empty list of values, got {vs!r}")
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {seeds}")
    elif not (isinstance(seeds, Sequence) and seeds and all(isinstance(s, int) for s in seeds)):
        raise ValueError(f"seeds must be a count >= 1 or a non-empty list of integers, got {seeds!r}")
    cells: list[Cell] = []
    for design, base in designs.items():
        seed_list = list(range(base.seed, base.seed + seeds)) if isinstance(seeds, int) else list(seeds)
        for combo in itertools.product(*over.values()):
            changes = dict(zip(over, combo))
            for seed in seed_list:
                scen = base.with_(**changes, seed=seed)
                labels = {"design": design, **{k: label(v) for k, v in changes.items()}, "seed": seed}
                cells.append(Cell(len(cells), labels, scen))
    return cells


def default_executor(workers: int | None = None) -> ProcessPoolExecutor:
    """A local process pool (forkserver, ``pipesim.api`` preloaded); ``workers`` defaults to the CPUs."""
    n = workers or os.cpu_count() or 1
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["pipesim.api"])
    return ProcessPoolExecutor(max_workers=n, mp_context=ctx)


def _progress(total: int, enabled: bool | None) -> Any:
    import sys

    from tqdm.auto import tqdm

    if enabled is None:
        enabled = total >= 20 and sys.stderr.isatty()
    return tqdm(total=total, desc="sweep", unit="run", disable=not enabled)


def _drain(
    futures: dict[Future[dict[str, Any]], Cell], bar: Any
) -> Iterator[tuple[Cell, dict[str, Any] | BaseException]]:
    for fut in as_completed(futures):
        bar.update(1)
        exc = fut.exception()
        yield futures[fut], (exc if exc is not None else fut.result())


def sweep(
    scenarios: Scenario | Mapping[str, Scenario],
    over: Mapping[str, Sequence[Any]] | None = None,
    seeds: int | Sequence[int] = 1,
    *,
    executor: Executor | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    fn: MetricsFn = run_summary,
) -> SweepResult:
    """Run every cell of ``grid(scenarios, over, seeds)`` on ``executor`` and collect a tidy table.

    ``executor``: any ``concurrent.futures.Executor``, e.g. ``Client(...).get_executor()`` for
    Dask. When None, a local process pool of ``workers`` processes is created and shut down here.
    ``fn`` maps a scenario to a flat dict of metrics and must be a picklable top-level function.
    ``progress`` shows a tqdm bar (None: only for >= 20 cells on a terminal).
    """
    cells = grid(scenarios, over, seeds)
    own = executor is None
    ex: Executor = default_executor(workers) if executor is None else executor
    results: dict[int, dict[str, Any]] = {}
    suspects: list[Cell] = []
    bar = _progress(len(cells), progress)
    try:
        futures = {ex.submit(_cell, c.index, c.scenario, fn): c for c in cells}
        for cell, res in _drain(futures, bar):
            if isinstance(res, BrokenProcessPool) and own:
                suspects.append(cell)
            elif isinstance(res, BaseException):
                results[cell.index] = {"status": "failed", "error": f"{type(res).__name__}: {res}"}
            else:
                results[cell.index] = res
    finally:
        ex.shutdown(wait=True, cancel_futures=True) if own else None
    # a dead worker broke our pool: rerun the unfinished cells one by one so only the culprits fail
    for cell in sorted(suspects, key=lambda c: c.index):
        with default_executor(1) as solo:
            try:
                results[cell.index] = solo.submit(_cell, cell.index, cell.scenario, fn).result()
            except BrokenProcessPool as exc:
                results[cell.index] = {"status": "failed", "error": f"worker process died ({exc})"}
    bar.close()
    return _collect(cells, results)


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
