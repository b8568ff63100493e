"""Long commands say what they do (a bounds walkthrough): ``pipesim plan`` says its space's size
before enumerating it and shows a bar over the fluid cut's ceilings; ``pipesim run --intervals``
shows a bar over its draws and, interrupted, prints the ranges of the draws done as partial and
exits 130; an interrupted plan closes its bars before the line that says so."""

from __future__ import annotations

import copy
import importlib
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pipesim.calibrate.predict as predict_mod
import pipesim.plan as plan
import pipesim.plan.evaluate as ev
from pipesim.calibrate.predict import predict
from pipesim.io.cli import main
from pipesim.plan.build import candidates, space_size
from pipesim.plan.evaluate import Evaluator
from pipesim.plan.runspec import dumps, from_dict
from pipesim.plan.space import Space
from tests.test_plan_outputs import TINY as PLAN_TINY
from tests.test_plan_outputs import tiny_spec
from tests.test_runspec import SPEC

TINY = PLAN_TINY.replace("seeds = 3", "seeds = 2")  # test_plan_outputs' plan, 2 seeds in full

RUN_SPEC: dict[str, Any] = {  # test_runspec's spec, 2 steps, calibrated
    **SPEC,
    "run": {"steps": 2, "seed": 5},
    "calibration": {"values": {"mfu": 0.3}, "intervals": {"mfu": [0.2, 0.4]}},
}

search_mod = importlib.import_module("pipesim.plan.search")  # the package re-exports a function of that name
COUNT = re.compile(r"pipesim plan: ([\d,]+) designs? in the space")


def _tiny(tmp_path: Path) -> Path:
    return tiny_spec(tmp_path, TINY)


class Bar:
    """A stand-in for ``tqdm.tqdm`` that records each bar, and says on stderr when one closes
    (``_instances``: the open ones, as tqdm keeps them)."""

    made: list[Bar] = []
    _instances: set[Bar] = set()

    def __init__(self, iterable: Any = None, **kw: Any) -> None:
        self.iterable, self.kw, self.n, self.closed = iterable, kw, 0, False
        Bar.made.append(self)
        Bar._instances.add(self)

    def __iter__(self) -> Any:
        try:  # as tqdm's: an exception from inside the iterable closes the bar
            for x in self.iterable:
                yield x
                self.n += 1
        finally:
            self.close()

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def update(self, k: int = 1) -> None:
        self.n += k

    def close(self) -> None:
        import sys

        if not self.closed:
            self.closed = True
            Bar._instances.discard(self)
            print(f"[bar {self.kw.get('desc')} closed]", file=sys.stderr)

    def __hash__(self) -> int:
        return id(self)


@pytest.fixture
def bars(monkeypatch: pytest.MonkeyPatch) -> type[Bar]:
    import tqdm

    monkeypatch.setattr(Bar, "made", [])
    monkeypatch.setattr(Bar, "_instances", set())
    monkeypatch.setattr(tqdm, "tqdm", Bar)
    return Bar


# -- the space's size, said first ----------------------------------------------------------------


def test_the_plan_says_its_space_size_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The line on stderr gives the number of designs the search enumerates; --quiet drops it."""
    spec = plan.load(str(_tiny(tmp_path)))
    assert plan.main([str(_tiny(tmp_path)), "--no-cache", "--no-sensitivity"]) == 0
    err = capsys.readouterr().err
    said = COUNT.search(err.splitlines()[0])
    assert said is not None, err
    assert int(said.group(1).replace(",", "")) == len(candidates(spec))
    assert plan.main([str(_tiny(tmp_path)), "--no-cache", "--no-sensitivity", "--quiet"]) == 0
    assert COUNT.search(capsys.readouterr().err) is None


def test_the_count_comes_before_the_designs_are_enumerated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C inside the enumeration: the count was said already (before, nothing for minutes)."""

    def stopped(*a: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(search_mod, "candidates", stopped)
    assert plan.main([str(_tiny(tmp_path)), "--no-cache"]) == 130
    lines = capsys.readouterr().err.splitlines()
    assert COUNT.search(lines[0]) and "interrupted" in lines[-1], lines


@pytest.mark.parametrize(
    "space,groups",
    [
        (Space(placement=None, tp=(1, 2, 2), eta=(0, 1, 1), update=("drain", "inflight")), True),
        (Space(placement=(0, 2, 2, 3), eta=(2,), sync_every=(1, 2, 1), oversample=(1, 1.0, 1.25)), True),
        (Space(oversample=(1.0, 1.25, 1.5)), False),  # no groups: one over-sampling factor
    ],
)
def test_the_space_size_is_the_number_of_candidates(tmp_path: Path, space: Space, groups: bool) -> None:
    spec = plan.load(str(_tiny(tmp_path))).with_(space=space)
    if not groups:
        spec = spec.with_(workload=replace(spec.workload, samples_per_prompt=1))
    assert space_size(spec) == len(candidates(spec))


# -- the fluid cut's bar ------------------------------------------------------------------------


@pytest.mark.parametrize("shown", [True, False])
def test_the_fluid_cut_has_a_bar_over_every_design(tmp_path: Path, bars: type[Bar], shown: bool) -> None:
    spec = plan.load(str(_tiny(tmp_path)))
    pool = candidates(spec)
    search_mod.first_cut(spec, Evaluator(spec, None, shown, 0, None), pool, 2, 1, 0)
    fluid = [b for b in bars.made if "fluid" in str(b.kw.get("desc"))]
    assert len(fluid) == 1, [b.kw for b in bars.made]
    assert fluid[0].kw["total"] == len(pool) == fluid[0].n and fluid[0].closed
    assert fluid[0].kw["disable"] is (not shown)  # off a terminal (or --quiet): hidden


def test_an_interrupted_plan_closes_its_bars_before_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bars: type[Bar], capsys: pytest.CaptureFixture[str]
) -> None:
    """Interrupted in the NSGA-II screen, whose bar the search holds (the evaluator's close as the
    runs' iterator unwinds): before, it closed when the exception was dropped, and printed its
    last line under "interrupted"."""
    real, calls = ev.run_design, {"n": 0}

    def interrupted(*a: Any) -> dict[str, float]:
        calls["n"] += 1
        if calls["n"] > 3:
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(ev, "run_design", interrupted)
    monkeypatch.setattr(plan, "progress_wanted", lambda quiet: True)
    args = [str(_tiny(tmp_path)), "--no-cache", "--method", "optuna", "--set", "search.first_cut=false"]
    assert plan.main(args) == 130
    lines = capsys.readouterr().err.splitlines()
    said = next(i for i, x in enumerate(lines) if x.startswith("pipesim plan: interrupted"))
    closed = [i for i, x in enumerate(lines) if x.startswith("[bar ")]
    assert any("NSGA" in x for x in lines[:said]), lines
    assert closed and max(closed) < said == len(lines) - 1, lines


