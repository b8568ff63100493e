"""A stop that lands inside a finalizer still stops the work, and the work started is kept.

A stop handler's KeyboardInterrupt raised inside a ``__del__`` (the garbage collector ran it when
the signal came) was printed as "Exception ignored in: ... __del__" and dropped: the command ran on
to its end, its Ctrl-C or ``timeout``'s SIGTERM lost (CI saw it in ``mismatch``;
tests/test_mismatch_stop_finalizer.py). pipesim's raising blocks (``sigterm_as_interrupt``,
``interrupt_once``), offpolicy's and the profile's (``stop_once``, also run on torch alone as the
top-level ``profile_stop``) now raise it again in the main code
(:mod:`pipesim.compute.finalizer_stop` and its twins). Each case drops an object whose ``__del__``
raises the signal (the handler runs inside it, at once) and then works on for up to
:data:`WORK_S`; the stop comes back within about 0.05 s. Before, the work ran to its end.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import offpolicy.interrupts as offpolicy_interrupts
import pipesim.io.api as api
import pipesim.io.sweeps as sweeps
from pipesim.compute.profile_stop import stop_once
from pipesim.io.cli import main
from pipesim.io.interrupts import interrupt_once, polled_interrupts, sigterm_as_interrupt

ROOT = Path(__file__).resolve().parents[1]
WORK_S = 10.0
"""How long a case works on after the stop was raised in the finalizer (a lost stop runs it out)."""

STOPS = [signal.SIGTERM, signal.SIGINT]
BLOCKS: dict[str, Callable[[], contextlib.AbstractContextManager[Any]]] = {
    "pipesim.sigterm_as_interrupt": sigterm_as_interrupt,
    "pipesim.interrupt_once": interrupt_once,
    "offpolicy.sigterm_as_interrupt": offpolicy_interrupts.sigterm_as_interrupt,
    "profile.stop_once": stop_once,
}


class SignalledInFinalizer:
    """Raises ``sig`` in this process from its ``__del__``: the Python handler runs there."""

    def __init__(self, sig: signal.Signals) -> None:
        self.sig = sig

    def __del__(self) -> None:
        signal.raise_signal(self.sig)
        self.after = True  # not reached where the handler raised


def work_on() -> None:
    """Busy work for up to :data:`WORK_S`, where the stop is raised again (within ~0.05 s)."""
    deadline = time.monotonic() + WORK_S
    while time.monotonic() < deadline:
        pass


def stop_in_a_finalizer_then_work(sig: signal.Signals = signal.SIGTERM) -> None:
    SignalledInFinalizer(sig)  # dropped at once: its __del__ runs here
    work_on()


@pytest.fixture
def hook_before(monkeypatch: pytest.MonkeyPatch) -> list[BaseException | None]:
    """The unraisable hook before each block: records what reaches it (it would print it)."""
    seen: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    return seen


def _handlers() -> list[Any]:
    return [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]


@pytest.mark.parametrize("sig", STOPS, ids=lambda s: s.name)
@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_a_stop_raised_in_a_finalizer_stops_the_block(
    block: str, sig: signal.Signals, hook_before: list[BaseException | None]
) -> None:
    handlers = _handlers()
    with pytest.raises(KeyboardInterrupt), BLOCKS[block]():
        stop_in_a_finalizer_then_work(sig)
    assert hook_before == []  # nothing "Exception ignored"
    assert _handlers() == handlers


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_a_block_that_ends_before_the_stop_comes_back_raises_it_as_it_ends(
    block: str, hook_before: list[BaseException | None]
) -> None:
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"), BLOCKS[block]():
        SignalledInFinalizer(signal.SIGTERM)
    assert hook_before == []
    time.sleep(0.2)  # the thread that would have sent it is done: nothing more comes


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_other_exceptions_in_finalizers_go_to_the_hook_before(
    block: str, hook_before: list[BaseException | None]
) -> None:
    class Broken:
        def __del__(self) -> None:
            raise ValueError("broken finalizer")

    with BLOCKS[block]():
        Broken()
    assert [type(e) for e in hook_before] == [ValueError]


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_the_hook_and_handlers_are_restored_after_the_block(block: str) -> None:
    hook, handlers = sys.unraisablehook, _handlers()
    with BLOCKS[block]():
        assert sys.unraisablehook is not hook
    assert sys.unraisablehook is hook and _handlers() == handlers
    with pytest.raises(KeyboardInterrupt), BLOCKS[block]():
        stop_in_a_finalizer_then_work()
    assert sys.unraisablehook is hook and _handlers() == handlers


def test_interrupt_once_still_drops_the_signals_after_the_stop() -> None:
    """``timeout`` signals the process, then its group: the second must not cut the saving."""
    with interrupt_once() as once:
        try:
            stop_in_a_finalizer_then_work()
        except KeyboardInterrupt:
            signal.raise_signal(signal.SIGTERM)  # while the command saves what it finished
    assert once.stopping and once.later == [signal.SIGTERM]


def test_a_stop_that_comes_back_inside_polled_interrupts_is_taken_at_a_check() -> None:
    """A sweep's pool waits under polled_interrupts, which holds SIGINT: the stop is raised at the
    next check, and a signal after it still goes to interrupt_once's handler (dropped), though the
    block put the spent one-shot handler back as "its" handler when it ended."""
    with interrupt_once() as once:
        try:
            SignalledInFinalizer(signal.SIGTERM)
            with polled_interrupts() as check:
                deadline = time.monotonic() + WORK_S
                while time.monotonic() < deadline:
                    check()
        except KeyboardInterrupt as stop:
            assert str(stop) == "signal SIGTERM"
            signal.raise_signal(signal.SIGINT)  # a second Ctrl-C while the command saves
    assert once.later == [signal.SIGINT]


# the commands users run, stopped inside a finalizer: their interrupted status and what they keep


def _stop_then(result: Any = None) -> Callable[..., Any]:
    def stopped(*args: Any, **kwargs: Any) -> Any:
        stop_in_a_finalizer_then_work()
        return result

    return stopped


def test_pipesim_run_stops_with_its_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = api.run

    def run(*args: Any, **kwargs: Any) -> Any:
        stop_in_a_finalizer_then_work()
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "run", run)
    save = tmp_path / "run"
    assert main(["run", "fig13.1-sync", "--save", str(save)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pipesim: interrupted: run stopped"), err
    assert not save.exists()


def test_pipesim_sweep_keeps_the_cells_that_finished(
    tmp_path: Path,
    one_thread: ThreadPoolExecutor,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two cells finish; the stop then lands in a finalizer between runs of the pool (as where a
    broken pool's cells are rerun one by one): the two are written, marked partial."""
    real_sweep, real_run_on = sweeps.sweep, sweeps._run_on

    def quick(scenario: Any) -> dict[str, float]:
        return {"eta": float(scenario.pipeline.max_staleness), "throughput_per_hour": 1.0}

    def two_then_stop(ex: Any, own: bool, cells: list[Any], *rest: Any) -> list[Any]:
        real_run_on(ex, own, cells[:2], *rest)
        stop_in_a_finalizer_then_work()
        return []

    kw = {"executor": one_thread, "timeout_s": None, "fn": quick}
    monkeypatch.setattr(sweeps, "sweep", lambda *a, **k: real_sweep(*a, **{**k, **kw}))
    monkeypatch.setattr(sweeps, "_run_on", two_then_stop)
    csv = tmp_path / "runs.csv"
    sweep = ["sweep", "fig13.1-sync", "--over", "max_staleness=0,1,2,3", "--quiet", "--csv", str(csv)]
    assert main(sweep) == 130
    runs = pd.read_csv(csv)
    assert list(runs["max_staleness"]) == [0, 1] and runs["partial"].all()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pipesim: interrupted: 2 of 4 cells had finished"), err


