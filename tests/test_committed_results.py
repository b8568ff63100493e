"""The committed study results are the ones their tables were printed from: re-tabling
``results/offpolicy/staleness.json`` (``--table-only``) gives ``results/offpolicy/staleness.txt``
exactly. A run that overwrites the JSON (the script's default ``--json``) and is committed by
mistake fails here (it once did: a one-run file replaced the 10-seed study)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parent.parent / "results" / "offpolicy"


def test_the_staleness_table_is_the_tabling_of_the_committed_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from offpolicy import staleness

    copy = tmp_path / "staleness.json"
    shutil.copy(RESULTS / "staleness.json", copy)
    staleness.main(["--table-only", "--json", str(copy)])
    capsys.readouterr()
    assert (tmp_path / "staleness.txt").read_text() == (RESULTS / "staleness.txt").read_text()
