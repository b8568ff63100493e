"""A walkthrough of ``pipesim plan``'s outputs (64 H100s, Qwen2.5-7B, an agent workload):
GPU-h/Mtok was the mean of the seeds' ratios, so the table's 4.61 disagreed with its own 14.1 Mtok/h
on 64 GPUs (64 / 14.1 = 4.54); a page interrupted before any full run said "(3 seeds in full)"
and nothing about the empty tables; a pick whose step is mostly waiting on tool calls did not say
that more GPUs would not shorten it."""

from __future__ import annotations

import dataclasses
import html
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim.plan as plan
import pipesim.plan.evaluate as ev
from pipesim.compute import AgentTurns
from pipesim.plan import report, report_lines
from pipesim.plan.evaluate import Evaluated, Evaluator, aggregate, priced
from pipesim.plan.search import _result
from tests.test_plan import small_spec
from tests.test_plan_outputs import TINY, tiny_spec


def _run(n_gpus: int, sim_s: float, trained: float) -> dict[str, float]:
    """The two metrics of :func:`pipesim.plan.evaluate.run_design` this checks, by its formulas."""
    return {
        "failed": 0.0,
        "throughput_per_hour": trained / 1000 / sim_s * 3600,
        "tokens_per_hour": trained / sim_s * 3600,
        "gpu_hours_per_mtok": n_gpus * sim_s / 3600 / (trained / 1e6),
        "staleness_max": 1.0,
    }


@settings(max_examples=80, deadline=None)
@given(
    n_gpus=st.integers(1, 4096),
    runs=st.lists(st.tuples(st.floats(1.0, 1e5), st.floats(1.0, 1e9)), min_size=1, max_size=8),
    told=st.booleans(),
)
def test_gpu_hours_per_mtok_times_mtok_per_hour_is_the_gpus(
    n_gpus: int, runs: list[tuple[float, float]], told: bool
) -> None:
    """The table's GPU-h/Mtok x Mtok/h = n_gpus on every aggregate, whether the evaluator gives the
    cluster's GPUs or they are read from the runs; the cost column is the same ratio priced."""
    agg = aggregate([_run(n_gpus, t, k) for t, k in runs], n_gpus if told else None)
    assert agg["gpu_hours_per_mtok"] * agg["tokens_per_hour"] / 1e6 == pytest.approx(n_gpus, rel=1e-9)
    assert priced(agg, 2.5)["cost_per_mtok"] == pytest.approx(2.5 * agg["gpu_hours_per_mtok"])


def test_every_evaluated_design_and_printed_row_agrees(tmp_path: Path) -> None:
    """Real runs (4 GPUs, three seeds whose throughputs differ): each design the evaluator judges,
    and each row the text prints, has GPU-h/Mtok x Mtok/h = n_gpus (to the printed digits); the
    cost limit judges the same number."""
    spec = small_spec(cost_per_gpu_hour=2.0, seeds=3)
    e = Evaluator(spec).evaluate([plan.Design(4, 1, 1, "partial"), plan.Design(0, 1, 0, "drain")], 2, 3)
    for x in e:
        m = x.metrics
        per_seed = [r["tokens_per_hour"] for r in x.runs]
        assert len(set(per_seed)) > 1  # the seeds differ: a mean of ratios would not agree
        assert m["gpu_hours_per_mtok"] * m["tokens_per_hour"] / 1e6 == pytest.approx(spec.n_gpus)
        assert m["cost_per_mtok"] == pytest.approx(2.0 * m["gpu_hours_per_mtok"])
    # a cost limit between the mean of the seeds' ratios and the ratio of the means: judged on the latter
    x = e[0]
    mean_of_ratios = 2.0 * sum(r["gpu_hours_per_mtok"] for r in x.runs) / len(x.runs)
    assert mean_of_ratios > x.metrics["cost_per_mtok"]
    limit = (mean_of_ratios + x.metrics["cost_per_mtok"]) / 2
    tight = spec.with_(constraints=dataclasses.replace(spec.constraints, cost_per_mtok=limit))
    assert Evaluator(tight).evaluate([x.design], 2, 3)[0].status["cost_per_mtok"][0] == "met"


