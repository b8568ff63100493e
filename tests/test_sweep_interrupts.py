"""Interrupts keep what was done and leave nothing half-written (issue 44 item 3).

Measured before: ``pipesim sweep`` on Ctrl-C exited 130 with no message and no ``--csv``, though
the finished cells were in memory; ``pipesim run`` and ``pipesim report`` exited 130 silently;
``python -m scenarios.published`` printed a traceback and left ``--json`` half-written; SIGTERM
killed a sweep where it stood. The interrupt is simulated: a cell sends SIGINT to its own process
(threads) or the test sends SIGTERM to a subprocess; an output is cut off by a writer that
raises KeyboardInterrupt after writing part of it.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim.io.sweeps as sweeps
from pipesim.config import Scenario
from pipesim.io.cli import main
from pipesim.io.registry import get_scenario
from tests.conftest import RELEASE

ROOT = Path(__file__).resolve().parents[1]


def small() -> Scenario:
    return get_scenario("synchronous").with_(pool_size=None, n_slots=4, batch_size=4, steps=2)


def interrupt_on_eta2(scenario: Scenario) -> dict[str, float]:
    """eta=2 interrupts the sweep as Ctrl-C would (SIGINT to this process) and then waits for the
    test to let its thread go; the other cells return at once."""
    eta = scenario.pipeline.max_staleness
    if eta == 2:
        os.kill(os.getpid(), signal.SIGINT)
        RELEASE.wait(30)
    return {"eta": float(eta), "throughput_per_hour": 1.0 + eta}


def quick(scenario: Scenario) -> dict[str, float]:
    return {"eta": float(scenario.pipeline.max_staleness), "throughput_per_hour": 1.0}


def test_an_interrupted_sweep_raises_with_the_cells_that_finished(one_thread: ThreadPoolExecutor) -> None:
    over = {"max_staleness": [0, 1, 2, 3]}
    with pytest.raises(sweeps.SweepInterrupted) as info:
        sweeps.sweep(small(), over, executor=one_thread, fn=interrupt_on_eta2, timeout_s=None, progress=False)
    assert isinstance(info.value, KeyboardInterrupt) and info.value.total == 4
    res = info.value.result
    assert res is not None and list(res.runs["max_staleness"]) == [0, 1]
    assert list(res.runs["status"]) == ["ok", "ok"] and list(res.runs["eta"]) == [0.0, 1.0]
    assert "2 of 4 cells" in str(info.value)


def worker_interrupted_on_eta2(scenario: Scenario) -> dict[str, float]:
    """eta=2's worker takes the Ctrl-C itself (the whole process group gets it; a loaded machine
    can run the worker before the parent's handler): its KeyboardInterrupt comes back as the
    future's exception, and eta 3 waits for the test to let it go."""
    eta = scenario.pipeline.max_staleness
    if eta == 2:
        raise KeyboardInterrupt
    if eta == 3:
        RELEASE.wait(30)
    return {"eta": float(eta), "throughput_per_hour": 1.0 + eta}


def test_a_worker_interrupted_before_the_sweep_is_not_a_failed_cell(one_thread: ThreadPoolExecutor) -> None:
    """The interrupted cell is neither a result nor a failed row: the sweep stops with the two
    cells that finished (it used to record eta 2 as "failed: KeyboardInterrupt" and go on)."""
    over = {"max_staleness": [0, 1, 2, 3]}
    with pytest.raises(sweeps.SweepInterrupted) as e:
        sweeps.sweep(
            small(),
            over,
            executor=one_thread,
            timeout_s=None,
            fn=worker_interrupted_on_eta2,
            progress=False,
        )
    got = e.value.result
    assert got is not None and list(got.runs["max_staleness"]) == [0, 1]
    assert (got.runs["status"] == "ok").all() and e.value.total == 4


def _on_threads(monkeypatch: pytest.MonkeyPatch, ex: ThreadPoolExecutor, fn: Any) -> None:
    """``pipesim sweep`` runs its cells with ``fn`` on ``ex`` (the CLI has no flag for either)."""
    real = sweeps.sweep

    def threaded(*args: Any, **kwargs: Any) -> Any:
        return real(*args, **{**kwargs, "executor": ex, "timeout_s": None, "fn": fn})

    monkeypatch.setattr(sweeps, "sweep", threaded)


