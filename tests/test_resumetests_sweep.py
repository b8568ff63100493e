"""``pipesim sweep --resume``: what the partial table's fingerprint and merge promise.

Three promises of :mod:`pipesim.io.sweep_resume` that no test held (a mutation audit removed each
and every test passed):

- the grid hash covers every cell's scenario, so a scenario file edited (or a ``--set`` changed)
  between an interrupted sweep and its ``--resume`` is refused, naming what differs, rather than
  its old rows being read back as this sweep's;
- a resumed cell's share of time after its last training step (the sidecar's ``tail_shares``) is
  read back exactly, equal to the uninterrupted sweep's per cell;
- a second interrupted run of the same sweep merged into its partial table keeps the new row of a
  cell both hold (a cell that failed the first time and succeeds now is ``ok``, not failed).

Driven in-process as tests/test_sweepfix_resume.py does: one thread, and a simulated Ctrl-C at a
cell boundary (``run_cells`` runs the cells ``cut`` picks, then raises KeyboardInterrupt).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim.io.cli_sweep as cli_sweep
import pipesim.io.sweeps as sweeps
from pipesim.io.cli import main

SCENARIO = """\
schema_version: 1
name: mine
pipeline: {n_slots: 8, batch_size: 8, max_staleness: 1, steps: 2}
durations: {type: LogNormalDurations, median_s: 60.0, sigma: 0.8}
"""


@pytest.fixture
def sw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The sweep on one thread. ``cut`` picks the cells a run gets to before its Ctrl-C, ``ran``
    records the cells each run ran, ``fail_first`` makes the next cell to run raise once, and
    ``shares`` records, per finished sweep, each cell's ``_tail_share`` as its notes saw it."""
    ex = ThreadPoolExecutor(1)
    real_sweep, real_cells, real_notes = sweeps.sweep, sweeps.run_cells, cli_sweep._notes
    state: dict[str, Any] = {"cut": None, "ran": [], "fail_first": False, "shares": []}

    def threaded(*args: Any, **kwargs: Any) -> Any:
        fn = kwargs["fn"]

        def cell_fn(scenario: Any) -> Any:
            if state["fail_first"]:
                state["fail_first"] = False
                raise RuntimeError("a transient failure")
            return fn(scenario)

        return real_sweep(*args, **{**kwargs, "executor": ex, "timeout_s": None, "fn": cell_fn})

    def cells(ex_: Any, todo: Sequence[Any], *rest: Any) -> Any:
        pick = state["cut"]
        run = list(todo) if pick is None else pick(list(todo))
        state["ran"].append([c.labels for c in run])
        out = real_cells(ex_, run, *rest)
        if pick is not None:
            raise KeyboardInterrupt("simulated Ctrl-C")
        return out

    def notes(cells_: Any, res: Any, seeds: int) -> list[str]:
        runs = res.runs
        key = zip(runs["max_staleness"].astype(str), runs["seed"].astype(str), strict=True)
        state["shares"].append(dict(zip(key, runs["_tail_share"], strict=True)))
        return real_notes(cells_, res, seeds)

    monkeypatch.setattr(sweeps, "sweep", threaded)
    monkeypatch.setattr(sweeps, "run_cells", cells)
    monkeypatch.setattr(cli_sweep, "_notes", notes)
    scen = tmp_path / "mine.yaml"
    scen.write_text(SCENARIO)
    state["scen"] = scen
    state["argv"] = ["sweep", str(scen), "--over", "max_staleness=0,1", "--seeds", "2", "--quiet"]
    yield state
    ex.shutdown()


def _interrupt(sw: dict[str, Any], csv: Path, n: int) -> None:
    sw["cut"] = lambda cells: cells[:n]
    assert main([*sw["argv"], "--csv", str(csv)]) == 130
    sw["cut"] = None


def test_resume_refuses_a_partial_table_whose_scenario_changed_since(
    tmp_path: Path, sw: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    part, scen = tmp_path / "part.csv", sw["scen"]
    _interrupt(sw, part, 1)
    before = part.read_bytes()
    capsys.readouterr()
    sw["ran"] = []
    # the file edited: the same settings as given, other cells
    scen.write_text(SCENARIO.replace("median_s: 60.0", "median_s: 61.0"))
    assert main([*sw["argv"], "--csv", str(part), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--resume" in err and str(part) in err and "scenario" in err, err
    # the file as it was, but a --set that changes every cell: named as the setting that differs
    scen.write_text(SCENARIO)
    assert main([*sw["argv"], "--set", "durations.median_s=61", "--csv", str(part), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "--resume" in err and "--set" in err and "median_s=61" in err, err
    assert sw["ran"] == [] and part.read_bytes() == before  # refused before anything ran or was written
    # the same sweep again: resumed, its one finished cell read back
    assert main([*sw["argv"], "--csv", str(part), "--resume"]) == 0
    assert "1 of 4 cells read back" in capsys.readouterr().err
    assert len(sw["ran"]) == 1 and len(sw["ran"][0]) == 3


def test_resumed_cells_keep_their_tail_shares_exactly(
    tmp_path: Path, sw: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    full, part = tmp_path / "full.csv", tmp_path / "part.csv"
    assert main([*sw["argv"], "--csv", str(full)]) == 0
    _interrupt(sw, part, 2)
    sw["ran"] = []
    assert main([*sw["argv"], "--csv", str(part), "--resume"]) == 0
    assert "2 of 4 cells read back" in capsys.readouterr().err
    whole, resumed = sw["shares"]
    ran = {(str(c["max_staleness"]), str(c["seed"])) for c in sw["ran"][0]}
    read_back = {k: v for k, v in resumed.items() if k not in ran}
    assert len(read_back) == 2 and all(v > 0 for v in read_back.values()), resumed  # not vacuous
    assert resumed == whole  # per cell, bit for bit: the read-back ones too


def test_a_merged_partial_table_keeps_the_new_row_of_a_cell_both_hold(
    tmp_path: Path, sw: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    full, part = tmp_path / "full.csv", tmp_path / "part.csv"
    assert main([*sw["argv"], "--csv", str(full)]) == 0
    sw["fail_first"] = True
    _interrupt(sw, part, 1)  # the first cell finished as failed
    first = pd.read_csv(part)
    assert list(first["status"]) == ["failed"], first
    _interrupt(sw, part, 2)  # run again (no --resume): the first cell succeeds now
    merged = pd.read_csv(part).drop(columns="partial")
    want = pd.read_csv(full).drop(columns="partial").iloc[:2]
    pd.testing.assert_frame_equal(merged, want)
    # and the resume from it is the uninterrupted sweep, byte for byte
    assert main([*sw["argv"], "--csv", str(part), "--resume"]) == 0
    assert "2 of 4 cells read back" in capsys.readouterr().err
    assert part.read_bytes() == full.read_bytes()
