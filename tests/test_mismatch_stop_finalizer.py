"""A stop that lands inside a finalizer still stops the probe.

CI once saw ``python -m mismatch`` ignore a SIGTERM: the signal came while the garbage collector ran
``regex``'s ``Group.__del__``, the KeyboardInterrupt the handler raised there was printed as
"Exception ignored in: ... __del__" and dropped, and the probe ran to its end and exited 0 (the test
wanted 130 and one line). :func:`mismatch.cliio.interrupts_stop_once` now delivers such a stop again,
from another thread once the finalizer has returned, raised in the main code (within about 0.05 s),
and prints nothing about it.

Its first copy took back only the block's own stops, tagged "signal ...": a stop raised by another
handler (``python -m mismatch``'s while torch imports, Python's own SIGINT handler's) was still
lost, and a stop the block outlived was sent after it had ended. The block is now
:mod:`mismatch.finalizer_stop`, a twin of ``pipesim.compute.finalizer_stop`` (mismatch imports
nothing of pipesim), kept equal to it here; the cases of the mechanism are tested on pipesim's
(tests/test_stop_finalizer.py), and ``python -m mismatch`` runs its import and its flags under it.
"""

from __future__ import annotations

import ast
import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mismatch.cliio import interrupts_stop_once

ROOT = Path(__file__).resolve().parents[1]


class SignalledInFinalizer:
    """Sends ``sig`` to the process from its ``__del__``; the handler runs there, at the next line."""

    def __init__(self, sig: signal.Signals) -> None:
        self.sig = sig

    def __del__(self) -> None:
        signal.raise_signal(self.sig)
        self.after = True  # the Python handler runs before this line, inside the finalizer


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_raised_in_a_finalizer_is_raised_again_in_the_main_code(
    sig: signal.Signals, capfd: pytest.CaptureFixture[str]
) -> None:
    start = time.monotonic()
    with interrupts_stop_once(), pytest.raises(KeyboardInterrupt, match=sig.name):
        SignalledInFinalizer(sig)  # dropped at once: its __del__ runs here
        gc.collect()
        while time.monotonic() - start < 20:  # the stop is raised again in here, soon
            pass
    assert time.monotonic() - start < 10
    assert "Exception ignored" not in capfd.readouterr().err


def test_other_exceptions_in_finalizers_go_to_the_hook_before(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def __del__(self) -> None:
            raise ValueError("broken finalizer")

    seen: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    with interrupts_stop_once():
        Broken()
        gc.collect()
    assert [type(e) for e in seen] == [ValueError]


def test_the_hook_and_handlers_are_restored_after_the_block() -> None:
    hook, handlers = sys.unraisablehook, [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    with interrupts_stop_once():
        assert sys.unraisablehook is not hook
    assert sys.unraisablehook is hook
    assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)] == handlers


FRESH = """
import signal
from mismatch.cliio import interrupts_stop_once

class D:
    def __del__(self):
        signal.raise_signal(signal.SIGTERM)
        self.after = True

try:
    with interrupts_stop_once():
        D()
        while True:
            pass
except KeyboardInterrupt as exc:
    print("stopped:", exc)
"""


