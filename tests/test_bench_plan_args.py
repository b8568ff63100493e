"""``benchmarks/bench_plan.py`` refuses, before its plan runs, what would only fail or pass
vacuously after it (``--longer-seeds 0`` printed "feasible in a run 4x longer: True" after no run;
``--sample 1 -2`` raised from ``random.sample`` at the end of a 9-minute plan)."""

from __future__ import annotations

import pytest

from benchmarks import bench_plan

BAD = [
    (["--check-longer", "--longer-seeds", "0"], "--longer-seeds"),
    (["--longer-seeds", "2"], "--longer-seeds"),
    (["--workers", "0"], "--workers"),
    (["--steps", "0"], "--steps"),
    (["--trials", "-1"], "--trials"),
    (["--reference", "--reference-seeds", "0"], "--reference-seeds"),
    (["--sample", "1", "2"], "--sample"),
    (["--reference", "--sample", "1", "-2"], "--sample"),
    (["--sample-fluid", "2"], "--sample-fluid"),
]


@pytest.mark.parametrize(("argv", "flag"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_arguments_are_refused_before_the_plan_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench_plan, "timed_plan", lambda *a: pytest.fail("the plan ran"))
    with pytest.raises(SystemExit) as exc:
        bench_plan.main(argv)
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err
