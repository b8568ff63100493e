"""A Ctrl-C stops a command's pool workers, not only the command (:mod:`pipesim.io.pools`).

Measured before: ``python -m scenarios.published --workers 2`` given Ctrl-C (SIGINT to its
process group) 20 s in printed "interrupted" and was still running 30 s later, both workers at
full CPU: each worker took the SIGINT inside its run, handed the KeyboardInterrupt back as that
run's result and went on with the queued runs, which the pool's exit waited for. The plan's own
stop read the pool's processes after ``shutdown`` had emptied them, and ended none.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pipesim.io.interrupts import sigterm_as_interrupt
from pipesim.io.pools import stop_pool, worker_pool

ROOT = Path(__file__).resolve().parents[1]


def _spin(seconds: float) -> float:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return seconds


def _wait_started(ex: ProcessPoolExecutor, n: int) -> list:
    procs: Any = ex._processes
    deadline = time.monotonic() + 20
    while len(procs) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    return list(procs.values())


def _ended(pid: int, within_s: float = 10.0) -> bool:
    """Whether process ``pid`` has ended (gone, or a zombie) within ``within_s``: read from
    /proc, since the pool's own thread may reap it before a ``join`` here sees it."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("under_sigterm_handler", [False, True])
def test_an_interrupt_in_the_block_ends_the_running_workers(under_sigterm_handler: bool) -> None:
    """Workers forked under the commands' SIGTERM-as-Ctrl-C handler end at ``terminate()``."""
    t0 = time.monotonic()
    handler = sigterm_as_interrupt() if under_sigterm_handler else contextlib.nullcontext()
    with pytest.raises(KeyboardInterrupt), handler, worker_pool(2) as ex:
        futures = [ex.submit(_spin, 60.0) for _ in range(6)]
        procs = _wait_started(ex, 2)
        time.sleep(0.3)  # the tasks are running
        raise KeyboardInterrupt
    assert time.monotonic() - t0 < 20, "the block waited for its tasks"
    assert all(_ended(p.pid) for p in procs)
    assert all(f.done() for f in futures)
    assert all(f.cancelled() or f.exception() is not None for f in futures)  # none ran to its end


def test_stop_pool_ends_the_workers_it_was_given() -> None:
    with worker_pool(1) as ex:
        ex.submit(_spin, 60.0)
        procs = _wait_started(ex, 1)
        time.sleep(0.3)
        stop_pool(ex)
        assert all(_ended(p.pid) for p in procs)


def test_a_block_left_normally_waits_for_every_task() -> None:
    with worker_pool(2) as ex:
        futures = [ex.submit(_spin, 0.05) for _ in range(5)]
    assert [f.result() for f in futures] == [0.05] * 5


SCRIPT = """
import faulthandler, signal, sys, time
from pathlib import Path
from scenarios.published import common
from scenarios.published.table import run_all
from pipesim.io.interrupts import sigterm_as_interrupt

@common.RunCache
def slow(i):
    Path(f"started-{i}").touch()
    end = time.monotonic() + 60
    while time.monotonic() < end:
        pass
    raise AssertionError("not stopped")

if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test's view of a hang
    keys = [("__main__", "slow", (i,)) for i in range(8)]
    try:
        with sigterm_as_interrupt():
            run_all(keys, 2, print)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
"""


def _signal_masks(pid: int | str) -> str:
    """Each thread of ``pid``'s pending, blocked, ignored and caught signals (hex masks, bit
    ``signum - 1``), from /proc: a hang after a signal shows whether it was blocked or never came."""
    keys = ("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
    lines = []
    for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
        with contextlib.suppress(OSError):
            fields = dict(
                ln.split(":\t", 1) for ln in (task / "status").read_text().splitlines() if ":\t" in ln
            )
            lines.append(
                f"thread {task.name}: " + " ".join(f"{k}={fields.get(k, '?').strip()}" for k in keys)
            )
    return "\n".join(lines)


def test_the_published_table_stops_its_workers_at_ctrl_c(tmp_path: Path) -> None:
    """Ctrl-C from a terminal reaches the whole process group; the command exits at once."""
    # a child inherits its parent thread's blocked and ignored signals: a SIGINT blocked or ignored
    # here (left so by an earlier test of this process) would reach no thread of the command
    mine = Path(f"/proc/self/task/{threading.get_native_id()}/status").read_text()
    masks = {k: int(v, 16) for k, v in re.findall(r"^(SigBlk|SigIgn):\t([0-9a-f]+)$", mine, re.M)}
    inherited = [k for k, mask in masks.items() if mask >> (signal.SIGINT - 1) & 1]
    assert not inherited, f"this test process has SIGINT in its {inherited}: an earlier test left it so"
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("started-*"))) < 2 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate(timeout=5)
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        t0 = time.monotonic()
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # a hang: fail with where every thread of the command was
            masks = _signal_masks(proc.pid)
            os.kill(proc.pid, signal.SIGUSR1)
            time.sleep(1.0)
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"the command did not exit 30 s after Ctrl-C; its threads then:\n{err}\n{masks}")
        assert time.monotonic() - t0 < 15
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert "not stopped" not in err
    assert len(list(tmp_path.glob("started-*"))) == 2  # the queued runs never started
