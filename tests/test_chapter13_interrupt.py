"""Ctrl-C on ``python -m scenarios.chapter13`` printed a 20-line KeyboardInterrupt traceback from
inside torch's draws; it stops with one line and status 130, as ``make demo`` does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_an_interrupted_chapter_run_says_one_line() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "scenarios.chapter13"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # it has started printing the tables (it runs for seconds)
        assert first, proc.communicate(timeout=60)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["python -m scenarios.chapter13: interrupted (it writes no file)"], err
