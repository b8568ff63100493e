"""Intervals of bounded quantities stay within their bounds; one value prints no interval.

Over 2 seeds t(0.975, 1) = 12.7, so the t interval of a pass rate printed as ``[-0.83, 1.6]``:
numbers no rate can take. The interval functions now take the quantity's bounds, cut the
interval there and mark the cut; an unbounded quantity keeps the t interval it had.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offpolicy import stats
from offpolicy.checks import FieldError
from offpolicy.experiment import bounds_of, fmt_ci, paired_table, summary_table
from pipesim.plan.stats import paired

RATES = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=12)
UNBOUNDED = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=2, max_size=40)
CELL = re.compile(r"^(\S+) \[(\S+?)(\*?), (\S+?)(\*?)\]$")


def printed(cell: str) -> tuple[float, float, float]:
    """(mean, lo, hi) as a cell printed them."""
    m = CELL.match(cell)
    assert m is not None, cell
    return float(m[1]), float(m[2]), float(m[4])


def old_t(values: list[float]) -> tuple[float, float, float]:
    """The interval as it was computed before bounds: mean +- t(n-1) s / sqrt(n)."""
    mean = statistics.fmean(values)
    half = stats.t_quantile(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


@given(RATES)
@settings(max_examples=200, deadline=None)
def test_a_rate_interval_stays_in_0_1_and_holds_its_mean(values: list[float]) -> None:
    iv = stats.t_interval(values, bounds=stats.RATE)
    assert 0.0 <= iv.lo <= iv.mean <= iv.hi <= 1.0
    cell = stats.fmt_interval(iv)
    assert cell == fmt_ci(values, bounds=bounds_of("pass_rate"))
    if len(values) == 1:  # no interval, and never one of no width
        assert cell.endswith("[1 seed]") and (iv.lo, iv.hi) == stats.RATE
        return
    mean, lo, hi = printed(cell)
    assert 0.0 <= lo <= mean <= hi <= 1.0
    _, t_lo, t_hi = old_t(values)
    cut = iv.lo_clipped or iv.hi_clipped
    assert (stats.CLIP_MARK in cell) == cut  # marked exactly where it was cut
    if t_lo < -1e-9 or t_hi > 1.0 + 1e-9:  # the t interval left [0, 1]: cut there
        assert cut and (iv.lo == 0.0 or iv.hi == 1.0)
    if not cut:
        assert (iv.lo, iv.hi) == pytest.approx((t_lo, t_hi), abs=1e-12)


@given(RATES, st.data())
@settings(max_examples=200, deadline=None)
def test_a_difference_of_rates_stays_in_minus_1_1(a: list[float], data: Any) -> None:
    b = data.draw(st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=len(a), max_size=len(a)))
    iv = stats.paired_t(a, b, bounds=stats.RATE)
    assert -1.0 <= iv.lo <= iv.mean <= iv.hi <= 1.0
    if len(a) == 1:
        assert not iv.excludes_zero  # one seed's difference is no claim (it excluded 0 before)
        return
    mean, lo, hi = printed(stats.fmt_interval(iv, 2, signed=True))
    assert -1.0 <= lo <= mean <= hi <= 1.0


@given(UNBOUNDED)
@settings(max_examples=200, deadline=None)
def test_an_unbounded_t_interval_is_the_one_it_was(values: list[float]) -> None:
    iv = stats.t_interval(values)
    mean, lo, hi = old_t(values)
    scale = max(1.0, max(abs(v) for v in values))
    assert (iv.mean, iv.lo, iv.hi) == pytest.approx((mean, lo, hi), abs=1e-9 * scale)
    assert not (iv.lo_clipped or iv.hi_clipped) and stats.CLIP_MARK not in stats.fmt_interval(iv)
    assert stats.paired_t(values, [0.0] * len(values)) == iv


def _run(seed: int, held: float, reward: float) -> dict[str, Any]:
    hist = [{"reward": reward, "mismatch": 0.1, "over_cap": 0.0, "clip_frac": 0.01} for _ in range(4)]
    return {"lag": 0, "correction": "none", "seed": seed, "steps": 4, "history": hist,
            "heldout": {"pass_rate": held, "reads": 1.0}}  # fmt: skip


def _numbers_in_brackets(text: str) -> list[float]:
    return [float(x) for cell in re.findall(r"\[([^]]*)\]", text) for x in re.findall(r"[-+]?\d+\.\d+", cell)]


def test_two_seeds_of_a_pass_rate_print_no_number_outside_0_1() -> None:
    """The known defect: pass rates 0.0 and 0.8 over 2 seeds printed 0.40 [-4.68, 5.48]."""
    runs = [_run(1, 0.0, 0.1), _run(2, 0.8, 0.9)]
    lines = summary_table(runs, keys=("lag",)).splitlines()
    row = lines[1].split(" | ")
    rates = [row[2], row[4], row[5], row[6]]  # reward window, over cap, clip frac, held-out
    assert all(0.0 <= x <= 1.0 for x in _numbers_in_brackets(" ".join(rates))), rates
    assert "0.40 [0.00*, 1.00*]" in row[6] and lines[-1] == stats.CLIP_NOTE


def test_a_two_seed_difference_of_pass_rates_prints_within_minus_1_1() -> None:
    runs = [dict(lag=lag, correction="none", seed=s, heldout=dict(pass_rate=p))
            for lag, s, p in ((0, 1, 0.9), (0, 2, 0.2), (8, 1, 0.0), (8, 2, 0.7))]  # fmt: skip
    lines = paired_table(runs, [((8, "none"), (0, "none"))]).splitlines()
    assert all(-1.0 <= x <= 1.0 for x in _numbers_in_brackets(lines[1].split(" | ")[1])), lines[1]
    assert stats.CLIP_MARK in lines[1] and lines[-1] == stats.CLIP_NOTE
    assert "n=2" in lines[1] and "significant" not in lines[1]


def test_a_table_with_nothing_cut_has_no_note() -> None:
    runs = [_run(s, 0.5 + 0.01 * s, 0.5) for s in range(3)]
    table = summary_table(runs, keys=("lag",))
    assert stats.CLIP_MARK not in table and stats.CLIP_NOTE not in table


def test_one_value_prints_no_interval_and_stores_none_of_no_width() -> None:
    iv = stats.t_interval([0.41], bounds=stats.RATE)
    assert stats.fmt_interval(iv) == "0.41 [1 seed]" and (iv.lo, iv.hi) == (0.0, 1.0)
    assert stats.t_interval([3.0]).lo == -math.inf and stats.t_interval([3.0]).hi == math.inf
    assert fmt_ci([0.41, math.nan], bounds=stats.RATE) == "0.41 [1 seed] (n=1)"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: stats.t_interval([0.5, 1.2], bounds=stats.RATE), "values"),
        (lambda: stats.t_interval([0.5, -0.1], bounds=stats.RATE), "values"),
        (lambda: stats.t_interval([0.5], bounds=(1.0, 0.0)), "bounds"),
        (lambda: stats.t_interval([0.5], bounds=(0.0, math.nan)), "bounds"),
        (lambda: stats.t_interval([0.5], bounds=("a", 1.0)), "bounds"),  # type: ignore[arg-type]
        (lambda: stats.t_interval([0.5], bounds=(0.0,)), "bounds"),  # type: ignore[arg-type]
        (lambda: stats.paired_t([0.5, 1.5], [0.5, 0.5], bounds=stats.RATE), "a"),
        (lambda: stats.paired_t([0.5, 0.5], [0.5, -2.0], bounds=stats.RATE), "b"),
        (lambda: fmt_ci([0.5, 1.5], bounds=stats.RATE), "values"),
    ],
)
def test_bad_values_or_bounds_name_the_field(call: Any, field: str) -> None:
    with pytest.raises(FieldError) as info:
        call()
    assert info.value.field == field


def test_the_plans_one_seed_comparison_has_no_interval() -> None:
    p = paired([1000.0], [900.0])
    assert math.isnan(p.half_width) and not p.tested
    assert paired([1000.0, 1010.0], [900.0, 905.0]).tested


def test_the_reward_band_stays_in_0_1_and_leaves_out_steps_of_one_run(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs of 0/1-like rewards: their t band reached [-4.6, 5.6]; a step only one run reached
    (the other diverged) drew a band of no width, which reads as certain."""
    import plotly.graph_objects as go

    from offpolicy.experiment import write_reward_figure

    traces: list[Any] = []
    real = go.Figure.add_trace
    monkeypatch.setattr(go.Figure, "add_trace", lambda self, t, *a, **k: (traces.append(t), real(self, t))[1])
    runs = [_run(1, 0.5, 0.1), _run(2, 0.5, 0.9)]
    runs[1]["history"] = runs[1]["history"][:2]  # stops after 2 of 4 steps
    write_reward_figure(runs, tmp_path / "f.html", ("lag",), "t")
    fill, line = traces
    assert fill.fill == "toself" and list(fill.x) == [0, 1, 1, 0]  # only the steps both runs have
    assert all(0.0 <= y <= 1.0 for y in fill.y) and max(fill.y) == 1.0 and min(fill.y) == 0.0
    assert list(line.x) == [0, 1, 2, 3]
