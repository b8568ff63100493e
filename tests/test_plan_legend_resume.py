"""A newcomer's reading of ``pipesim plan``: the best designs' table is followed by a legend of the
design labels (``split 6:2``, ``os=1.25``, ``k=2`` were explained nowhere in the output), and an
interrupted plan that used the run cache says how to continue it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import pipesim.plan as plan
import pipesim.plan.evaluate as ev
from pipesim.plan.report import LEGEND, text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plan import small_spec  # noqa: E402
from test_plan_outputs import tiny_spec  # noqa: E402


def test_the_best_table_is_followed_by_the_label_legend() -> None:
    lines = text(plan.plan(small_spec(method="grid", seeds=1)), top=3).splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("best feasible designs"))
    after = next(i for i in range(at + 3, len(lines)) if not lines[i].startswith(("colocated ", "split ")))
    assert lines[after] == LEGEND
    for word in ("split T:R", "tpN", "eta", "k =", "os ="):
        assert word in LEGEND


@pytest.mark.parametrize(("cache", "hinted"), [(True, True), (False, False)])
def test_an_interrupted_plan_says_how_to_resume_when_it_cached_its_runs(
    cache: bool, hinted: bool, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    real_run, calls = ev.run_design, {"n": 0}

    def interrupted(*a: Any) -> dict[str, float]:
        calls["n"] += 1
        if calls["n"] > 3:
            raise KeyboardInterrupt
        return real_run(*a)

    monkeypatch.setattr(ev, "run_design", interrupted)
    where = ["--cache-dir", str(tmp_path / "cache")] if cache else ["--no-cache"]
    assert plan.main([str(tiny_spec(tmp_path)), "--quiet", "--no-sensitivity", *where]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and ("--resume" in err) == hinted, err
