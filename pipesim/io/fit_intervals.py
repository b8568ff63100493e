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
  without the fit's KS step. The model's spread (CV^2) rises with the turn count to a peak and falls
  past it (the ``max_turns`` cap bends it back), so a spread below the peak matches one turn count
  on each side of it, a *branch*; a resample takes the match on the branch it follows (where it
  matches none there, that branch's closest, as the fit takes the closest). The intervals follow
  the fit's branch alone where the choice is decided: one turn count matches, or KS rejects the
  other (``p <`` :data:`~pipesim.io.fit_choice.KS_REJECT_P`, the rule that rejects a fit for
  ``--scenario-out``) and not the reported one. Where it is not (KS rejects neither or both,
  :func:`undecided_turns`; or the trace's
  spread is above the peak, so the fit is pinned there), each interval is the hull of the two
  branches' percentile intervals: the totals do not identify the turn count, and an interval on
  the branch KS happened to choose excluded the truth whenever it chose wrong (at 3 true turns and
  300 episodes it covered 82-88% of traces, not 95%). Reporting a set of two branches is the standard
  answer for a parameter identified only up to a set: the hull covers the truth whenever the true
  branch's interval does. Where, without a turn column, the ``mean_turns`` interval is one point (all but
  under 2.5% of the resamples have a spread beyond the model's reach, pinned at the closest turn
  count, e.g. a trace more spread than the peak), no turn count is within sampling error of the
  trace: the totals do not identify it, and its interval is NaN at both ends (JSON ``null``, with
  ``turns_identified`` false) rather than a point that claims certainty. A range of counts "near"
  the peak would rest on the model fitting, which it then does not; ``seconds_per_turn``'s interval
  is kept, given the reported turn count, and the line says so. The other parameters are kept from
  the base model (the token range) or
  move with ``seconds_per_turn`` (the decode rate and tool median are its scaled copies), so they
  get none. Percentile intervals are approximate: docs/usage.md gives the coverage measured.
* **empirical**: no fitted parameters (it replays the data), so no interval.

Randomness: the bootstrap draws only from a generator seeded from ``fit_values``' ``seed`` (a
child stream of it, so it is apart from the fit's own draws): the same seed gives the same output.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from pipesim.io.fit_choice import KS_REJECT_P
from pipesim.io.fit_models import ModelFit, _turn_moments, agent_cv2_curve, normal_ppf, turn_mean_curve
from pipesim.io.sweep_grid import t_quantile_975
from pipesim.workload.durations import AgentDurations

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "INTERVAL_LEVEL",
    "agent_intervals",
    "turn_choice_note",
    "undecided_turns",
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


def undecided_turns(fit: ModelFit) -> tuple[float, ...]:
    """The mean turn counts other than the reported one that match the trace's mean and spread and
    that KS does not rule out: a count is ruled out where KS rejects it (``p <``
    :data:`~pipesim.io.fit_choice.KS_REJECT_P`, the rule that rejects a fit elsewhere) and does not
    reject the reported one. Where KS rejects both, it does not choose between them either."""
    at = fit.params.get("mean_turns")
    p_at = dict(fit.turn_roots).get(at, 1.0) if at is not None else 1.0
    return tuple(r for r, p in fit.turn_roots if r != at and (p >= KS_REJECT_P or p_at < KS_REJECT_P))


def _ks_verdict(fit: ModelFit) -> str:
    """Why KS leaves the turn counts of :func:`undecided_turns` undecided: it rejects none of them,
    or it rejects the reported one too (KS reports the best fit, so then it rejects every one) and so
    does not choose between them. The two read alike in a count and must not in words."""
    at = fit.params.get("mean_turns")
    p_at = dict(fit.turn_roots).get(at, 1.0) if at is not None else 1.0
    every = "both" if len(fit.turn_roots) <= 2 else "all"
    if p_at < KS_REJECT_P:
        return f"KS rejects {every} (p < {KS_REJECT_P:g}), so it does not choose between them"
    return f"KS rejects {'neither' if every == 'both' else 'none'} (p < {KS_REJECT_P:g})"


def turn_choice_note(fit: ModelFit) -> str:
    """Two mean turn counts match the totals: which one is reported, and whether KS decides."""
    ps = ", ".join(f"{r:.3g} (KS p={p:.2g})" for r, p in fit.turn_roots)
    head = (
        "agent model: the turn cap bends the spread back down, so two mean turn counts match the mean "
        f"and the spread of the totals, {ps}; the one whose distribution fits better (KS) is reported"
    )
    if undecided_turns(fit):
        return (
            f"{head}, but {_ks_verdict(fit)}: the totals do not identify the turn count, and the "
            "intervals of mean_turns and seconds_per_turn span both (--turns-column measures the turns)."
        )
    return f"{head}; KS rejects the other (p < {KS_REJECT_P:g}) and not it, so the intervals keep to it."