SWEEP = ["sweep", "fig13.1-sync", "--over", "max_staleness=0,1,2,3", "--quiet"]


def test_pipesim_sweep_on_ctrl_c_writes_the_finished_cells_marked_partial(
    tmp_path: Path,
    one_thread: ThreadPoolExecutor,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _on_threads(monkeypatch, one_thread, interrupt_on_eta2)
    csv = tmp_path / "runs.csv"
    assert main([*SWEEP, "--csv", str(csv)]) == 130
    runs = pd.read_csv(csv)
    assert list(runs["max_staleness"]) == [0, 1] and runs["partial"].tolist() == [True, True]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    said = f"pipesim: interrupted: 2 of 4 cells had finished; wrote them to {csv} with partial=True"
    assert err[0] == said + "; the same command with --resume runs the rest"


def test_pipesim_sweep_without_csv_says_nothing_was_kept(
    one_thread: ThreadPoolExecutor, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _on_threads(monkeypatch, one_thread, interrupt_on_eta2)
    assert main(SWEEP) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["pipesim: interrupted: 2 of 4 cells had finished; nothing written (no --csv)"]


def test_a_complete_sweeps_csv_says_it_is_not_partial(
    tmp_path: Path, one_thread: ThreadPoolExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    _on_threads(monkeypatch, one_thread, quick)
    csv = tmp_path / "runs.csv"
    assert main([*SWEEP, "--csv", str(csv)]) == 0
    runs = pd.read_csv(csv)
    assert list(runs["max_staleness"]) == [0, 1, 2, 3] and not runs["partial"].any()


# SIGTERM to the command goes through the same interrupt_once handler and pool stop as the Ctrl-C
# to its whole group, which runs by default (the harder case: the pool's workers get it too);
# SIGTERM as Ctrl-C is checked in-process by tests/test_stop_finalizer.py and
# tests/test_pool_workers_stop.py. This variant is run by make test-full.
@pytest.mark.parametrize("how", [pytest.param("SIGTERM", marks=pytest.mark.full), "Ctrl-C"])
def test_pipesim_sweep_stopped_keeps_the_finished_cells_and_exits_130(tmp_path: Path, how: str) -> None:
    """A real process pool, stopped while its one worker runs the third cell: by SIGTERM to the
    command, or as Ctrl-C in a terminal does, by SIGINT to its whole process group (the pool's
    processes too; none of them may print a traceback)."""
    mark, csv = tmp_path / "third-cell-started", tmp_path / "runs.csv"
    script = tmp_path / "sweep_then_term.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, sys, time
            from pathlib import Path

            def slow_on_eta2(scenario):
                eta = scenario.pipeline.max_staleness
                if eta == 2:
                    time.sleep(1)  # the parent has taken in the results of eta 0 and 1 by then
                    Path({str(mark)!r}).touch()
                    time.sleep(60)
                return {{"eta": float(eta), "throughput_per_hour": 1.0}}

            if __name__ == "__main__":
                import pipesim.io.sweeps as sweeps
                from pipesim.io.cli import main

                real = sweeps.sweep
                sweeps.sweep = lambda *a, **kw: real(*a, **{{**kw, "fn": slow_on_eta2}})
                sys.exit(main({[*SWEEP, "--workers", "1", "--csv", str(csv)]!r}))
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # a process group of its own, as a shell gives a command
    )
    try:
        for _ in range(1200):  # the third cell starts within seconds; 120 s at most
            if mark.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert mark.exists(), proc.communicate(timeout=5)
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-3000:]
    lines = err.strip().splitlines()
    said = re.fullmatch(
        rf"pipesim: interrupted: (\d) of 4 cells had finished; wrote them to {re.escape(str(csv))} "
        "with partial=True; the same command with --resume runs the rest",
        lines[0] if len(lines) == 1 else "",
    )
    assert said, lines
    # eta 0 and 1 had finished; eta 3 may finish in the worker before the parent takes the signal
    # (a loaded machine): a finished cell is kept. Eta 2 was interrupted: never a row, not even a
    # failed one (its worker's KeyboardInterrupt came back as the cell's exception, once a
    # "failed" row, so the run read "4 of 4 cells had finished")
    runs = pd.read_csv(csv)
    assert len(runs) == int(said.group(1)) in (2, 3)
    assert list(runs["max_staleness"])[:2] == [0, 1] and 2 not in set(runs["max_staleness"])
    assert runs["partial"].all() and (runs["status"] == "ok").all()


def _raise_interrupt(*args: Any, **kwargs: Any) -> Any:
    raise KeyboardInterrupt


def _one_interrupt_line(capsys: pytest.CaptureFixture[str], command: str) -> None:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"pipesim: interrupted: {command} stopped"), err


