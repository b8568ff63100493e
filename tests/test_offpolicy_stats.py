"""offpolicy.stats against slow, obvious references, and the experiment CLIs' seed handling."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offpolicy import stats
from offpolicy.experiment import fmt_ci, paired_table, seeds_from_args, summary_table
from offpolicy.staleness import comparison_pairs

VALUES = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=12)


def quantile_ref(xs: list[float], q: float) -> float:
    """Linear interpolation between order statistics at position q * (n - 1)."""
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (pos - lo) * (xs[hi] - xs[lo])


def bootstrap_ref(values: list[float], seed: int, n_boot: int, level: float) -> tuple[float, float, float]:
    """The same draws (one [n_boot, n] index matrix), everything else as plain python loops."""
    idx = np.random.default_rng(seed).integers(0, len(values), size=(n_boot, len(values))).tolist()
    means = []
    for row in idx:
        total = 0.0
        for i in row:
            total += values[i]
        means.append(total / len(row))
    return (
        sum(values) / len(values),
        quantile_ref(means, (1 - level) / 2),
        quantile_ref(means, (1 + level) / 2),
    )


@given(VALUES, st.integers(0, 2**32 - 1), st.sampled_from([0.8, 0.9, 0.95]))
@settings(max_examples=30, deadline=None)
def test_bootstrap_mean_matches_loop_reference(values: list[float], seed: int, level: float) -> None:
    iv = stats.bootstrap_mean(values, np.random.default_rng(seed), n_boot=300, level=level)
    m, lo, hi = bootstrap_ref(values, seed, 300, level)
    assert iv.n == len(values)
    assert iv.mean == pytest.approx(m, abs=1e-12)
    assert iv.lo == pytest.approx(lo, abs=1e-12) and iv.hi == pytest.approx(hi, abs=1e-12)
    assert min(values) - 1e-12 <= iv.lo <= iv.hi <= max(values) + 1e-12


@given(VALUES, st.integers(0, 1000))
@settings(max_examples=30, deadline=None)
def test_paired_difference_is_the_bootstrap_of_the_differences(values: list[float], seed: int) -> None:
    other = [v * 0.5 + 0.1 for v in values]
    iv = stats.paired_difference(values, other, np.random.default_rng(seed), n_boot=200)
    ref = stats.bootstrap_mean(
        [a - b for a, b in zip(values, other)], np.random.default_rng(seed), n_boot=200
    )
    assert iv == ref
    same = stats.paired_difference(values, values, np.random.default_rng(seed), n_boot=200)
    assert (same.mean, same.lo, same.hi) == (0.0, 0.0, 0.0) and not same.excludes_zero


def test_bootstrap_is_deterministic_and_covers_a_known_mean() -> None:
    a = stats.bootstrap_mean([0.1, 0.9, 0.5, 0.3], np.random.default_rng(4))
    assert a == stats.bootstrap_mean([0.1, 0.9, 0.5, 0.3], np.random.default_rng(4))
    # coverage: 95% intervals from 10 draws of N(0.5, 0.2) contain 0.5 in roughly 95% (>= 85%) of 200 trials
    data = np.random.default_rng(9).normal(0.5, 0.2, size=(200, 10))
    hits = 0
    for row in data:
        iv = stats.bootstrap_mean(row.tolist(), np.random.default_rng(1), n_boot=1000)
        hits += iv.lo <= 0.5 <= iv.hi
    assert hits >= 170


def test_significance_collapsed_and_format() -> None:
    up = stats.paired_difference([0.8, 0.9, 0.7, 0.85], [0.1, 0.2, 0.0, 0.15], np.random.default_rng(0))
    assert up.excludes_zero and up.lo > 0
    mixed = stats.paired_difference([0.8, 0.0, 0.7, 0.0], [0.0, 0.6, 0.1, 0.5], np.random.default_rng(0))
    assert not mixed.excludes_zero
    assert stats.collapsed([0.0, 0.049, 0.05, 0.8]) == 2
    assert stats.fmt_interval(stats.Interval(0.5, 0.25, 0.75, 3)) == "0.50 [0.25, 0.75]"
    assert stats.fmt_interval(stats.Interval(0.1, -0.2, 0.3, 3), signed=True) == "+0.10 [-0.20, +0.30]"
    assert stats.paired_by_seed({1: 0.5, 2: 0.7, 5: 0.1}, {5: 0.0, 1: 0.25}) == (
        [1, 5],
        [0.5, 0.1],
        [0.25, 0.0],
    )
    # unpaired, empty and a level outside (0, 1): rows stats-* of tests/test_refusals_offpolicy.py


def test_seed_list_and_seeds() -> None:
    assert seeds_from_args(3, None) == [0, 1, 2]
    assert seeds_from_args(3, [101, 202]) == [101, 202]
    # a repeated seed: row seed-list-repeats of tests/test_refusals_offpolicy.py


def _run(lag: int, correction: str, seed: int, held: float) -> dict[str, object]:
    hist = [{"reward": held, "mismatch": 0.01 * lag, "over_cap": 0.0, "clip_frac": 0.01} for _ in range(10)]
    return {
        "lag": lag,
        "correction": correction,
        "seed": seed,
        "steps": 10,
        "history": hist,
        "heldout": {"pass_rate": held, "reads": 1.0},
    }


def test_tables_print_mean_with_bootstrap_interval_and_paired_differences() -> None:
    runs = [_run(0, "none", s, h) for s, h in zip((101, 202, 303), (0.8, 0.81, 0.82))]
    runs += [_run(8, "none", s, h) for s, h in zip((101, 202, 303), (0.0, 0.5, 0.0))]
    runs += [_run(8, "tis", s, h) for s, h in zip((101, 202, 404), (0.6, 0.4, 0.9))]
    table = summary_table(runs)
    assert fmt_ci([0.8, 0.81, 0.82]) in table and "2/3" in table
    pairs = comparison_pairs(runs)
    assert pairs == [((8, "none"), (0, "none")), ((8, "tis"), (8, "none"))]
    paired = paired_table(runs, pairs)
    lines = paired.splitlines()
    assert "n=3 | significant" in lines[1]  # lag 8 none is below lag 0 on every seed
    assert "n=2 | not significant" in lines[2]  # seeds 101 and 202 only: +0.60 and -0.10
    assert "+0.25 [" in lines[2]


def test_sign_test_equals_enumerating_every_sign_pattern() -> None:
    import itertools

    for n in range(0, 9):
        for wins in range(n + 1):
            observed = min(wins, n - wins)
            # every equally likely pattern of n fair signs, as extreme as observed on either side
            heads = [sum(signs) for signs in itertools.product((0, 1), repeat=n)]
            extreme = sum(1 for h in heads if min(h, n - h) <= observed)
            assert stats.sign_test(wins, n - wins) == pytest.approx(min(1.0, extreme / 2**n), abs=1e-12)
    assert stats.sign_test(10, 0) == pytest.approx(2 / 1024)
    # a negative count: rows sign-test-{wins,losses} of tests/test_refusals_offpolicy.py


def test_a_one_seed_difference_claims_nothing() -> None:
    """One shared seed gives an interval of one point, which excludes 0 whenever the runs differ at
    all: the table said "significant (n < 10: no claim)" for -0.00 [-0.00, -0.00]."""
    runs = [_run(0, "none", 101, 0.8), _run(8, "none", 101, 0.79), _run(8, "none", 202, 0.1)]
    line = paired_table(runs, [((8, "none"), (0, "none"))]).splitlines()[1]
    assert "n=1" in line and "significant" not in line and "no claim" in line
