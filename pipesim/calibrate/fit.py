"""The fits of a calibration, each closed-form where it can be, each value with a 95% interval.

**Trainer**: the framework profile's constants, :mod:`pipesim.calibrate.trainer` (through
:func:`pipesim.compute.phasefit.fit_profile`). :data:`MIN_TOKEN_SPREAD` is its test of whether
the steps' tokens separate a fixed cost from an efficiency.

**Lengths** (:func:`fit_lengths`): the response lengths are log-normal (the spec's
``difficulty_sigma`` spread of each group folded in: ``s**2 = sigma**2 + difficulty_sigma**2``),
capped at ``max_response_tokens``. With a clip ratio ``c`` in (0, 0.5): the cap is the ``1 - c``
quantile, ``mu = ln cap - s z``, and the capped mean ``E min(L, cap)`` equals the logged mean at
one ``s`` (bisection). Otherwise with an uncapped ``response_length/max``: the median of a step's
maximum of ``batch`` draws is ``exp(mu + s z_B)`` with ``z_B`` the normal quantile of
``0.5 ** (1 / batch)``, and the mean is ``exp(mu + s**2 / 2)``: a quadratic in ``s`` (taking draws
as independent, which groups are not). Otherwise ``s`` is the spec's, and only the median is fitted.
**At the cap** (the steps' mean within :data:`AT_CAP_SLACK` of ``max_response_tokens``: every
response was cut there) no finite median gives that mean, and the median is known only to be at
least the one whose capped mean reaches the cap to that slack: that bound is the value, its
interval ``[bound, inf]`` (open above), and a note says so. Before, the bisection stopped at its
bracket's top, ``e**10`` times the cap, and printed ``9.022e+07 [9.022e+07, 9.022e+07]`` tokens for
a 4,096-token cap.
Intervals: a bootstrap over steps (:data:`BOOTSTRAP` resamples, a seeded generator passed in),
each end's distance from the value widened for a short log by :func:`small_sample` (the percentile
bootstrap of ``n`` steps is a normal interval on the plug-in variance: too narrow for a few).

**Length trajectory** (:func:`fit_drift`): the workload's ``drift_per_version`` scales lengths by
``(1 + d) ** version``, so ``ln`` of the step's mean length is linear in the step with slope
``ln(1 + d)``: least squares over the steps, a t interval on the slope. Where samples hit the cap,
the capped mean grows more slowly than the lengths and this slope understates the drift (and the
pooled length fit above reads the growth as spread): with a clip ratio above 0 at some step, a
synchronous calibration fits the drift, median and sigma together with the cap instead
(:mod:`pipesim.calibrate.trajfit`); without one, a note says which way the values are biased.

**Decode overhead** and **weight sync**: see :mod:`pipesim.calibrate` (they need simulation).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from pipesim.core.validate import FieldError, check_int, check_number, refuse, shown
from pipesim.io.sweep_grid import t_quantile_975
from pipesim.plan.checks import MAX_TOKENS

__all__ = [
    "AT_CAP_SLACK",
    "BOOTSTRAP",
    "MIN_DRIFT_STEPS",
    "MIN_TOKEN_SPREAD",
    "Fitted",
    "capped_mean",
    "fit_drift",
    "fit_lengths",
    "small_sample",
    "t95",
]

BOOTSTRAP = 200
"""Bootstrap resamples of the steps for the length fit's intervals."""
MIN_DRIFT_STEPS = 6
"""The fewest steps a length trajectory (``drift_per_version``) is fitted from."""
MIN_TOKEN_SPREAD = 0.01
"""The least coefficient of variation of the steps' tokens that separates slope from intercept."""
AT_CAP_SLACK = 1e-6
"""How close (relative) the steps' mean response may come to the cap and still identify a median:
within it, every response is at the cap (module docstring). The rounding a CSV's six decimals
leave, the slack :func:`pipesim.calibrate.agent.check_episodes` allows a logged mean too."""

_N = NormalDist()


