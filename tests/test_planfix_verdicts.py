"""Why a design that meets the printed limits is infeasible (``pipesim.plan.verdicts``): the JSON
and CSV carry each constraint's limit, value judged, value measured and verdict, and the text and
HTML a reason (a user's walkthrough: split 20:44 TP 2 eta 1 partial printed mean staleness 0.90
against a limit of 1, infeasible on its settled mean of 1.0035, and no output said so)."""

from __future__ import annotations

import json
import math

import pytest

import pipesim.plan as plan
from pipesim.plan import report
from pipesim.plan.evaluate import Evaluator, run_design
from pipesim.plan.judge import bound, mean_estimate
from pipesim.plan.search import PlanResult, _result
from tests.test_plan import small_spec

ETA1 = plan.Design(trainer_gpus=2, tp=1, eta=1, update="partial")
SAFE = plan.Design(trainer_gpus=0, tp=1, eta=0, update="drain")


@pytest.fixture(scope="module")
def censored() -> PlanResult:
    """A mean-staleness limit between the eta-1 design's whole-run mean (lowered by the warm-up)
    and its settled estimate: measured within the limit, judged past it."""
    base = small_spec(seeds=1, min_full=1)
    m = run_design(base, ETA1, base.steps, 0)
    est, _ = mean_estimate(m, bound(base, ETA1), base.steps)
    assert est > m["staleness_mean"] + 1e-6  # the warm-up censors the whole-run mean
    limit = (est + m["staleness_mean"]) / 2
    spec = base.with_(constraints=plan.Constraints(mean_staleness=limit, max_staleness=20))
    evals = Evaluator(spec).evaluate([ETA1, SAFE], spec.steps, spec.seeds)
    return _result(spec, "grid", 2, [(spec.steps, 2)], evals, evals)


def _bad(result: PlanResult) -> plan.Evaluated:
    return next(e for e in result.full if e.design == ETA1)


def test_the_json_holds_each_constraints_limit_judged_value_and_verdict(censored: PlanResult) -> None:
    data = json.loads(json.dumps(report.as_json(censored)))
    entries = {e["label"]: e for e in data["full"]}
    bad = entries[ETA1.label(censored.spec.n_gpus)]
    st = bad["constraints"]["mean_staleness"]
    assert st["state"] == "violated" and not bad["feasible"]
    assert st["measured"] <= st["limit"] < st["judged"]  # meets as printed, breaks as judged
    assert st["measured"] == pytest.approx(bad["metrics"]["staleness_mean"])
    assert "mean_staleness" in bad["why_infeasible"]
    for e in data["full"]:
        if e["feasible"]:
            assert e["why_infeasible"] == ""
            assert all(s["state"] == "met" for s in e["constraints"].values())
    # counts are means over seeds: whole ones are written as integers
    assert isinstance(bad["metrics"]["episodes_trained_run"], int)


def test_the_csv_text_and_html_say_why(censored: PlanResult, tmp_path: object) -> None:
    df = censored.frame()
    row = df[df["label"] == ETA1.label(censored.spec.n_gpus)].iloc[0]
    assert row["mean_staleness_state"] == "violated"
    assert row["mean_staleness_measured"] <= row["mean_staleness_limit"] < row["mean_staleness_judged"]
    assert "mean_staleness" in row["why_infeasible"]
    assert all(df[df["feasible"]]["why_infeasible"] == "")
    text = report.text(censored)
    line = next(x for x in text.splitlines() if x.strip().startswith(ETA1.label(censored.spec.n_gpus) + ","))
    assert "mean_staleness violated" in line
    fig = report.figure(censored)
    hover = [t for tr in fig.data if tr.name == "full, infeasible" for t in tr.text]
    assert hover and all("infeasible: " in t and "mean_staleness" in t for t in hover)
    assert math.isfinite(_bad(censored).status["mean_staleness"][1])
