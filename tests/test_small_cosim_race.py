"""The cosim race table names every design it cannot race, per correction.

A resumed ``--json`` (or one grid of ``--designs sync,async-eta2 --corrections none`` then
another adding ``async-eta2`` with ``tis``) holds ``async-eta2 tis`` but no ``sync tis``: the
race table printed the ``none`` row and left ``tis`` out without a word, as if it was never
asked for. It now says that correction has no sync runs to race against, as the whole table
already did with no sync runs at all. Built from stored records (no training).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scenarios import cosim_report
from scenarios.cosim_tables import aggregate, race_table
from tests.test_offfix_walkthrough import cosim_runs


def _mixed() -> list[dict[str, object]]:
    """sync and async-eta2 with none, then async-eta2 alone with tis (no sync tis)."""
    return cosim_runs(["sync", "async-eta2"], ["none"]) + cosim_runs(["async-eta2"], ["tis"])


def test_a_correction_without_sync_runs_says_so() -> None:
    lines = race_table(_mixed(), 0.5).splitlines()
    raced = [line for line in lines if line.startswith("async-eta2 none ")]
    assert len(raced) == 1 and "of  3" in raced[0], lines  # the raced row is still there
    unraced = [line for line in lines if line.startswith("async-eta2 tis ")]
    assert len(unraced) == 1, lines
    assert "no sync tis runs to race against" in unraced[0], unraced
    assert unraced[0].index("|") == raced[0].index("|")  # in the table's columns
    assert "sign test" not in unraced[0] and "p =" not in unraced[0]


def test_a_correction_with_sync_but_no_shared_seed_says_so() -> None:
    runs = cosim_runs(["sync", "async-eta2"], ["none"])
    for r in runs:  # async-eta2 on seeds 10-12, sync on 0-2: nothing to pair
        if r["design"] == "async-eta2":
            r["seed"] = int(r["seed"]) + 10
    lines = race_table(runs, 0.5).splitlines()
    row = [line for line in lines if line.startswith("async-eta2 none ")]
    assert len(row) == 1 and "no seed shared with sync none" in row[0], lines
    assert "of  0" not in row[0] and "p =" not in row[0]


def test_retable_of_a_resumed_file_prints_the_unraced_correction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = _mixed()
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(cosim_report.to_json(records, aggregate(records, 0.5))))
    assert cosim_report.cli(["--retable", str(path)]) == 0
    out = capsys.readouterr().out
    race = out[out.index("paired time to 0.50 against sync") :]
    assert "async-eta2 none " in race and "no sync tis runs to race against" in race, race