def t95(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom, infinite below 1
    (:func:`pipesim.io.sweep_grid.t_quantile_975`, the one sweeps and plans read; this module kept
    a table of its own that stepped 2.021, 2.000, 1.980 past 30, up to 1% off)."""
    if isinstance(df, bool) or not isinstance(df, int):
        raise refuse("df", f"must be an integer (degrees of freedom), got {shown(df)}")
    return math.inf if df < 1 else t_quantile_975(df)


def small_sample(value: float, lo: float, hi: float, n: int) -> tuple[float, float]:
    """A percentile-bootstrap 95% interval ``[lo, hi]`` of a smooth function of ``n`` steps' means,
    each end's distance from ``value`` widened by ``t95(n - 1) sqrt(n / (n - 1)) / 1.96``.

    The bootstrap's spread is the plug-in one (variance over ``n``, not ``n - 1``) and its
    quantiles are normal ones, so for a mean of normal steps its coverage is
    ``P(|T_(n-1)| < 1.96 sqrt((n - 1) / n))``: 75% at 3 steps, 85% at 5, 93% at 20, for a stated
    95% (on 3- to 5-step sample logs, 68-78% of 40 seeds held the decode overhead). The factor is
    the one that turns that interval into Student's t interval on the unbiased variance (the
    expanded percentile interval of Hesterberg 2015, "What teachers should know about the
    bootstrap", applied by scaling rather than by quantile, which a resample of 3 steps cannot
    reach): 2.69 at 3 steps, 1.58 at 5, 1.10 at 20, 1.01 at 1,000. Fewer than 2 steps: unbounded."""
    check_int("n", n, 1)
    if n < 2:
        return -math.inf, math.inf
    f = t95(n - 1) * math.sqrt(n / (n - 1)) / t95(10**6)
    # never narrower than the bootstrap's own ends, and holding the estimate: a nonlinear fit's
    # estimate may lie outside its percentile interval, where widening from it moved an end inwards
    return min(lo, value, value - f * (value - lo)), max(hi, value, value + f * (hi - value))


def _ends(draws: np.ndarray) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of bootstrap ``draws``."""
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Fitted:
    """One fitted value and its 95% interval ``(lo, hi)``."""

    value: float
    lo: float
    hi: float
    how: str = ""

    def __post_init__(self) -> None:  # numpy scalars as floats: a spec file writes plain numbers
        for name in ("value", "lo", "hi"):
            x = getattr(self, name)
            if isinstance(x, bool) or not isinstance(x, int | float | np.integer | np.floating):
                raise refuse(name, f"must be a number, got {shown(x)}")
            object.__setattr__(self, name, float(x))
        if math.isnan(self.value):
            raise refuse("value", "must be a number, got nan (an interval's end may be nan, not the value)")
        if not isinstance(self.how, str):
            raise refuse("how", f"must be a string, got {shown(self.how)}")

    @property
    def width(self) -> float:
        return self.hi - self.lo


def capped_mean(mu: float, s: float, cap: float) -> float:
    """``E min(L, cap)`` for ``ln L ~ N(mu, s**2)``: ``mu`` within +-700 (``exp`` of it a float),
    ``s >= 0``, ``cap > 0`` (FieldError naming the argument otherwise)."""
    check_number("mu", mu, -700.0)
    if mu > 700:
        raise refuse("mu", f"must be at most 700 (ln of a length), got {mu:g}")
    check_number("s", s, 0.0)
    check_number("cap", cap, 0.0, strict=True)
    if s <= 0:
        return min(math.exp(mu), cap)
    return _formula(mu, s, cap)


def _capped_mean(mu: float, s: float, cap: float) -> float:
    """:func:`capped_mean` for the bisections of :func:`_lengths`, which call it thousands of times
    a fit on arguments :func:`fit_lengths` checked once: three float comparisons instead of the
    three checks (half a fit's time). Anything they do not pass (``mu`` past +-700 or NaN, ``s``
    zero or not finite, ``cap`` not finite above 0) goes to :func:`capped_mean`, so its error and
    its ``s == 0`` case are that function's; both evaluate :func:`_formula`."""
    if not (-700.0 <= mu <= 700.0 and 0.0 < s < math.inf and 0.0 < cap < math.inf):
        return capped_mean(mu, s, cap)
    return _formula(mu, s, cap)


def _formula(mu: float, s: float, cap: float) -> float:
    """The capped mean's expression, for ``s > 0`` and arguments already checked."""
    lc = math.log(cap)
    return math.exp(mu + s * s / 2) * _N.cdf((lc - mu - s * s) / s) + cap * (1 - _N.cdf((lc - mu) / s))


