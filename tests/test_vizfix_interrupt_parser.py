"""A Ctrl-C or SIGTERM while the command line's parser is built is one line and 130.

``pipesim_entry`` covers the import of the command line; :func:`pipesim.io.cli._main` then built
the parser (which imports the planner and calibration, ~0.3 s and seconds under load) and, for
``pipesim plan``, imported the planner, both outside its ``try``. Measured before: a Ctrl-C there
printed a 29-line (sweep) or 18-line (plan) KeyboardInterrupt traceback, and a SIGTERM killed the
process silently (status 143). The signal is raised at a fixed point, as the planner is imported,
so the test does not depend on the machine's speed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import signal, sys
from pipesim_entry import main
import pipesim.io.cli  # past the console script's import window: the planner is not imported yet

class StopAsThePlannerImports:
    def find_spec(self, name, path=None, target=None):
        if name == "pipesim.plan":
            sys.meta_path.remove(self)
            print("stopped", flush=True)  # the stop came where the test means it to
            signal.raise_signal(signal.{sig})
        return None

sys.meta_path.insert(0, StopAsThePlannerImports())
sys.exit(main({argv!r}))
"""

COMMANDS = {
    "sweep": ["sweep", "synchronous", "--over", "max_staleness=0,1", "--seeds", "2", "--csv", "out.csv"],
    "plan": ["plan", "spec.toml", "--csv", "out.csv"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_stop_while_the_parser_is_built_is_one_line_and_130(
    sig: signal.Signals, command: str, tmp_path: Path
) -> None:
    script = tmp_path / "stopped.py"
    script.write_text(SCRIPT.format(sig=sig.name, argv=COMMANDS[command]))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130, done.stderr[-3000:]
    assert done.stdout == "stopped\n"
    assert done.stderr == f"pipesim: interrupted before {command} started; nothing was written\n"
    assert not (tmp_path / "out.csv").exists()
