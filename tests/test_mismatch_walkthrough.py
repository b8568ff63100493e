"""Finds of a user walkthrough of ``python -m mismatch`` and ``mismatch/gpu_check.sh``.

* A checkpoint whose tokenizer has more tokens than its config's ``vocab_size`` was a traceback
  from inside torch (``IndexError: index out of range in self``) after the model was built; it is
  now one ``error:`` line naming both sizes, before any weights are loaded.
* ``--model FILE`` said the path "does not exist"; run-only flags with ``--from-json`` were
  silently ignored; usage errors came in two shapes (argparse's usage block, a bare ``error:``).
* A reader that leaves early (``| head -1``) lost the ``--json``/``--html`` files or ended with
  rc 2 ``[Errno 32] Broken pipe`` or rc 120.
* ``gpu_check.sh`` exited 0 when every step failed, failed to find ``pipesim/compute/profile.py``
  when started outside the repository root, and logged ``qwen3-8b`` for the CPU run's ``tiny``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from mismatch.checks import FieldError  # noqa: E402
from mismatch.cli import main  # noqa: E402
from mismatch.models import ModelSource, load_model  # noqa: E402
from pipesim.compute.measured import read_measurements  # noqa: E402
from pipesim.compute.profile_shapes import OPS  # noqa: E402
from tests.tiny_checkpoint import tiny_checkpoint  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "mismatch" / "gpu_check.sh"
SAVED = REPO / "results" / "mismatch" / "tiny_cpu.json"


class WorkStarted(Exception):
    """Raised in place of loading weights: the check came too late."""


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


# --- 1. a tokenizer larger than the model's vocabulary ---------------------------------------------


def test_a_tokenizer_larger_than_the_vocabulary_is_one_error_line_before_any_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tiny_checkpoint(tmp_path / "ckpt", vocab_size=1000, n_tokens=1019)
    capsys.readouterr()  # save_pretrained's progress bar
    monkeypatch.setattr("mismatch.models.load_model", lambda *a, **k: (_ for _ in ()).throw(WorkStarted()))
    assert main(["--model", str(path), "--prompts", "3", "--new-tokens", "4"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "1019" in line and "1000" in line and "vocab_size" in line, line
    with pytest.raises(FieldError) as info:
        ModelSource.real(str(path))
    assert info.value.field == "vocab_size" and "1019" in str(info.value), str(info.value)


def test_a_tokenizer_smaller_than_the_vocabulary_is_fine(tmp_path: Path) -> None:
    """Qwen3 pads its embedding table past the tokenizer: that is not refused."""
    path = tiny_checkpoint(tmp_path / "ckpt", vocab_size=1000, n_tokens=900)
    assert ModelSource.real(str(path)).tokenizer.pad_id == 899


def test_a_prompt_id_past_the_vocabulary_is_refused_before_the_run() -> None:
    """The probe's own guard (for a tokenizer whose size was not known up front)."""
    from mismatch.probe import ProbeConfig, run_probe
    from mismatch.prompts import ByteTokenizer

    source = ModelSource("tiny", torch.device("cpu"), "sdpa", ByteTokenizer(pad_id=400))  # vocab is 320
    with pytest.raises(FieldError) as info:
        run_probe(source, ProbeConfig(n_prompts=2, new_tokens=2, knobs=False))
    assert info.value.field == "vocab_size" and "400" in str(info.value) and "320" in str(info.value)


# --- 3. messages ---------------------------------------------------------------------------------


