"""The benchmark scripts as a user runs them: Ctrl-C (or SIGTERM) ends one with a line saying what
was kept and exit status 130, the rows already printed kept (a KeyboardInterrupt or
``PlanInterrupted`` traceback before, and bench_pipeline's verdicts of the printed rows lost); a
missing file or flags that cannot go together are usage errors (exit 2) naming the file or the
flags, not tracebacks; and the flags, verdicts and labels say what the scripts do.

The scripts run at tiny sizes, each in its own process group, and the signal goes to the group as
a terminal sends it, once the script has printed its first row."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from benchmarks import bench_pipeline, bench_plan

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


def interrupted(
    argv: list[str],
    ready: str,
    sig: int = signal.SIGINT,
    env: dict[str, str] | None = None,
    wait: float = 120,
) -> tuple[int, str, str]:
    """Run ``benchmarks/<argv>`` in its own process group, send ``sig`` to the group once its
    output (stdout, or stderr for progress bars) holds ``ready``; (status, stdout, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, str(BENCH / argv[0]), *argv[1:]],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    got: dict[str, bytearray] = {"out": bytearray(), "err": bytearray()}

    def drain(key: str, fd: int) -> None:
        while chunk := os.read(fd, 65536):
            got[key] += chunk

    readers = [
        threading.Thread(target=drain, args=(k, s.fileno()), daemon=True)  # type: ignore[union-attr]
        for k, s in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for t in readers:
        t.start()
    deadline = time.monotonic() + wait
    try:
        while ready.encode() not in got["out"] + got["err"]:
            if proc.poll() is not None:
                pytest.fail(f"it ended before {ready!r}: {got}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {ready!r} in {wait} s: {got}")
            time.sleep(0.05)
        os.killpg(proc.pid, sig)
        proc.wait(timeout=wait)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for t in readers:
            t.join(timeout=10)
    return proc.returncode, got["out"].decode(), got["err"].decode()


def test_bench_pipeline_interrupted_keeps_the_rows_and_their_verdicts() -> None:
    if not bench_pipeline.CHAPTER_LOOP.is_file():
        pytest.skip("the chapter's loop is not there: the rows are too fast to interrupt")
    rc, out, err = interrupted(["bench_pipeline.py", "--rounds", "1"], "eta=0 interrupt  |")
    assert rc == 130, (out, err)
    assert "Traceback" not in err and "interrupted" in err, err
    rows = [ln for ln in out.splitlines() if " interrupt  |" in ln]
    verdicts = [ln for ln in out.splitlines() if ln.startswith("  ") and "slots eta=" in ln]
    assert 1 <= len(rows) < 4, out
    assert len(verdicts) == len(rows), out  # every printed row has its verdict


def test_bench_compute_interrupted_keeps_the_rows_printed() -> None:
    argv = ["bench_compute.py", "--samples", "1", "--rounds", "1", "--no-verl"]
    rc, out, err = interrupted(argv, "\n         64 ")
    assert rc == 130, (out, err)
    assert "Traceback" not in err and "interrupted" in err, err
    assert any(ln.lstrip().startswith("64 ") for ln in out.splitlines()), out


def test_bench_timeline_html_interrupted_by_sigterm_keeps_the_rows_printed() -> None:
    argv = ["bench_timeline_html.py", "--steps", "5,6", "--slots", "2"]
    rc, out, err = interrupted(argv, "run --html", sig=signal.SIGTERM)
    assert rc == 130, (out, err)
    assert "Traceback" not in err and "interrupted" in err, err
    assert "run --html" in out


# SIGTERM goes through the same interrupt_once handler (SIGTERM as Ctrl-C) and the same way out as
# the SIGINT case, which runs by default, and
# test_bench_timeline_html_interrupted_by_sigterm_keeps_the_rows_printed stops a bench script under
# that handler by SIGTERM. This variant is run by make test-full.
@pytest.mark.parametrize(
    "sig", [signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.full)], ids=["SIGINT", "SIGTERM"]
)
def test_bench_plan_interrupted_says_what_it_kept_and_leaves_no_scratch(sig: int, tmp_path: Path) -> None:
    argv = ["bench_plan.py", "examples/agent_plan.toml", "--workers", "1", "--steps", "2"]
    argv += ["--screen-steps", "1", "--trials", "5"]
    rc, out, err = interrupted(argv, "| 1/", sig=sig, env={"TMPDIR": str(tmp_path)})  # a run done
    assert rc == 130, (out, err)
    assert "Traceback" not in err, err
    said = err.strip().splitlines()[-1]
    runs = re.search(r"(\d+) runs", said)
    assert "interrupted during the plan" in said and runs and int(runs.group(1)) >= 1, said
    assert "--cache-dir" in said, said
    assert not list(tmp_path.glob("bench_plan_*")), "the temporary run cache was left behind"


