"""A user walkthrough of ``pipesim plan`` (two small specs): a maximum below its limit called
violated, an infeasible message built on 3-step numbers, a tie line suggesting a refused seed
count, code whose seed the report did not name, an interrupted plan's recommendation not marked
provisional, counts that did not say what they counted, and merged identical designs named by the
twin no bound proves."""

from __future__ import annotations

import dataclasses
import html
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import pipesim.plan as plan
from pipesim.plan import report, report_lines
from pipesim.plan.evaluate import Evaluated, Evaluator, aggregate, run_design
from pipesim.plan.explain import infeasible_message
from pipesim.plan.judge import HORIZON, bound, judge
from pipesim.plan.search import _result
from pipesim.plan.space import MAX_SEEDS
from pipesim.plan.verify import needs_verification, tail_open, verify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plan import small_spec  # noqa: E402


def test_a_full_run_maximum_at_its_ceiling_below_the_limit_is_open_and_verification_decides() -> None:
    """Partial rollouts at eta 1: the 6-step runs reach the ceiling (5) well under a limit of 10.
    It used to be ``violated`` (5 x HORIZON > 10); it is ``open``, and verification runs it
    HORIZON x as long and holds it exactly when those runs stay within the limit."""
    spec = small_spec(steps=6, seeds=2, constraints=plan.Constraints(max_staleness=10))
    d = plan.Design(4, 1, 1, "partial")
    assert bound(spec, d) is None
    e = Evaluator(spec).evaluate([d], 6, 2)[0]
    assert e.metrics["staleness_max"] == 5  # the ceiling of a 6-step run, under the limit
    assert e.status["max_staleness"][0] == "open" and not e.feasible
    assert tail_open(spec, e)  # admitted to verification
    (checked,) = verify(spec, Evaluator(spec), [e])
    longer = [run_design(spec, d, HORIZON * 6, s) for s in range(4)]  # twice the seeds
    assert checked.feasible == all(r["staleness_max"] <= 10 for r in longer)
    assert checked.verified.startswith(("held", "verified: broke"))


@example(top=5, lim=10, at=50, below=100)  # at the ceiling of a 6-step run, under the limit
@settings(max_examples=60, deadline=None)
@given(
    top=st.integers(0, 5),
    lim=st.integers(0, 30),
    at=st.integers(1, 400),
    below=st.integers(0, 400),
)
def test_a_maximum_is_violated_exactly_when_it_is_above_the_limit(
    top: int, lim: int, at: int, below: int
) -> None:
    """docs/plan.md: violated is "a maximum above the limit"; within it, at the ceiling or not,
    a full run's maximum is met or open (verification decides), never violated."""
    spec = small_spec(steps=6, constraints=plan.Constraints(max_staleness=lim))
    d = plan.Design(4, 1, 2, "partial")  # no declared bound
    m = {
        "staleness_max": float(top),
        "staleness_mean": 0.1,
        "at_max": float(at),
        "below_max": float(below),
        "episodes_trained_run": 768.0,
        "seeds": 3.0,
        "discarded_share": 0.0,
    }
    state, _ = judge(spec, d, 6, m)["max_staleness"]
    assert (state == "violated") == (top > lim)


def _ev(
    d: plan.Design, steps: int, runs: list[dict[str, float]], status: dict, feasible: bool = False
) -> Evaluated:
    return Evaluated(d, steps, runs, aggregate(runs), feasible, status, 0.0)


def _run(thr: float, mean: float, top: float) -> dict[str, float]:
    return {
        "throughput_per_hour": thr,
        "staleness_mean": mean,
        "staleness_max": top,
        "discarded_share": 0.0,
        "tokens_generated": 1.0,
    }


def test_the_infeasible_message_names_judged_full_run_values_and_every_constraint_all_break() -> None:
    """A 3-step screen's whole-run mean (0.49) and censored maximum (2) are not what the full runs
    judged (settled mean 0.9, maximum 7): the message reads the full runs' judged values, and
    names both constraints every full run breaks, not a value no run of the spec's length reaches."""
    spec = small_spec(steps=8, constraints=plan.Constraints(mean_staleness=0.7, max_staleness=3))
    a, b = plan.Design(4, 1, 1, "partial"), plan.Design(2, 1, 1, "partial")
    screen = _ev(
        a, 3, [_run(100.0, 0.49, 2.0)], {"mean_staleness": ("open", 0.6), "max_staleness": ("open", 7.0)}
    )
    full = [
        _ev(
            d,
            8,
            [_run(90.0, 0.8, 7.0)],
            {"mean_staleness": ("violated", est), "max_staleness": ("violated", 7.0)},
        )
        for d, est in ((a, 0.95), (b, 0.9))
    ]
    msg = infeasible_message(spec, [screen, *full])
    assert "0.49" not in msg and "value reached is 2 " not in msg
    assert "judged on the 2 run in full" in msg
    assert "The tightest is max_staleness" in msg and "best value reached is 7" in msg
    assert "mean_staleness is violated by every one of them too (best 0.9," in msg
    assert "Relax max_staleness and mean_staleness" in msg


@pytest.fixture(scope="module")
def result() -> plan.PlanResult:
    return plan.plan(small_spec(method="grid", seeds=3), seed=0, with_sensitivity=False)


