"""A plan read back from its run cache says how many runs its answer rests on, beside how many it
simulated (a user's walkthrough: after ``--resume`` the search line and the JSON's ``runs`` said
78, the new runs, of a plan of 199); the first cut's line names its docs whatever it found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomllib

import pipesim.plan as plan
from pipesim.plan import report
from pipesim.plan.fluid import Cut
from tests.test_plan_outputs import TINY, tiny_spec


def test_a_plan_from_the_cache_reports_every_run_and_the_new_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, cache = str(tiny_spec(tmp_path)), str(tmp_path / "cache")
    args = [spec, "--quiet", "--no-sensitivity", "--cache-dir", cache]
    assert plan.main([*args, "--json", str(tmp_path / "a.json")]) == 0
    assert plan.main([*args, "--resume", "--json", str(tmp_path / "b.json")]) == 0
    first, again = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "ab")
    assert first["runs"] > 0 and first["runs_reused"] == 0
    assert again["runs"] == 0 and again["runs_reused"] == first["runs"]
    assert again["runs_total"] == first["runs_total"] == first["runs"]
    search = [line for line in capsys.readouterr().out.splitlines() if line.startswith("search:")]
    assert f"{first['runs']} runs in" in search[0]
    assert f"{first['runs']} runs (0 simulated, {first['runs']} from the run cache)" in search[1]


def test_the_first_cut_line_names_its_docs_in_every_case() -> None:
    result = plan.plan(plan.from_dict(tomllib.loads(TINY)), with_sensitivity=False)
    assert result.cut.ceilings  # the cut ran
    lines = [report.cut_line(result)]
    result.cut = Cut(dict(result.cut.ceilings), ruled_out=list(result.cut.ceilings)[:1], floor=1.0)
    lines.append(report.cut_line(result))
    result.cut = Cut(dict(result.cut.ceilings))
    lines.append(report.cut_line(result))
    assert all(line.startswith("first cut (fluid ceiling, docs/plan.md): ") for line in lines), lines