def test_pipesim_profile_keeps_the_rows_it_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    from pipesim.compute import profile
    from pipesim.compute.measured import read_measurements

    monkeypatch.setattr(profile, "measure_attention", _stop_then())
    out = tmp_path / "gpu.csv"
    tiny = ["--model", "tiny", "--device", "cpu", "--dtype", "float32", "--warmup", "1", "--repeats", "3"]
    assert main(["profile", *tiny, "--tokens", "1,16", "--tp", "1", "--out", str(out)]) == 130
    kept = read_measurements(out)
    assert kept and {m.op for m in kept} == {*profile.ps.GEMM_OPS, "linear"}


def test_an_offpolicy_script_keeps_its_finished_runs(capsys: pytest.CaptureFixture[str]) -> None:
    def body(kept: offpolicy_interrupts.Kept) -> None:
        kept.written = 1  # one run finished and written
        stop_in_a_finalizer_then_work()  # the next one is training

    assert offpolicy_interrupts.run_keeping("offpolicy.x", "runs.json", body, resumable=True) == 130
    said = "offpolicy.x: interrupted: runs.json keeps the 1 finished run(s); --resume continues"
    assert capsys.readouterr().err.strip().splitlines() == [said]


# a fresh process prints nothing but its own line (in-process, pytest's hook takes what is printed)