def _bisect(g: Callable[[float], float], lo: float, hi: float) -> float | None:
    """A root of ``g`` in ``[lo, hi]`` by bisection; None when ``g`` keeps its sign there. It
    stops once the midpoint is an end (the ends are adjacent floats, or equal): every later step
    would keep both ends (``mid == lo`` keeps ``g``'s sign at ``lo``) or set ``lo`` to ``hi``, so
    the root is that midpoint, as the 80 steps would have returned it."""
    flo, fhi = g(lo), g(hi)
    if flo == 0:
        return lo
    if flo * fhi > 0:
        return None
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            return mid
        fm = g(mid)
        if (fm > 0) == (flo > 0):
            lo, flo = mid, fm
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _lengths(
    mean: float, clip: float | None, max_median: float | None, cap: float, batch: int, s_prior: float
) -> tuple[float, float, str]:
    """(mu, s, how) of the capped log-normal (see the module docstring)."""
    if clip is not None and 0 < clip < 0.5:
        z = _N.inv_cdf(1 - clip)
        s = _bisect(lambda s: _capped_mean(math.log(cap) - s * z, s, cap) - mean, 1e-3, 4.0)
        if s is not None:
            return math.log(cap) - s * z, s, "clip ratio and mean"
    if max_median is not None and max_median < cap:
        zb = _N.inv_cdf(0.5 ** (1 / batch))
        d = math.log(max_median) - math.log(mean)
        disc = zb * zb - 2 * d
        if disc >= 0 and d > 0:
            s = zb - math.sqrt(disc)
            return math.log(mean) - s * s / 2, s, "maximum and mean"
    mu = _bisect(lambda m: _capped_mean(m, s_prior, cap) - mean, math.log(mean) - 10, math.log(cap) + 10)
    return (mu if mu is not None else math.log(mean)), s_prior, "mean (sigma from the spec)"


def fit_lengths(
    mean: np.ndarray,
    clip: np.ndarray | None,
    maxes: np.ndarray | None,
    cap: float,
    batch: int,
    difficulty_sigma: float,
    sigma_prior: float,
    rng: np.random.Generator,
) -> tuple[dict[str, Fitted], list[str]]:
    """``response_median_tokens`` and ``response_sigma`` from per-step response statistics (module
    docstring), with bootstrap intervals; and what could not be identified. Each series is one
    per step (a 1-D array of the same length, finite: lengths above 0, clip shares in [0, 1]),
    ``cap`` at most a spec's bound (``MAX_TOKENS``); a FieldError (a LogError for a series) names
    the argument otherwise."""
    from pipesim.calibrate.frame import check_kind, check_series

    mean = check_series("mean", mean, positive=True)
    clip = check_series("clip", clip, len(mean)) if clip is not None else None
    maxes = check_series("maxes", maxes, len(mean), positive=True) if maxes is not None else None
    if clip is not None and (clip > 1).any():
        raise refuse("clip", f"must be shares in [0, 1], got {clip.max():g}")
    check_number("cap", cap, 0.0, strict=True)
    if cap > MAX_TOKENS:  # ln(cap) + 10 bounds the median's bisection: keep it within exp's range
        raise refuse("cap", f"must be at most {MAX_TOKENS} tokens (a response cap), got {cap:g}")
    check_int("batch", batch, 1)
    check_number("difficulty_sigma", difficulty_sigma, 0.0)
    check_number("sigma_prior", sigma_prior, 0.0)
    check_kind("rng", rng, np.random.Generator, "a numpy Generator (np.random.default_rng(seed))")
    s_prior = math.hypot(sigma_prior, difficulty_sigma)
    if float(mean.mean()) >= cap * (1.0 - AT_CAP_SLACK):
        return _at_cap(float(mean.mean()), cap, s_prior, sigma_prior)

    def one(idx: np.ndarray) -> tuple[float, float, str]:
        c = float(clip[idx].mean()) if clip is not None else None
        mx = float(np.median(maxes[idx])) if maxes is not None else None
        return _lengths(float(mean[idx].mean()), c, mx, cap, batch, s_prior)

    n = len(mean)
    mu, s, how = one(np.arange(n))
    if math.exp(mu) < 1.0:  # a response holds whole tokens, at least one: its median is >= 1
        raise FieldError(
            f"response_length/mean: the responses' mean ({float(mean.mean()):.4g} tokens a response, "
            f"at sigma {s:.3g}) gives a median of {math.exp(mu):.3g} tokens, under one: the log's "
            "responses are at the one-token floor (an agent spec's observations account for nearly "
            "all of each episode: check agent.turns and agent.observation_tokens)",
            "response_length/mean",
        )
    notes = [_sigma_note(sigma_prior)] if how.startswith("mean") else []
    if n >= 2 and all(x is None or np.ptp(x) == 0 for x in (mean, clip, maxes)):
        notes.append(
            f"response_length/mean: {float(mean[0]):g} at every step (and the clip ratio or max the "
            "fit read): a bootstrap over the steps sees no spread, so the length intervals hold no "
            "step-to-step noise (zero wide where nothing else widens them); a log of one mean "
            "repeated, not of steps, tells no more than one step"
        )
    boots = [one(rng.integers(0, n, n))[:2] for _ in range(BOOTSTRAP)]
    med = np.exp([b[0] for b in boots])
    sig = np.sqrt(np.maximum(np.square([b[1] for b in boots]) - difficulty_sigma**2, 0.0))
    sigma = math.sqrt(max(s * s - difficulty_sigma**2, 0.0))
    m_lo, m_hi = small_sample(math.exp(mu), *_ends(med), n)
    out = {"response_median_tokens": Fitted(math.exp(mu), max(m_lo, 0.0), m_hi, how)}
    if not how.startswith("mean"):
        lo, hi = small_sample(sigma, *_ends(sig), n)
        out["response_sigma"] = Fitted(sigma, max(lo, 0.0), hi, how)
    return out, notes


