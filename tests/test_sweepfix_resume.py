"""``pipesim sweep --resume``, and a second interrupted sweep that kept the first one's cells.

Before: an interrupted sweep could not be resumed (``pipesim plan`` and the offpolicy scripts
can), and a second interrupted sweep to the same ``--csv`` replaced the first one's partial table
(``big_int.partial.csv``: 10 rows, then 4). Now a partial table carries its sweep's fingerprint
(``<csv>.sweep.json``), a second interrupted run of the same sweep merges into it, another sweep's
goes to a numbered file, and ``--resume`` reruns only the cells no table of this sweep holds.
The interrupt is simulated at a cell boundary: the sweep's ``run_cells`` runs some cells, then
raises KeyboardInterrupt, as Ctrl-C does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim.io.sweeps as sweeps
from pipesim.io.cli import main

SCENARIO = """\
schema_version: 1
name: mine
pipeline: {n_slots: 8, batch_size: 8, max_staleness: 1, steps: 2}
durations: {type: LogNormalDurations, median_s: 60.0, sigma: 0.8}
"""


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The sweep runs on one thread (no process start-up); ``ran`` records the cells each sweep ran."""
    ex = ThreadPoolExecutor(1)
    real_sweep, real_cells = sweeps.sweep, sweeps.run_cells
    state: dict[str, Any] = {"cut": None, "ran": []}

    def threaded(*args: Any, **kwargs: Any) -> Any:
        return real_sweep(*args, **{**kwargs, "executor": ex, "timeout_s": None})

    def cells(ex_: Any, todo: Sequence[Any], *rest: Any) -> Any:
        pick = state["cut"]
        run = list(todo) if pick is None else pick(list(todo))
        state["ran"].append([c.labels for c in run])
        out = real_cells(ex_, run, *rest)
        if pick is not None:
            raise KeyboardInterrupt("simulated Ctrl-C")
        return out

    monkeypatch.setattr(sweeps, "sweep", threaded)
    monkeypatch.setattr(sweeps, "run_cells", cells)
    scen = tmp_path / "mine.yaml"
    scen.write_text(SCENARIO)
    state["argv"] = ["sweep", str(scen), "--over", "max_staleness=0,1", "--seeds", "2", "--quiet"]
    yield state
    ex.shutdown()


def test_resume_reruns_only_the_missing_cells_and_gives_the_uninterrupted_csv(
    tmp_path: Path, setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    full, part = tmp_path / "full.csv", tmp_path / "part.csv"
    assert main([*setup["argv"], "--csv", str(full)]) == 0
    setup["cut"] = lambda cells: cells[:1]
    assert main([*setup["argv"], "--csv", str(part)]) == 130
    setup["cut"] = lambda cells: cells[-1:]  # a second interrupted run: another cell
    assert main([*setup["argv"], "--csv", str(part)]) == 130
    kept = pd.read_csv(part)
    assert len(kept) == 2 and kept["partial"].all()  # merged: the first run's cell is still there
    assert "earlier interrupted run" in capsys.readouterr().err
    setup["cut"], setup["ran"] = None, []
    assert main([*setup["argv"], "--csv", str(part), "--resume"]) == 0
    ran = setup["ran"][0]
    assert len(ran) == 2, ran  # 4 cells, 2 read back
    assert "2 of 4 cells read back" in capsys.readouterr().err
    pd.testing.assert_frame_equal(pd.read_csv(part), pd.read_csv(full))
    assert part.read_bytes() == full.read_bytes()
    assert not (tmp_path / "part.csv.sweep.json").exists()  # the complete table has none


def test_resume_refuses_a_partial_table_of_another_sweep_naming_what_differs(
    tmp_path: Path, setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    part = tmp_path / "part.csv"
    setup["cut"] = lambda cells: cells[:1]
    assert main([*setup["argv"], "--csv", str(part)]) == 130
    before = part.read_bytes()
    setup["cut"] = None
    other = [a if a != "max_staleness=0,1" else "max_staleness=0,2" for a in setup["argv"]]
    capsys.readouterr()
    assert main([*other, "--csv", str(part), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--resume" in err and "--over" in err and "max_staleness=0,2" in err, err
    assert main([*setup["argv"], "--seeds", "3", "--csv", str(part), "--resume"]) == 2
    assert "the seeds" in capsys.readouterr().err
    assert part.read_bytes() == before


def test_resume_needs_csv(setup: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*setup["argv"], "--resume"]) == 2
    assert "--csv" in capsys.readouterr().err


def test_another_sweeps_interrupt_goes_to_a_numbered_file_and_keeps_the_first(
    tmp_path: Path, setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    keep = tmp_path / "big.csv"
    keep.write_text("a complete,earlier result\n1,2\n")
    setup["cut"] = lambda cells: cells[:3]
    assert main([*setup["argv"], "--csv", str(keep)]) == 130
    first = tmp_path / "big.partial.csv"
    rows = first.read_bytes()
    assert len(pd.read_csv(first)) == 3
    capsys.readouterr()
    other = [a if a != "max_staleness=0,1" else "max_staleness=2,3" for a in setup["argv"]]
    setup["cut"] = lambda cells: cells[:1]
    assert main([*other, "--csv", str(keep)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    second = tmp_path / "big.partial.2.csv"
    assert len(err) == 1 and str(second) in err[0] and str(first) in err[0], err
    assert first.read_bytes() == rows  # the first sweep's 3 cells are still there
    assert list(pd.read_csv(second)["max_staleness"]) == [2]