def test_a_model_path_that_is_a_file_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "hostname"
    file.write_text("box\n")
    assert main(["--model", str(file)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(file) in line and "is a file, not a model directory" in line and "does not exist" not in line
    with pytest.raises(FileNotFoundError, match="not a model directory"):
        load_model(str(file))


RUN_ONLY = [
    (["--prompts", "5"], "--prompts"),
    (["--device", "cuda"], "--device"),
    (["--new-tokens", "4"], "--new-tokens"),
    (["--batch", "2"], "--batch"),
    (["--seed", "0"], "--seed"),  # the default's value, given: still refused
    (["--attn", "eager"], "--attn"),
    (["--no-knobs"], "--no-knobs"),
    (["--threads", "1"], "--threads"),
]


@pytest.mark.parametrize(("extra", "flag"), RUN_ONLY, ids=[f for _, f in RUN_ONLY])
def test_run_only_flags_with_from_json_are_refused_by_name(
    extra: list[str], flag: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mismatch.cli.load_result", lambda *a: (_ for _ in ()).throw(WorkStarted()))
    with pytest.raises(SystemExit) as info:
        main(["--from-json", str(SAVED), *extra])
    line = _one_error_line(capsys.readouterr().err)
    assert info.value.code == 2 and flag in line and "--from-json" in line, line


def test_two_run_only_flags_are_both_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--from-json", str(SAVED), "--prompts", "5", "--device", "cuda"])
    line = _one_error_line(capsys.readouterr().err)
    assert info.value.code == 2 and "--prompts" in line and "--device" in line, line


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--prompts", "x"], "--prompts"),
        (["--tiny", "--random-0.6b"], "--random-0.6b"),
        (["--json", "/no/such/dir/m.json"], "/no/such/dir/m.json"),
        (["--from-json", str(SAVED), "--json", "b.json"], "--json"),
    ],
    ids=["bad-int", "two-sources", "json-dir", "from-json-json"],
)
def test_every_usage_error_is_one_error_line(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse's own errors printed its usage block, the CLI's later ones a bare ``error:``."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    line = _one_error_line(capsys.readouterr().err)
    assert info.value.code == 2 and needle in line and "usage:" not in line, line


# --- 4. a reader that leaves early ---------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("argv", "output"),
    [
        pytest.param(["--from-json", str(SAVED), "--html", "r.html"], "r.html", id="from-json-html"),
        # Both go through one writer (mismatch.cli.main under cliio.closed_pipe_dropped, the tables
        # printed before --json/--html is written); from-json-html above covers it in the default
        # run. This one, a run of the probe (about 6 s of CPU in its own process), is the same path
        # once more with another output, run by make test-full.
        pytest.param(
            ["--tiny", "--prompts", "2", "--new-tokens", "2", "--no-knobs", "--json", "q.json"],
            "q.json",
            id="tiny-json",
            marks=pytest.mark.full,
        ),
    ],
)
def test_a_closed_stdout_still_writes_every_output(argv: list[str], output: str, tmp_path: Path) -> None:
    """``python -m mismatch ... | head -1``: the read end is closed before the first write."""
    if output.endswith(".html"):
        pytest.importorskip("plotly")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mismatch", *argv],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, raw = proc.communicate(timeout=110)
    err = raw.decode()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "Broken pipe" not in err and "BrokenPipeError" not in err, err
    assert (tmp_path / output).stat().st_size > 0


# --- 2. gpu_check.sh -----------------------------------------------------------------------------


def _gpu_check(tmp_path: Path, cwd: Path, script: Path = SCRIPT, **env: str) -> subprocess.CompletedProcess:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OMP_NUM_THREADS": "1", "DEVICE": "cpu"}
    return subprocess.run(
        ["bash", str(script)], cwd=cwd, env=base | env, capture_output=True, text=True, timeout=300
    )


def test_gpu_check_fails_naming_every_failed_step(tmp_path: Path) -> None:
    """PYTHON=false: every step fails. The script used to exit 0; now the last line names them."""
    (tmp_path / "elsewhere").mkdir()
    done = _gpu_check(tmp_path, tmp_path / "elsewhere", PYTHON="false", OUT="out")
    last = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 1, done.stdout + done.stderr
    assert last.startswith("gpu_check: FAILED steps:"), last
    for name in ("env", "random06b", "rerun", "profile"):
        assert f"{name} (rc=1)" in last, last
    log = (tmp_path / "elsewhere" / "out" / "log.txt").read_text()  # a relative OUT: from the start dir
    assert "== profile: rc=1" in log and log.strip().splitlines()[-1] == last


def test_gpu_check_goes_on_after_a_failed_step_from_the_repo_root(tmp_path: Path) -> None:
    """A stub python fails the first probe only: the others still run, every command runs in the
    repository root (started elsewhere), the log shows what ran, and only that step is named."""
    calls = tmp_path / "calls.txt"
    stub = tmp_path / "python"
    fail = 'case "$*" in *random06b.json*) exit 3;; esac\nexit 0\n'
    stub.write_text(f'#!/bin/bash\nargs="$*"\necho "$PWD|${{args//$\'\\n\'/ }}" >> {calls}\n{fail}')
    stub.chmod(0o755)
    done = _gpu_check(tmp_path, tmp_path, PYTHON=str(stub), OUT=str(tmp_path / "out"), SRC="--tiny")
    last = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 1 and last.startswith("gpu_check: FAILED steps: random06b (rc=3)"), last
    assert "rerun" not in last and "profile" not in last, last
    ran = [line.split("|", 1) for line in calls.read_text().splitlines()]
    assert {cwd for cwd, _ in ran} == {str(REPO)}, ran
    assert any("rerun.json" in args for _, args in ran) and any("profile.py" in args for _, args in ran)
    log = (tmp_path / "out" / "log.txt").read_text()
    profile = next(line for line in log.splitlines() if line.startswith("== profile (limit"))
    assert "tiny on cpu" in profile and "--model tiny" in profile and "qwen3-8b" not in profile, profile


def test_gpu_check_default_out_is_under_the_repo_root(tmp_path: Path) -> None:
    """The default OUT (results/mismatch/gpu) is the root's, not the caller's directory's: the
    script is run from a copy whose root is a temporary folder."""
    root = tmp_path / "root"
    (root / "mismatch").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "mismatch" / "gpu_check.sh")
    (tmp_path / "cwd").mkdir()
    done = _gpu_check(tmp_path, tmp_path / "cwd", script=root / "mismatch" / "gpu_check.sh", PYTHON="false")
    assert done.returncode == 1
    assert (root / "results" / "mismatch" / "gpu" / "log.txt").is_file()
    assert not list((tmp_path / "cwd").iterdir())