# -- run --intervals: a bar, and the draws done kept -----------------------------------------------


def _stopping_at(monkeypatch: pytest.MonkeyPatch, draw: int) -> None:
    """predict's ``draw``-th draw (1-based; 0: the spec's own run) raises KeyboardInterrupt."""
    real, calls = predict_mod.run, {"n": 0}

    def run(*a: Any, **k: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == draw + 1:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(predict_mod, "run", run)


def test_an_interrupted_prediction_keeps_the_ranges_of_its_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Interrupted in draw 4 of 6: the ranges of draws 1-3, which are a 3-draw prediction's."""
    rs = from_dict(copy.deepcopy(RUN_SPEC))
    whole = predict(rs, 3, np.random.default_rng(7))
    _stopping_at(monkeypatch, 4)
    told: list[int] = []
    with pytest.raises(predict_mod.PredictInterrupted) as e:
        predict(rs, 6, np.random.default_rng(7), on_draw=told.append)
    assert (e.value.done, e.value.n, told) == (3, 6, [1, 2, 3])
    assert e.value.ranges == whole
    assert isinstance(e.value, KeyboardInterrupt)  # a caller that does not know it still stops


@pytest.mark.parametrize("draw", [0, 1, 2])
def test_fewer_than_two_draws_give_no_range(monkeypatch: pytest.MonkeyPatch, draw: int) -> None:
    _stopping_at(monkeypatch, draw)
    with pytest.raises(predict_mod.PredictInterrupted) as e:
        predict(from_dict(copy.deepcopy(RUN_SPEC)), 5, np.random.default_rng(0))
    assert e.value.done == max(draw - 1, 0) and e.value.ranges is None


def test_run_intervals_interrupted_prints_the_partial_ranges_and_exits_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cal.toml"
    path.write_text(dumps(RUN_SPEC, "toml"))
    _stopping_at(monkeypatch, 4)
    out_json = tmp_path / "r.json"
    assert main(["run", str(path), "--intervals", "6", "--json", str(out_json)]) == 130
    got = capsys.readouterr()
    assert "interrupted after 3 of 6 draws" in got.out and "partial" in got.out, got.out
    head = next(i for i, x in enumerate(got.out.splitlines()) if "interrupted after" in x)
    rows = got.out.splitlines()[head + 1 :]
    assert any(r.startswith("throughput_per_hour") and "[" in r for r in rows), rows
    err = got.err.strip().splitlines()
    assert err[-1].startswith("pipesim: interrupted:") and "--json" in err[-1], err
    assert "Traceback" not in got.err and not out_json.exists()


def test_run_intervals_shows_a_bar_over_its_draws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bars: type[Bar], capsys: pytest.CaptureFixture[str]
) -> None:
    import pipesim.io.cli_runspec as cli_runspec

    path = tmp_path / "cal.toml"
    path.write_text(dumps(RUN_SPEC, "toml"))
    monkeypatch.setattr(cli_runspec, "progress_wanted", lambda quiet: not quiet)
    assert main(["run", str(path), "--intervals", "3"]) == 0
    draws = [b for b in bars.made if b.kw.get("total") == 3 and "draw" in str(b.kw.get("desc"))]
    assert len(draws) == 1 and draws[0].n == 3 and draws[0].closed and not draws[0].kw["disable"]
    assert "95% range over 3 runs" in capsys.readouterr().out
