"""``pipesim sweep --resume``: the note on time after the last training step counts every cell.

Before: the share of a run after its last training step (``_tail_share``, a side value the CSV
has no column for) was known only for the cells run in this session, so a resumed sweep's note
said "in 2 of 2 runs" of a 4-cell table, and said nothing where only read-back cells had a long
tail. Now the partial table's sidecar keeps each finished cell's share and ``--resume`` reads it
back, so the resumed note is the uninterrupted sweep's; a cell read back from a sidecar that kept
none is said to be not counted, never taken as no tail. Driven in-process as
tests/test_sweepfix_resume.py does (one thread, a simulated Ctrl-C at a cell boundary).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pipesim.io.sweep_outputs as sweep_outputs
from pipesim.io.cli import main
from tests.test_sweepfix_resume import setup  # noqa: F401  (the fixture)


def tail_line(err: str) -> str:
    lines = [line for line in err.splitlines() if "after the last training step" in line]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def every_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run's tail is over the bar, so the note appears and counts every run it knows of."""
    monkeypatch.setattr(sweep_outputs, "TAIL_NOTE_SHARE", -1.0)


def interrupted_then_resumed(
    tmp_path: Path, state: dict[str, Any], capsys: pytest.CaptureFixture[str], forget: bool
) -> tuple[str, str]:
    """The uninterrupted sweep's tail line and the resumed one's (2 of its 4 cells read back);
    ``forget``: the sidecar loses the kept shares first (a partial table written before them)."""
    full, part = tmp_path / "full.csv", tmp_path / "part.csv"
    assert main([*state["argv"], "--csv", str(full)]) == 0
    whole = tail_line(capsys.readouterr().err)
    state["cut"] = lambda cells: cells[:2]
    assert main([*state["argv"], "--csv", str(part)]) == 130
    capsys.readouterr()
    if forget:
        side = tmp_path / "part.csv.sweep.json"
        kept = json.loads(side.read_text())
        kept.pop("tail_shares", None)
        side.write_text(json.dumps(kept))
    state["cut"], state["ran"] = None, []
    assert main([*state["argv"], "--csv", str(part), "--resume"]) == 0
    err = capsys.readouterr().err
    assert "2 of 4 cells read back" in err and len(state["ran"][0]) == 2
    return whole, tail_line(err)


def test_the_resumed_tail_note_counts_the_cells_read_back(
    tmp_path: Path,
    setup: dict[str, Any],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    every_tail: None,
) -> None:
    whole, resumed = interrupted_then_resumed(tmp_path, setup, capsys, forget=False)
    assert "in 4 of 4 runs" in whole, whole
    assert resumed == whole  # the same shares, the same maximum: read back exactly


def test_cells_read_back_without_a_kept_share_are_said_not_counted(
    tmp_path: Path,
    setup: dict[str, Any],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    every_tail: None,
) -> None:
    _, resumed = interrupted_then_resumed(tmp_path, setup, capsys, forget=True)
    assert "in 2 of 2 runs" in resumed, resumed
    assert "2 more read back by --resume without it, not counted" in resumed, resumed