def test_the_tie_line_never_suggests_more_seeds_than_search_seeds_allows(
    result: plan.PlanResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    best = result.best
    assert best is not None
    other = next(e for e in result.feasible if e.throughput != best.throughput)  # not its twin
    monkeypatch.setattr(report_lines, "tied_with_best", lambda r: [other])
    monkeypatch.setattr(report_lines, "seeds_to_separate", lambda p: MAX_SEEDS + 1225)
    (line,) = report_lines.tie_lines(result)
    assert f"search.seeds = {MAX_SEEDS + 1225}" not in line
    assert "cannot be separated within the allowed seeds" in line
    monkeypatch.setattr(report_lines, "seeds_to_separate", lambda p: 7)
    assert "(search.seeds = 7)" in report_lines.tie_lines(result)[0]


def test_the_code_says_it_runs_seed_0_and_the_headline_is_the_mean(result: plan.PlanResult) -> None:
    best = result.best
    assert best is not None and len(best.runs) == 3
    seed0 = best.runs[0]["throughput_per_hour"]
    text = report.text(result)
    note = next(line for line in text.splitlines() if line.startswith("# the code below runs"))
    assert f"{seed0:,.0f}" in note and f"{best.throughput:,.0f}" in note and "seeds 0-2" in note
    assert text.index(note) < text.index("import pipesim")
    assert report.as_json(result)["recommended"]["code_note"] == note.removeprefix("# ")


def test_an_interrupted_plans_recommendation_is_provisional(result: plan.PlanResult) -> None:
    done = report.as_json(result)["recommended"]
    assert done["provisional"] is False
    cut = dataclasses.replace(result, partial=True)
    cut.best = dataclasses.replace(result.best, verified="")  # its full rung had not finished
    rec = report.as_json(cut)["recommended"]
    assert rec["provisional"] is True and rec["verified"].startswith("not verified: the plan was interrupted")
    assert "provisional: the plan was interrupted" in report.text(cut)


def test_the_design_count_is_the_distinct_designs_one_csv_row_each(result: plan.PlanResult) -> None:
    said = report.designs_said(result)
    assert said == f"{len(result.frame())} designs ({len(result.full)} run in full)"
    assert len(result.frame()) < len(result.full) + len(result.screened)  # the old count


def test_merged_identical_designs_are_named_by_the_twin_a_bound_proves() -> None:
    """eta 0: abort-reprefill, drain and partial meet no sync with a sequence in flight, so their
    runs are identical; the search's tie order names ``abort_reprefill`` first, which no bound
    proves. The report, the JSON and the code name the drain twin, proved by its declared bound."""
    spec = small_spec(seeds=2, constraints=plan.Constraints(max_staleness=3))
    abort, drain = plan.Design(0, 1, 0, "abort_reprefill"), plan.Design(0, 1, 0, "drain")
    assert needs_verification(spec, abort) and not needs_verification(spec, drain)
    evals = Evaluator(spec).evaluate([abort, drain], spec.steps, spec.seeds)
    assert [r["throughput_per_hour"] for r in evals[0].runs] == [
        r["throughput_per_hour"] for r in evals[1].runs
    ]
    assert all(e.feasible for e in evals)
    res = _result(spec, "grid", 2, [(spec.steps, 2)], evals, evals)
    assert res.best is not None and res.best.design == abort  # the search's tie order
    text = report.text(res)
    assert "recommended: " + drain.label(8) in text
    assert "AbortReprefill" not in text.split("recommended:", 1)[1]
    assert "colocated tp1 eta=0 drain = abort_reprefill" in text
    (tie,) = report_lines.tie_lines(res)  # the twin is merged in the best's row, not a tie
    assert "1 design(s) tied with the best, each identical to it on every seed" in tie
    got = report.as_json(res)["recommended"]
    assert got["label"] == drain.label(8) and "AbortReprefill" not in got["code"]


def test_the_html_and_the_exported_run_spec_name_the_twin_the_text_names(tmp_path: Path) -> None:
    """The page's heading and code and ``--export-best`` named ``result.best`` (the unproved
    abort-reprefill twin) while the text and the JSON named the drain twin a bound proves."""
    from pipesim.plan.report_html import write_html
    from pipesim.plan.runspec import write_best
    from pipesim.plan.runspec_export import design_to_runspec

    spec = small_spec(seeds=2, constraints=plan.Constraints(max_staleness=3))
    abort, drain = plan.Design(0, 1, 0, "abort_reprefill"), plan.Design(0, 1, 0, "drain")
    evals = Evaluator(spec).evaluate([abort, drain], spec.steps, spec.seeds)
    res = _result(spec, "grid", 2, [(spec.steps, 2)], evals, evals)
    assert res.best is not None and res.best.design == abort
    page = tmp_path / "plan.html"
    write_html(res, str(page))
    body = page.read_text()
    heading = body.split("<h2>Recommended: ", 1)[1]
    assert heading.startswith(html.escape(drain.label(8)))
    assert "AbortReprefill" not in heading
    out = tmp_path / "best.toml"
    write_best(spec, res, out)
    want = design_to_runspec(spec, drain, steps=res.spec.steps, seed=res.spec.sim_seed)
    from pipesim.plan.runspec import dumps

    assert out.read_text() == dumps(want, "toml")


def test_an_open_maximum_at_the_ceiling_says_verification_decides() -> None:
    """The open state at a full run's ceiling gave the tail's reason ("its tail allows samples
    beyond the limit"); it is the ceiling's: the maximum may grow, and verification decides."""
    from pipesim.plan.evaluate import Evaluator
    from pipesim.plan.verdicts import why_infeasible
    from tests.test_plan_judge import small_spec

    spec = small_spec(steps=6, constraints=plan.Constraints(max_staleness=5))
    e = Evaluator(spec).evaluate([plan.Design(4, 1, 1, "partial")], 6, 1)[0]
    why = why_infeasible(spec, e)
    assert e.status["max_staleness"][0] == "open" and "ceiling" in why and "tail" not in why
