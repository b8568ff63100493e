"""A stop that lands inside a finalizer while the console script imports pipesim still stops it.

:mod:`pipesim_entry` imports the command line (about a second) with SIGTERM raising
KeyboardInterrupt, and Python's own SIGINT handler raising it too; neither was in pipesim's
finalizer-stop block yet (:mod:`pipesim.compute.finalizer_stop`, which the commands run under). A
signal whose handler ran inside a ``__del__`` there was printed as "Exception ignored in: ...
__del__" and lost: the import went on, and the command ran to its end and exited 0. The import now
runs under that block, loaded from its file without importing ``pipesim``: the stop is raised again
in the main code, and the script says its one line and exits 130.

Each finalizer case is one fresh process (the console script's): a finder drops an object whose
``__del__`` raises the signal as the first module of ``pipesim`` is about to be imported, so the
handler runs inside the finalizer, at once, at the start of the import (the stop comes back about
0.05 s later, in the import; before, the import and ``pipesim list`` ran to their end).

A stop can also come as an extension module imports from C, which may turn the KeyboardInterrupt
into its own error: numpy's 40-line "Importing the numpy C-extensions failed" ImportError, when the
stop came back as numpy imported ``datetime`` (a few runs in twenty of the cases above). The entry
now takes an error out of an import that a stop signal came into for that stop; the last case
cuts a stop into an ImportError as that C code does, and checks that an import failing with no
signal still raises.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import signal, sys
from pipesim_entry import main

class Signalled:
    def __del__(self):
        signal.raise_signal(signal.{sig})
        self.after = True  # the Python handler runs before this line, inside the finalizer

class StopInAFinalizer:  # as pipesim's first module is about to be imported
    def find_spec(self, name, path=None, target=None):
        if name.startswith("pipesim."):
            sys.meta_path.remove(self)
            Signalled()  # dropped at once: its __del__ runs here
        return None

sys.meta_path.insert(0, StopInAFinalizer())
sys.exit(main(["list"]))
"""


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "entry_stopped.py"
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_in_a_finalizer_while_pipesim_imports_is_one_line_and_130(
    sig: signal.Signals, tmp_path: Path
) -> None:
    done = _run(SCRIPT.format(sig=sig.name), tmp_path)
    assert done.returncode == 130, done.stderr[-3000:]
    assert done.stderr == "pipesim: interrupted before list started; nothing was written\n"
    assert done.stdout == ""  # list never ran


CUT_IN_C = """
import json, signal, sys
from pipesim_entry import main

class Fails:  # pipesim's first module fails to import: with no signal, or as a stop came
    def __init__(self, stop):
        self.stop = stop

    def find_spec(self, name, path=None, target=None):
        if name.startswith("pipesim."):
            sys.meta_path.remove(self)
            try:
                if self.stop:
                    signal.raise_signal(signal.SIGTERM)
            except KeyboardInterrupt:
                raise ImportError("could not import module") from None  # as numpy's C code does
            raise ImportError("broken install")
        return None

outcomes = []
for stop in (False, True):
    sys.meta_path.insert(0, Fails(stop))
    try:
        outcomes.append(main(["list"]))
    except ImportError as error:
        outcomes.append(str(error))
print(json.dumps(outcomes))
"""


def test_an_import_error_a_stop_caused_is_the_stop_and_one_without_is_raised(tmp_path: Path) -> None:
    done = _run(CUT_IN_C, tmp_path)
    assert json.loads(done.stdout) == ["broken install", 130], done.stderr[-3000:]
    assert done.stderr == "pipesim: interrupted before list started; nothing was written\n"
