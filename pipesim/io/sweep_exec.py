"""Running sweep cells on any :class:`concurrent.futures.Executor`, surviving failures.

Why an Executor: it is the smallest interface that a local process pool, a thread pool and a Dask
cluster (``distributed.Client(...).get_executor()``) all provide, so the same call scales from a
laptop to a cluster without a second code path. The default is a local process pool using the
``forkserver`` start method with :mod:`pipesim.io.api` (and torch, when installed, for the chapter's
draws) preloaded: heavy modules are imported once in the server instead of once per worker, and
no worker is forked from a parent whose OpenMP threads may already be running (a classic fork hang).

Failures do not lose results. An exception inside a run is caught in the worker (:func:`run_cell`)
and returned as a failed row with its error. A worker process that dies breaks a process pool and
fails every unfinished future: :func:`run_cells` returns those cells as lost, so that the caller can
rerun them one at a time on fresh pools and report only the cells that really kill their worker.
``timeout_s`` bounds each cell, :data:`DEFAULT_CELL_TIMEOUT_S` unless the caller lifts it with
``timeout_s=None``. Only a process pool can enforce it: in a worker process an alarm stops the cell
at ``timeout_s`` from the cell's own start (the worker lives on), and a worker that does not stop
is killed; the other unfinished cells then come back as lost, to be rerun, never as timed out.
Any other executor cannot stop a running cell (a thread cannot be killed; Dask abandons a late
cell and its worker stays busy), so a hung cell would hang the sweep, and the threads left behind
keep the interpreter from exiting: :func:`timeout_refusal` refuses a limit there up front. Running
such cells in a child process of their own was the alternative; it was not taken because Dask's
worker processes are daemons, which may not start children, and because a thread pool is chosen
to avoid exactly that per-cell process and its pickling.

A process pool re-imports the main script in each worker (``spawn`` and ``forkserver`` both do), so
a script that starts a sweep at top level would start a sweep in every worker;
:func:`~pipesim.io.main_guard.main_guard_problem` finds that case before a pool starts (its own
module: it reads the caller's stack and source, and runs nothing).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from types import FrameType
from typing import TYPE_CHECKING, Any

from pipesim.config import Scenario
from pipesim.core.errors import PipelineError
from pipesim.core.validate import FieldError
from pipesim.io.interrupts import ignore_sigint, signals_to, stopping
from pipesim.io.main_guard import main_guard_problem as main_guard_problem  # re-exported
from pipesim.io.main_guard import reimports_main as reimports_main  # re-exported
from pipesim.io.pools import POLL_S as _POLL_S
from pipesim.io.pools import Finished, kill_workers, polled_interrupts
from pipesim.io.pools import stop_pool as stop_pool  # re-exported: sweeps

if TYPE_CHECKING:
    from pipesim.io.sweep_grid import Cell

MetricsFn = Callable[[Scenario], Mapping[str, float]]

DEFAULT_CELL_TIMEOUT_S = 3600.0
"""The per-cell limit of a sweep that names none (seconds): generous, since a real cell runs for
seconds to minutes, but finite, so that a hung cell cannot hold a sweep forever. ``timeout_s=None``
lifts it (no limit), which an executor that cannot stop a cell requires (:func:`timeout_refusal`)."""

MAX_CELL_TIMEOUT_S = 30 * 86400.0
"""The largest per-cell limit (30 days): past it the deadline's clock arithmetic overflows on some
platforms (``time_t``), and a cell that long is no limit at all: say ``timeout_s=None``."""

# how long a cell in a process pool may look "running" before its worker is killed: a future
# counts as running once it is in the pool's call queue (workers + 1 deep), so it may wait behind
# two rounds of cells (each stopped by the alarm at timeout_s) before it really starts
_KILL_ROUNDS = 3
_KILL_GRACE_S = 2.0


class CellTimeout(BaseException):
    """Raised inside a worker when its cell passes ``timeout_s`` (a BaseException, so that a
    metrics function's ``except Exception`` cannot swallow it)."""


SIGNED_SUMMARY = frozenset({"length_bias_excess"})
"""The metrics of :func:`run_summary` that may be negative; every other is a count, a time, a rate,
a share or a ratio of them (:attr:`~pipesim.io.sweep_grid.SweepResult.nonnegative`)."""


def run_summary(scenario: Scenario) -> dict[str, float]:
    """The default cell function: ``run(scenario).summary()`` plus ``length_bias_excess``.

    ``length_bias`` is the summary's, trained mean duration / launched mean duration (below 1 when
    the trainer sees shorter episodes than were started: the chapter's oldest-finished-first bias);
    ``length_bias_excess`` is the same as a signed deviation, ``length_bias - 1``.

    A cell whose set pool holds fewer tasks than it trains fails at once, naming ``pool_size``
    (:meth:`~pipesim.config.Scenario.check_pool_size`, which :func:`pipesim.run` asks before it
    draws the pool), where it ran until the pool was spent.
    """
    from pipesim.io.api import run

    return summary_metrics(run(scenario))


def summary_metrics(result: Any) -> dict[str, float]:
    """A run's default metrics (:func:`run_summary`'s): its summary and ``length_bias_excess``."""
    s = dict(result.summary())
    s["length_bias_excess"] = s["length_bias"] - 1
    return s


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise CellTimeout


def run_cell(index: int, scenario: Scenario, fn: MetricsFn, alarm_s: float | None = None) -> dict[str, Any]:
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
        # where a bug raised (a user's policy) helps; a refusal names its field, and pipesim's path
        # in it read as a crash ("FieldError: TraceDurations holds 1 durations ... at .../durations.py:367")
        refusal = isinstance(exc, FieldError | PipelineError)
        where = f" at {tb[-1].filename}:{tb[-1].lineno}" if tb and not refusal else ""
        error = f"{type(exc).__name__}: {exc}{where}{_notes(exc)}"
        out = {"_index": index, "status": "failed", "error": error}
    return out


def _notes(exc: BaseException) -> str:
    """The exception's notes (``__notes__``) as the row's error keeps them, `` (NOTE; NOTE)``: a
    policy's exception carries "raised by the admission policy X during the pipesim run", which a
    plain run prints and a sweep's row left out."""
    notes = [" ".join(str(n).split()) for n in getattr(exc, "__notes__", ()) or ()]
    return f" ({'; '.join(n for n in notes if n)})" if any(notes) else ""


def _timeout_error(timeout_s: float | None, killed: bool = False) -> str:
    msg = f"timed out: the cell ran longer than timeout_s={timeout_s:g} s"
    return msg + (" and did not stop, so its worker was killed" if killed else "")


def enforces_timeout(ex: Executor) -> bool:
    """Whether a per-cell limit holds on ``ex``: only a process pool's worker can be stopped (by the
    alarm) or killed; a thread cannot be, and Dask abandons a late cell while its worker runs on."""
    return isinstance(ex, ProcessPoolExecutor)


def timeout_refusal(ex: Executor, timeout_s: float | None) -> str | None:
    """Why ``timeout_s`` cannot hold on ``ex`` (the message of the ValueError), or None when it can."""
    if timeout_s is None or enforces_timeout(ex):
        return None
    kind = f"{type(ex).__module__}.{type(ex).__qualname__}"
    default = " (the default, DEFAULT_CELL_TIMEOUT_S)" if timeout_s == DEFAULT_CELL_TIMEOUT_S else ""
    return (
        f"timeout_s={timeout_s:g} s{default} cannot be enforced on a {kind}: it cannot stop a running "
        "cell (a thread cannot be killed, Dask abandons a late cell), so one hung cell would hang the "
        "sweep; use the default process pool (executor=None, workers=N), or pass timeout_s=None to "
        "run with no per-cell limit"
    )


def default_executor(workers: int | None = None) -> ProcessPoolExecutor:
    """A local process pool (forkserver, ``pipesim.io.api`` preloaded); ``workers`` defaults to the
    CPUs. Its workers ignore Ctrl-C (:func:`ignore_sigint`): a terminal sends it to the whole
    process group, and the parent, which keeps the finished cells, stops them."""
    n = workers or os.cpu_count() or 1
    ctx = multiprocessing.get_context("forkserver")
    # torch only serves the chapter's draws (AgentDurations); a missing torch is skipped here
    ctx.set_forkserver_preload(["pipesim.io.api", "torch"])
    start_forkserver()
    return ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=ignore_sigint)


