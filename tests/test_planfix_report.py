"""The plan's HTML page says what its text says (the paired test, verification and its fallback,
the baseline's verdict, the recommendation's tie and notes); the discarded-share axis never
repeats a tick label; the full-run count names the baseline; a tie with a fresher design is said;
a context too short is refused as the workload's, not a design's tp; a re-run that finds only
runs of other code says so; the benchmarks print ``(1 seed)`` for no interval."""

from __future__ import annotations

import copy
import dataclasses
import html
import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import pipesim.plan as plan
from pipesim.plan import report
from pipesim.plan.checks import PlanError
from pipesim.plan.stats import tied_with_best

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_plan_verify import ridge_spec  # noqa: E402

HERE = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tied() -> plan.PlanResult:
    """8 GPUs, three seeds, a [baseline] that breaks max_staleness: the pick (a split, eta 1 drain,
    95% off-policy) is tied by the paired test with colocated eta 0 (0% off-policy)."""
    spec = ridge_spec(
        seeds=3,
        space=plan.Space(placement=(0, 2), eta=(0, 1), update=("partial", "drain"), oversample=(1.0, 1.25)),
        baseline=plan.Design(2, 1, 1, "partial"),
    )
    return plan.plan(spec, with_sensitivity=False)


def _with_fallback(result: plan.PlanResult) -> plan.PlanResult:
    """``result`` with an infeasible full design marked as refused unverified: the recommendation
    (proved by its bound) is then the fallback of verification, and the text says so."""
    out = copy.copy(result)
    out.full = list(result.full)
    i = next(i for i, e in enumerate(out.full) if not e.feasible and e.design != result.spec.baseline)
    out.full[i] = dataclasses.replace(out.full[i], verified="not verified: verification budget (3) spent")
    return out


def _page(result: plan.PlanResult, tmp_path: Path) -> str:
    path = tmp_path / "plan.html"
    report.write_html(result, str(path))
    return html.unescape(path.read_text(encoding="utf-8"))


def test_the_page_carries_every_sentence_of_the_texts_conclusion(
    tied: plan.PlanResult, tmp_path: Path
) -> None:
    result = _with_fallback(tied)
    text = report.text(result)
    page = _page(result, tmp_path)
    said = [
        line.strip()
        for line in text.splitlines()
        if line.strip().startswith(
            (
                "paired t-test",
                "verification",
                "no verified design",
                "baseline (your design)",
                "the recommendation is",
            )
        )
        or line.startswith(("note:", "  tied with", "  split", "  colocated"))
    ]
    for must in (
        "paired t-test",
        "falls back",
        "baseline (your design)",
        "infeasible (",
        "note:",
        "tied with",
    ):
        assert any(must in line for line in said), must  # the text says it ...
    for line in said:
        assert line in page, line  # ... and so does the page, in the same words


def test_the_discarded_share_axis_never_repeats_a_tick_label(tied: plan.PlanResult) -> None:
    from pipesim.plan.report_html import figure

    assert max(e.metrics["discarded_share"] for e in tied.full) == 0  # the range is the minimum
    ax = figure(tied).layout.xaxis2
    assert ax.dtick is not None and ax.tickformat, (ax.dtick, ax.tickformat)
    decimals = int(re.fullmatch(r"\.(\d+)%", ax.tickformat).group(1))  # type: ignore[union-attr]
    ticks = [ax.tick0 + k * ax.dtick for k in range(int(ax.range[1] / ax.dtick + 1e-9) + 1)]
    labels = [format(t, f".{decimals}%") for t in ticks]
    assert len(ticks) >= 4 and len(set(labels)) == len(labels), labels


@pytest.mark.parametrize("top", [1e-4, 0.0037, 0.01, 0.0108, 0.05, 0.123, 0.3, 1.08])
def test_share_ticks_are_distinct_at_any_range(top: float) -> None:
    from pipesim.plan.report_html import share_ticks

    step, fmt = share_ticks(top)
    n = int(top / step + 1e-9) + 1
    labels = [format(k * step, fmt) for k in range(n)]
    assert 5 <= n - 1 < 13 and len(set(labels)) == n, labels