DEL = """
import signal, sys, time

class D:
    def __del__(self):
        signal.raise_signal(signal.{sig})
        self.after = True

def work():
    D()
    deadline = time.monotonic() + {work_s}
    while time.monotonic() < deadline:
        pass
"""

PIPESIM_RUN = """
import pipesim.io.api as api
from pipesim.io.cli import main  # __main__.main is pipesim's: the command line is the program

real = api.run

def run(*args, **kwargs):
    work()
    return real(*args, **kwargs)

api.run = run
if __name__ == "__main__":
    sys.exit(main(["run", "fig13.1-sync", "--save", {save!r}]))
"""

OFFPOLICY = """
from offpolicy.interrupts import run_keeping

def body(kept):
    kept.written = 1
    work()

sys.exit(run_keeping("offpolicy.x", "runs.json", body, resumable=True))
"""

PROFILE_ALONE = """
sys.path.insert(0, "pipesim/compute")  # as python pipesim/compute/profile.py imports it
import profile_stop

try:
    with profile_stop.stop_once():
        work()
except KeyboardInterrupt as exc:
    assert not [m for m in sys.modules if m.startswith("pipesim")]
    print("stopped:", exc)
"""


def _fresh(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "stopped_in_a_finalizer.py"
    script.write_text(textwrap.dedent(code))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


# The SIGINT case is the same redelivery through the same command's handler: the SIGTERM case
# runs by default, and test_a_stop_raised_in_a_finalizer_stops_the_block takes SIGINT in each block
# in-process. This variant is run by make test-full.
@pytest.mark.parametrize(
    "sig",
    [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.full)],
    ids=lambda s: s.name,
)
def test_a_fresh_pipesim_run_stops_with_only_its_line(sig: signal.Signals, tmp_path: Path) -> None:
    save = tmp_path / "run"
    proc = _fresh(DEL.format(sig=sig.name, work_s=WORK_S) + PIPESIM_RUN.format(save=str(save)), tmp_path)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 130 and len(err) == 1, proc.stderr[-3000:]
    assert err[0].startswith("pipesim: interrupted: run stopped") and not save.exists()


def test_a_fresh_offpolicy_script_stops_with_only_its_line(tmp_path: Path) -> None:
    proc = _fresh(DEL.format(sig="SIGTERM", work_s=WORK_S) + OFFPOLICY, tmp_path)
    said = "offpolicy.x: interrupted: runs.json keeps the 1 finished run(s); --resume continues\n"
    assert proc.returncode == 130 and proc.stderr == said, proc.stderr[-3000:]


def test_the_profile_run_on_torch_alone_stops_with_nothing_printed(tmp_path: Path) -> None:
    proc = _fresh(DEL.format(sig="SIGTERM", work_s=WORK_S) + PROFILE_ALONE, tmp_path)
    assert proc.returncode == 0 and proc.stdout == "stopped: signal SIGTERM\n", proc.stderr[-3000:]
    assert proc.stderr == ""


# the block's own cases (pipesim.compute.finalizer_stop's docstring), each in a fresh process: a stop is
# sent back as a SIGINT after DELAY_S, and some cases leave a handler of their own in place

