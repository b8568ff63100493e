"""A ``none`` axis value of ``pipesim sweep``, and what ``--resume`` leaves once the table is whole.

Before: ``--over max_concurrent_rollouts=32,none`` (a preset's parameter) and ``--over
timeout=none,Timeout(cap_s=100)`` (a scenario's field) put a raw None in the label column. pandas
took it for a missing value: NaN in the printed and HTML tables, an empty CSV cell, ``32.0`` for the
32 beside it, and no point in any figure (the no-timeout cell vanished; the other figure was a
numeric 31-33 axis with lines named ``32.0`` and ``nan``). Now the value is labelled ``none``
everywhere, integers stay integers, and the figures draw it as a category.

And: a ``--resume`` that completed the table left the partial table (``runs.partial.csv``) and its
``.sweep.json``; a second ``--resume`` read its cells back and ran the rest of a finished sweep
again. Now this sweep's partial tables go once the complete table is written, and a ``--resume``
onto a complete table runs nothing. The interrupt is simulated at a cell boundary, as in
``tests/test_sweepfix_resume.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pipesim.io.sweeps as sweeps
import pipesim.io.viz as viz
from pipesim import Timeout
from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.io.registry import get_scenario

AREAL = [
    "sweep",
    "systems:areal",
    "--over",
    "max_head_offpolicyness=0,2",
    "--over",
    "max_concurrent_rollouts=32,none",
    "--seeds",
    "2",
    "--set",
    "steps=2",
    "--quiet",
]
TIMEOUT = [
    "sweep",
    "async-eta1",
    "--set",
    "steps=2",
    "--over",
    "timeout=none,Timeout(cap_s=100)",
    "--seeds",
    "2",
    "--quiet",
]


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The sweep runs on one thread; ``ran`` records the cells each sweep ran, ``cut`` (when set)
    picks the cells to run before a simulated Ctrl-C, and ``figs`` holds the page's line figures."""
    ex = ThreadPoolExecutor(1)
    real_sweep, real_cells, real_lines = sweeps.sweep, sweeps.run_cells, viz.lines_figure
    state: dict[str, Any] = {"cut": None, "ran": [], "figs": []}

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

    def lines(agg: pd.DataFrame, x: str, metric: str, **kw: Any) -> Any:
        fig = real_lines(agg, x, metric, **kw)
        state["figs"].append((x, metric, fig))
        return fig

    monkeypatch.setattr(sweeps, "sweep", threaded)
    monkeypatch.setattr(sweeps, "run_cells", cells)
    monkeypatch.setattr(viz, "lines_figure", lines)
    yield state
    ex.shutdown()


def _points(fig: Any) -> list[list[Any]]:
    """The x values of each line of a figure (its bands left out)."""
    return [list(t.x) for t in fig.data if t.fill is None]