def start_forkserver() -> None:
    """Start the forkserver (if it is not running) with Ctrl-C ignored from its first instruction.

    Its preload (``pipesim.io.api``, torch: seconds) runs before it ignores SIGINT itself, and a
    terminal's Ctrl-C reaches the whole process group, so an interrupt in a sweep's first seconds
    printed a 20-line traceback from the forkserver's imports under the sweep's clean "interrupted"
    line. A disposition of SIG_IGN survives exec: the parent ignores SIGINT for the moment of the
    spawn (milliseconds, main thread only) and restores its handler; the workers ignore it anyway
    (:func:`ignore_sigint`)."""
    from multiprocessing import forkserver

    with signals_to(signal.SIG_IGN, (signal.SIGINT,)):
        forkserver.ensure_running()
    _await_preload(getattr(forkserver, "_forkserver", None))


_READY: set[int] = set()  # the forkservers (pids) whose preload has finished


def _await_preload(server: Any) -> None:
    """Wait, taking Ctrl-C and SIGTERM every :data:`_POLL_S`, until ``server`` has finished its
    preload: it forks a process that only exits. The pool's first ``submit`` waited for the preload
    instead (seconds: 8.5 s under load), with interrupts held (:func:`run_cells`), so a stop in a
    sweep's first seconds took 8-12 s to exit. The probe starts on a thread, never cut half-way; on
    a stop the server is killed (its would-be children with it) and reaped, and a later sweep in
    this process starts a fresh one."""
    pid = getattr(server, "_forkserver_pid", None)  # CPython's (3.8 on); absent: the pool waits
    if pid is None or pid in _READY:
        return
    probe = multiprocessing.get_context("forkserver").Process(target=ignore_sigint, daemon=True)
    starting = threading.Thread(target=_start_quietly, args=(probe,), daemon=True)
    with polled_interrupts() as check:
        starting.start()
        try:
            while starting.is_alive():
                check()
                starting.join(_POLL_S)
        except BaseException:
            os.kill(pid, signal.SIGKILL)
            starting.join(_POLL_S)  # its read ends as the server dies: EOF
            if callable(stop := getattr(server, "_stop", None)):
                stop()
            raise
    if probe.pid is not None:  # else it failed on its own: the pool's start says why
        probe.join()
        _READY.add(pid)


