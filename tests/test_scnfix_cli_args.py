"""Scripts read the arguments they are given: ``python -m scenarios.chapter13`` ran every table
whatever it was given (``--help`` printed no usage, ``--bogus`` exited 0),
``benchmarks/engine_vllm_defaults.py`` had no parser at all, and ``python -m scenarios.published``
refused ``--seeds`` that its own help text mentioned, without listing it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = {
    "chapter13": [sys.executable, "-m", "scenarios.chapter13"],
    "engine_vllm_defaults": [sys.executable, str(ROOT / "benchmarks" / "engine_vllm_defaults.py")],
}


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_an_unknown_flag_is_a_usage_error_and_runs_nothing(name: str) -> None:
    got = _run([*SCRIPTS[name], "--bogus"])
    assert got.returncode == 2, got.stderr
    assert "unrecognized arguments: --bogus" in got.stderr
    assert got.stdout == ""  # no table was printed


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_help_prints_the_usage_and_runs_nothing(name: str) -> None:
    got = _run([*SCRIPTS[name], "--help"])
    assert got.returncode == 0, got.stderr
    assert got.stdout.startswith("usage:"), got.stdout[:200]
    assert "13.1 weight sync" not in got.stdout and "step s" not in got.stdout  # neither table


def test_chapter13_cli_passes_its_arguments_to_main() -> None:
    from scenarios import chapter13

    with pytest.raises(SystemExit) as info:
        chapter13.cli(["--steps", "3"])
    assert info.value.code == 2


def test_published_lists_seeds_and_refuses_it_without_april_dapo(capsys: pytest.CaptureFixture[str]) -> None:
    from scenarios.published.table import main

    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    assert "--seeds N" in capsys.readouterr().out
    for argv in (["--seeds", "2"], ["--april-offpolicy", "--seeds", "2"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert "--seeds" in err and "--april-dapo" in err, err


def test_a_files_pool_too_small_for_its_steps_is_named_with_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every other error of a scenario file starts with the file; this one, a check of the whole
    scenario rather than of one key, did not."""
    from pipesim.io.cli import main

    path = tmp_path / "a.toml"
    assert main(["export", "async-eta2", "--out", str(path)]) == 0
    text = path.read_text()
    assert "steps = 20\n" in text
    path.write_text(text.replace("steps = 20\n", "steps = 1100\n", 1))
    capsys.readouterr()
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pipesim: error: {path}: pool_size (65,536)"), err