CASES = """
import importlib.util, json, signal, sys, threading, time

spec = importlib.util.spec_from_file_location("finalizer_stop", {path!r})
fs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fs)
seen = []  # what reached the hook before the block, and what other handlers took
sys.unraisablehook = lambda u: seen.append(type(u.exc_value).__name__)


class Stop:
    def __del__(self):
        raise KeyboardInterrupt("stop")  # a stop handler's, landed in a finalizer


def work(s=5.0, until=lambda: False):  # a stop sent back (after DELAY_S) ends it early
    deadline = time.monotonic() + s
    while time.monotonic() < deadline and not until():
        pass


def held(signum, frame):  # another block's handler (polled_interrupts' hold): it takes the SIGINT
    seen.append("held")


def taken_by_other():  # the one-shot replaced before the stop is sent: that handler takes it
    with fs.stops_from_finalizers():
        Stop()
        old = signal.signal(signal.SIGINT, held)
        work(until=lambda: "held" in seen)
        signal.signal(signal.SIGINT, old)


def second_while_replaced():  # a second stop while the one-shot is replaced: it is sent too
    with fs.stops_from_finalizers():
        Stop()
        signal.signal(signal.SIGINT, held)
        Stop()
        work()


def again_after_putback():  # the spent one-shot put back by a block, then a new stop
    with fs.stops_from_finalizers():
        Stop()
        one_shot = signal.getsignal(signal.SIGINT)
        try:
            work()
        except KeyboardInterrupt:
            seen.append("first")
        signal.signal(signal.SIGINT, one_shot)
        Stop()
        work()


def second_stop():  # the first stop raised and caught (the command saves), then another
    with fs.stops_from_finalizers():
        Stop()
        try:
            work()
        except KeyboardInterrupt:
            seen.append("first")
        Stop()
        work()


def off_main_thread():  # no handler can be set there: the hook before takes it
    with fs.stops_from_finalizers():
        t = threading.Thread(target=Stop)
        t.start()
        t.join()
        work(0.3)  # six times DELAY_S: nothing is sent


def other_error():  # the block raises another error while the stop is on its way: that one stands
    try:
        with fs.stops_from_finalizers():
            Stop()
            raise ValueError("x")
    except ValueError:
        seen.append("ValueError")
    work(0.3)  # six times DELAY_S: nothing is sent


try:
    {case}()
    outcome = "ended"
except KeyboardInterrupt as stop:
    outcome = f"raised {{stop}}"
default = signal.getsignal(signal.SIGINT) is signal.default_int_handler
print(json.dumps({{"outcome": outcome, "seen": seen, "default_sigint": default}}))
"""

FINALIZER_STOP = ROOT / "pipesim" / "compute" / "finalizer_stop.py"


@pytest.mark.parametrize(
    ("case", "outcome", "seen"),
    [
        ("taken_by_other", "ended", ["held"]),
        ("second_while_replaced", "raised stop", []),
        ("again_after_putback", "raised stop", ["first"]),
        ("second_stop", "raised stop", ["first"]),
        ("off_main_thread", "ended", ["KeyboardInterrupt"]),
        ("other_error", "ended", ["ValueError"]),
    ],
)
def test_the_blocks_cases_each_stop_once(case: str, outcome: str, seen: list[str], tmp_path: Path) -> None:
    """A stop another handler took is not raised again at the block's end; a second stop, after a
    first one was taken or while the one-shot is replaced, is raised; one off the main thread goes
    to the hook before; a block that raises another error sends nothing after it, and leaves
    Python's SIGINT handler in place."""
    script = tmp_path / f"{case}.py"
    script.write_text(CASES.format(path=str(FINALIZER_STOP), case=case))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    assert (got["outcome"], got["seen"]) == (outcome, seen), got
    if case in ("other_error", "second_stop", "again_after_putback", "off_main_thread"):
        assert got["default_sigint"], got  # the one-shot, spent or cancelled, is gone


def test_a_hook_set_inside_the_block_is_kept() -> None:
    from pipesim.compute.finalizer_stop import stops_from_finalizers

    before = sys.unraisablehook

    def mine(unraisable: Any) -> None:
        pass

    try:
        with stops_from_finalizers():
            sys.unraisablehook = mine
        assert sys.unraisablehook is mine  # the block puts back its own hook only
    finally:
        sys.unraisablehook = before