def test_a_fresh_process_stops_and_prints_only_its_line() -> None:
    proc = subprocess.run([sys.executable, "-c", FRESH], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "stopped: signal SIGTERM", proc.stderr
    assert proc.stderr == ""


BLOCK_CASES = """
import json, signal, sys, time
from mismatch.cliio import interrupts_stop_once

seen = []  # what reached the hook before the block (it would print "Exception ignored")
sys.unraisablehook = lambda u: seen.append(type(u.exc_value).__name__)


class Stop:
    def __del__(self):
        raise KeyboardInterrupt("stop")  # another handler's stop, untagged (python -m mismatch's)


class Signalled:
    def __del__(self):
        signal.raise_signal(signal.SIGTERM)
        self.after = True  # the block's handler runs before this line, inside the finalizer


def work(s):  # a stop raised again (after about 0.05 s) ends it early
    deadline = time.monotonic() + s
    while time.monotonic() < deadline:
        pass


def another_handlers_stop():
    with interrupts_stop_once():
        Stop()
        work(10.0)


def outlived():  # the block ends before the stop comes back: it is raised as the block ends
    with interrupts_stop_once():
        Signalled()


outcomes = []
for case in (another_handlers_stop, outlived):
    try:
        case()
        outcomes.append("ended")
    except KeyboardInterrupt as stop:
        outcomes.append(f"raised {stop}")
work(0.2)  # four times the delay: nothing more comes
print(json.dumps({"outcomes": outcomes, "seen": seen}))
"""


def test_any_stop_in_a_finalizer_stops_the_block_and_one_it_outlives_is_raised_as_it_ends() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", BLOCK_CASES], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    assert got == {"outcomes": ["raised stop", "raised signal SIGTERM"], "seen": []}, got


TORCH_IMPORT_STOP = """
import runpy, signal, sys

class Signalled:
    def __del__(self):
        signal.raise_signal(signal.SIGTERM)
        self.after = True  # python -m mismatch's handler runs before this line, inside the finalizer

class StopInAFinalizer:  # as torch is about to be imported
    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            sys.meta_path.remove(self)
            Signalled()  # dropped at once: its __del__ runs here
        return None

sys.meta_path.insert(0, StopInAFinalizer())
sys.argv = ["mismatch", "--help"]  # before, the import went on and this printed the usage, status 0
runpy.run_module("mismatch", run_name="__main__", alter_sys=True)
"""


def test_a_stop_in_a_finalizer_while_torch_imports_is_one_line_and_130(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(TORCH_IMPORT_STOP)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = "python -m mismatch: interrupted while starting (importing torch): nothing written\n"
    assert proc.returncode == 130 and proc.stderr == said, proc.stderr[-3000:]
    assert proc.stdout == ""


def _code(path: Path) -> str:
    """A module's code without its docstrings (module, class, function, attribute) and with the
    stop thread's name made neutral: what the twin must keep equal."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            body[:] = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return ast.dump(tree).replace("'pipesim-stop'", "'-stop'").replace("'mismatch-stop'", "'-stop'")


def test_the_twin_is_pipesims_mechanism_line_for_line() -> None:
    """mismatch may not import pipesim, so it carries a copy; a change to either is made to both."""
    theirs = _code(ROOT / "pipesim" / "compute" / "finalizer_stop.py")
    assert _code(ROOT / "mismatch" / "finalizer_stop.py") == theirs


IMPORT_CUT_IN_C = """
import runpy, signal, sys

class Fails:  # torch fails to import: with no signal, or as a stop came (numpy's C code does this)
    def __init__(self, stop):
        self.stop = stop

    def find_spec(self, name, path=None, target=None):
        if name == "torch":
            sys.meta_path.remove(self)
            try:
                if self.stop:
                    signal.raise_signal(signal.SIGTERM)
            except KeyboardInterrupt:
                raise ImportError("cannot load module more than once per process") from None
            raise ImportError("broken install")
        return None

sys.meta_path.insert(0, Fails({stop}))
sys.argv = ["mismatch", "--help"]
runpy.run_module("mismatch", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("stop", [False, True])
def test_an_import_error_a_stop_caused_is_the_stop_one_without_is_raised(stop: bool, tmp_path: Path) -> None:
    """A Ctrl-C at random moments of ``python -m mismatch --help`` was about 1 in 100 turned by numpy
    into an ImportError traceback; an import error that follows a stop signal is that stop."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(IMPORT_CUT_IN_C.format(stop=stop))],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if stop:
        said = "python -m mismatch: interrupted while starting (importing torch): nothing written\n"
        assert proc.returncode == 130 and proc.stderr == said, proc.stderr[-3000:]
    else:
        assert proc.returncode == 1 and "ImportError: broken install" in proc.stderr, proc.stderr[-3000:]
    assert proc.stdout == ""
