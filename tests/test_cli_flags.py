"""The experiment and scenario scripts refuse a bad flag before any work, as a usage error naming it.

Each case calls the script's ``main`` in this process: a usage error is ``SystemExit(2)`` with the
message on stderr, raised by the checks that run before the first training step or simulation (so
none of these cases trains or simulates anything). They used to be tracebacks from inside the run
(``ValueError``, a numpy error, ``ZeroDivisionError`` after training with ``--steps 0``,
``FileNotFoundError`` once the results were computed), or were accepted (``--threads 0``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from mismatch import cli as mismatch_cli
from mismatch.cli import main as mismatch_main
from offpolicy import estimator, fp8, lr_sweep, staleness
from scenarios import chapter13, cosim, starvation
from scenarios import compute as scenario_compute
from scenarios.published.table import main as published_main

Main = Callable[[list[str]], object]

CASES: list[tuple[str, Main, list[str], str]] = [
    (
        "starvation-eta",
        starvation.main,
        ["--etas", "0", "-1"],
        "--etas: a staleness bound must be >= 0, got -1",
    ),
    ("starvation-steps", starvation.main, ["--steps", "0"], "--steps must be at least 1, got 0"),
    (
        "compute-steps-huge",
        scenario_compute.main,
        ["--steps", "100000000"],
        "--steps 100,000,000: ",
    ),  # a traceback
    # the task lengths are drawn up front: 10^8 steps was a numpy MemoryError traceback (95 GiB)
    ("starvation-steps-huge", starvation.main, ["--steps", "100000000"], "--steps 100,000,000 with --etas"),
    ("starvation-seed", starvation.main, ["--seed", "-1"], "--seed must be >= 0, got -1"),
    ("starvation-sigma", starvation.main, ["--sigma", "-1"], "--sigma must be a finite number >= 0"),
    (
        "starvation-html",
        starvation.main,
        ["--html", "/no/such/dir/x.html"],
        "--html /no/such/dir/x.html: no directory",
    ),
    ("starvation-dup-etas", starvation.main, ["--etas", "1", "1"], "--etas: values must be distinct"),
    (
        "starvation-sigma-big",
        starvation.main,
        ["--sigma", "1e6"],
        "a task length overflows",
    ),
    ("starvation-html-dir", starvation.main, ["--html", "/tmp"], "--html /tmp: is a directory"),
    ("published-json-dir", published_main, ["--json", "/tmp"], "--json /tmp: is a directory"),
    (
        "compute-json-proc",
        scenario_compute.main,
        ["--json", "/proc/x.json"],
        "/proc/x.json: cannot write",
    ),
    ("staleness-lag", staleness.main, ["--lags", "-1"], "--lags must be >= 0, got -1"),
    ("staleness-correction", staleness.main, ["--corrections", "bogus"], "unknown correction 'bogus'"),
    ("staleness-seeds", staleness.main, ["--seeds", "0"], "--seeds must be at least 1, got 0"),
    # 10^8 seeds first built the list of them, then ran until killed
    ("staleness-seeds-huge", staleness.main, ["--seeds", "100000000"], "--seeds must be at most 1,000"),
    ("lr-sweep-steps-huge", lr_sweep.main, ["--steps", "100000000"], "--steps must be at most 100,000"),
    (
        "staleness-steps",
        staleness.main,
        ["--steps", "0", "--seeds", "1"],
        "--steps must be at least 1, got 0",
    ),
    ("staleness-lr", staleness.main, ["--lr", "nan"], "a learning rate must be a finite number > 0"),
    (
        "staleness-seed-list",
        staleness.main,
        ["--seed-list", "1", "1"],
        "--seed-list: values must be distinct",
    ),
    ("staleness-table", staleness.main, ["--table-only", "--json", "no-such.json"], "which does not exist"),
    (
        "staleness-json",
        staleness.main,
        ["--json", "/proc/x/s.json"],
        "--json /proc/x/s.json: no directory /proc/x",
    ),
    ("staleness-dup-lags", staleness.main, ["--lags", "0", "0"], "--lags: values must be distinct"),
    ("lr-sweep-dup", lr_sweep.main, ["--lrs", "1e-3", "1e-3"], "--lrs: values must be distinct"),
    ("lr-sweep-lrs", lr_sweep.main, ["--lrs", "1e-3", "0"], "a learning rate must be a finite number > 0"),
    ("lr-sweep-eval", lr_sweep.main, ["--eval-every", "-1"], "--eval-every must be at least 0, got -1"),
    ("fp8-corrections", fp8.main, ["--corrections", "none", "xis"], "unknown correction 'xis'"),
    (
        "estimator-out",
        estimator.main,
        ["--out", "/no/such/dir/t.txt"],
        "--out /no/such/dir/t.txt: no directory",
    ),
    (
        "published-json",
        published_main,
        ["--json", "/no/such/dir/p.json"],
        "--json /no/such/dir/p.json: no directory",
    ),
    ("cosim-retable", cosim.main, ["--retable", "no-such.json"], "--retable no-such.json: cannot read it"),
    ("cosim-seeds-huge", cosim.main, ["--seeds", "100000000"], "--seeds must be 1 to 1,000"),
    ("mismatch-threads", mismatch_main, ["--tiny", "--threads", "0"], "--threads must be 1 to"),
    ("mismatch-threads-huge", mismatch_main, ["--tiny", "--threads", "100000"], "--threads must be 1 to"),
    (
        "mismatch-json",
        mismatch_main,
        ["--json", "/no/such/dir/m.json"],
        "--json /no/such/dir/m.json: no directory",
    ),
    (
        "mismatch-html",
        mismatch_main,
        ["--html", "/no/such/dir/m.html"],
        "--html /no/such/dir/m.html: no directory",
    ),
    (
        "mismatch-from-json-json",
        mismatch_main,
        ["--from-json", "a.json", "--json", "b.json"],
        "--json writes a new run; with --from-json nothing is run",
    ),
    ("cosim-seed-list", cosim.main, ["--seed-list", "-5"], "--seed-list must be an integer in [0, "),
    ("cosim-eval-every", cosim.main, ["--eval-every", "0"], "--eval-every must be >= 1"),
    (
        "cosim-also-target",
        cosim.main,
        ["--also-target", "5"],
        "--also-target is a held-out pass rate in [0, 1]",
    ),
    ("cosim-target", cosim.main, ["--target", "nan"], "--target is a held-out pass rate in [0, 1]"),
    ("cosim-json", cosim.main, ["--json", "/no/such/dir/c.json"], "--json /no/such/dir/c.json: no directory"),
    ("cosim-html", cosim.main, ["--html", "/no/such/dir/c.html"], "--html /no/such/dir/c.html: no directory"),
    (
        "staleness-html",
        staleness.main,
        ["--html", "/no/such/d/s.html"],
        "--html /no/such/d/s.html: no directory",
    ),
    (
        "staleness-seed-big",
        staleness.main,
        ["--seed-list", str(2**64)],
        "--seed-list: a seed must be at most",
    ),
    ("chapter13-args", chapter13.main, ["--steps", "3"], "unrecognized arguments: --steps 3"),
]


@pytest.mark.parametrize(("main", "argv", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_flag_is_a_usage_error_naming_it(
    main: Main,
    argv: list[str],
    needle: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing a script might write lands in the checkout
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert needle in err, err
    assert "Traceback" not in err and not list(tmp_path.iterdir())


class WorkStarted(Exception):
    """Raised in place of a script's first piece of work: the output checks came too late."""


