"""``python -m ... | head``: a reader that leaves before the command writes ends it quietly.

The read end is closed before the child prints anything, so its first write to stdout fails
every time (no race with the pipe's buffer): the command must exit 0 with no traceback, as
``pipesim`` itself does (``tests/test_cli.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

COMMANDS = [
    # scenarios.cosim's __main__ is pipesim.io.interrupts.reader_may_leave, a wrapper of the
    # stdout_may_close that `pipesim` runs every command under: the pipesim case below (and
    # test_a_reader_that_leaves_early_still_gets_every_file) runs that path by default. The
    # cosim case (it imports torch: seconds) is run by make test-full.
    pytest.param(["scenarios.cosim", "--retable", "results/cosim/cosim.json"], marks=pytest.mark.full),
    ["offpolicy.lr_sweep", "--table-only", "--json", "results/offpolicy/lr_sweep.json"],
    ["pipesim", "list"],
]
IDS = ["scenarios.cosim", "offpolicy.lr_sweep", "pipesim"]


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_a_reader_that_leaves_early_ends_the_command_quietly(command: list[str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", *command], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before the first line
    _, err = proc.communicate(timeout=120)
    text = err.decode()
    assert "Traceback" not in text and "BrokenPipeError" not in text, text
    assert proc.returncode == 0, text


def test_a_reader_that_leaves_early_still_gets_every_file(tmp_path: Path) -> None:
    """``pipesim run ... --trace t.json --events e.parquet | head``: the summary's first print
    hit the closed pipe and the command ended with 0 before it wrote either file."""
    trace, events = tmp_path / "t.json", tmp_path / "e.parquet"
    command = [
        "pipesim",
        "run",
        "async-eta1",
        "--set",
        "steps=3",
        "--trace",
        str(trace),
        "--events",
        str(events),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", *command], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "Traceback" not in err.decode(), err.decode()
    assert trace.stat().st_size > 0 and events.stat().st_size > 0
