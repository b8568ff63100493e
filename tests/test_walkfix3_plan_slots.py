"""A plan's recommendation said a pick was tool-latency bound, "so more GPUs will not shorten it",
while the same pick was slot-limited (walkthrough: 30 s tools, split 4:4 eta 1 with 16 slots a
replica ran 2,015 samples/h; 64 slots a replica gave 3,029 and 16 GPUs 3,030). The engines idle
for want of slots, not of tool results: the line now says the pick is slot-limited and points to
the slot note, in the text, ``--json`` and the HTML page alike; a pick that is not slot-limited
keeps the tool-latency bound line."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest

from pipesim import plan
from pipesim.plan import report, report_html, report_lines, specfile
from pipesim.plan.slots import SLOT_KEY, limited
from tests.test_plan_toolslot import _data
from tests.test_planwalk3_outputs import _agent_result

NOT_MORE_GPUS = "more GPUs will not shorten it"


def _said(result: plan.PlanResult) -> list[str]:
    return [s.strip() for s in report_lines.recommended_lines(result)[1:]]


def test_a_slot_limited_pick_is_not_said_to_gain_nothing_from_more_gpus() -> None:
    """The walkthrough's shares (at least 69% of the run waiting with the engines idle) on a pick
    whose runs were slot-limited."""
    result = _agent_result(151.2, 155.7, 0.28)
    assert result.best is not None
    result.best.metrics[SLOT_KEY] = 1.0
    said = _said(result)
    assert not any(NOT_MORE_GPUS in s or "tool-latency bound" in s for s in said)
    line = next(s for s in said if s.startswith("slot-limited:"))
    assert "at least 69%" in line and "model.episodes_per_replica" in line
    assert report.as_json(result)["recommended"]["notes"] == [line]


def _plan(**model: Any) -> plan.PlanResult:
    data = _data(**model)
    data["workload"]["agent"]["tool_latency_s"] = 30.0  # /tmp/wk_newest/agent30s.toml
    return plan.plan(specfile.from_dict(data), workers=1, with_sensitivity=False)


def test_the_walkthrough_pick_says_slot_limited_in_text_json_and_html(tmp_path: Path) -> None:
    result = _plan()
    assert result.best is not None and result.best.design in {e.design for e in limited(result)}
    text = report.text(result)
    assert NOT_MORE_GPUS not in text
    line = next(s for s in _said(result) if s.startswith("slot-limited:"))
    out = report.as_json(result)
    assert out["tool_slots"]["recommended"] is True
    assert line in out["recommended"]["notes"] and not any(
        NOT_MORE_GPUS in n for n in out["recommended"]["notes"]
    )
    page = tmp_path / "p.html"
    report_html.write_html(result, str(page))
    body = html.unescape(page.read_text())
    assert line in body and NOT_MORE_GPUS not in body


@pytest.mark.parametrize("slots", [256])
def test_a_pick_with_slots_to_spare_still_says_more_gpus_will_not_help(slots: int) -> None:
    """The control: 256 slots a replica, none of the shown designs slot-limited."""
    result = _plan(max_num_seqs=slots)
    assert not limited(result)
    said = [s for s in _said(result) if "tool-latency bound" in s]
    assert len(said) == 1 and NOT_MORE_GPUS in said[0]
    assert not any(s.startswith("slot-limited:") for s in _said(result))
    assert said == [n for n in report.as_json(result)["recommended"]["notes"] if "tool-latency" in n]