def test_the_full_count_names_the_baseline_it_adds_to_the_last_rung(tied: plan.PlanResult) -> None:
    rung = tied.rungs[-1][1]
    assert len(tied.full) == rung + 1 and tied.baseline is not None
    assert f"of {len(tied.full)} run in full: the last rung's {rung} and your baseline" in report.text(tied)


def test_a_tie_with_a_fresher_design_is_said_and_the_pick_stays_the_fastest(tied: plan.PlanResult) -> None:
    best = tied.best
    assert best is not None and best.throughput == max(e.throughput for e in tied.feasible)
    share = "offpolicy_token_share"
    fresher = [e for e in tied_with_best(tied) if e.metrics[share] < best.metrics[share]]
    assert fresher
    recommended = report.text(tied).split("\nrecommended: ", 1)[1].split("\nimport pipesim", 1)[0]
    tie = next(line for line in recommended.splitlines() if "tied with" in line)
    named = tie.split("tied with ", 1)[1].split(" (", 1)[0]
    assert named in {e.design.label(tied.spec.n_gpus) for e in fresher}
    other = next(e for e in fresher if e.design.label(tied.spec.n_gpus) == named)
    assert f"trains {other.metrics[share]:.0%} of its tokens off-policy" in tie


def _tables(run: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "cluster": {"gpu": "h100", "n_gpus": 32},
        "model": {"name": "Qwen/Qwen2.5-7B", "max_model_len": 4096, "max_num_seqs": 256},
        "workload": {
            "prompts_per_step": 32,
            "samples_per_prompt": 8,
            "prompt_tokens": 1024,
            "response": {"median_tokens": 350, "sigma": 0.9},
            "max_response_tokens": 1536,
            "agent": {"turns": 6, "tool_latency_s": 4.0, "observation_tokens": 600},
        },
    }
    design = {"placement": 8, "tp": 1, "eta": 1, "update": "partial"}
    if run:
        return {"kind": "compute", **data, "design": design}
    return {**data, "space": {"tp": [1, 2], "eta": [0, 1]}, "baseline": design}


@pytest.mark.parametrize("run", [False, True], ids=["plan with baseline", "run spec"])
def test_a_context_too_short_names_max_model_len_and_the_workload_not_the_tp(run: bool) -> None:
    from pipesim.plan import runspec

    with pytest.raises(PlanError) as err:
        if run:
            runspec.from_dict(_tables(run))
        else:
            plan.plan(plan.from_dict(_tables(run)), with_sensitivity=False)
    text = str(err.value)
    assert "model.max_model_len" in text and "workload.max_response_tokens" in text, text
    assert not err.value.field.endswith(".tp") and ".tp (" not in text, (err.value.field, text)
    without = _tables(run)  # the same refusal a plan of the same tables without a design gives
    without.pop("design" if run else "baseline")
    if not run:
        with pytest.raises(PlanError) as plain:
            plan.plan(plan.from_dict(without), with_sensitivity=False)
        assert str(plain.value) == text


def test_a_resume_that_finds_only_other_codes_runs_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_plan_outputs import tiny_spec

    from pipesim.plan import cache

    spec, where = str(tiny_spec(tmp_path)), str(tmp_path / "cache")
    args = [spec, "--quiet", "--no-sensitivity", "--cache-dir", where]
    assert plan.main(args) == 0
    written = sum(1 for _ in Path(where).rglob("*.json"))
    assert written > 0
    capsys.readouterr()
    monkeypatch.setattr(cache, "code_hash", lambda: "0" * 64)  # pipesim's code changed since
    assert plan.main([*args, "--resume"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("run cache"))
    assert ": 0 runs reused" in line
    said = re.search(r"; (\d+) cached runs from other code were not reused", line)
    assert said is not None, line
    assert 0 < int(said.group(1)) <= written


def test_the_benchmarks_print_one_seed_not_a_nan_interval() -> None:
    from benchmarks import bench_plan, plan_reference

    for fn in (bench_plan.interval, plan_reference.interval):
        assert fn({"throughput_ci": math.nan}) == "(1 seed)"
        assert fn({"throughput_ci": 1234.4}) == "± 1,234"
