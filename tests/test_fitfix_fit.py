"""``pipesim fit``: intervals that span both turn-count branches where KS does not decide, rows
dropped by name and reason, refused turn counts, and a trace in milliseconds noticed.

Before: without a turn column the mean-turns interval kept to the branch KS chose, and covered a
true 3 turns in 85 of 100 traces of 300 episodes (a wrong KS choice, or a spread above the peak,
left the truth outside); dropped rows were one count ("missing, non-positive or not numbers", inf
and text among them, no row named); a turn count of 2.5 was accepted, one above ``max_turns``
refused as "the turn column" with no row; a trace in milliseconds fitted 0.0355 tok/s silently.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pipesim.io.fit import FitError, fit_trace, fit_values, format_result, to_json
from pipesim.io.fit_intervals import undecided_turns

TRUE_TURNS = 3.0


def _draw(n: int, mean_turns: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Episodes of the default agent shape (40 turns at most, U(100, 600) tokens at 40 tok/s, a
    log-normal tool call of median 2 s and sigma 1): the walkthrough's generator, seed for seed."""
    rng = np.random.default_rng(seed)
    turns = np.minimum(rng.geometric(1 / mean_turns, n), 40)
    dur = np.array(
        [
            (rng.uniform(100, 600, k) / 40.0).sum() + (2.0 * np.exp(rng.standard_normal(k))).sum()
            for k in turns
        ]
    )
    return turns, dur


# -- intervals where the totals do not decide the turn count ----------------------------------------
@pytest.mark.parametrize(
    "seed",
    [
        8,  # KS chose the far root (15.7 turns) and rules neither out: before, [12.5, 19.75]
        9,  # the spread is above the model's peak, pinned at 7.02 turns: before, [7.02, 15.2]
    ],
)
def test_an_undecided_turn_count_gets_an_interval_that_covers_the_truth(seed: int) -> None:
    _, x = _draw(300, TRUE_TURNS, 1000 + seed)
    agent = fit_values(x, seed=seed).fits["agent"]
    lo, hi = agent.intervals["mean_turns"]
    assert lo <= TRUE_TURNS <= hi, (agent.params["mean_turns"], lo, hi)
    assert lo <= agent.params["mean_turns"] <= hi


@pytest.mark.parametrize("seed", [8, 25, 55, 65])
def test_the_intervals_hold_every_turn_count_ks_does_not_rule_out(seed: int) -> None:
    _, x = _draw(300, TRUE_TURNS, 1000 + seed)
    result = fit_values(x, seed=seed)
    agent = result.fits["agent"]
    others = undecided_turns(agent)
    assert others, agent.turn_roots  # these traces fit two turn counts that KS does not separate
    lo, hi = agent.intervals["mean_turns"]
    for r in (agent.params["mean_turns"], *others):
        assert lo <= r <= hi, (r, lo, hi)
    # the seconds per turn of each branch too (the mean over each branch's expected turn count)
    spt_lo, spt_hi = agent.intervals["seconds_per_turn"]
    assert spt_hi / spt_lo > 1.5
    assert "do not identify the turn count" in format_result(result)


def test_a_decided_turn_count_keeps_its_interval_to_its_branch() -> None:
    """Seed 51: 1.88 turns (KS p 0.29) against 19.5 (p 0.0014): KS rejects the far one only."""
    _, x = _draw(300, TRUE_TURNS, 1051)
    agent = fit_values(x, seed=51).fits["agent"]
    assert len(agent.turn_roots) == 2 and undecided_turns(agent) == ()
    far = max(r for r, _ in agent.turn_roots)
    lo, hi = agent.intervals["mean_turns"]
    assert lo <= agent.params["mean_turns"] <= hi < far


def test_with_a_turn_column_no_branch_is_spanned() -> None:
    turns, x = _draw(300, TRUE_TURNS, 1008)
    agent = fit_values(x, turns=turns, seed=8).fits["agent"]
    assert agent.turn_roots == () and agent.intervals["mean_turns"][1] < 5


