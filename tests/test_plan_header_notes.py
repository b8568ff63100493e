"""The plan's text names every limit it judges, and its discard note fires under a loose limit.

A walkthrough set ``constraints.cost_per_mtok``: the judge applied it (0.2 made the plan
infeasible) but the header's constraints left it out. It set ``discarded_share = 1.0``: the pick
aborted 79% of what it generated, its samples the short ones (139 trained tokens a sample against
drain's 652), and no note said so, since the note fired only with no limit at all."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import pipesim.plan as plan
from pipesim.plan import report, report_lines
from pipesim.plan.constraints import CONSTRAINT_METRICS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plan import small_spec  # noqa: E402


def test_the_header_names_every_limit_the_judge_applies() -> None:
    c = plan.Constraints(mean_staleness=1.0, max_staleness=5, cost_per_mtok=100.0, offpolicy_token_share=0.9)
    spec = small_spec(method="grid", seeds=1, constraints=c, cost_per_gpu_hour=2.5)
    res = plan.plan(spec, seed=0, with_sensitivity=False)
    header = report.text(res).splitlines()[0]
    for name in CONSTRAINT_METRICS:
        if getattr(c, name) is not None:
            assert f"{name} <= {getattr(c, name)}" in header, (name, header)


def _result(limit: float | None, share: float) -> SimpleNamespace:
    metrics = {"discarded_share": share, "throughput_per_hour": 1000.0, "tokens_per_hour": 139_000.0}
    constraints = dataclasses.replace(plan.Constraints(), discarded_share=limit)
    spec = SimpleNamespace(constraints=constraints)
    return SimpleNamespace(best=SimpleNamespace(metrics=metrics), spec=spec)


@pytest.mark.parametrize(
    ("limit", "share", "said"),
    [
        (None, 0.79, "no limit on discarded_share"),
        (1.0, 0.79, "discarded_share may reach 1"),
        (0.5, 0.4, "discarded_share may reach 0.5"),
        (0.05, 0.04, None),  # a tight limit: nothing to say
        (None, 0.05, None),  # below the note's threshold
    ],
)
def test_the_discard_note_fires_under_no_limit_or_a_loose_one(
    limit: float | None, share: float, said: str | None
) -> None:
    notes = [n for n in report_lines.unlimited_notes(_result(limit, share)) if "discard" in n]  # type: ignore[arg-type]
    if said is None:
        assert notes == []
    else:
        (note,) = notes
        assert said in note and "139 trained tokens a sample" in note


def _baseline(status: dict[str, tuple[str, float]], feasible: bool) -> SimpleNamespace:
    design = SimpleNamespace(label=lambda n: "split 4:4 tp1 eta=1 partial")
    b = SimpleNamespace(status=status, feasible=feasible, steps=8, design=design, throughput=244_329.0)
    return SimpleNamespace(baseline=b, best=None, spec=SimpleNamespace(n_gpus=8))


def test_a_baseline_that_breaks_nothing_is_not_called_infeasible() -> None:
    """It read "infeasible (max_staleness open)": an open maximum is no violation, and the plan
    never verifies the baseline."""
    (line,) = report_lines.baseline_lines(_baseline({"max_staleness": ("open", 7.0)}, False))  # type: ignore[arg-type]
    assert "infeasible" not in line and "not proved feasible (max_staleness open" in line
    both = {"max_staleness": ("open", 7.0), "mean_staleness": ("violated", 3.0)}
    (line,) = report_lines.baseline_lines(_baseline(both, False))  # type: ignore[arg-type]
    assert "infeasible (max_staleness open, mean_staleness violated)" in line
