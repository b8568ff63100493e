"""An interrupted ``pipesim sweep`` over a preset's own parameter (``systems:roll --over
async_generation_ratio=0,1,2,3``), whose cells are designs built by the factory and whose axis
column is added after the sweep (:func:`pipesim.io.sweep_presets.with_knobs`), not a label of the
grid's cells.

What a user expects: the partial ``--csv`` has the axis's column, as the complete one does;
``--resume`` reads the finished cells back (runs only the others, labels each as before) and the
final CSV is the uninterrupted sweep's, byte for byte; without ``--csv`` the partial table printed
has the axis's column, as the complete table does. The interrupt is a real SIGINT sent by the
cell of ratio 2 to this process, as in ``tests/test_sweep_interrupts.py``; the cells run on one
thread (a fresh one per sweep, so a resume does not queue behind the interrupted cell) with a
cell function that returns at once.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim.io.sweeps as sweeps
from pipesim.io.cli import main

ROLL = ["sweep", "systems:roll", "--set", "steps=2", "--over", "async_generation_ratio=0,1,2,3", "--quiet"]

STATE: dict[str, Any] = {"stop_at": None, "ran": [], "release": threading.Event()}
"""``stop_at``: the ratio whose cell interrupts the sweep (None: none does); ``ran``: the ratios
whose cells ran; ``release``: let go of the interrupted cell's thread."""


def cell(scenario: Any) -> dict[str, float]:
    """The ratio's cell: Ctrl-C (SIGINT to this process) at ``stop_at``, waiting there until the
    test ends so it never finishes; else metrics of the ratio, at once."""
    ratio = scenario.admission.ratio  # RollGroupAdmission(ratio=async_generation_ratio)
    if ratio == STATE["stop_at"]:
        os.kill(os.getpid(), signal.SIGINT)
        STATE["release"].wait(30)
    STATE["ran"].append(ratio)
    return {"throughput_per_hour": 100.0 + ratio, "staleness_mean": ratio / 2, "staleness_max": float(ratio)}


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``pipesim sweep`` runs :func:`cell` on a one-thread pool of its own per sweep."""
    real = sweeps.sweep
    pools: list[ThreadPoolExecutor] = []
    STATE.update(stop_at=None, ran=[])
    STATE["release"].clear()

    def threaded(*args: Any, **kwargs: Any) -> Any:
        pools.append(ThreadPoolExecutor(1))
        return real(*args, **{**kwargs, "executor": pools[-1], "timeout_s": None, "fn": cell})

    monkeypatch.setattr(sweeps, "sweep", threaded)
    try:
        yield
    finally:
        STATE["release"].set()
        for pool in pools:
            pool.shutdown(wait=True)


def _interrupted(argv: list[str]) -> None:
    STATE.update(stop_at=2, ran=[])
    assert main(argv) == 130
    assert STATE["ran"] == [0, 1]
    STATE.update(stop_at=None, ran=[])


def test_resume_of_a_preset_axis_sweep_reads_the_cells_back_and_gives_the_uninterrupted_csv(
    tmp_path: Path, threads: None, capsys: pytest.CaptureFixture[str]
) -> None:
    full, runs = tmp_path / "full.csv", tmp_path / "runs.csv"
    assert main([*ROLL, "--csv", str(full)]) == 0
    _interrupted([*ROLL, "--csv", str(runs)])
    part = pd.read_csv(runs)
    assert list(part.columns)[:3] == ["design", "async_generation_ratio", "seed"]  # as the complete CSV's
    assert list(part["async_generation_ratio"]) == [0, 1] and part["partial"].all()
    capsys.readouterr()
    assert main([*ROLL, "--csv", str(runs), "--resume"]) == 0
    assert STATE["ran"] == [2, 3]  # ratios 0 and 1 were read back, not run again
    assert "2 of 4 cells read back" in capsys.readouterr().err
    assert runs.read_bytes() == full.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full.csv", "runs.csv"]  # no sidecar left


def _table(out: str) -> list[list[str]]:
    return [ln.split() for ln in out.splitlines() if ln.strip() and not ln.startswith(("partial:", "note:"))]


def test_the_partial_table_printed_over_a_preset_axis_has_its_column(
    threads: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(ROLL) == 0
    whole = _table(capsys.readouterr().out)
    _interrupted(ROLL)
    out, err = capsys.readouterr()
    assert err.strip().splitlines() == [
        "pipesim: interrupted: 2 of 4 cells had finished; nothing written (no --csv)"
    ]
    assert out.startswith("partial: interrupted after 2 of 4 cells had finished")
    part = _table(out)
    assert part[0][:3] == ["design", "async_generation_ratio", "n_seeds"] and part[0] == whole[0]
    assert part[1:] == whole[1:3]  # the rows of ratios 0 and 1, as the complete table prints them
    assert [row[:3] for row in part[1:]] == [
        ["async_generation_ratio=0", "0", "1"],
        ["async_generation_ratio=1", "1", "1"],
    ]
