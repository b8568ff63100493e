"""The length fit from a step's mean and maximum, and the small-sample widening of its intervals,
checked against the closed forms of :mod:`pipesim.calibrate.fit`'s docstring computed here."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from pipesim.calibrate.fit import fit_lengths, small_sample

_Z = NormalDist()


def _fit(mean: np.ndarray, maxes: np.ndarray, batch: int) -> dict:
    out, _ = fit_lengths(mean, None, maxes, 1e9, batch, 0.0, 0.9, np.random.default_rng(1))
    return out


def _closed_form(mean: float, max_median: float, batch: int) -> tuple[float, float]:
    """(median, sigma) solving median-of-max = exp(mu + s z_B), mean = exp(mu + s^2/2): the
    smaller root of s^2/2 - z_B s + ln(max/mean) = 0 (the larger one puts the mean's median far
    below any draw)."""
    zb = _Z.inv_cdf(0.5 ** (1 / batch))
    d = math.log(max_median / mean)
    s = zb - math.sqrt(zb * zb - 2 * d)
    return mean * math.exp(-s * s / 2), s


def test_synthetic_lognormal_steps_recover_median_and_sigma_within_intervals() -> None:
    median, sigma, batch = 1000.0, 0.6, 512
    draws = np.exp(np.random.default_rng(0).normal(math.log(median), sigma, (8, batch)))
    out = _fit(draws.mean(1), draws.max(1), batch)
    med, sig = out["response_median_tokens"], out["response_sigma"]
    assert med.how == sig.how == "maximum and mean"
    assert med.lo <= median <= med.hi and med.value == pytest.approx(median, rel=0.05)
    assert sig.lo <= sigma <= sig.hi and sig.value == pytest.approx(sigma, rel=0.1)


def test_fit_from_maxima_is_the_closed_form_at_the_median_step_maximum() -> None:
    batch = 256
    mean = np.array([1000.0, 1000.0, 1000.0])
    maxes = np.array([5000.0, 6000.0, 40000.0])  # one heavy-tailed step: its mean is far off the median
    want_med, want_s = _closed_form(1000.0, float(np.median(maxes)), batch)
    out = _fit(mean, maxes, batch)
    assert out["response_median_tokens"].value == pytest.approx(want_med, rel=1e-9)
    assert out["response_sigma"].value == pytest.approx(want_s, rel=1e-9)
    # the median of the maxima: one outlying step's maximum moves nothing
    tamer = _fit(mean, np.array([5000.0, 6000.0, 7000.0]), batch)
    assert tamer["response_sigma"].value == pytest.approx(out["response_sigma"].value, rel=1e-12)


# Student's t two-sided 95% quantiles (standard table) and the normal one
_T95 = {2: 4.303, 4: 2.776}
_Z975 = 1.959964


@pytest.mark.parametrize("n", [3, 5])
def test_small_sample_widening_is_t_on_unbiased_variance(n: int) -> None:
    f = _T95[n - 1] * math.sqrt(n / (n - 1)) / _Z975
    lo, hi = small_sample(10.0, 9.0, 12.0, n)  # ends 1 below and 2 above the value
    assert 10.0 - lo == pytest.approx(f * 1.0, rel=1e-3)
    assert hi - 10.0 == pytest.approx(f * 2.0, rel=1e-3)
    # the docstring's 2.69 at 3 steps (its "1.46 at 5" disagrees with its own formula: 1.58)
    if n == 3:
        assert f == pytest.approx(2.69, abs=0.01)
