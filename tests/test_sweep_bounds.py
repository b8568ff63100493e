"""A sweep is bounded on any executor (issue 44 item 4).

Measured before: on a ThreadPoolExecutor a per-cell ``timeout_s`` could not stop a hung cell, so
two hung cells kept the sweep from returning, one hung cell made a healthy cell queued behind it
fail as "timed out", and the abandoned thread kept the script from exiting; without ``timeout_s``
a sweep had no limit at all. Now a limit that the executor cannot enforce is refused up front,
a sweep has a finite default limit, and a cell queued beside one that ignores the alarm is rerun,
not reported timed out. Cells here are tiny (no simulation) and limits are 1 s, so the file runs
in seconds and never leaves a hung thread behind.
"""

from __future__ import annotations

import inspect
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pipesim.config import Scenario
from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.io.registry import get_scenario
from pipesim.io.sweeps import DEFAULT_CELL_TIMEOUT_S, SweepError, sweep

ROOT = Path(__file__).resolve().parents[1]
CALLS: list[int] = []


def small() -> Scenario:
    return get_scenario("synchronous").with_(pool_size=None, n_slots=4, batch_size=4, steps=2)


def counted(scenario: Scenario) -> dict[str, float]:
    """A cell that records that it ran (in this process: threads only) and returns at once."""
    CALLS.append(scenario.pipeline.max_staleness)
    return {"eta": float(scenario.pipeline.max_staleness)}


def alarm_left(scenario: Scenario) -> dict[str, float]:
    """The seconds left on the cell's alarm: the limit the worker enforces (0: none)."""
    return {"alarm_s": signal.getitimer(signal.ITIMER_REAL)[0]}


def deaf_on_eta0(scenario: Scenario) -> dict[str, float]:
    """eta=0 hangs with SIGALRM blocked, so only killing its worker stops it; the others return."""
    if scenario.pipeline.max_staleness == 0:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(20)
    return {"eta": float(scenario.pipeline.max_staleness)}


class Inline(Executor):
    """An executor of one's own: runs each call in the caller (it can stop nothing)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        fut.set_result(fn(*args, **kwargs))
        return fut


def _threads() -> Iterator[Executor]:
    with ThreadPoolExecutor(2) as ex:
        yield ex


def _inline() -> Iterator[Executor]:
    yield Inline()


def _dask() -> Iterator[Executor]:
    distributed = pytest.importorskip("distributed")
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None
    ) as client:
        yield client.get_executor()


@pytest.mark.parametrize(
    ("make", "kind"),
    [(_threads, "ThreadPoolExecutor"), (_inline, "Inline"), (_dask, "ClientExecutor")],
)
@pytest.mark.parametrize("limit", [{"timeout_s": 1}, {}], ids=["timeout_s=1", "default"])
def test_a_limit_the_executor_cannot_enforce_is_refused_naming_it_and_the_remedy(
    make: Callable[[], Iterator[Executor]], kind: str, limit: dict[str, float]
) -> None:
    """Before: the sweep ran on these executors, where a hung cell hung it (threads, Dask)."""
    for ex in make():
        CALLS.clear()
        with pytest.raises(FieldError) as info:
            sweep(small(), {"max_staleness": [0, 1]}, executor=ex, fn=counted, progress=False, **limit)
        msg = str(info.value)
        assert info.value.field == "timeout_s"
        # the sentence is the point here: it names the executor, why, and the two ways out
        assert (
            "cannot be enforced" in msg
            and kind in msg
            and "default process pool" in msg
            and "timeout_s=None" in msg
            and "\n" not in msg
        )
        assert ("DEFAULT_CELL_TIMEOUT_S" in msg) == (not limit)
        assert CALLS == []  # refused before any cell ran
        # no limit, said explicitly, is the user's choice and runs
        res = sweep(
            small(), {"max_staleness": [0, 1]}, executor=ex, fn=counted, progress=False, timeout_s=None
        )
        assert list(res.runs["status"]) == ["ok", "ok"] and sorted(CALLS) == [0, 1]


def test_a_hung_cell_on_threads_no_longer_keeps_the_script_from_exiting(tmp_path: Path) -> None:
    """The measured failure: the sweep "timed out" the hung cell, and the script then never exited
    (its thread is joined at exit). Now the limit is refused at once and the script ends."""
    script = tmp_path / "threads.py"
    script.write_text(
        textwrap.dedent(
            """
            import threading
            from concurrent.futures import ThreadPoolExecutor
            from pipesim.io.registry import get_scenario
            from pipesim.io.sweeps import sweep

            NEVER = threading.Event()

            def hang_on_eta0(scenario):
                if scenario.pipeline.max_staleness == 0:
                    NEVER.wait()
                return {"eta": 1.0}

            sc = get_scenario("synchronous").with_(pool_size=None, n_slots=4, batch_size=4, steps=2)
            res = sweep(sc, {"max_staleness": [0, 1]}, executor=ThreadPoolExecutor(2), fn=hang_on_eta0,
                        timeout_s=1, progress=False)
            print(res.runs["status"].tolist())
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert "FieldError: timeout_s=1 s cannot be enforced" in proc.stderr, proc.stderr[-2000:]


