"""The experiment and scenario scripts refuse a bad flag before any work, as a usage error naming it.

Each case calls the script's ``main`` in this process: a usage error is ``SystemExit(2)`` with the
message on stderr, raised by the checks that run before the first training step or simulation (so
none of these cases trains or simulates anything). They used to be tracebacks from inside the run
(``ValueError``, a numpy error, ``ZeroDivisionError`` after training with ``--steps 0``,
``FileNotFoundError`` once the results were computed), or were accepted (``--threads 0``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mismatch.cli import main as mismatch_main
from offpolicy import estimator, fp8, lr_sweep, staleness
from scenarios import chapter13, cosim, starvation
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
    ("starvation-seed", starvation.main, ["--seed", "-1"], "--seed must be >= 0, got -1"),
    ("starvation-sigma", starvation.main, ["--sigma", "-1"], "--sigma must be a finite number >= 0"),
    (
        "starvation-html",
        starvation.main,
        ["--html", "/no/such/dir/x.html"],
        "--html /no/such/dir/x.html: no directory",
    ),
    ("staleness-lag", staleness.main, ["--lags", "-1"], "--lags must be >= 0, got -1"),
    ("staleness-correction", staleness.main, ["--corrections", "bogus"], "unknown correction 'bogus'"),
    ("staleness-seeds", staleness.main, ["--seeds", "0"], "--seeds must be at least 1, got 0"),
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
        "--json /proc/x/s.json: cannot make its directory",
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
    ("mismatch-threads", mismatch_main, ["--tiny", "--threads", "0"], "--threads must be at least 1, got 0"),
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


def test_a_retable_file_that_is_not_a_stored_run_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "other.json"
    bad.write_text('{"rows": []}')
    with pytest.raises(SystemExit):
        cosim.main(["--retable", str(bad)])
    assert f"--retable {bad}: not a --json file of this command (no 'runs' list)" in capsys.readouterr().err


def test_chapter13_help_prints_usage_without_running_the_tables(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        chapter13.main(["--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0 and "usage: python -m scenarios.chapter13" in out
    assert "weight sync" not in out  # the first table's title: nothing ran
