"""Outputs of ``pipesim sweep``, ``trace`` and ``run --save`` never destroy what the user has.

Measured before: ``pipesim sweep mine.toml ... --csv mine.toml`` replaced the scenario file with
the CSV, and ``--csv X --html X`` wrote both to one path; ``pipesim trace rr.json --out rr.json``
replaced its own input; ``--save runs/eta1/sub`` inside a saved run was accepted and the run then
failed to load; ``--csv /dev/stdout | cat`` failed after all the work (the temporary file was to
go in ``/proc/N/fd/``); ``--seeds 2`` past the largest seed named seed S+1, which nobody gave; the
``--html`` page said nothing of the cells that failed; and an interrupted rerun replaced a complete
``--csv`` with the few rows it had finished.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim
import pipesim.io.sweeps as sweeps
from pipesim.config import Scenario
from pipesim.io.cli import main
from pipesim.io.interrupts import write_atomic, write_text_atomic, writes_in_place
from pipesim.io.registry import get_scenario
from pipesim.io.saved import load
from pipesim.io.sweep_grid import SweepResult
from pipesim.io.sweep_outputs import failures_note
from tests.test_sweep_interrupts import SWEEP, _on_threads, interrupt_on_eta2

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--set", "n_slots=4", "--set", "batch_size=4", "--set", "steps=2"]


def _bytes(*paths: Path) -> list[bytes]:
    return [p.read_bytes() for p in paths]


# 1. pipesim sweep: an output over the scenario file, or two outputs on one path


def test_sweep_csv_over_its_scenario_file_is_refused_and_the_file_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine.toml"
    assert main(["export", "synchronous", "--set", "steps=2", "--out", str(mine)]) == 0
    before = mine.read_bytes()
    capsys.readouterr()
    argv = ["sweep", str(mine), "--over", "max_staleness=0,1", "--workers", "2", "--csv", str(mine)]
    assert main(argv) == 2
    assert "--csv" in capsys.readouterr().err
    assert mine.read_bytes() == before


def test_sweep_html_over_its_scenario_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine.toml"
    assert main(["export", "synchronous", "--set", "steps=2", "--out", str(mine)]) == 0
    before = mine.read_bytes()
    capsys.readouterr()
    assert main(["sweep", str(mine), "--over", "max_staleness=0,1", "--html", str(mine)]) == 2
    assert "--html" in capsys.readouterr().err
    assert mine.read_bytes() == before


def test_sweep_csv_and_html_on_one_path_are_refused_before_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    same = tmp_path / "same.out"
    same.write_text("the user's own file\n")

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the sweep ran")

    monkeypatch.setattr(sweeps, "sweep", never)
    argv = ["sweep", "synchronous", *SMALL, "--over", "max_staleness=0,1", "--csv", str(same)]
    assert main([*argv, "--html", str(same)]) == 2
    err = capsys.readouterr().err
    assert "--csv" in err and "--html" in err
    assert same.read_text() == "the user's own file\n"


@pytest.mark.parametrize("opt", ["--csv", "--html"])
def test_a_dash_output_of_a_sweep_is_refused_not_written_to_a_file_named_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], opt: str
) -> None:
    """``run --json -`` is standard output; ``sweep --csv -`` wrote a file named '-' (a sweep's
    standard output holds its table). It is refused before the sweep runs, naming /dev/stdout."""
    monkeypatch.chdir(tmp_path)
    argv = ["sweep", "synchronous", *SMALL, "--over", "max_staleness=0,1", opt, "-"]
    assert main(argv) == 2
    assert opt in capsys.readouterr().err
    assert not (tmp_path / "-").exists()


def test_a_policies_file_and_a_py_scenario_file_are_inputs(tmp_path: Path) -> None:
    """``--csv`` over a ``--policies`` module, or over the ``.py`` of ``file.py:name``, is refused
    (checked here without importing a module: the catalog is shared by the whole test session)."""
    from pipesim.io.cli_common import UsageError, check_distinct, read_inputs

    mod, scen = tmp_path / "mine_policies.py", tmp_path / "scen.py"
    mod.write_text("# no policies\n")
    scen.write_text("# no scenario\n")
    inputs = read_inputs(f"{scen}:small", [str(mod), "some.module"])
    assert [p for _, p in inputs] == [str(scen), str(mod)]
    for target in (mod, scen):
        with pytest.raises(UsageError, match="--csv"):
            check_distinct([("csv", str(target))], inputs)
    assert read_inputs("synchronous") == [] and read_inputs(None) == []
    check_distinct([("csv", str(tmp_path / "runs.csv"))], inputs)


# 2. pipesim trace: the output over its own input


@pytest.fixture(scope="module")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rr = tmp_path_factory.mktemp("trace") / "rr.json"
    assert main(["run", "synchronous", "--set", "steps=2", "--json", str(rr)]) == 0
    return rr


def test_trace_out_over_its_run_file_is_refused(run_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = run_file.read_bytes()
    capsys.readouterr()
    assert main(["trace", str(run_file), "--out", str(run_file)]) == 2
    assert "--out" in capsys.readouterr().err
    assert run_file.read_bytes() == before


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_trace_out_over_its_events_table_is_refused(
    tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ev = tmp_path / f"ev{suffix}"
    assert main(["run", "synchronous", "--set", "steps=2", "--events", str(ev)]) == 0
    before = ev.read_bytes()
    capsys.readouterr()
    assert main(["trace", str(ev), "--out", str(ev)]) == 2
    assert "--out" in capsys.readouterr().err
    assert ev.read_bytes() == before


def test_trace_out_over_the_scenario_file_its_run_file_names_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine, rr = tmp_path / "mine.toml", tmp_path / "rr.json"
    assert main(["export", "synchronous", "--set", "steps=2", "--out", str(mine)]) == 0
    assert main(["run", str(mine), "--json", str(rr)]) == 0
    before = _bytes(mine, rr)
    capsys.readouterr()
    assert main(["trace", str(rr), "--out", str(mine)]) == 2
    assert "--out" in capsys.readouterr().err
    assert _bytes(mine, rr) == before


def test_trace_to_a_new_file_is_still_written(run_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    assert main(["trace", str(run_file), "--out", str(out)]) == 0
    assert out.stat().st_size > 0


# 3. --save inside a saved run


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("saved") / "eta1"
    pipesim.run(get_scenario("async-eta1").with_(n_slots=4, batch_size=4, steps=2)).save(d)
    return d


@pytest.mark.parametrize("sub", ["sub", "sub/deeper"])
def test_save_inside_a_saved_run_is_refused_and_the_run_still_loads(
    saved: Path, sub: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sorted(p.name for p in saved.iterdir())
    assert main(["run", "synchronous", "--set", "steps=2", "--save", str(saved / sub)]) == 2
    err = capsys.readouterr().err
    assert "--save" in err and str(saved) in err
    assert sorted(p.name for p in saved.iterdir()) == before
    load(saved)  # the run still loads


def test_save_over_a_saved_run_or_beside_it_is_still_accepted(tmp_path: Path) -> None:
    from pipesim.io.cli_common import check_save_dir

    d = tmp_path / "run"
    pipesim.run(get_scenario("synchronous").with_(n_slots=4, batch_size=4, steps=2)).save(d)
    check_save_dir(str(d))  # replacing a saved run is allowed
    check_save_dir(str(tmp_path / "other"))


# 4. /dev/stdout and other targets that are not regular files are written in place


def test_a_pipe_named_by_a_file_descriptor_path_is_written_in_place(tmp_path: Path) -> None:
    r, w = os.pipe()
    try:
        target = f"/dev/fd/{w}" if Path("/dev/fd").is_dir() else f"/proc/self/fd/{w}"
        assert writes_in_place(target)
        write_text_atomic(target, "through the pipe\n")
    finally:
        os.close(w)
    with os.fdopen(r) as f:
        assert f.read() == "through the pipe\n"
    assert not list(tmp_path.iterdir())


def test_a_fifo_is_written_in_place(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    link = tmp_path / "link"
    link.symlink_to(fifo)
    assert writes_in_place(link)
    write_atomic(link, lambda p: p.write_text("into the fifo"))
    reader.join(10)
    assert got == ["into the fifo"] and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "link"]  # no temporary file


def test_a_regular_file_and_a_link_to_one_are_still_replaced_whole(tmp_path: Path) -> None:
    real, link = tmp_path / "real.csv", tmp_path / "link.csv"
    real.write_text("old")
    link.symlink_to(real)
    assert not writes_in_place(real) and not writes_in_place(link)
    assert not writes_in_place(tmp_path / "new.csv")
    write_text_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


@pytest.mark.skipif(not Path("/dev/stdout").exists(), reason="no /dev/stdout")
@pytest.mark.parametrize(
    "argv",
    [
        ["run", "synchronous", "--set", "steps=2", "--json", "/dev/stdout"],
        ["sweep", "synchronous", *SMALL, "--over", "max_staleness=0,1", "--workers", "1"]
        + ["--quiet", "--csv", "/dev/stdout"],
    ],
    ids=["run-json", "sweep-csv"],
)
def test_dev_stdout_on_a_pipe_is_written(argv: list[str]) -> None:
    code = f"import sys; from pipesim.io.cli import main; sys.exit(main({argv!r}))"
    if argv[0] == "sweep":  # the CSV's writer is the point, not the pool: cells on a thread (a
        # process pool would start a forkserver and import torch in it, seconds for two tiny cells)
        code = (
            "from concurrent.futures import ThreadPoolExecutor\n"
            "import pipesim.io.sweeps as sweeps\n"
            "real, threads = sweeps.sweep, {'executor': ThreadPoolExecutor(1), 'timeout_s': None}\n"
            "sweeps.sweep = lambda *a, **kw: real(*a, **{**kw, **threads})\n"
            f"{code}\n"
        )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "No such file" not in proc.stderr
    if argv[0] == "run":
        assert '"recipe"' in proc.stdout
    else:
        assert "design,max_staleness,seed,status" in proc.stdout


# 5. the seed limit names --seeds and the seed given


def test_seeds_past_the_largest_seed_name_seeds_and_the_base_seed(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sweep", "synchronous", "--set", "seed=4294967295", "--over", "max_staleness=1", "--seeds", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--seeds" in err and "4294967295" in err and "4294967296" in err
    assert "4,294,967,296" not in err  # S+1 as if the user had given it


def test_one_seed_at_the_largest_is_not_refused_by_the_seeds_check() -> None:
    from pipesim.io.cli_sweep import _check_seed_range

    _check_seed_range(get_scenario("synchronous").with_(seed=2**32 - 1), 1)
    _check_seed_range(get_scenario("synchronous").with_(seed=2**32 - 3), 3)


# 6. the page names the failed cells; stderr counts them


def fail_on_eta1(scenario: Scenario) -> dict[str, float]:
    eta = scenario.pipeline.max_staleness
    if eta == 1:
        raise RuntimeError("cell broke on purpose")
    return {"throughput_per_hour": 1.0 + eta, "staleness_mean": float(eta)}


def test_sweep_html_names_the_failed_cells(
    tmp_path: Path,
    one_thread: ThreadPoolExecutor,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _on_threads(monkeypatch, one_thread, fail_on_eta1)
    page, csv = tmp_path / "s.html", tmp_path / "s.csv"
    argv = ["sweep", "synchronous", *SMALL, "--over", "max_staleness=0,1,2", "--quiet"]
    assert main([*argv, "--html", str(page), "--csv", str(csv)]) == 0  # the exit status is as it was
    err = capsys.readouterr().err
    assert "1 of 3 cells failed" in err
    text = page.read_text()
    assert "pipesim-failures" in text and "1 of 3 cells failed" in text
    assert "max_staleness=1" in text and "cell broke on purpose" in text
    assert (pd.read_csv(csv)["status"] != "ok").sum() == 1


def test_sweep_html_of_a_clean_sweep_has_no_failure_note(
    tmp_path: Path, one_thread: ThreadPoolExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    _on_threads(monkeypatch, one_thread, fail_on_eta1)
    page = tmp_path / "s.html"
    argv = ["sweep", "synchronous", *SMALL, "--over", "max_staleness=0,2", "--quiet", "--html", str(page)]
    assert main(argv) == 0
    assert "pipesim-failures" not in page.read_text()


def test_failures_note_counts_timed_out_cells_and_lists_each() -> None:
    runs = pd.DataFrame(
        {
            "max_staleness": [0, 1, 2, 3],
            "seed": [0, 0, 0, 0],
            "status": ["ok", "failed", "failed", "ok"],
            "error": ["", "timed out: the cell ran longer than timeout_s=1 s", "ValueError: <bad>", ""],
            "throughput_per_hour": [1.0, None, None, 2.0],
        }
    )
    note = failures_note(SweepResult(runs, ("max_staleness",), ("throughput_per_hour",)))
    assert "2 of 4 cells failed" in note and "1 of them timed out" in note
    assert "max_staleness=1" in note and "max_staleness=2" in note and "max_staleness=0" not in note
    assert "&lt;bad&gt;" in note  # escaped, not markup
    assert failures_note(SweepResult(runs.iloc[[0, 3]], ("max_staleness",))) == ""


# 7. an interrupted rerun keeps the complete CSV it finds


def test_an_interrupted_rerun_writes_beside_an_existing_csv(
    tmp_path: Path,
    one_thread: ThreadPoolExecutor,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _on_threads(monkeypatch, one_thread, interrupt_on_eta2)
    keep = tmp_path / "keep.csv"
    keep.write_text("a complete,earlier result\n1,2\n")
    before = keep.read_bytes()
    assert main([*SWEEP, "--csv", str(keep)]) == 130
    assert keep.read_bytes() == before
    beside = tmp_path / "keep.partial.csv"
    runs = pd.read_csv(beside)
    assert list(runs["max_staleness"]) == [0, 1] and runs["partial"].all()
    err = capsys.readouterr().err
    assert str(beside) in err and "--csv" in err