def test_a_preset_axis_none_is_labelled_none_everywhere(
    tmp_path: Path, setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    csv, page = tmp_path / "areal.csv", tmp_path / "areal.html"
    assert main([*AREAL, "--csv", str(csv), "--html", str(page)]) == 0
    printed = capsys.readouterr().out
    assert "NaN" not in printed and "none" in printed
    text = pd.read_csv(csv, dtype=str, keep_default_na=False)
    assert list(dict.fromkeys(text["max_concurrent_rollouts"])) == ["32", "none"]  # not 32.0 and ""
    assert all(
        d.endswith(f"max_concurrent_rollouts={v}")
        for d, v in text[["design", "max_concurrent_rollouts"]].values
    )
    html = page.read_text()
    assert ">none<" in html and ">NaN<" not in html and ">32.0<" not in html  # the page's table
    figs = [(x, fig) for x, _, fig in setup["figs"] if x == "max_concurrent_rollouts"]
    assert figs
    for _, fig in figs:
        assert fig.layout.xaxis.type == "category"  # plotly took [32, "none"] for a number axis
        assert [str(v) for v in fig.layout.xaxis.categoryarray] == ["32", "none"]
        assert all([str(v) for v in xs] == ["32", "none"] for xs in _points(fig))
        names = [t.name for t in fig.data if t.fill is None]
        assert len(set(names)) == len(names) == 2  # a line per eta, not two lines on one point
    eta = [fig for x, _, fig in setup["figs"] if x == "max_head_offpolicyness"]
    assert eta and all({t.name for t in fig.data if t.fill is None} == {"32", "none"} for fig in eta)


def test_a_field_axis_none_draws_its_cell(
    tmp_path: Path, setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    csv = tmp_path / "to.csv"
    assert main([*TIMEOUT, "--csv", str(csv), "--html", str(tmp_path / "to.html")]) == 0
    assert "NaN" not in capsys.readouterr().out
    timeouts = pd.read_csv(csv, keep_default_na=False)["timeout"]
    assert list(dict.fromkeys(timeouts)) == ["none", "Timeout(cap_s=100)"]
    figs = [fig for x, _, fig in setup["figs"] if x == "timeout"]
    assert len(figs) == 2  # throughput and staleness
    for fig in figs:
        assert _points(fig) == [["none", "Timeout(cap_s=100)"]]
        assert all(pd.notna(list(t.y)).all() for t in fig.data if t.fill is None)


def test_the_python_api_labels_none_as_the_cli_does() -> None:
    scen = get_scenario("async-eta1").with_(steps=2)
    res = sweeps.sweep(
        scen,
        {"timeout": [None, Timeout(cap_s=100)]},
        executor=ThreadPoolExecutor(1),
        timeout_s=None,
        progress=False,
    )
    agg = res.aggregate
    assert list(agg["timeout"]) == ["none", "Timeout(cap_s=100)"]
    assert list(res.runs["timeout"]) == ["none", "Timeout(cap_s=100)"]
    fig = viz.lines_figure(agg, "timeout", "throughput_per_hour")
    assert _points(fig) == [["none", "Timeout(cap_s=100)"]] and fig.layout.xaxis.type == "category"
    # the cells ran what they say: the "none" one has no timeout
    cells = sweeps.grid(scen, {"timeout": [None, Timeout(cap_s=100)]})
    assert [c.scenario.timeout for c in cells] == [None, Timeout(cap_s=100)]
    with pytest.raises(FieldError) as err:  # None and "none" would share a row
        sweeps.grid(scen, {"timeout": [None, "none"]})
    assert err.value.field == "over.timeout[1]"


def test_resume_with_a_none_column_gives_the_uninterrupted_csv_and_drops_the_partial_table(
    tmp_path: Path, setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    full, runs = tmp_path / "full.csv", tmp_path / "runs.csv"
    partial = tmp_path / "runs.partial.csv"
    assert main([*AREAL, "--csv", str(full)]) == 0
    runs.write_text("a complete,earlier table\n1,2\n")  # so the partial table goes beside it
    setup["cut"] = lambda cells: cells[:3]
    assert main([*AREAL, "--csv", str(runs)]) == 130
    assert partial.is_file() and (tmp_path / "runs.partial.csv.sweep.json").is_file()
    setup["cut"], setup["ran"] = None, []
    capsys.readouterr()
    assert main([*AREAL, "--csv", str(runs), "--resume"]) == 0
    assert len(setup["ran"][0]) == 8 - 3
    err = capsys.readouterr().err
    assert "3 of 8 cells read back" in err and str(partial) in err
    assert runs.read_bytes() == full.read_bytes()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["full.csv", "runs.csv"]  # no partial table, no .sweep.json

    # a resume of the finished sweep runs nothing and leaves the table as it is
    setup["ran"] = []
    assert main([*AREAL, "--csv", str(runs), "--resume"]) == 2
    assert setup["ran"] == []
    assert "--resume" in capsys.readouterr().err
    assert runs.read_bytes() == full.read_bytes()


def test_finishing_a_sweep_keeps_another_sweeps_partial_table(
    tmp_path: Path, setup: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs.csv"
    runs.write_text("a complete,earlier table\n1,2\n")
    setup["cut"] = lambda cells: cells[:1]
    assert main([*TIMEOUT, "--csv", str(runs)]) == 130
    other = tmp_path / "runs.partial.csv"
    kept = other.read_bytes()
    setup["cut"] = None
    other_sweep = [a if a != "2" else "3" for a in TIMEOUT]  # 3 seeds: another sweep
    assert main([*other_sweep, "--csv", str(runs)]) == 0
    assert other.read_bytes() == kept and (tmp_path / "runs.partial.csv.sweep.json").is_file()
    assert "removed" not in capsys.readouterr().err