def _sigma_note(sigma_prior: float) -> str:
    return (
        "response_sigma: no clip ratio in (0, 0.5) and no uncapped response_length/max; "
        f"sigma kept from the spec ({sigma_prior:g}), and the median is fitted from the mean at "
        "that sigma: its interval holds only given that sigma (another sigma moves the median "
        "the same mean gives; docs/calibrate.md)"
    )


def _at_cap(mean: float, cap: float, s: float, sigma_prior: float) -> tuple[dict[str, Fitted], list[str]]:
    """The median of responses all at the cap (module docstring): the least whose capped mean
    (at the spec's sigma ``s``, difficulty folded in) is within :data:`AT_CAP_SLACK` of ``cap``,
    open above; the sigma is the spec's."""
    target = cap * (1.0 - AT_CAP_SLACK)
    lc = math.log(cap)
    mu = _bisect(lambda m: _capped_mean(m, s, cap) - target, lc, lc + 10.0 * s) if s > 0 else lc
    m = math.exp(mu if mu is not None else lc)
    note = (
        f"response_median_tokens: the responses' mean is at the cap ({mean:g} tokens, "
        f"workload.max_response_tokens = {cap:g}): every response was cut there, so the median is "
        f"known only to be at least {m:.5g} tokens (the least whose capped mean reaches the cap, at "
        f"the spec's sigma): written as that bound with its interval open above; a run of the "
        "calibrated spec cuts every response at the cap, as the log's did. Was the run's cap "
        "larger than the spec's?"
    )
    return {"response_median_tokens": Fitted(m, m, math.inf, "mean at the cap: a lower bound")}, [
        note,
        _sigma_note(sigma_prior),
    ]


def fit_drift(steps: np.ndarray, mean: np.ndarray) -> Fitted | None:
    """``drift_per_version`` from the steps' mean response lengths (module docstring); None with
    fewer than :data:`MIN_DRIFT_STEPS` steps. ``steps``: distinct, ``mean``: above 0, as many (a
    FieldError naming the argument otherwise)."""
    from pipesim.calibrate.frame import check_series

    mean = check_series("mean", mean, positive=True)
    x = np.asarray(steps, float) if isinstance(steps, np.ndarray | pd.Series | list | tuple) else None
    if x is None or x.shape != mean.shape or not np.isfinite(x).all() or len(np.unique(x)) < len(x):
        raise refuse(
            "steps", f"must be {len(mean)} distinct finite step numbers (one per mean), got {shown(steps)}"
        )
    y = np.log(mean)
    n = len(x)
    if n < MIN_DRIFT_STEPS:
        return None
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    b = float(((x - xm) * (y - ym)).sum() / sxx)
    rss = float(((y - ym - b * (x - xm)) ** 2).sum())
    half = t95(n - 2) * math.sqrt(rss / (n - 2) / sxx)
    return Fitted(
        math.expm1(b),
        math.expm1(b - half),
        math.expm1(b + half),
        "least squares of ln mean length on the step",
    )
