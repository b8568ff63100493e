"""Ctrl-C in a training script keeps the finished runs, prints one line and exits 130.

Measured before: ``python -m offpolicy.staleness`` (and ``lr_sweep``, ``fp8``) stopped by Ctrl-C
printed a KeyboardInterrupt traceback and died from SIGINT (exit -2 / 130 from the shell, no
word on what was kept), though the JSON held the runs finished before; ``python -m
scenarios.cosim`` did the same from inside SimPy (``tests/test_cosim.py``). Each case starts the
real script in a process group of its own, waits until the JSON holds a finished run, sends SIGINT
to the group as a terminal's Ctrl-C does (or SIGTERM to the script), and reads what is left. The
runs are two steps long, so a case takes a few seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _runs(path: Path) -> list[dict[str, object]]:
    """The runs the results file holds now (it is replaced whole, never half-written)."""
    try:
        return list(json.loads(path.read_text())["runs"])
    except FileNotFoundError:
        return []


def interrupt_after_first_run(
    module: str, args: list[str], out: Path, how: signal.Signals = signal.SIGINT
) -> tuple[int, str, list[dict[str, object]], int]:
    """Run ``python -m module args``, signal it once ``out`` holds a run -> (exit status, stderr,
    the runs ``out`` holds after, the runs it held when the signal was sent)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,  # a process group of its own, as a shell gives a command
    )
    try:
        deadline = time.monotonic() + 60
        while not (seen := len(_runs(out))) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert seen and proc.poll() is None, proc.communicate(timeout=5)
        if how == signal.SIGINT:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole group
        else:
            proc.send_signal(how)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, err, _runs(out), seen


def ctrl_c_at_line(args: list[str], prefix: str, stream: str = "stdout") -> tuple[int, str]:
    """Run ``python -m args`` in a process group of its own, read its ``stream`` (``"stdout"`` or
    ``"stderr"``) until a line starts with ``prefix`` (the work is under way), send SIGINT to the
    group as a terminal's Ctrl-C does -> (exit status, the stderr not yet read)."""
    pipe, quiet = subprocess.PIPE, subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        stdout=pipe if stream == "stdout" else quiet,
        stderr=pipe,
        text=True,
        start_new_session=True,
    )
    try:
        lines = proc.stdout if stream == "stdout" else proc.stderr
        assert lines is not None
        for line in lines:
            if line.startswith(prefix):
                break
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, err


def check_one_line(rc: int, err: str, runs: list[dict[str, object]], seen: int, prog: str, out: Path) -> None:
    """Exit 130, one line on stderr naming the file (no traceback), every run seen still there."""
    lines = err.strip().splitlines()
    assert rc == 130, err[-3000:]
    assert "Traceback" not in err and len(lines) == 1, lines
    assert lines[0].startswith(f"{prog}: interrupted") and str(out) in lines[0], lines
    assert len(runs) >= seen >= 1
    assert not list(out.parent.glob("*.tmp")), "a temporary file was left behind"


SCRIPTS = [  # (module, its arguments): many short runs, so the signal lands mid-grid
    ("offpolicy.staleness", ["--lags", "0", "--corrections", "none", "--seeds", "50"]),
    ("offpolicy.lr_sweep", ["--lrs", "1e-3", "--lags", "0", "--seeds", "50"]),
    ("offpolicy.fp8", ["--corrections", "none", "--seeds", "50"]),
]

# The three scripts stop through one handler (offpolicy.interrupts.run_keeping, SIGTERM as Ctrl-C)
# around one loop (offpolicy.runfile.run_cells). In the default run a real Ctrl-C (SIGINT to the
# process group) stops fp8 in tests/test_offpolicy_resume_fp8.py::
# test_sigint_then_resume_of_fp8_keeps_the_finished_runs (the same check_one_line, then a resume),
# and a real SIGTERM stops a fresh process inside run_keeping in tests/test_stop_finalizer.py::
# test_a_fresh_offpolicy_script_stops_with_only_its_line (exit 130, only the line naming the file
# and --resume); these cases are the same stop once more per script and signal, run by make
# test-full.
CTRL_C = [pytest.param(m, a, id=m.split(".")[1], marks=pytest.mark.full) for m, a in SCRIPTS]


@pytest.mark.parametrize(("module", "args"), CTRL_C)
def test_ctrl_c_keeps_the_finished_runs_and_exits_130(module: str, args: list[str], tmp_path: Path) -> None:
    out = tmp_path / "runs.json"
    argv = [*args, "--steps", "2", "--eval-every", "0", "--json", str(out)]
    rc, err, runs, seen = interrupt_after_first_run(module, argv, out)
    check_one_line(rc, err, runs, seen, f"python -m {module}", out)


@pytest.mark.full  # SIGTERM beside the default SIGINT of fp8: see the comment above CTRL_C
def test_sigterm_stops_staleness_as_ctrl_c_does_and_points_to_resume(tmp_path: Path) -> None:
    out = tmp_path / "runs.json"
    argv = [*SCRIPTS[0][1], "--steps", "2", "--eval-every", "0", "--json", str(out)]
    rc, err, runs, seen = interrupt_after_first_run("offpolicy.staleness", argv, out, signal.SIGTERM)
    check_one_line(rc, err, runs, seen, "python -m offpolicy.staleness", out)
    assert "--resume" in err
