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
* :func:`fmt_interval` -- ``'0.85 [0.70, 0.95]'``; ``'0.95 [0.80, 1.00*]'`` where cut at a bound.

* :func:`t_interval` -- the mean and its Student-t interval, ``mean +- t(n-1) s / sqrt(n)``:
  what every table prints, for a cell's mean over seeds and for a paired difference
  (:func:`paired_t`). It is descriptive: no table's verdict rests on it (below).
* ``bounds`` -- a share or a rate (a pass rate, a reward of 0 or 1 per episode, a clipped share)
  lies in :data:`RATE` = [0, 1], a difference of two in [-1, 1], a count or a log-ratio size in
  :data:`NONNEGATIVE`. The t interval knows nothing of that: over 2 seeds t(0.975, 1) = 12.7,
  and pass rates 0.0 and 0.8 gave ``0.40 [-4.68, 5.48]``. Given the quantity's bounds,
  :func:`t_interval` cuts the interval at them and says so (``Interval.lo_clipped`` /
  ``hi_clipped``; :func:`fmt_interval` prints the cut end with :data:`CLIP_MARK`, explained by
  :data:`CLIP_NOTE`). The cut costs no coverage: the true mean lies within the bounds, so it is
  inside the cut interval exactly when it is inside the t interval. A value outside the bounds is
  an error (it means the bounds, or the value, are wrong), not something to cut.
* One value has no interval (the t interval with 0 degrees of freedom is infinite): its ``lo`` and
  ``hi`` are the bounds (``-inf`` and ``inf`` when there are none), and :func:`fmt_interval`
  prints ``'0.41 [1 seed]'``, never an interval of no width.
* :func:`sign_flip_p` -- the exact two-sided sign-flip permutation p-value of paired
  differences (every one of the ``2**n`` sign assignments, for n up to :data:`MAX_EXACT_FLIPS`;
  above, estimated from :data:`FLIP_DRAWS` seeded random assignments), which assumes no shape for
  the outcomes; :func:`holm` adjusts a family of them. A table's verdict on a paired difference
  ("significant") is its sign-flip p < 0.05, the p it prints and Holm adjusts.
* :func:`resampled_coverage` -- how often the t interval over ``n`` values drawn from a
  population holds that population's mean: the check behind the paragraph below.

Why t and not the percentile bootstrap the tables printed before: over 10 seeds a percentile
bootstrap interval is a normal interval with a standard deviation biased low (it divides by n,
and uses 1.96 for 2.26): its simulated coverage was 91% for normal values, 86.5% for the
skewed differences of the co-simulation and 83% at n = 5, where the t interval holds 95% for
normal values (``tests/test_offpolicy_stats.py`` checks both).

