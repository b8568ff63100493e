"""docs/usage.md's "From a config file", "Saving and comparing runs" and "Fitting your own trace":
every code block runs, in order, in a fresh directory.

Each ``pipesim`` of a bash block is a process of its own, a fresh interpreter that runs the console
script, forked from one that has imported pipesim already (tests/interpreters.py), so the import
(about 0.7 s of CPU, the most of a short command) is paid once a module, not once a command.
tests/test_doc_blocks.py runs its blocks the same way."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.interpreters import Interpreters

ROOT = Path(__file__).resolve().parent.parent
USAGE = ROOT / "docs" / "usage.md"
SECTIONS = ["From a config file", "Saving and comparing runs", "Fitting your own trace"]


def blocks(section: str) -> list[tuple[str, str]]:
    text = USAGE.read_text().split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(bash|python)\n(.*?)```", text, re.S)]


def readme_config_file_checks(work: Path, stdout: str) -> None:
    """The README's "From a config file" block is commands of this section's first block
    (tests/test_readme.py's test_the_config_file_block_is_run_by_test_usage): its checks."""
    text = (work / "areal.toml").read_text()
    # a system preset is written in its own knob names (issue 43 item 6), and loads back
    assert "schema_version" in text and "[system]" in text and "max_head_offpolicyness" in text
    assert len(re.findall(r"^throughput_per_hour\s+[\d,.]+$", stdout, re.M)) == 2  # each run's summary


@pytest.mark.parametrize("section", SECTIONS)
def test_every_example_of_the_section_runs(
    section: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interpreters: Interpreters
) -> None:
    found = blocks(section)
    assert found and any(kind == "bash" for kind, _ in found), f"{section}: no runnable example"
    interpreters.shim(tmp_path / "bin")
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
    }
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    namespace: dict = {}
    for i, (kind, code) in enumerate(found):
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
            if (section, i) == (SECTIONS[0], 0):
                readme_config_file_checks(work, proc.stdout)
        else:
            exec(compile(code, f"{USAGE}:{section}", "exec"), namespace)