@pytest.mark.parametrize("where", ["pipesim.io.api.run", "pipesim.results.run.RunResult.save"])
def test_pipesim_run_interrupted_says_so_in_one_line(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(where, _raise_interrupt)
    save = tmp_path / "run"
    assert main(["run", "fig13.1-sync", "--save", str(save)]) == 130
    _one_interrupt_line(capsys, "run")
    assert not save.exists()


def _cut_short(text: str) -> Any:
    """A writer that writes the first half of ``text`` and is then interrupted."""

    def write(self: Path, *args: Any, **kwargs: Any) -> int:
        with open(self, "w") as f:
            f.write(text[: len(text) // 2])
        raise KeyboardInterrupt

    return write


def _left_as_it_was(path: Path) -> None:
    assert path.read_text() == "old", path.read_text()[:200]
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_pipesim_run_cut_short_while_writing_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.json"
    out.write_text("old")
    monkeypatch.setattr(Path, "write_text", _cut_short('{"summary": {"episodes_trained": 1}}'))
    assert main(["run", "fig13.1-sync", "--json", str(out)]) == 130
    _one_interrupt_line(capsys, "run")
    _left_as_it_was(out)


def test_pipesim_report_interrupted_says_so_and_leaves_the_old_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import pipesim.io.cli_trace as cli_trace
    import pipesim.io.report as report
    import pipesim.io.viz as viz

    page = tmp_path / "page.html"
    page.write_text("old")
    monkeypatch.setattr(report, "build_report", _raise_interrupt)
    assert main(["report", "--out", str(page), "--quiet"]) == 130
    _one_interrupt_line(capsys, "report")
    _left_as_it_was(page)
    saved = type("Saved", (), {"scenario": small(), "engine": "slots"})()
    monkeypatch.setattr(cli_trace, "load_saved", lambda path: saved)
    monkeypatch.setattr(viz, "run_page", lambda saved, title, **kw: "<html>" + "x" * 10_000 + "</html>")
    monkeypatch.setattr(Path, "write_text", _cut_short("<html>" + "x" * 10_000 + "</html>"))
    assert main(["report", str(tmp_path / "a-run"), "--out", str(page)]) == 130
    _one_interrupt_line(capsys, "report")
    _left_as_it_was(page)


class _Interrupting(dict):  # type: ignore[type-arg]
    """A row whose encoding is interrupted after its first key: json.dump has written the rows
    before it to the file by then."""

    def items(self) -> Any:
        yield "claim", "second"
        raise KeyboardInterrupt


def test_published_interrupted_says_so_in_one_line_and_leaves_json_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    table = importlib.import_module("scenarios.published.table")  # the package re-exports table()

    row = {
        "claim": "c",
        "system": "s",
        "source": "src",
        "unit": "x",
        "published": 1.0,
        "predicted": 1.1,
        "protocol": "stated",
        "phase": "step",
        "low": 1.0,
        "high": 1.2,
        "_diagnosis": "",
        "_published_diagnosis": "",
    }
    monkeypatch.setattr(table, "predict", lambda **_: [row])
    monkeypatch.setattr(table, "json_rows", lambda rows: [{"claim": "first"}, _Interrupting(claim="second")])
    out = tmp_path / "claims.json"
    out.write_text("old")
    try:
        status: Any = table.main(["--json", str(out)])
    except KeyboardInterrupt:
        status = "KeyboardInterrupt escaped"
    assert status == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"python -m scenarios.published: interrupted; {out} was not written"]
    _left_as_it_was(out)
    # uninterrupted, the file is written whole
    monkeypatch.setattr(table, "json_rows", lambda rows: [{"claim": "first"}])
    assert table.main(["--json", str(out)]) == 0
    assert json.loads(out.read_text()) == [{"claim": "first"}]


def test_an_atomic_write_keeps_what_a_plain_write_would(tmp_path: Path) -> None:
    """Through a symlink the named file is written (the link stays); an existing file keeps its
    mode; a device such as /dev/null is written in place, not replaced."""
    import stat

    from pipesim.io.interrupts import write_text_atomic

    real, link = tmp_path / "real.csv", tmp_path / "link.csv"
    real.write_text("old")
    real.chmod(0o640)
    link.symlink_to(real)
    write_text_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.csv", "real.csv"]
    write_text_atomic("/dev/null", "x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.timeout(120)
def test_make_demo_interrupted_says_so_in_one_line_and_leaves_no_report(tmp_path: Path) -> None:
    """``make demo`` (``python -m pipesim.io.demo``) stopped by Ctrl-C once the table is printed
    printed a KeyboardInterrupt traceback from wherever it was; now one line, exit 130, and the
    report (written whole or not at all) is not there."""
    from tests.test_offpolicy_interrupts import ctrl_c_at_line

    out = tmp_path / "report.html"
    # once the table is printed, the report is being built
    rc, err = ctrl_c_at_line(["pipesim.io.demo", str(out)], "writing the report")
    if rc == 0:  # the report was done before the signal arrived: nothing to test
        pytest.skip("the report finished before the interrupt")
    lines = err.strip().splitlines()
    assert rc == 130 and "Traceback" not in err and len(lines) == 1, err[-2000:]
    assert str(out) in lines[0] and not out.exists()
    assert not list(tmp_path.glob("*.tmp*")), "a temporary file was left behind"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_the_forkserver_ignores_ctrl_c_while_it_preloads() -> None:
    """A terminal's Ctrl-C reaches the whole process group; the forkserver ignored SIGINT only
    after its preload (about a second here: pipesim.io.api and torch), so an interrupt in a
    sweep's first seconds printed a traceback from its imports. It now ignores SIGINT from its
    start: read at once, before its preload can have finished, its SigIgn mask holds SIGINT."""
    code = textwrap.dedent(
        """
        import multiprocessing, os, signal
        multiprocessing.get_context("forkserver").set_forkserver_preload(["pipesim.io.api", "torch"])
        from multiprocessing import forkserver
        from pipesim.io.sweep_exec import start_forkserver
        start_forkserver()
        pid = forkserver._forkserver._forkserver_pid
        line = [x for x in open(f"/proc/{pid}/status") if x.startswith("SigIgn:")][0]
        print(int(line.split()[1], 16) >> 1 & 1)  # SIGINT is signal 2: bit 1
        print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)  # the parent's, restored
        os.kill(pid, signal.SIGKILL)  # read: the rest of its preload (torch, seconds) is not waited for
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["1", "True"]


def test_held_interrupts_deliver_a_ctrl_c_when_the_block_ends_not_inside_it() -> None:
    """A pool's submit may start a worker; cut half-way, the worker printed a traceback of its own.
    The submits run under held_interrupts: a Ctrl-C inside waits for the block's end, and is raised
    there under the caller's handler."""
    from pipesim.io.interrupts import held_interrupts

    before = signal.getsignal(signal.SIGINT)
    finished = False
    with pytest.raises(KeyboardInterrupt), held_interrupts():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # a signal handler runs between bytecodes: it would have raised here
        finished = True
    assert finished
    assert signal.getsignal(signal.SIGINT) is before
    with held_interrupts():  # nothing held: nothing raised
        pass
