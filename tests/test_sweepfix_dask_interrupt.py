"""Ctrl-C in ``pipesim sweep --dask local`` prints the one line the process pool prints.

Before: ~70 lines under it: each Nanny worker's KeyboardInterrupt traceback (a terminal's Ctrl-C
reaches the whole process group) and Dask's warnings on the cells it cancelled and the workers it
lost while closing. The partial CSV was right then too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(180)
def test_ctrl_c_under_dask_local_prints_one_line(tmp_path: Path) -> None:
    mark, csv = tmp_path / "third-cell-started", tmp_path / "runs.csv"
    argv = ["sweep", "fig13.1-sync", "--over", "max_staleness=0,1,2,3", "--quiet"]
    argv += ["--dask", "local", "--timeout-s", "none", "--csv", str(csv)]  # 2 workers
    script = tmp_path / "dask_then_int.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, time
            from pathlib import Path

            def slow_from_eta2(scenario):
                eta = scenario.pipeline.max_staleness
                if eta >= 2:
                    Path({str(mark)!r}).touch()
                    time.sleep(60)
                return {{"eta": float(eta), "throughput_per_hour": 1.0}}

            if __name__ == "__main__":
                import pipesim.io.sweeps as sweeps
                from pipesim.io.cli import main

                real = sweeps.sweep
                sweeps.sweep = lambda *a, **kw: real(*a, **{{**kw, "fn": slow_from_eta2}})
                sys.exit(main({argv!r}))
            """
        )
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,  # a process group of its own, as a shell gives a command
    )
    try:
        for _ in range(1200):
            if mark.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert mark.exists(), proc.communicate(timeout=5)
        time.sleep(1.0)  # eta 0 and 1 have come back by then
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the workers get it too
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err[-3000:]
    assert lines[0].startswith("pipesim: interrupted: 2 of 4 cells had finished; wrote them to")
    runs = pd.read_csv(csv)
    assert list(runs["max_staleness"]) == [0, 1] and runs["partial"].all()