def test_a_sweep_has_a_finite_default_limit_that_none_lifts() -> None:
    """Before: a sweep without timeout_s had no limit (its cells ran with no alarm)."""
    default = inspect.signature(sweep).parameters["timeout_s"].default
    assert default == DEFAULT_CELL_TIMEOUT_S and 60 <= DEFAULT_CELL_TIMEOUT_S < float("inf")
    res = sweep(small(), workers=1, fn=alarm_left, progress=False)
    assert DEFAULT_CELL_TIMEOUT_S - 120 < res.runs.loc[0, "alarm_s"] <= DEFAULT_CELL_TIMEOUT_S
    lifted = sweep(small(), workers=1, fn=alarm_left, progress=False, timeout_s=None)
    assert lifted.runs.loc[0, "alarm_s"] == 0.0


def _own_pool() -> dict[str, Any]:
    return {"workers": 1}


def _user_pool() -> dict[str, Any]:
    return {"executor": ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver"))}


# Both pools go through one loop (pipesim.io.sweep_exec's submit-and-collect); the caller's pool
# runs in the default run, and tests/test_sweep.py::test_timeout_kills_a_worker_that_does_not_stop
# kills a deaf cell's worker in a pool of the sweep's own: this case is run by make test-full.
@pytest.mark.parametrize(
    "pool",
    [
        pytest.param(_own_pool, id="own pool", marks=pytest.mark.full),
        pytest.param(_user_pool, id="caller's pool"),
    ],
)
def test_a_cell_that_ignores_the_alarm_does_not_time_out_the_cells_queued_beside_it(
    pool: Callable[[], dict[str, Any]],
) -> None:
    """One worker: eta=0 ignores the alarm; eta=1 waits in the pool's queue beside it, which
    concurrent.futures already counts as running. Before: both were reported timed out when the
    deadline passed (and on the caller's pool the hung worker was left running). Now only the
    deaf cell is; its worker is killed and the others are rerun."""
    kw = pool()
    try:
        res = sweep(
            small(), {"max_staleness": [0, 1, 2]}, fn=deaf_on_eta0, timeout_s=0.5, progress=False, **kw
        )
    finally:
        if "executor" in kw:
            kw["executor"].shutdown(wait=False, cancel_futures=True)
    assert list(res.runs["status"]) == ["failed", "ok", "ok"], res.runs[["status", "error"]]
    assert "timeout_s=0.5" in res.runs.loc[0, "error"] and "killed" in res.runs.loc[0, "error"]
    assert list(res.runs["eta"].iloc[1:]) == [1.0, 2.0]


def test_pipesim_sweep_passes_the_default_limit_and_takes_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: no --timeout-s meant no limit; now it means the default, and ``none`` lifts it."""
    import pipesim.io.sweeps as sweeps

    seen: list[Any] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["timeout_s"])
        raise SweepError("recorded")

    monkeypatch.setattr(sweeps, "sweep", record)
    argv = ["sweep", "fig13.1-sync", "--quiet"]
    for extra in ([], ["--timeout-s", "none"], ["--timeout-s", "NONE"], ["--timeout-s", "2.5"]):
        assert main([*argv, *extra]) == 2
    assert seen == [DEFAULT_CELL_TIMEOUT_S, None, None, 2.5]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ([], "--timeout-s none"),
        (["--timeout-s", "60"], "--timeout-s none"),
        (["--timeout-s", "0"], "--timeout-s"),
        (["--timeout-s", "soon"], "--timeout-s"),
        (["--timeout-s", "1e10"], "--timeout-s"),  # failed every cell (time_t overflow) before
    ],
)
def test_pipesim_sweep_refuses_a_limit_it_cannot_enforce_in_one_line(
    extra: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--dask`` cannot stop a late cell; before, it ran with no limit (or the ignored one)."""
    assert main(["sweep", "fig13.1-sync", "--dask", "tcp://127.0.0.1:1", "--quiet", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("pipesim: error: ") and says in err[-1], err
    assert not any("Traceback" in ln for ln in err)
