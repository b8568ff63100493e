"""gpu_check.sh's guards for its one run on a lent GPU: a rerun that differs fails the determinism
step (it said "every step passed" while its log said False), an unset HOME does not end the script
before its summary (``set -u``), and an unset OUT says where the files went."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_mismatch_gpu_review import BASE_ENV, SCRIPT, STUB

DETERMINISM = re.search(r"<<'PYEOF'\n(.*?)\nPYEOF", SCRIPT.read_text(), re.S).group(1)  # type: ignore[union-attr]


@pytest.mark.parametrize(("changed", "rc"), [(False, 0), (True, 1)])
def test_the_determinism_step_fails_when_the_rerun_differs(tmp_path: Path, changed: bool, rc: int) -> None:
    run = {"samples": [[1, 2, 3]], "comparisons": [{"row": "engine vs trainer", "mean": 1.6e-3}]}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(run))
    if changed:
        run["comparisons"][0]["mean"] = 1.7e-3  # type: ignore[index]
    b.write_text(json.dumps(run))
    done = subprocess.run([sys.executable, "-c", DETERMINISM, str(a), str(b)], capture_output=True, text=True)
    assert done.returncode == rc, done.stderr
    assert f"reproduced every sample and row: {not changed}" in done.stdout


def _run(tmp_path: Path, env: dict[str, str], script: Path = SCRIPT) -> subprocess.CompletedProcess[str]:
    stub = tmp_path / "python"
    stub.write_text(STUB)
    stub.chmod(0o755)
    (tmp_path / "calls.txt").write_text("")
    base = BASE_ENV | {"PYTHON": str(stub), "CALLS": str(tmp_path / "calls.txt"), "DEVICE": "cpu"}
    return subprocess.run(
        ["bash", str(script)], cwd=tmp_path, env=base | env, capture_output=True, text=True, timeout=120
    )


def test_an_unset_home_still_ends_with_the_summary(tmp_path: Path) -> None:
    done = _run(tmp_path, {"OUT": str(tmp_path / "out")})  # no HOME in the environment
    assert "unbound variable" not in done.stderr, done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("gpu_check: "), done.stdout[-2000:]
    assert "== steps" in (tmp_path / "out" / "log.txt").read_text()


def test_an_unset_out_says_where_the_files_go(tmp_path: Path) -> None:
    """Run from a copy of the script, so that its default OUT is under tmp_path, not the checkout."""
    copy = tmp_path / "repo" / "mismatch" / "gpu_check.sh"
    copy.parent.mkdir(parents=True)
    shutil.copy(SCRIPT, copy)
    done = _run(tmp_path, {"HOME": str(tmp_path)}, script=copy)
    assert "OUT is not set" in done.stderr and "results/mismatch/gpu" in done.stderr, done.stderr
    assert (tmp_path / "repo" / "results" / "mismatch" / "gpu" / "log.txt").is_file()