# -- usage errors, not tracebacks ------------------------------------------------------------------
def usage_error(argv: list[str]) -> str:
    """``benchmarks/<argv>`` run: exit 2, no traceback; its stderr."""
    proc = subprocess.run(
        [sys.executable, str(BENCH / argv[0]), *argv[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "usage:" in proc.stderr, proc.stderr
    return proc.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["bench_plan.py", "nosuch.toml"],
        ["plan_reference.py", "nosuch.toml", "--cache-dir", "unused"],
        ["test_kinds.py", "/nonexistent"],
    ],
)
def test_a_missing_file_is_a_usage_error_naming_it(argv: list[str]) -> None:
    assert argv[1] in usage_error(argv)


def test_bench_plan_steps_that_cannot_go_together_name_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """In-process (argparse's exit 2 is a SystemExit here): bench_plan.py's usage error as a process,
    exit 2 and no traceback, is test_a_missing_file_is_a_usage_error_naming_it's first case."""
    with pytest.raises(SystemExit) as exc:
        bench_plan.main(["--screen-steps", "9", "--steps", "2"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "usage:" in err, err
    assert "--screen-steps" in err and "--steps" in err, err


class Planned(Exception):
    """Raised in place of the plan: the spec it was given."""


def test_bench_plan_applies_the_step_flags_to_a_spec_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """``SPEC --screen-steps 1 --steps 2 --trials 5`` plans with those (they were ignored), and
    ``--trials 0`` with the grid; no flag leaves the spec's own values."""

    def timed_plan(sp: object, *args: object) -> None:
        raise Planned(sp)

    monkeypatch.setattr(bench_plan, "timed_plan", timed_plan)
    spec = str(ROOT / "examples" / "agent_plan.toml")
    seen = []
    for argv in (
        [spec, "--screen-steps", "1", "--steps", "2", "--trials", "5"],
        [spec, "--trials", "0"],
        [spec],
    ):
        with pytest.raises(Planned) as got:
            bench_plan.main(argv)
        seen.append(got.value.args[0])
    flagged, grid, own = seen
    assert (flagged.screen_steps, flagged.steps, flagged.trials) == (1, 2, 5)
    assert grid.method == "grid" and own.method != "grid"
    assert (own.screen_steps, own.steps, own.trials) != (1, 2, 5)


def test_bench_plan_a_spec_file_with_flags_that_clash_names_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bench_plan.main([str(ROOT / "examples" / "agent_plan.toml"), "--screen-steps", "50"])
    assert exc.value.code == 2
    assert "--screen-steps" in capsys.readouterr().err


# -- what the scripts say --------------------------------------------------------------------------
def fields(**changes: float) -> dict[str, object]:
    base: dict[str, object] = {k: 1.0 for k in bench_pipeline.CHECKED}
    base["events"] = [("gen", 0.0)]
    return {**base, **changes}


def test_the_float32_staleness_mean_alone_is_agreement_of_its_own() -> None:
    mean = 1.611640625
    f32 = float(__import__("numpy").float32(mean))
    assert bench_pipeline.agreement(fields(), fields())[0] == "AGREE"
    verdict, how = bench_pipeline.agreement(fields(staleness_mean=mean), fields(staleness_mean=f32))
    assert verdict == "AGREE (float32 mean)" and "float32" in how
    both = bench_pipeline.agreement(fields(staleness_mean=mean, time=2.0), fields(staleness_mean=f32))
    assert both[0] == "DISAGREE"
    assert bench_pipeline.agreement(fields(staleness_mean=1.5), fields(staleness_mean=1.6))[0] == "DISAGREE"


def test_bench_pipeline_quick_runs_the_sizes_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[int] = []
    monkeypatch.setattr(bench_pipeline, "chapter_suite", lambda rounds: None)
    monkeypatch.setattr(bench_pipeline, "durations_pool", lambda n, seed: pytest.skip("ran"))
    monkeypatch.setattr(bench_pipeline, "oracle_suite", lambda sizes, quick: ran.append(sizes))
    assert bench_pipeline.main(["--suite", "all", "--quick", "--sizes", "4096"]) == 0
    assert ran == [[4096]]
    assert bench_pipeline.main(["--sizes", "4096"]) == 2  # the chapter suite has no sizes


def test_bench_compute_labels_the_verl_line_by_its_clock(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import bench_compute

    bench_compute.clock = __import__("time").process_time
    try:
        bench_compute.verl_scale(1)
    finally:
        bench_compute.clock = __import__("time").perf_counter
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "samples launched" in ln)
    assert "CPU" in line and "wall" not in line, line


def test_verl_sample_assembly_interrupted_says_so_without_a_row() -> None:
    argv = ["verl_sample_assembly.py", "--prompts", "2", "--rounds", "100"]
    rc, out, err = interrupted(argv, "median of 100 rounds")
    assert rc == 130, (out, err)
    assert "Traceback" not in err and "interrupted" in err, err
    assert "ms/prompt" not in out, out