def _branches(
    at: float, others: tuple[float, ...], grid: np.ndarray, curve: np.ndarray
) -> list[tuple[slice, float]]:
    """The branches of the CV^2 curve the bootstrap follows, each as its slice of the grid and its
    anchor (the fit's turn count on it, or the peak). The curve rises to a peak and falls (the cap
    bends it back), so each branch matches a spread at most once. A turn count below the peak is on
    the rising branch, above it on the falling one, and the peak itself (a spread above every turn
    count's, pinned there) on both."""
    peak_i = int(np.argmax(curve))
    peak = float(grid[peak_i])
    sides: dict[str, float] = {}
    for v in (at, *others):
        if v <= peak:
            sides.setdefault("rising", v)
        if v >= peak:
            sides.setdefault("falling", v)
    where = {"rising": slice(0, peak_i + 1), "falling": slice(peak_i, None)}
    return [(where[k], v) for k, v in sides.items()]


def agent_intervals(
    x: np.ndarray,
    fit: ModelFit,
    base: AgentDurations,
    turns: np.ndarray | None,
    rng: np.random.Generator,
    resamples: int = BOOTSTRAP_RESAMPLES,
    others: tuple[float, ...] = (),
) -> tuple[dict[str, tuple[float, float]], int]:
    """Percentile-bootstrap 95% intervals of the agent fit's ``mean_turns`` and ``seconds_per_turn``,
    and how many resamples had a spread no turn count reaches (the module docstring). ``others``:
    turn counts the trace fits as well as the fit's (:func:`undecided_turns`); the intervals span
    the branches of all of them."""
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
        branches = [(grid[idx], curve[idx])]
    else:
        grid, curve = agent_cv2_curve(base)
        out_of_reach = int(((spread > curve.max()) | (spread < curve.min())).sum())
        branches = []
        for part, anchor in _branches(at, others, grid, curve):
            mean_turns = _turns_from_spread(spread, grid[part], curve[part], anchor)
            per_episode = np.array([_turn_moments(base.max_turns, float(m))[0] for m in mean_turns])
            branches.append((mean_turns, per_episode))
    pct = [50 * (1 - INTERVAL_LEVEL), 50 * (1 + INTERVAL_LEVEL)]
    out: dict[str, tuple[float, float]] = {}
    for mean_turns, per_episode in branches:  # the hull of each branch's interval
        for name, values in (("mean_turns", mean_turns), ("seconds_per_turn", means / per_episode)):
            lo, hi = (float(v) for v in np.percentile(values, pct))
            old = out.get(name, (lo, hi))
            out[name] = (min(old[0], lo), max(old[1], hi))
    return out, out_of_reach


def _at_peak(fit: ModelFit, base: AgentDurations) -> bool:
    """Whether the fit is pinned at the peak of the model's spread (a trace's spread above it)."""
    grid, curve = agent_cv2_curve(base)
    return bool(fit.params["mean_turns"] == float(grid[int(np.argmax(curve))]))


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
        agent, shape = fits["agent"], base or AgentDurations()
        others = undecided_turns(agent) if turns is None else ()
        found, missed = agent_intervals(x, agent, shape, turns, rng, others=others)
        how = f"percentile bootstrap of the episodes, {BOOTSTRAP_RESAMPLES} resamples, seed {seed}"
        lo, hi = found["mean_turns"]
        identified = turns is not None or lo < hi
        if not identified:  # every resample (but a tail under 2.5%) pinned at one turn count
            found["mean_turns"] = (math.nan, math.nan)
        if others:
            counts = ", ".join(f"{r:.3g}" for r in (agent.params["mean_turns"], *others))
            every = "both" if len(others) == 1 else "all"
            how += f"; mean turns {counts} {every} match the mean and spread, and {_ks_verdict(agent)}: "
            how += "the intervals span the bootstrap of each"
        elif identified and turns is None and not agent.turn_roots and _at_peak(agent, shape):
            how += (
                "; the spread is above every turn count's, so the intervals span the turn counts on "
                "both sides of the peak"
            )
        if not identified:
            how += (
                f"; {missed} of {BOOTSTRAP_RESAMPLES} resamples have a spread no turn count reaches, "
                "so no turn count is within sampling error: the totals do not identify mean_turns (no "
                "interval); the seconds_per_turn interval holds mean_turns at the reported "
                f"{agent.params['mean_turns']:.4g} (--turns-column measures the turns)"
            )
        elif missed:
            how += (
                f"; {missed} of {BOOTSTRAP_RESAMPLES} resamples have a spread no turn count reaches, "
                "pinned at the closest as the fit is, so the mean_turns interval understates its uncertainty"
            )
        out["agent"] = dataclasses.replace(agent, intervals=found, interval_how=how)
    if "empirical" in fits:
        out["empirical"] = dataclasses.replace(fits["empirical"], interval_how=EMPIRICAL_HOW)
    return out