def test_gpu_check_only_profile_runs_the_profile_alone(tmp_path: Path) -> None:
    """ONLY=profile (the profile's own CPU check) runs the profile and its roofline check, not the
    probes; a stub python stands in (the smoke run below runs the real profile step)."""
    calls = tmp_path / "calls.txt"
    stub = tmp_path / "python"
    stub.write_text(f'#!/bin/bash\nargs="$*"\necho "${{args//$\'\\n\'/ }}" >> {calls}\nexit 0\n')
    stub.chmod(0o755)
    done = _gpu_check(tmp_path, tmp_path, PYTHON=str(stub), OUT=str(tmp_path / "out"), ONLY="profile")
    last = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0 and last.startswith("gpu_check: every step passed"), done.stdout[-3000:]
    ran = calls.read_text()
    assert "profile.py" in ran and "check-roofline" in ran, ran
    assert "random06b" not in ran and "rerun.json" not in ran, ran
    assert "== profile: rc=0" in (tmp_path / "out" / "log.txt").read_text()


@pytest.mark.timeout(300)
def test_gpu_check_cpu_smoke_run_from_outside_the_repo(tmp_path: Path) -> None:
    """The documented CPU smoke run, started outside the repository: every step passes."""
    done = _gpu_check(
        tmp_path, tmp_path, PYTHON=sys.executable, SRC="--tiny", PROMPTS="2", NEW="2", OUT="out"
    )
    last = done.stdout.strip().splitlines()[-1]
    out = tmp_path / "out"
    assert done.returncode == 0 and last.startswith("gpu_check: every step passed"), done.stdout[-3000:]
    for name in ("random06b.json", "rerun.json", "profile.csv", "tables.txt"):
        assert (out / name).stat().st_size > 0, name
    # at most 7 files (the lent machine brings back 8), no temporary ones; versions are in the log
    names = {p.name for p in out.iterdir()}
    assert names == {"log.txt", "tables.txt", "random06b.json", "rerun.json", "profile.csv", "profile.txt"}
    assert "torch" in (out / "log.txt").read_text() and "RANDOM weights" in (out / "tables.txt").read_text()
    assert (
        "determinism: rerun in a fresh process reproduced every sample and row: True"
        in (out / "log.txt").read_text()
    )
    # the profile step (once tests/test_profile.py ran it alone, ONLY=profile, a second time): it
    # passed, measured every op of the roofline but all_reduce (one device), and the check's table
    # follows it
    assert "== profile: rc=0" in (out / "log.txt").read_text()
    assert {m.op for m in read_measurements(out / "profile.csv")} == set(OPS) - {"all_reduce"}
    profile = (out / "profile.txt").read_text()
    assert "decode_attention" in profile
    # the script, run as a file on the CPU without --allreduce-gpus, says why there is no all-reduce
    # (tests/test_profile.py's run of it as a file times the all-reduce too)
    skipped = next((x for x in profile.splitlines() if x.startswith("all-reduce: skipped")), "")
    assert "CPU" in skipped and "one GPU" not in skipped, profile[:3000]
