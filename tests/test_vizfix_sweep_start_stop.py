"""A Ctrl-C or SIGTERM while a sweep's worker pool starts stops the sweep at once.

The pool's forkserver preloads ``pipesim.io.api`` and torch (seconds; 8.5 s under load), and the
pool's first ``submit`` waited for that preload with interrupts held, so ``pipesim sweep`` took
8-12 s to exit after a stop in its first seconds (docs/sweeps.md promises one second). The sweep
now waits for the preload itself, taking interrupts, and kills the forkserver on a stop. Here the
forkserver's preload never ends (a ``sitecustomize`` blocks its import of ``pipesim.io.api``), so
the sweep stops only if the stop is taken during the preload: before, this hung until the test's
guard timed out. The signal goes to the whole process group, as a terminal's does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

BLOCKING_PRELOAD = """
import pathlib, sys, time

class BlockThePreload:  # in the forkserver only: its preload of pipesim.io.api never ends
    def find_spec(self, name, path=None, target=None):
        if name == "pipesim.io.api":
            pathlib.Path({marker!r}).write_text("preloading")
            time.sleep(600)
        return None

if "forkserver" in " ".join(sys.orig_argv):  # (sys.argv is not set yet)
    sys.meta_path.insert(0, BlockThePreload())
"""

SWEEP = ["sweep", "synchronous", "--set", "steps=2", "--over", "max_staleness=0,1", "--seeds", "2"]


def _group_alive(pgid: int) -> list[str]:
    found = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout.split()
    return [pid for pid in found if Path(f"/proc/{pid}/cmdline").read_bytes()]  # not zombies


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_stop_during_the_pools_preload_is_taken(sig: signal.Signals, tmp_path: Path) -> None:
    marker = tmp_path / "preloading"
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKING_PRELOAD.format(marker=str(marker)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    code = "import sys; from pipesim_entry import main; sys.exit(main())"
    argv = [sys.executable, "-c", code, *SWEEP, "--workers", "2", "--csv", "out.csv"]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, start_new_session=True, stderr=subprocess.PIPE, text=True
    )
    try:
        while not marker.exists():  # the forkserver is preloading
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            time.sleep(0.02)
        os.killpg(proc.pid, sig)
        err = proc.communicate(timeout=120)[1]  # a guard: before, the sweep waited for the preload
        assert proc.returncode == 130, err[-3000:]
        assert err.splitlines() == [
            "pipesim: interrupted: 0 of 4 cells had finished; nothing written to out.csv"
        ]
        assert not (tmp_path / "out.csv").exists()
        for _ in range(200):  # the forkserver was killed and reaped (a moment after the exit)
            if not _group_alive(proc.pid):
                break
            time.sleep(0.05)
        assert not _group_alive(proc.pid)
    finally:
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