def _start_quietly(probe: multiprocessing.process.BaseProcess) -> None:
    """``probe.start()``; an error (the server killed under it, a stopped sweep) is dropped: the
    sweep that stopped says so, and a probe that failed on its own fails the pool's start after."""
    with contextlib.suppress(Exception):  # the caller reports the stop
        probe.start()


# -- running cells -----------------------------------------------------------------------------------


def progress_bar(total: int, enabled: bool | None, label: str = "sweep") -> Any:
    """A tqdm bar of ``total`` runs, headed ``label`` (say what the runs are for: a command that
    runs several sweeps showed several bars all headed ``sweep``); None shows it for 20 runs or
    more on a terminal."""
    from tqdm.auto import tqdm

    if enabled is None:
        enabled = total >= 20 and sys.stderr.isatty()
    return tqdm(total=total, desc=label, unit="run", disable=not enabled)


def run_cells(
    ex: Executor,
    cells: Sequence[Cell],
    fn: MetricsFn,
    timeout_s: float | None,
    results: dict[int, dict[str, Any]],
    bar: Any,
) -> list[Cell]:
    """Submit ``cells`` to ``ex`` and fill ``results``; returns the cells lost to a broken process pool.

    ``timeout_s`` must be None unless ``ex`` is a process pool (:func:`timeout_refusal`; the caller
    checks). There the alarm stops a cell at ``timeout_s`` from its own start; a cell that still
    looks running :data:`_KILL_ROUNDS` limits later (a future counts as running from when it is
    queued for a worker, before it starts) ignored the alarm: it is reported timed out and the
    pool's workers are killed. The other unfinished cells then fail with BrokenProcessPool and come
    back as lost, never as timed out, so the caller reruns them on fresh pools. Killing breaks a
    pool that is not ours too (concurrent.futures cannot replace a worker); any broken process
    pool's cells come back as lost, since the caller reruns them on pools of its own.
    """
    procs = isinstance(ex, ProcessPoolExecutor)
    if timeout_s is not None and not procs:
        raise FieldError(str(timeout_refusal(ex, timeout_s)), "timeout_s")
    deadline_s = None if timeout_s is None else _KILL_ROUNDS * timeout_s + _KILL_GRACE_S
    # Ctrl-C and SIGTERM are held from the first submit (one that starts a worker, cut half-way,
    # left it to die with a traceback) and taken only between the waits, never inside
    # concurrent.futures: a KeyboardInterrupt in wait() left futures' locks held, and the stopped
    # sweep hung for good with its finished cells unwritten (pipesim.io.pools)
    with polled_interrupts() as check:
        pending: dict[Future[dict[str, Any]], Cell] = {
            ex.submit(run_cell, c.index, c.scenario, fn, timeout_s): c for c in cells
        }
        try:
            return _collect_cells(ex, pending, timeout_s, deadline_s, results, bar, check)
        except BaseException as exc:  # Ctrl-C: keep the cells that finished; the queued ones need not start
            if isinstance(exc, KeyboardInterrupt):
                stopping()  # a worker's, perhaps: a later signal must not cut the saving
            for fut, cell in pending.items():
                if not fut.cancel() and fut.done() and not _interrupted(fut.exception()):
                    results[cell.index] = _row(fut, cell.scenario)
            raise


