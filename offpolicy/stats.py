"""Statistics for claims over seeds: bootstrap intervals, paired differences, collapsed runs.

Pure functions of plain sequences of floats; every random draw comes from the
``numpy.random.Generator`` passed in, so a table printed twice from the same runs and the same
seed is identical.

* :func:`bootstrap_mean` -- the mean and a percentile-bootstrap interval (default 95%): draw
  ``n_boot`` resamples of the values with replacement (one ``rng.integers`` call for the whole
  [n_boot, n] index matrix), take each resample's mean, and report the ``(1 - level) / 2`` and
  ``(1 + level) / 2`` quantiles of those means (linear interpolation between order statistics,
  numpy's default rule).
* :func:`paired_difference` -- the same for the per-seed differences ``a[i] - b[i]`` of two
  settings run on the same seeds (a paired comparison: the seed's own luck cancels). A
  difference is *significant* at that level when its interval excludes 0.
* :func:`collapsed` -- how many runs ended below a threshold (held-out pass rate < 0.05 by
  default), reported beside every mean because outcomes are bimodal.
* :func:`sign_test` -- the exact two-sided sign test of paired outcomes that are only ordered
  (which of two designs reached a target first on each seed, where "never" is a valid outcome
  and has no number to average): under "neither is faster" the wins among the untied pairs are
  Binomial(n, 1/2); the p-value doubles the smaller tail, capped at 1.
* :func:`fmt_interval` -- ``'0.85 [0.70, 0.95]'``.

With few values a bootstrap interval is too narrow (with 3 seeds it can only ever span the
observed values); it is reported as it is, with n, and claims are made only from cells of at
least 10 seeds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from offpolicy.checks import FieldError, refuse

N_BOOT = 10_000
LEVEL = 0.95
COLLAPSED = 0.05


@dataclass(frozen=True)
class Interval:
    """A point estimate with a bootstrap interval.

    Attributes:
        mean: the estimate (mean of the values, or of the paired differences).
        lo: lower end of the interval.
        hi: upper end of the interval.
        n: number of values (or of pairs).
    """

    mean: float
    lo: float
    hi: float
    n: int

    @property
    def excludes_zero(self) -> bool:
        """Whether 0 lies outside [lo, hi] (for a difference: significant at the interval's level)."""
        return self.lo > 0.0 or self.hi < 0.0


def _check(values: Sequence[float], n_boot: int, level: float) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise FieldError("values: need a non-empty 1-d sequence", "values")
    if not np.isfinite(arr).all():
        raise FieldError("values: must be finite", "values")
    if n_boot <= 0:
        raise refuse("n_boot", f"must be > 0, got {n_boot}")
    if not 0.0 < level < 1.0:
        raise refuse("level", f"must be in (0, 1), got {level}")
    return arr


def bootstrap_mean(
    values: Sequence[float], rng: np.random.Generator, n_boot: int = N_BOOT, level: float = LEVEL
) -> Interval:
    """Mean of ``values`` with a percentile-bootstrap interval at ``level`` drawn from ``rng``."""
    arr = _check(values, n_boot, level)
    idx = rng.integers(0, arr.size, size=(n_boot, arr.size))  # [n_boot, n]
    means = arr[idx].mean(axis=1)  # [n_boot]
    lo, hi = np.quantile(means, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return Interval(float(arr.mean()), float(lo), float(hi), int(arr.size))


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    rng: np.random.Generator,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
) -> Interval:
    """Mean of ``a[i] - b[i]`` (same seeds, same order) with its bootstrap interval."""
    if len(a) != len(b):
        raise FieldError(f"a and b must pair up (same seeds): lengths {len(a)} and {len(b)}", "b")
    return bootstrap_mean([x - y for x, y in zip(a, b)], rng, n_boot, level)


def paired_by_seed(a: dict[int, float], b: dict[int, float]) -> tuple[list[int], list[float], list[float]]:
    """The seeds both settings ran, ascending, with their values: -> (seeds, a values, b values)."""
    seeds = sorted(set(a) & set(b))
    return seeds, [a[s] for s in seeds], [b[s] for s in seeds]


def collapsed(values: Sequence[float], threshold: float = COLLAPSED) -> int:
    """How many of ``values`` are below ``threshold``."""
    return sum(1 for v in values if v < threshold)


def sign_test(wins: int, losses: int) -> float:
    """Exact two-sided sign-test p-value of ``wins`` against ``losses`` (ties left out)."""
    if wins < 0 or losses < 0:
        field = "wins" if wins < 0 else "losses"
        raise FieldError(f"wins and losses must be >= 0, got {wins} and {losses}", field)
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def fmt_interval(iv: Interval, digits: int = 2, signed: bool = False) -> str:
    """``'mean [lo, hi]'`` with ``digits`` decimals (``signed``: a leading + on positives)."""
    sign = "+" if signed else ""
    return f"{iv.mean:{sign}.{digits}f} [{iv.lo:{sign}.{digits}f}, {iv.hi:{sign}.{digits}f}]"