def _no_work(*args: object, **kwargs: object) -> None:
    raise WorkStarted


#: (id, main, the module and name of its first piece of work, the output flag and its extra argv)
OUTPUTS: list[tuple[str, Main, object, str, str, list[str]]] = [
    ("mismatch-json", mismatch_main, mismatch_cli, "run", "--json", []),
    ("mismatch-html", mismatch_main, mismatch_cli, "run", "--html", []),
    ("estimator-out", estimator.main, estimator, "estimator_table", "--out", []),
    ("staleness-json", staleness.main, staleness, "load_base", "--json", ["--seeds", "1"]),
    ("staleness-html", staleness.main, staleness, "load_base", "--html", ["--seeds", "1", "--json", "s.j"]),
    ("lr-sweep-json", lr_sweep.main, lr_sweep, "load_base", "--json", ["--seeds", "1"]),
    ("fp8-json", fp8.main, fp8, "load_base", "--json", ["--seeds", "1"]),
]


@pytest.mark.parametrize("where", ["directory", "unwritable"])
@pytest.mark.parametrize(
    ("main", "module", "work", "flag", "extra"), [c[1:] for c in OUTPUTS], ids=[c[0] for c in OUTPUTS]
)
def test_an_output_that_is_a_directory_or_cannot_be_written_is_a_usage_error_before_any_work(
    main: Main,
    module: object,
    work: str,
    flag: str,
    extra: list[str],
    where: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only a missing directory was caught: a path that is a directory, or one that cannot be
    written (a file in /proc, even for root), failed once the probe or the training was done."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(module, work, _no_work)
    path = str(tmp_path) if where == "directory" else "/proc/out.json"
    with pytest.raises(SystemExit) as info:
        main([*extra, flag, path])
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    says = "is a directory; give a file name" if where == "directory" else "cannot write it"
    assert f"{flag} {path}: {says}" in err and "Traceback" not in err, err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("main", "module", "work", "flag", "extra"), [c[1:] for c in OUTPUTS], ids=[c[0] for c in OUTPUTS]
)
def test_a_writable_output_passes_the_check_and_leaves_no_file_behind(
    main: Main,
    module: object,
    work: str,
    flag: str,
    extra: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # the default --json of staleness --html makes results/ here
    monkeypatch.setattr(module, work, _no_work)
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(WorkStarted):
        main([*extra, flag, str(folder / "out.file")])
    assert not list(folder.iterdir())  # the check's probe is gone; the script writes the file


def test_a_retable_file_that_is_not_a_stored_run_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "other.json"
    bad.write_text('{"rows": []}')
    with pytest.raises(SystemExit):
        cosim.main(["--retable", str(bad)])
    assert f"--retable {bad}: not a --json file of this command (no 'runs' list" in capsys.readouterr().err


SHAPES = ['{"runs": [{"seed": 0}]}', "[1, 2]", '{"runs": 3}', "not json"]


@pytest.mark.parametrize("text", SHAPES)
def test_a_stored_file_of_another_shape_is_named_before_any_work(
    text: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--table-only / --resume / --retable / --from-json of a file these scripts did not write:
    one usage error naming the file (they were a KeyError, AttributeError or ``min()`` of
    nothing inside a table, or, for --resume, a traceback after the first run)."""
    bad = tmp_path / "other.json"
    bad.write_text(text)
    runs: list[tuple[Main, list[str]]] = [
        (staleness.main, ["--table-only", "--json", str(bad)]),
        (lr_sweep.main, ["--resume", "--json", str(bad)]),
        (cosim.main, ["--retable", str(bad)]),
        (cosim.main, ["--resume", "--json", str(bad)]),
    ]
    for main, argv in runs:
        with pytest.raises(SystemExit) as info:
            main(argv)
        err = capsys.readouterr().err
        assert info.value.code == 2 and str(bad) in err and "Traceback" not in err, (argv, err)
    assert mismatch_main(["--from-json", str(bad)]) == 2  # the probe's own errors return 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --from-json {bad}: ") and "Traceback" not in err, err


def test_a_table_only_file_with_no_runs_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text('{"runs": []}')
    with pytest.raises(SystemExit):
        staleness.main(["--table-only", "--json", str(empty)])
    assert f"--json {empty} holds no runs" in capsys.readouterr().err


def test_chapter13_help_prints_usage_without_running_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        chapter13.main(["--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0 and "usage: python -m scenarios.chapter13" in out
    assert "weight sync" not in out  # the first table's title: nothing ran


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("main", "module", "work", "flag", "extra"), [c[1:] for c in OUTPUTS], ids=[c[0] for c in OUTPUTS]
)
def test_an_output_that_is_a_pipe_is_left_to_the_write(
    main: Main,
    module: object,
    work: str,
    flag: str,
    extra: list[str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """From a probe: the check opened a FIFO to test it (it hung with no reader, and handed a
    reader an end of file) and refused ``/dev/stdout`` or ``>(cat)`` (their resolved name is no
    file). A stream is written as is; a ``--json`` written through a rename refuses it by name."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(module, work, _no_work)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    renamed = flag == "--json" and module is not mismatch_cli
    if renamed:
        with pytest.raises(SystemExit) as info:
            main([*extra, flag, str(fifo)])
        assert info.value.code == 2
        assert f"{flag} {fifo}: not a regular file (a pipe or a device)" in capsys.readouterr().err
        return
    for path in (str(fifo), "/dev/null"):
        with pytest.raises(WorkStarted):
            main([*extra, flag, path])


@pytest.mark.timeout(30)
def test_a_scenario_script_leaves_a_pipe_to_the_write(tmp_path: Path) -> None:
    import argparse

    from scenarios.outputs import check_output

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    check_output(argparse.ArgumentParser(), "--json", str(fifo))  # returns: it did not open it
    check_output(argparse.ArgumentParser(), "--json", "/dev/null")


@pytest.mark.parametrize("beside", [".txt", ".html"])
def test_staleness_checks_the_files_it_writes_beside_its_json(
    beside: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a probe: the table (.txt) and, without --html, the figure (.html) are written next to
    --json after training; a directory in their place failed only then."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(staleness, "load_base", _no_work)
    (tmp_path / f"x{beside}").mkdir()
    with pytest.raises(SystemExit) as info:
        staleness.main(["--seeds", "1", "--json", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and f"x{beside}: is a directory" in err, err


@pytest.mark.parametrize("where", ["missing.json", "."], ids=["no such file", "a folder"])
def test_a_from_json_that_cannot_be_read_is_named(
    where: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / where
    assert mismatch_main(["--from-json", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --from-json {path}: ") and "Traceback" not in err, err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_full_device_names_the_output(capsys: pytest.CaptureFixture[str]) -> None:
    """``--json /dev/full`` said "[Errno 28] No space left on device" and not which output."""
    from pipesim.io.cli import main as pipesim_main

    assert pipesim_main(["run", "fig13.1-sync", "--set", "steps=2", "--json", "/dev/full"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "/dev/full" in err[0], err


def test_retable_alone_reprints_the_stored_tables_targets(capsys: pytest.CaptureFixture[str]) -> None:
    """The committed table was aggregated at 0.8 and 0.9; ``--retable`` alone printed it at the
    run default 0.5, another table than the one stored. It now reads the stored targets; a given
    ``--target`` still wins."""
    stored = str(Path(__file__).resolve().parents[1] / "results" / "cosim" / "cosim.json")
    assert cosim.main(["--retable", stored]) == 0
    alone = capsys.readouterr().out
    assert cosim.main(["--retable", stored, "--target", "0.8", "--also-target", "0.9"]) == 0
    assert capsys.readouterr().out == alone
    assert cosim.main(["--retable", stored, "--target", "0.5"]) == 0
    assert capsys.readouterr().out != alone
