"""A stop that lands inside a finalizer still stops the probe.

CI once saw ``python -m mismatch`` ignore a SIGTERM: the signal came while the garbage collector ran
``regex``'s ``Group.__del__``, the KeyboardInterrupt the handler raised there was printed as
"Exception ignored in: ... __del__" and dropped, and the probe ran to its end and exited 0 (the test
wanted 130 and one line). :func:`mismatch.cliio.interrupts_stop_once` now delivers such a stop again,
from another thread once the finalizer has returned, raised in the main code (within about 0.05 s),
and prints nothing about it."""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
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