# -- dropped rows, named ----------------------------------------------------------------------------
def _csv(tmp_path: Path, cells: dict[int, tuple[str, str]], n: int = 30, turns: str = "turns") -> Path:
    rows = [f"{10.0 + i},{1 + i % 5}" for i in range(n)]
    for i, (d, t) in cells.items():
        rows[i] = f"{d},{t}"
    p = tmp_path / "trace.csv"
    p.write_text(f"duration_s,{turns}\n" + "\n".join(rows) + "\n")
    return p


def test_every_dropped_row_is_counted_under_its_reason_and_named_by_line(tmp_path: Path) -> None:
    cells = {3: ("", "2"), 5: ("-2", "1"), 6: ("0", "3"), 8: ("inf", "1"), 4: ("12s", "1"), 10: ("20", "0")}
    result = fit_trace(_csv(tmp_path, cells), "duration_s", turns_column="turns")
    got = {(d.column, d.reason): (d.count, d.first) for d in result.dropped}
    assert got == {  # row i is line i + 2 (the header is line 1)
        ("duration_s", "missing"): (1, ("line 5",)),
        ("duration_s", "not a number"): (1, ("line 6: '12s'",)),
        ("duration_s", "not finite"): (1, ("line 10: inf",)),
        ("duration_s", "not positive"): (2, ("line 7: -2", "line 8: 0")),
        ("turns", "below 1"): (1, ("line 12: 0",)),
    }
    assert result.n_dropped == sum(d.count for d in result.dropped) == 6
    assert "not finite (line 10: inf)" in format_result(result)
    assert '"reason": "not a number"' in to_json(result)


def test_a_blank_line_does_not_shift_the_lines_named(tmp_path: Path) -> None:
    p = _csv(tmp_path, {6: ("-1", "1")})
    lines = p.read_text().splitlines()
    p.write_text("\n".join([*lines[:3], "", *lines[3:]]) + "\n")  # a blank line 4
    result = fit_trace(p, "duration_s")
    # the blank line inside the rows is a missing row (as in a one-column file), named by its line
    assert [d.first for d in result.dropped] == [("line 4",), ("line 9: -1",)]


# -- refusals: the exception type and the column's own name -----------------------------------------
@pytest.mark.parametrize(
    ("cells", "what"),
    [
        ({5: ("30", "2.5")}, "line 7: 2.5 is not a whole number"),
        ({5: ("30", "80")}, "line 7: 80 is above the agent model's max_turns (40)"),
    ],
)
def test_a_turn_count_that_is_no_count_is_refused_by_column_and_line(
    tmp_path: Path, cells: dict[int, tuple[str, str]], what: str
) -> None:
    with pytest.raises(FitError) as info:
        fit_trace(_csv(tmp_path, cells, turns="n_turns"), "duration_s", turns_column="n_turns")
    assert info.value.field == "n_turns", str(info.value)
    assert "'n_turns'" in str(info.value) and what in str(info.value)


@pytest.mark.parametrize("bad", [2.5, 41.0])
def test_the_api_refuses_such_turn_counts_by_index(bad: float) -> None:
    turns, x = _draw(50, TRUE_TURNS, 0)
    turns = turns.astype(np.float64)
    turns[7] = bad
    with pytest.raises(FitError) as info:
        fit_values(x, turns=turns)
    assert info.value.field == "turns" and "turns[7]" in str(info.value)


# -- a trace in milliseconds ------------------------------------------------------------------------
def test_a_trace_in_milliseconds_asks_whether_it_is_in_seconds() -> None:
    turns, x = _draw(300, 5.0, 1)
    in_s = fit_values(x, turns=turns)
    in_ms = fit_values(x * 1000, turns=turns)
    assert not any("in seconds?" in n for n in in_s.notes)
    assert any("in seconds?" in n and "--scale 0.001" in n for n in in_ms.notes), in_ms.notes
