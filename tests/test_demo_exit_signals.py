"""``python -m pipesim.io.demo`` ignores Ctrl-C in its last steps (pipesim.io.interrupts'
``ignore_interrupts_at_exit``).

Beside three CPU hogs, ``make demo`` stopped by one Ctrl-C said "interrupted", left by
``SystemExit(130)``, ran its exit functions with Python's SIGINT handler in place, and then died of
SIGINT (returncode -2, not 130) in 2 of 115 stops: the interpreter gives a signal with a Python
handler its default action back as it finalizes. A probe registered before the demo runs its exit
function after the demo's own, and reads whether SIGINT and SIGTERM are ignored there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import atexit, runpy, signal, sys
handlers = lambda: [signal.getsignal(s) == signal.SIG_IGN for s in (signal.SIGINT, signal.SIGTERM)]
atexit.register(lambda: print("last steps:", *handlers()))
sys.argv = ["pipesim.io.demo", sys.argv[1]]
runpy.run_module("pipesim.io.demo", run_name="__main__", alter_sys=True)
"""


def test_the_demo_ignores_ctrl_c_and_sigterm_in_its_last_steps(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.exists()
    last = [line for line in proc.stdout.splitlines() if line.startswith("last steps:")]
    assert last == ["last steps: True True"], proc.stdout[-1000:]
