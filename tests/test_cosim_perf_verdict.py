"""``python -m scenarios.cosim --perf``: the cost goal is set on 40-step runs over 5 seeds, so a run
of other steps or fewer seeds prints its ratios without a met / NOT met verdict (a 6-step run
printed "NOT met" against a goal it was never measured for)."""

from __future__ import annotations

from typing import Any

import pytest

from scenarios import cosim_perf
from scenarios.cosim import main


@pytest.fixture
def fast_ratios(monkeypatch: pytest.MonkeyPatch) -> None:
    """No training: each run's ratio is 1.7 (over the 1.5 median goal), so a judged row is NOT met."""
    monkeypatch.setattr(cosim_perf, "warm_up", lambda *a, **k: None)

    def ratio(design: str, steps: int, seed: int, gym: str, lr: Any) -> dict[str, float]:
        return {"ratio": 1.7, "train_rl_cpu_s": 1.0, "cosim_cpu_s": 1.7}

    monkeypatch.setattr(cosim_perf, "perf_ratio", ratio)


@pytest.mark.parametrize(
    ("args", "verdict"),
    [
        (["--steps", "6", "--seed-list", "101,202"], "not judged"),
        (["--steps", "40", "--seed-list", "101,202"], "not judged"),
        (["--steps", "6"], "not judged"),
        (["--steps", "40"], "NOT met"),
    ],
)
def test_only_the_goals_protocol_is_judged(
    fast_ratios: None, capsys: pytest.CaptureFixture[str], args: list[str], verdict: str
) -> None:
    assert main(["--perf", "sync", *args]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("sync ") and "|" in ln)
    assert row.rstrip().endswith(verdict), row
