"""Follow-ups to the walkthrough of ``pipesim plan``'s outputs (tests/test_planwalk3_outputs.py).

* The one line a Ctrl-C leaves said what ran and what was written, but not that there was no
  recommendation yet when no design had been judged in full (the report's header says so; the
  terminal gets only the line).
* The JSON's ``recommended.notes`` held the discarded-share and off-policy notes but not the
  text's tool-latency bound line, so a script reading the JSON saw a GPU-bound pick where the text
  said more GPUs would not shorten its step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pipesim.plan as plan
import pipesim.plan.evaluate as ev
from pipesim.plan import report, report_lines
from tests.test_plan_outputs import tiny_spec
from tests.test_planwalk3_outputs import _agent_result

SAID = "pipesim plan: interrupted: 5 runs done; 5 designs (0 run in full) written with partial: true"
"""The line of a plan stopped after its 5th screening run (tests/test_double_interrupt.py's)."""


def _interrupted_after(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """The evaluator raises KeyboardInterrupt (as Ctrl-C does in the parent) on run ``n + 1``."""
    real, calls = ev.run_design, {"n": 0}

    def interrupted(*a: Any) -> dict[str, float]:
        calls["n"] += 1
        if calls["n"] > n:
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(ev, "run_design", interrupted)


def _line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_an_interrupt_before_any_full_run_says_there_is_no_recommendation_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _interrupted_after(monkeypatch, 5)
    out = tmp_path / "p.json"
    args = [str(tiny_spec(tmp_path)), "--json", str(out), "--quiet", "--no-sensitivity"]
    assert plan.main([*args, "--no-cache"]) == 130
    assert _line(capsys) == SAID + "; no recommendation yet"
    assert json.loads(out.read_text())["recommended"] is None
    # with a cache, the resume hint comes last: what ran, what it gave, what to do next
    monkeypatch.undo()  # a fresh count of runs
    _interrupted_after(monkeypatch, 5)
    assert plan.main([*args, "--cache-dir", str(tmp_path / "cache")]) == 130
    assert _line(capsys) == (
        SAID + "; no recommendation yet; the same command with --resume continues from the runs cached"
    )


def test_an_interrupt_after_the_full_rung_has_a_pick_and_does_not_say_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tiny plan screens 8 designs and runs 4 in full on 3 seeds (20 runs), then verifies:
    stopped in verification, its provisional pick is in the JSON and the line says none is missing."""
    _interrupted_after(monkeypatch, 20)
    out = tmp_path / "p.json"
    rc = plan.main(
        [str(tiny_spec(tmp_path)), "--json", str(out), "--quiet", "--no-cache", "--no-sensitivity"]
    )
    assert rc == 130
    line = _line(capsys)
    assert line.startswith("pipesim plan: interrupted: 20 runs done;") and "recommendation" not in line
    data = json.loads(out.read_text())
    assert data["recommended"] is not None and data["recommended"]["provisional"] is True


def test_the_json_notes_carry_the_tool_latency_bound_line_the_text_prints() -> None:
    """The walkthrough's pick (151.2 s of a 155.7 s step waiting, the engines 72% idle)."""
    result = _agent_result(151.2, 155.7, 0.28)
    text = [s.strip() for s in report_lines.recommended_lines(result) if "tool-latency bound" in s]
    notes = report.as_json(result)["recommended"]["notes"]
    assert len(text) == 1 and [n for n in notes if "tool-latency bound" in n] == text
    assert text[0].startswith("tool-latency bound: for at least 69% of the run")
    assert report.json_notes(result) == notes


def test_the_json_notes_keep_the_text_order_with_an_unlimited_note() -> None:
    """A tool-latency bound pick that also discards 30% of its tokens with no discard limit: both
    lines, in the text's order (the bound first), and nothing else."""
    result = _agent_result(151.2, 155.7, 0.28)
    assert result.best is not None
    result.best.metrics["discarded_share"] = 0.3
    notes = report.as_json(result)["recommended"]["notes"]
    text = [s.strip() for s in report_lines.recommended_lines(result)]
    assert [n[:20] for n in notes] == ["tool-latency bound: ", "note: no limit on di"]
    assert notes == text[-2:]


@pytest.mark.parametrize(("busy", "agent"), [(0.80, True), (0.28, False)])  # GPU-bound; no tools
def test_a_pick_the_text_does_not_call_tool_bound_has_no_such_note(busy: float, agent: bool) -> None:
    result = _agent_result(151.2, 155.7, busy, agent)
    assert not any("tool-latency" in s for s in report_lines.recommended_lines(result))
    assert not any("tool-latency" in n for n in report.as_json(result)["recommended"]["notes"])
