"""docs/usage.md's "From a config file", "Saving and comparing runs" and "Fitting your own trace":
every code block runs, in order, in a fresh directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
USAGE = ROOT / "docs" / "usage.md"
SECTIONS = ["From a config file", "Saving and comparing runs", "Fitting your own trace"]


def blocks(section: str) -> list[tuple[str, str]]:
    text = USAGE.read_text().split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(bash|python)\n(.*?)```", text, re.S)]


@pytest.mark.parametrize("section", SECTIONS)
def test_every_example_of_the_section_runs(
    section: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = blocks(section)
    assert found and any(kind == "bash" for kind, _ in found), f"{section}: no runnable example"
    shim = tmp_path / "bin" / "pipesim"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pipesim "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    namespace: dict = {}
    for kind, code in found:
        code = code.replace("../shared/", f"{ROOT.parent}/shared/")  # paths from the repository root
        if kind == "bash":
            proc = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", code],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=240,
            )
            assert proc.returncode == 0, f"{section}:\n{code}\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
            assert "Traceback" not in proc.stderr
        else:
            exec(compile(code, f"{USAGE}:{section}", "exec"), namespace)