def test_the_text_table_rows_agree(tmp_path: Path) -> None:
    result = plan.plan(plan.load(tiny_spec(tmp_path)), with_sensitivity=False)
    head = report.header(result)
    mtok, gpuh = head.index("Mtok/h"), head.index("GPU-h/Mtok")
    for row in report.rows(result, result.full):
        # the printed digits: 0.05 in Mtok/h, 0.005 in GPU-h/Mtok
        a, b = float(row[mtok]), float(row[gpuh])
        lo, hi = max(a - 0.05, 1e-9) * (b - 0.005), (a + 0.05) * (b + 0.005)
        assert lo <= result.spec.n_gpus <= hi, row


def _interrupted_after(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    real = ev.run_design
    calls = {"n": 0}

    def interrupted(*a: Any) -> dict[str, float]:
        calls["n"] += 1
        if calls["n"] > n:
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(ev, "run_design", interrupted)


def test_a_page_interrupted_before_any_full_run_says_so_and_points_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _interrupted_after(monkeypatch, 5)
    page = tmp_path / "p.html"
    rc = plan.main([str(tiny_spec(tmp_path)), "--html", str(page), "--quiet", "--no-cache"])
    assert rc == 130
    head = html.unescape(re.search(r"<pre>(.*?)</pre>", page.read_text(), re.S).group(1))  # type: ignore[union-attr]
    assert "seeds in full" not in head
    assert "interrupted before any design ran in full" in head
    assert "no recommendation yet" in head and "--resume" in head


def test_the_text_of_an_interrupted_plan_says_what_ran(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _interrupted_after(monkeypatch, 5)
    with pytest.raises(plan.PlanInterrupted) as info:
        plan.search(plan.load(tiny_spec(tmp_path)))
    result = info.value.result
    assert result.partial and result.best is None and not result.full
    text = report.text(result)
    top = text.split("\n\n")[0]
    assert "5 run for 2 steps (interrupted before any design ran in full)" in top
    assert "no recommendation yet" in top and "--resume" in top


def test_a_finished_plan_keeps_its_header(tmp_path: Path) -> None:
    result = plan.plan(plan.load(tiny_spec(tmp_path, TINY)), with_sensitivity=False)
    top = report.text(result).split("\n\n")[0]
    assert "(3 seeds in full)" in top and "no recommendation" not in top


def _agent_result(wait_s: float, step_s: float, engine_busy: float, agent: bool = True) -> plan.PlanResult:
    spec = small_spec()
    if agent:
        spec = spec.with_(workload=dataclasses.replace(spec.workload, agent=AgentTurns(turns=4)))
    m = {
        "throughput_per_hour": 6000.0,
        "tokens_per_hour": 1.4e7,
        "staleness_mean": 0.0,
        "staleness_max": 0.0,
        "discarded_share": 0.0,
        "offpolicy_token_share": 0.0,
        "step_time_s": step_s,
        "train_time_s": step_s - wait_s - 1.0,
        "sync_time_s": 1.0,
        "wait_time_s": wait_s,
        "engine_busy_share": engine_busy,
        "seeds": 1.0,
    }
    best = Evaluated(plan.Design(0, 1, 0, "drain"), spec.steps, [m], m, True, {}, 1.0)
    return _result(spec, "grid", 1, [(spec.steps, 1)], [best], [best])


def test_a_pick_that_mostly_waits_on_tool_calls_says_more_gpus_will_not_help() -> None:
    """The walkthrough's pick: 151.2 s of a 155.7 s step waiting, the engines 72% idle: at least
    69% of the run is the trainer waiting with the engines idle."""
    lines = report_lines.recommended_lines(_agent_result(151.2, 155.7, 0.28))
    said = [s for s in lines if "tool-latency bound" in s]
    assert len(said) == 1 and "at least 69%" in said[0] and "more GPUs will not shorten it" in said[0]


@pytest.mark.parametrize(
    ("wait_s", "step_s", "busy", "agent"),
    [
        (151.2, 155.7, 0.28, False),  # no tool calls: not a tool's latency
        (151.2, 155.7, 0.80, True),  # the engines busy: the GPUs' work
        (40.0, 155.7, 0.10, True),  # the trainer's step, not the wait
    ],
)
def test_a_pick_bound_by_its_gpus_or_with_no_tools_says_nothing(
    wait_s: float, step_s: float, busy: float, agent: bool
) -> None:
    result = _agent_result(wait_s, step_s, busy, agent)
    assert not any("tool-latency" in s for s in report_lines.recommended_lines(result))
