"""A user walkthrough: ``python -m scenarios.cosim --retable e.json`` took a file with no run in it.

A blank file, ``{}`` or ``[]`` printed the tables' headers with no row under them, exit 0, and the
advice "add sync to --designs"; ``{"foo": 1}`` was refused as not a ``--json`` file of this
command. No file the command writes is empty (the grid writes after each finished run), so a
``runs`` list with nothing in it is refused too. ``--resume`` still starts afresh from such a file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scenarios import cosim, cosim_report


class RunStarted(Exception):
    """Raised where the grid would start its first run."""


@pytest.fixture(autouse=True)
def no_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    def started(*args: Any, **kwargs: Any) -> Any:
        raise RunStarted

    monkeypatch.setattr(cosim_report, "run_grid", started)


EMPTY = {"blank": "", "object": "{}", "list": "[]", "empty runs": json.dumps({"table": [], "runs": []})}


@pytest.mark.parametrize("text", list(EMPTY.values()), ids=list(EMPTY))
def test_retable_refuses_a_file_with_no_run(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "e.json"
    path.write_text(text)
    with pytest.raises(SystemExit) as info:
        cosim.main(["--retable", str(path)])
    assert info.value.code == 2
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].split("error:", 1)[1].strip().startswith(f"--retable {path}")
    assert "--designs" not in captured.out  # no table, no advice about its rows


@pytest.mark.parametrize("text", list(EMPTY.values()), ids=list(EMPTY))
def test_resume_starts_afresh_from_a_file_with_no_run(text: str, tmp_path: Path) -> None:
    path = tmp_path / "e.json"
    path.write_text(text)
    argv = ["--designs", "sync", "--corrections", "none", "--seed-list", "0", "--steps", "2"]
    with pytest.raises(RunStarted):
        cosim.main([*argv, "--json", str(path), "--resume"])