def _interrupted(exc: BaseException | None) -> bool:
    """A cell that did not finish: its pool broke, or Ctrl-C reached its worker (the whole process
    group gets it: the worker's KeyboardInterrupt comes back as the future's exception, and the
    cell is the user's to rerun, not a failed row)."""
    return isinstance(exc, BrokenProcessPool | KeyboardInterrupt)


def _row(fut: Future[dict[str, Any]], scenario: Scenario) -> dict[str, Any]:
    """A finished future's result row (a failed row when the executor raised; a cell a process
    pool could not send names the scenario field that holds what does not pickle)."""
    exc = fut.exception()
    if exc is not None:
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}{unpicklable_field(scenario)}"}
    return fut.result()


def unpicklable_field(scenario: Scenario) -> str:
    """``"; scenario field X (a Y) does not pickle: ..."`` for the first field of ``scenario`` (a
    policy, usually) that ``pickle`` refuses, or ``""`` when every field pickles. A process pool
    sends each cell's scenario to a worker by pickling it; pickle's own message names the object
    that failed (``'_thread.lock'``), not the policy holding it."""
    import dataclasses
    import pickle

    for f in dataclasses.fields(scenario):
        value = getattr(scenario, f.name)
        try:
            pickle.dumps(value)
        except Exception:  # pickle raises TypeError, AttributeError or PicklingError, by the object
            return (
                f"; scenario field {f.name!r} ({type(value).__name__}) does not pickle, so a process "
                "pool cannot send it to a worker: make it picklable (no locks, open files or lambdas "
                "in its attributes) or sweep on threads (executor=ThreadPoolExecutor(...), timeout_s=None)"
            )
    return ""


def _collect_cells(
    ex: Executor,
    pending: dict[Future[dict[str, Any]], Cell],
    timeout_s: float | None,
    deadline_s: float | None,
    results: dict[int, dict[str, Any]],
    bar: Any,
    check: Callable[[], None],
) -> list[Cell]:
    """Wait for ``pending``'s cells, filling ``results``; ``check`` (:func:`polled_interrupts`'s)
    takes a held Ctrl-C before each wait, and each wait is short (:data:`_POLL_S`, with or without
    a per-cell limit), so the sweep still stops within a poll of the signal.

    Finished cells come from done-callbacks (:class:`~pipesim.io.pools.Finished`), and the deadline
    looks only at the head of ``pending``: a pool starts its tasks in the order they were submitted,
    so the first future that is not running ends the running ones. Each poll so costs the cells
    finished and running, not the cells pending (a 10,000-cell sweep spent most of a core in this
    loop when every poll touched every future)."""
    started: dict[Future[dict[str, Any]], float] = {}
    lost: list[Cell] = []
    finished = Finished(pending)
    while pending:
        check()
        for fut in finished.take(_POLL_S):
            if fut not in pending:  # timed out and killed already
                continue
            cell = pending.pop(fut)
            bar.update(1)
            exc = fut.exception()
            if isinstance(exc, KeyboardInterrupt):  # Ctrl-C reached the worker first: stop here too
                pending[fut] = cell  # not finished: the handler below must not record it
                raise KeyboardInterrupt("a worker was interrupted")
            if isinstance(exc, BrokenProcessPool):
                lost.append(cell)
            else:
                results[cell.index] = _row(fut, cell.scenario)
        if deadline_s is None:
            continue
        late = _late_cell(pending, started, deadline_s)
        if late is not None:
            cell = pending.pop(late)
            bar.update(1)
            results[cell.index] = {"status": "failed", "error": _timeout_error(timeout_s, killed=True)}
            kill_workers(ex)  # the rest were queued beside it, not late: they come back as lost
    return lost


_Fut = Future[dict[str, Any]]


def _late_cell(pending: dict[_Fut, Cell], started: dict[_Fut, float], deadline_s: float) -> _Fut | None:
    """The first running cell of ``pending`` past ``deadline_s`` since it was first seen running
    (noted in ``started``), or None. Only the head is read: a pool starts its tasks in submission
    order, so the first that is not running (queued, or done and not yet taken) ends the search."""
    now = time.monotonic()
    for fut in pending:
        if not fut.running():
            return None
        if now - started.setdefault(fut, now) > deadline_s:
            return fut
    return None


class NoBar:
    """A progress bar that shows nothing (the one-cell reruns)."""

    def update(self, n: int) -> None:
        pass
