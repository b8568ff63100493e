"""How well a trace pins down the fitted parameters: 95% intervals for ``pipesim fit``.

Design: :func:`with_intervals` takes the fits of :func:`pipesim.io.fit.fit_values` and returns them
with :attr:`~pipesim.io.fit_models.ModelFit.intervals` filled in; it changes no fitted value and
not which model is chosen. Every interval assumes that the trace's episodes are independent draws
(a trace whose episodes are correlated, e.g. in time, pins the parameters down less than it says).

* **log-normal**: exact, from the sampling distribution of the maximum-likelihood fit. With
  ``mu = mean(log x)``, ``s`` the standard deviation of ``log x`` with ``n - 1`` in the denominator
  and ``sigma = std(log x)`` (``n`` in it, the reported MLE): the median's interval is
  ``exp(mu -+ t * s / sqrt(n))`` with ``t`` Student's 97.5% quantile at ``n - 1`` degrees of freedom
  (:func:`pipesim.io.sweep_grid.t_quantile_975`), and sigma's is
  ``sigma * sqrt(n / q)`` for ``q`` the chi-square quantiles at 0.975 and 0.025 with ``n - 1``
  degrees of freedom, since ``n sigma^2 / sigma_true^2`` is chi-square with ``n - 1``
  (:func:`chi2_quantile`). Both cover the truth in exactly 95% of log-normal samples.
* **agent**: a percentile bootstrap over the episodes (:data:`BOOTSTRAP_RESAMPLES` resamples,
  rows drawn with replacement; with a turn column, a row's duration and turn count together) of the
  two identified parameters, ``mean_turns`` and ``seconds_per_turn``. Each resample's mean and
  spread are matched as the fit matches them, on the same grid (:func:`agent_cv2_curve`), but
  without the fit's KS step: where the spread matches two turn counts the resample takes the one
  nearer the fit's (it stays on the branch KS chose), and where it matches none, the closest, as the
  fit does. The other parameters are kept from the base model (the token range) or move with
  ``seconds_per_turn`` (the decode rate and tool median are its scaled copies), so they get none.
  Percentile intervals are approximate (they cover 92-93% at 300 episodes in the tests).
* **empirical**: no fitted parameters (it replays the data), so no interval.

Randomness: the bootstrap draws only from a generator seeded from ``fit_values``' ``seed`` (a
child stream of it, so it is apart from the fit's own draws): the same seed gives the same output.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from pipesim.io.fit_models import ModelFit, _turn_moments, agent_cv2_curve, normal_ppf, turn_mean_curve
from pipesim.io.sweep_grid import t_quantile_975
from pipesim.workload.durations import AgentDurations

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "INTERVAL_LEVEL",
    "agent_intervals",
    "chi2_quantile",
    "lognormal_intervals",
    "with_intervals",
]

INTERVAL_LEVEL = 0.95
"""Every interval's coverage (fixed: the t quantile is the 97.5% one)."""

BOOTSTRAP_RESAMPLES = 200
"""Resamples of the agent fit's bootstrap: the 2.5% and 97.5% percentiles of 200 values move by
about a tenth of the interval's width from seed to seed, and 200 keep ``pipesim fit`` quick (the
resamples are moments of the data, matched on a precomputed grid, not refits)."""

EMPIRICAL_HOW = "no interval: the empirical model has no fitted parameters (it replays the data)"


# -- the chi-square quantile -----------------------------------------------------------------------
def _gamma_p(a: float, x: float) -> float:
    """The regularized lower incomplete gamma function P(a, x): its series below ``a + 1``, the
    continued fraction for 1 - P above (Numerical Recipes 6.2), each summed to float precision."""
    if x <= 0:
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    cap = 1000 + int(50 * math.sqrt(a))  # both converge in O(sqrt(a)) steps
    if x < a + 1:
        term = total = 1.0 / a
        ap = a
        for _ in range(cap):
            ap += 1
            term *= x / ap
            total += term
            if term < total * 1e-17:
                break
        return min(1.0, total * math.exp(log_front))
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, cap):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1 / (d if abs(d) > tiny else tiny)
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return max(0.0, 1.0 - math.exp(log_front) * h)


def chi2_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of the chi-square distribution with ``df`` degrees of freedom.

    A numeric inverse: Newton's method on ``P(df/2, q/2) = p`` (:func:`_gamma_p`), kept inside a
    bracket that bisection shrinks where a Newton step would leave it, from the Wilson-Hilferty
    approximation ``df (1 - 2/(9 df) + z sqrt(2/(9 df)))^3``. It stops at a relative change of
    1e-12: within 1e-9 (relative) of the exact quantile for any ``df >= 1`` and ``p`` in
    [1e-6, 1 - 1e-6] (e.g. 5.023886 and 0.0009821 at df 1, 74.22193 and 129.5612 at df 100),
    and a Monte Carlo reference agrees within its noise (the tests check both).
    """
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p!r}")
    if isinstance(df, bool) or not isinstance(df, int | np.integer) or df < 1:
        raise ValueError(f"df must be an integer >= 1 (degrees of freedom), got {df!r}")
    a = df / 2
    z = float(normal_ppf(np.array(p)))
    h = 2 / (9 * df)
    q = df * max(1 - h + z * math.sqrt(h), 0.0) ** 3
    lo, hi = 0.0, max(2 * q, df + 40 * math.sqrt(df) + 100)
    while _gamma_p(a, hi / 2) < p:  # the bracket's top (never taken in practice)
        lo, hi = hi, 2 * hi
    q = q if lo < q < hi else (lo + hi) / 2
    for _ in range(200):
        f = _gamma_p(a, q / 2) - p
        lo, hi = (q, hi) if f < 0 else (lo, q)
        density = math.exp((a - 1) * math.log(q / 2) - q / 2 - math.lgamma(a)) / 2
        step = f / density if density > 0 else math.inf
        nxt = q - step
        if not lo < nxt < hi:
            nxt = (lo + hi) / 2
        if abs(nxt - q) <= 1e-12 * nxt:
            return nxt
        q = nxt
    return q


# -- the intervals ---------------------------------------------------------------------------------
def lognormal_intervals(x: np.ndarray) -> dict[str, tuple[float, float]]:
    """Exact 95% intervals of the log-normal's ``median_s`` and ``sigma`` (the module docstring)."""
    logs = np.log(np.asarray(x, dtype=np.float64))
    n = len(logs)
    mu, s = float(logs.mean()), float(logs.std(ddof=1))
    half = t_quantile_975(n - 1) * s / math.sqrt(n)
    sigma = float(logs.std())
    q_hi, q_lo = chi2_quantile(0.975, n - 1), chi2_quantile(0.025, n - 1)
    return {
        "median_s": (math.exp(mu - half), math.exp(mu + half)),
        "sigma": (sigma * math.sqrt(n / q_hi), sigma * math.sqrt(n / q_lo)),
    }