The t interval does not fix coverage on *these* outcomes, though: it is exact only for normal
values, and held-out pass rates over seeds are skewed or bimodal (most seeds near the top, a few
far below). Taking a committed 10-seed cell as the population and drawing 10 values from it with
replacement (:func:`resampled_coverage`, 20,000 draws, seed 0), the 95% t interval held the
population's mean 0.77 of the time for ``staleness.json``'s lag 0 (nine seeds at 0.90-0.97, one
at 0.78), 0.89 for its lag 4 TIS, 0.72 and 0.87 for the co-simulation's eta-2 and eta-1 TIS; 0.67
for a population with a 10% tail of collapsed runs (the lag-0 values nine times over and 10% at
0.0); 0.93-0.95 for the paired differences of the staleness table and for normal values. So the
intervals are descriptive (a reader's sense of the spread), and every verdict rests on the exact
sign-flip test, which assumes no shape; with few values any interval is weak. Claims are made only
from cells of at least 10 seeds, and within a table's family of comparisons the Holm-adjusted
sign-flip p-values say which survive the number of comparisons.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from offpolicy.checks import FieldError, check_real, refuse, shown
from offpolicy.tdist import T95 as T95  # re-exported: the table beside the intervals
from offpolicy.tdist import t_quantile
from offpolicy.tdist import t_two_sided_tail as t_two_sided_tail

N_BOOT = 10_000
LEVEL = 0.95
COLLAPSED = 0.05
MAX_EXACT_FLIPS = 20
"""The most pairs :func:`sign_flip_p` enumerates (2**20 sign assignments)."""
Bounds = tuple[float, float]
"""The least and the greatest value a quantity can take (``-inf`` / ``inf`` for no bound)."""
UNBOUNDED: Bounds = (-math.inf, math.inf)
RATE: Bounds = (0.0, 1.0)
"""A share or a rate: a pass rate, a mean reward of 0-or-1 episodes, a share of tokens."""
RATE_DIFF: Bounds = (-1.0, 1.0)
"""The difference of two rates (what :func:`paired_t` derives from ``bounds=RATE``)."""
NONNEGATIVE: Bounds = (0.0, math.inf)
"""A count, a size or a time: no upper bound, but never below 0."""
CLIP_MARK = "*"
"""What :func:`fmt_interval` prints after an end of an interval cut at the quantity's bound."""
CLIP_NOTE = (
    f"{CLIP_MARK} the t interval reached past what the quantity can take (a rate lies in [0, 1], a "
    "difference of rates in [-1, 1], a count at or above 0) and is cut there; the true mean lies "
    "inside those bounds, so the cut loses no coverage"
)
"""The line under a table that printed a :data:`CLIP_MARK` (:func:`clip_note`)."""


@dataclass(frozen=True)
class Interval:
    """A point estimate with an interval (Student t or percentile bootstrap).

    Attributes:
        mean: the estimate (mean of the values, or of the paired differences).
        lo: lower end of the interval (the lower bound for one value: no interval).
        hi: upper end of the interval (the upper bound for one value: no interval).
        n: number of values (or of pairs).
        lo_clipped: the t interval reached below the quantity's lower bound, and ``lo`` is that bound.
        hi_clipped: the same at the upper bound.
    """

    mean: float
    lo: float
    hi: float
    n: int
    lo_clipped: bool = False
    hi_clipped: bool = False

    @property
    def excludes_zero(self) -> bool:
        """Whether 0 lies outside [lo, hi] (never for one value, whose interval is the whole of its
        bounds). For a difference this is the t-test at the interval's level, which is not what a
        table calls significant: that is the exact sign-flip p (:func:`sign_flip_p`)."""
        return self.lo > 0.0 or self.hi < 0.0


def _floats(values: Sequence[float], field: str) -> np.ndarray:
    """``values`` as a float array, or a FieldError naming ``field`` and the first item that is not
    a number (numpy's own error, "could not convert string to float", named neither)."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        pass
    try:
        items = list(values)
    except TypeError:
        raise FieldError(f"{field}: need a sequence of numbers, got {shown(values)}", field) from None
    for i, v in enumerate(items):
        try:
            float(v)
        except (TypeError, ValueError):
            raise FieldError(f"{field}[{i}] = {shown(v)} is not a number", field) from None
    raise FieldError(f"{field}: need a flat sequence of numbers, got {shown(values)}", field)


def _check(values: Sequence[float], n_boot: int, level: float, field: str = "values") -> np.ndarray:
    arr = _floats(values, field)
    if arr.ndim != 1 or arr.size == 0:
        raise FieldError(f"{field}: need a non-empty 1-d sequence", field)
    if not np.isfinite(arr).all():
        raise FieldError(f"{field}: must be finite", field)
    if n_boot <= 0:
        raise refuse("n_boot", f"must be > 0, got {n_boot}")
    if not 0.0 < level < 1.0:
        raise refuse("level", f"must be in (0, 1), got {level}")
    return arr


def check_bounds(bounds: Bounds) -> Bounds:
    """``bounds`` as two floats ``lo < hi`` (either may be infinite), else a FieldError naming it."""
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise refuse("bounds", f"must be two numbers (lo, hi), got {bounds!r}") from None
    if not lo < hi:  # also NaN
        raise refuse("bounds", f"must have lo < hi, got {bounds!r}")
    return lo, hi


def _check_within(arr: np.ndarray, bounds: Bounds, field: str) -> None:
    """A FieldError naming ``field`` (its message: the index and value) for the first value outside
    ``bounds``: the bounds (or the value) are wrong, and cutting an interval at them would hide it."""
    lo, hi = bounds
    outside = np.flatnonzero((arr < lo) | (arr > hi))
    if outside.size:
        i = int(outside[0])
        raise FieldError(
            f"{field}[{i}] = {float(arr[i])!r} lies outside the quantity's bounds [{lo}, {hi}]", field
        )


def bootstrap_mean(
    values: Sequence[float], rng: np.random.Generator, n_boot: int = N_BOOT, level: float = LEVEL
) -> Interval:
    """Mean of ``values`` with a percentile-bootstrap interval at ``level`` drawn from ``rng``
    (resample means lie between the least and the greatest value, so it needs no bounds)."""
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


def t_interval(values: Sequence[float], level: float = LEVEL, bounds: Bounds = UNBOUNDED) -> Interval:
    """Mean of ``values`` with its Student-t interval at ``level``, cut at ``bounds`` (what the
    quantity can take: :data:`RATE` for a share; a value outside them is a FieldError), each cut
    end marked. One value has no interval: ``lo`` and ``hi`` are then the bounds themselves (the
    t interval with no degree of freedom is infinite), and the tables print ``[1 seed]``."""
    arr = _check(values, 1, level)
    b_lo, b_hi = check_bounds(bounds)
    _check_within(arr, (b_lo, b_hi), "values")
    mean = min(max(float(arr.mean()), b_lo), b_hi)  # a rounding ulp past a bound such as 0.7
    if arr.size == 1:
        return Interval(mean, b_lo, b_hi, 1)
    half = t_quantile(arr.size - 1, level) * float(arr.std(ddof=1)) / math.sqrt(arr.size)
    lo, hi = mean - half, mean + half
    return Interval(mean, max(lo, b_lo), min(hi, b_hi), int(arr.size), lo < b_lo, hi > b_hi)


def difference_bounds(bounds: Bounds) -> Bounds:
    """The bounds of ``a - b`` for ``a`` and ``b`` within ``bounds``: [0, 1] gives [-1, 1]."""
    lo, hi = check_bounds(bounds)
    return lo - hi, hi - lo


def paired_t(
    a: Sequence[float], b: Sequence[float], level: float = LEVEL, bounds: Bounds = UNBOUNDED
) -> Interval:
    """Mean of ``a[i] - b[i]`` (same seeds, same order) with its Student-t interval; ``bounds``
    are those of ``a`` and ``b`` (:data:`RATE` for pass rates), and the difference's interval is
    cut at :func:`difference_bounds` of them ([-1, 1])."""
    if len(a) != len(b):
        raise FieldError(f"a and b must pair up (same seeds): lengths {len(a)} and {len(b)}", "b")
    b_lo, b_hi = check_bounds(bounds)
    for field, values in (("a", a), ("b", b)):
        _check_within(_floats(values, field), (b_lo, b_hi), field)
    return t_interval([x - y for x, y in zip(a, b)], level, difference_bounds((b_lo, b_hi)))


def sign_flip_p(diffs: Sequence[float]) -> float:
    """Exact two-sided p-value of paired differences under "no difference": the share of the
    ``2**n`` ways to flip their signs whose mean is at least as far from 0 as the observed one
    (a tolerance of 1e-12 counts ties as at least as far). Exact, so it can never go below
    ``2 / 2**n`` (0.0625 at n = 5, 0.002 at n = 10)."""
    arr = _check(diffs, 1, LEVEL, "diffs")
    n = arr.size
    observed = abs(float(arr.mean()))
    if n > MAX_EXACT_FLIPS:  # the docs ask for 40-55 seeds: estimate it instead (p=nan before)
        return _sign_flip_p_drawn(np.abs(arr), observed, np.random.default_rng(FLIP_SEED))
    signs = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)  # [2**n, n] of +-1
    means = np.abs(signs @ np.abs(arr)) / n
    return float(np.mean(means >= observed - 1e-12))


FLIP_DRAWS = 200_000
"""Random sign assignments :func:`sign_flip_p` draws above :data:`MAX_EXACT_FLIPS` pairs."""
FLIP_SEED = 0
"""The seed of those draws: the same differences give the same p-value on every run."""


def _sign_flip_p_drawn(magnitudes: np.ndarray, observed: float, rng: np.random.Generator) -> float:
    """The sign-flip p-value estimated from :data:`FLIP_DRAWS` random sign assignments, counted
    as ``(1 + hits) / (1 + draws)`` (the observed assignment is one of them), so it is never 0
    and its Monte Carlo error is about ``sqrt(p / draws)`` (0.0005 at p = 0.05)."""
    n, hits, left = magnitudes.size, 0, FLIP_DRAWS
    while left:
        k = min(left, 20_000)  # 20,000 x n signs at a time: bounded memory at any n
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(k, n))
        hits += int(np.count_nonzero(np.abs(signs @ magnitudes) / n >= observed - 1e-12))
        left -= k
    return (1 + hits) / (1 + FLIP_DRAWS)


def resampled_coverage(
    population: Sequence[float], n: int, rng: np.random.Generator, trials: int = 20_000, level: float = LEVEL
) -> float:
    """The share of ``trials`` t intervals at ``level``, each over ``n`` values drawn with
    replacement from ``population``, that hold the population's mean: the coverage the t interval
    actually has on outcomes shaped like ``population`` (``level`` exactly only for normal
    values). Draws come from ``rng`` in one ``integers`` call ([trials, n] indices); a draw of n
    equal values has an interval of no width, which holds the mean only if it equals it."""
    for field, count, least in (("n", n, 2), ("trials", trials, 1)):  # one value has no interval
        if isinstance(count, bool) or not isinstance(count, int) or count < least:
            raise refuse(field, f"must be an int >= {least}, got {count!r}")
    arr = _check(population, 1, level, "population")
    draws = arr[rng.integers(0, arr.size, size=(trials, n))]  # [trials, n]
    means = draws.mean(axis=1)  # [trials]
    half = t_quantile(n - 1, level) * draws.std(axis=1, ddof=1) / math.sqrt(n)
    truth = float(arr.mean())
    return float(np.mean((means - half <= truth) & (truth <= means + half)))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (same order as given): the i-th
    smallest is multiplied by (m - i), each kept at least the one before it and at most 1."""
    for i, p in enumerate(pvalues):  # NaN or 1.5 came back as 1.0, a p-value like any other
        check_real(f"pvalues[{i}]", p, 0.0, 1.0)
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def holm_line(family: Sequence[tuple[str, float]], what: str) -> str | None:
    """The line under a table of claims: which of ``family`` ((name, p-value) pairs) survive Holm's
    adjustment at ``1 - LEVEL`` (``what`` names the family and its test); None for fewer than two,
    where each row's own p says as much."""
    if len(family) < 2:
        return None
    adjusted = holm([p for _, p in family])
    kept = [name for (name, _), q in zip(family, adjusted, strict=True) if q < 1 - LEVEL]
    return f"Holm over the {len(family)} {what}: " + (", ".join(kept) if kept else "none survives")


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
    """``'mean [lo, hi]'`` with ``digits`` decimals (``signed``: a leading + on positives), an end
    cut at the quantity's bound followed by :data:`CLIP_MARK` (``'0.40 [0.00*, 1.00*]'``); one
    value has no interval, and says so (``'0.41 [1 seed]'``) rather than print one of no width."""
    sign = "+" if signed else ""
    if iv.n < 2:
        return f"{iv.mean:{sign}.{digits}f} [1 seed]"
    lo = f"{iv.lo:{sign}.{digits}f}" + (CLIP_MARK if iv.lo_clipped else "")
    hi = f"{iv.hi:{sign}.{digits}f}" + (CLIP_MARK if iv.hi_clipped else "")
    return f"{iv.mean:{sign}.{digits}f} [{lo}, {hi}]"


def clip_note(cells: Iterable[str]) -> str | None:
    """:data:`CLIP_NOTE` when any of ``cells`` (:func:`fmt_interval`'s text) printed a cut end,
    for the line under its table; None when none did."""
    return CLIP_NOTE if any(CLIP_MARK in c for c in cells) else None
