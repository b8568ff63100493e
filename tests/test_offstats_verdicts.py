"""A paired row's verdict is its own printed p; the t interval's real coverage; the cosim ``±``.

* ``paired_table`` took a row's "significant" from the t interval (it excluded 0) while printing
  the exact sign-flip p beside it and giving Holm that p: the per-seed differences below printed
  ``+0.06 [+0.00, +0.11] | n=10 | p=0.059 | significant``. The verdict is now ``p < 0.05``.
* ``resampled_coverage`` measures how often the t interval holds a population's mean: 95% for
  normal values, far less for a bimodal one (the docs' numbers come from it).
* ``format_table``'s ``final`` column prints mean±(population SD); a legend line says so.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offpolicy import stats
from offpolicy.checks import FieldError
from offpolicy.experiment import paired_table
from scenarios.cosim_tables import SD_LEGEND, aggregate, format_table

SEEDS = range(101, 111)
EXAMPLE = [0.09, 0.11, -0.02, -0.03, 0.10, 0.03, 0.10, 0.16, -0.08, 0.11]
"""Per-seed differences whose t interval excludes 0 while the exact sign-flip p is 0.059."""
ROW = re.compile(r"\| n=(\d+) \| p=([0-9.]+) \| (significant|not significant)$")


def paired_rows(diffs: list[float], base: float = 0.5) -> list[str]:
    """The table's rows of ``8 none - 0 none`` over 10 seeds with the given per-seed differences."""
    runs: list[dict[str, Any]] = []
    for seed, d in zip(SEEDS, diffs):
        runs.append({"lag": 0, "correction": "none", "seed": seed, "heldout": {"pass_rate": base}})
        runs.append({"lag": 8, "correction": "none", "seed": seed, "heldout": {"pass_rate": base + d}})
    return paired_table(runs, [((8, "none"), (0, "none"))]).splitlines()


def test_the_example_row_no_longer_contradicts_itself() -> None:
    iv = stats.paired_t([0.5 + d for d in EXAMPLE], [0.5] * 10, bounds=stats.RATE)
    p = stats.sign_flip_p(EXAMPLE)
    assert iv.excludes_zero and p > 0.05  # the case itself: the two tests disagree
    row = paired_rows(EXAMPLE)[1]
    match = ROW.search(row)
    assert match is not None, row
    assert float(match.group(2)) > 0.05 and match.group(3) == "not significant", row


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-40, 40), min_size=10, max_size=10))
def test_a_rows_verdict_is_its_printed_p(hundredths: list[int]) -> None:
    diffs = [h / 100 for h in hundredths]
    row = paired_rows(diffs)[1]
    match = ROW.search(row)
    assert match is not None, row
    p = stats.sign_flip_p(diffs)
    assert match.group(2) == f"{p:.3f}"
    assert (match.group(3) == "significant") == (p < 0.05), row


def test_coverage_is_nominal_for_normal_values_and_short_for_a_bimodal_population() -> None:
    normal = np.random.default_rng(1).normal(0.0, 1.0, 50_000)
    assert 0.93 <= stats.resampled_coverage(normal, 10, np.random.default_rng(0)) <= 0.97
    # nine seeds near the top, a tenth of runs collapsed: a draw without a collapse misses the mean
    bimodal = [0.93] * 90 + [0.0] * 10
    short = stats.resampled_coverage(bimodal, 10, np.random.default_rng(0))
    assert short < 0.8
    assert short == stats.resampled_coverage(bimodal, 10, np.random.default_rng(0))  # seeded


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("n", {"population": [0.1, 0.2], "n": 1}),
        ("n", {"population": [0.1, 0.2], "n": 2.5}),
        ("trials", {"population": [0.1, 0.2], "n": 5, "trials": 0}),
        ("population", {"population": [], "n": 5}),
        ("population", {"population": [0.1, float("nan")], "n": 5}),
    ],
)
def test_resampled_coverage_refuses_bad_input_naming_the_field(field: str, kwargs: dict[str, Any]) -> None:
    with pytest.raises(FieldError) as info:
        stats.resampled_coverage(rng=np.random.default_rng(0), **kwargs)
    assert info.value.field == field and field in str(info.value)


def cosim_runs(finals: list[float]) -> list[dict[str, Any]]:
    summary = dict(
        staleness_mean=0.0, staleness_max=0, mixed_share=0.0, mismatch=0.0, sim_hours=1.0,
        lone_share=0.0, token_staleness_mean=0.0, trained_duration_s=1.0, launched_duration_s=1.0,
    )  # fmt: skip
    evals = [dict(step=0, sim_h=0.0, pass_rate=0.2), dict(step=5, sim_h=0.1, pass_rate=0.9)]
    return [
        dict(design="sync", correction="none", seed=s, evals=evals, summary=dict(summary, final_pass_rate=f))
        for s, f in enumerate(finals)
    ]


@pytest.mark.parametrize("also", [None, 0.9])
def test_the_cosim_table_says_what_its_plus_minus_is(also: float | None) -> None:
    finals = [0.9, 0.7, 0.8]
    lines = format_table(aggregate(cosim_runs(finals), 0.5, also), 0.5).splitlines()
    sd = float(np.std(finals))  # the population SD, which the legend names
    assert f"0.800±{sd:.3f}" in lines[2]
    assert lines[-1].rstrip() == SD_LEGEND and "SD" in SD_LEGEND and "not an interval" in SD_LEGEND
    assert len({len(line) for line in lines}) == 1  # the legend keeps the table's width