def _turns_from_spread(cv2: np.ndarray, grid: np.ndarray, curve: np.ndarray, at: float) -> np.ndarray:
    """The ``mean_turns`` each resample's CV^2 matches: of the grid cells where the model's CV^2
    crosses it (interpolated), the one nearest ``at`` (the fit's); where none does, the closest
    grid point, as :func:`~pipesim.io.fit_models.fit_agent` takes it."""
    out = np.empty(len(cv2))
    log_grid = np.log(grid)
    for b, c in enumerate(cv2.tolist()):
        gap = curve - c
        i = np.nonzero(np.sign(gap[:-1]) != np.sign(gap[1:]))[0]
        if len(i) == 0:
            out[b] = grid[int(np.argmin(np.abs(gap)))]
            continue
        w = gap[i] / (gap[i] - gap[i + 1])  # [roots]
        log_roots = log_grid[i] + w * (log_grid[i + 1] - log_grid[i])
        out[b] = math.exp(float(log_roots[int(np.argmin(np.abs(log_roots - math.log(at))))]))
    return out


def agent_intervals(
    x: np.ndarray,
    fit: ModelFit,
    base: AgentDurations,
    turns: np.ndarray | None,
    rng: np.random.Generator,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> tuple[dict[str, tuple[float, float]], int]:
    """Percentile-bootstrap 95% intervals of the agent fit's ``mean_turns`` and ``seconds_per_turn``,
    and how many resamples had a spread no turn count reaches (the module docstring)."""
    n = len(x)
    means, spread, turn_means = np.empty(resamples), np.empty(resamples), np.empty(resamples)
    for b in range(resamples):  # one resample at a time: memory stays O(n)
        idx = rng.integers(0, n, n)
        xb = x[idx]
        means[b] = xb.mean()
        spread[b] = xb.var() / means[b] ** 2
        if turns is not None:
            turn_means[b] = turns[idx].mean()
    at = fit.params["mean_turns"]
    out_of_reach = 0
    if turns is not None:
        grid, curve = turn_mean_curve(base.max_turns)
        idx = np.argmin(np.abs(curve[None, :] - turn_means[:, None]), axis=1)  # [resamples]
        mean_turns, per_episode = grid[idx], curve[idx]
    else:
        grid, curve = agent_cv2_curve(base)
        out_of_reach = int(((spread > curve.max()) | (spread < curve.min())).sum())
        mean_turns = _turns_from_spread(spread, grid, curve, at)
        per_episode = np.array([_turn_moments(base.max_turns, float(m))[0] for m in mean_turns])
    pct = [50 * (1 - INTERVAL_LEVEL), 50 * (1 + INTERVAL_LEVEL)]
    out = {}
    for name, values in (("mean_turns", mean_turns), ("seconds_per_turn", means / per_episode)):
        lo, hi = np.percentile(values, pct)
        out[name] = (float(lo), float(hi))
    return out, out_of_reach


def with_intervals(
    fits: dict[str, ModelFit],
    x: np.ndarray,
    base: AgentDurations | None = None,
    turns: np.ndarray | None = None,
    seed: int = 0,
) -> dict[str, ModelFit]:
    """``fits`` with their 95% intervals and how each was found (the fitted values unchanged)."""
    out = dict(fits)
    if "lognormal" in fits:
        how = "exact: Student t for the median, chi-square for sigma"
        out["lognormal"] = dataclasses.replace(
            fits["lognormal"], intervals=lognormal_intervals(x), interval_how=how
        )
    if "agent" in fits:
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1,)))  # apart from the fit's
        found, missed = agent_intervals(x, fits["agent"], base or AgentDurations(), turns, rng)
        how = f"percentile bootstrap of the episodes, {BOOTSTRAP_RESAMPLES} resamples, seed {seed}"
        if missed:
            how += (
                f"; {missed} of {BOOTSTRAP_RESAMPLES} resamples have a spread no turn count reaches, "
                "pinned at the closest as the fit is, so the mean_turns interval understates its uncertainty"
            )
        out["agent"] = dataclasses.replace(fits["agent"], intervals=found, interval_how=how)
    if "empirical" in fits:
        out["empirical"] = dataclasses.replace(fits["empirical"], interval_how=EMPIRICAL_HOW)
    return out
