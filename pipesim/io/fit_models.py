"""Length models for ``pipesim fit``: log-normal, agent and empirical fits, and their statistics.

Design: each ``fit_*`` function takes the cleaned positive values (:mod:`pipesim.io.fit_readers`)
and returns a :class:`ModelFit`: the pipesim duration model, its parameters, and the
Kolmogorov-Smirnov statistic with its asymptotic p-value.

* **log-normal** (:func:`fit_lognormal`): the maximum-likelihood fit, ``median = exp(mean(log x))``
  and ``sigma = std(log x)``; KS against its CDF.
* **agent** (:func:`fit_agent`): by moments. The coefficient of variation gives the mean number of
  turns (or a turn column gives it directly), the mean gives the seconds of a turn, and the base
  model's per-turn shape is kept (:func:`agent_moments` is exact). When the turn cap bends the
  spread back so that two turn counts match, KS against draws of each chooses. KS is two-sample,
  against :data:`AGENT_DRAWS` draws of the fit.
* **empirical** (:func:`fit_empirical`): the values, shuffled and cycled; KS between two random
  halves (in-sample it would be 0). Above :data:`EMPIRICAL_MAX_VALUES` values, that many evenly
  spaced order statistics, so that a scenario file holding them can be loaded.

Which one ``--scenario-out`` writes by default (:func:`choose_model`): the parametric fit (log-normal
or agent) with the smallest KS D of those that KS does not reject (``p >= 0.01``) and whose mean is
within 5% of the data's (:func:`fit_problems`); where none passes, the empirical replay.

No scipy: the normal CDF is an erf approximation (Abramowitz and Stegun 7.1.26, error < 1.5e-7) and
its inverse a bisection. :mod:`pipesim.io.fit` re-exports these names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from pipesim.workload.durations import (
    MAX_WHOLE_DRAW_CELLS,
    AgentDurations,
    LogNormalDurations,
    TraceDurations,
)

__all__ = [
    "AGENT_DRAWS",
    "agent_draws",
    "EMPIRICAL_MAX_VALUES",
    "ModelFit",
    "agent_cv2_curve",
    "agent_moments",
    "cv2_standard_error",
    "fit_agent",
    "fit_empirical",
    "fit_lognormal",
    "kolmogorov_p",
    "ks_statistic",
    "normal_cdf",
    "normal_ppf",
    "turn_mean_curve",
]

AGENT_DRAWS = 20_000


def agent_draws(model: AgentDurations) -> int:
    """How many episodes the fit draws of ``model``: :data:`AGENT_DRAWS`, fewer where its
    ``max_turns`` would pass the cells one draw may hold (:data:`MAX_WHOLE_DRAW_CELLS`; above
    3,355 turns)."""
    return min(AGENT_DRAWS, MAX_WHOLE_DRAW_CELLS // model.max_turns)


EMPIRICAL_MAX_VALUES = 100_000
"""The most values an empirical fit replays: about 2 MB in a scenario file, whose limit is 16 MiB
(:data:`~pipesim.core.readfile.SCENARIO_MAX_BYTES`); above it, evenly spaced order statistics."""


@dataclass(frozen=True)
class ModelFit:
    """One fitted model: its pipesim object, parameters, KS statistic and p-value."""

    name: str
    model: Any
    params: dict[str, float]
    ks: float
    p_value: float
    how: str
    note: str = ""
    """What the fit could not pin down, where it says so (``pipesim fit`` prints it as a note)."""
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    """95% intervals of the identified parameters, by name (:mod:`pipesim.io.fit_intervals`)."""
    interval_how: str = ""
    """How :attr:`intervals` were found (exact, or a bootstrap), or why there are none."""
    turn_roots: tuple[tuple[float, float], ...] = ()
    """The agent fit without a turn column: each ``mean_turns`` whose mean and spread match the
    trace's, with the KS p-value of its fit (two where the turn cap bends the spread back down;
    empty where no turn count reaches the spread, and with a turn column). The intervals span every
    one KS does not reject (:func:`pipesim.io.fit_intervals.undecided_turns`)."""


# -- statistics ------------------------------------------------------------------------------------
def _erf(x: np.ndarray) -> np.ndarray:
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))  # type: ignore[no-any-return]


def normal_cdf(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + _erf(np.asarray(z, dtype=np.float64) / math.sqrt(2.0)))


def normal_ppf(p: np.ndarray) -> np.ndarray:
    """Inverse normal CDF by bisection on :func:`normal_cdf` (60 halvings: exact to float)."""
    p = np.asarray(p, dtype=np.float64)
    lo, hi = np.full(p.shape, -9.0), np.full(p.shape, 9.0)
    for _ in range(60):
        mid = (lo + hi) / 2
        below = normal_cdf(mid) < p
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2  # type: ignore[no-any-return]


def kolmogorov_p(d: float, n_eff: float) -> float:
    """Asymptotic p-value of a KS statistic ``d`` with effective sample size ``n_eff``."""
    if n_eff <= 0:
        return float("nan")
    s = math.sqrt(n_eff)
    lam = (s + 0.12 + 0.11 / s) * d
    if lam < 0.2:
        return 1.0
    total = sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101))
    return float(min(1.0, max(0.0, 2 * total)))


def ks_statistic(x: np.ndarray, cdf: Any = None, other: np.ndarray | None = None) -> float:
    """KS D of sample ``x`` against a CDF (a function) or against a second sample ``other``."""
    x = np.sort(np.asarray(x, dtype=np.float64))
    n = len(x)
    if other is None:
        f = cdf(x)
        i = np.arange(1, n + 1)
        return float(max(np.max(i / n - f), np.max(f - (i - 1) / n)))
    y = np.sort(np.asarray(other, dtype=np.float64))
    grid = np.concatenate([x, y])
    fx = np.searchsorted(x, grid, side="right") / n
    fy = np.searchsorted(y, grid, side="right") / len(y)
    return float(np.max(np.abs(fx - fy)))


# -- the models ------------------------------------------------------------------------------------
def fit_lognormal(x: np.ndarray) -> ModelFit:
    logs = np.log(x)
    mu, sigma = float(logs.mean()), float(logs.std())
    model = LogNormalDurations(median_s=math.exp(mu), sigma=sigma)
    if sigma > 0:
        d = ks_statistic(x, lambda v: normal_cdf((np.log(v) - mu) / sigma))
    else:
        d = float("nan")
    return ModelFit(
        "log-normal",
        model,
        {"median_s": model.median_s, "sigma": sigma},
        d,
        kolmogorov_p(d, len(x)),
        "its CDF",
    )


def _turn_moments(n_max: int, mean_turns: float) -> tuple[float, float]:
    """Mean and variance of the turns: geometric with mean ``mean_turns``, capped at ``n_max``."""
    q = 1 - 1 / mean_turns
    k = np.arange(1, n_max + 1, dtype=np.float64)
    pmf = q ** (k - 1) * (1 - q)
    pmf[-1] += q**n_max  # the mass past the cap sits at the cap
    m = float((k * pmf).sum())
    return m, float((k * k * pmf).sum() - m * m)


def agent_moments(model: AgentDurations) -> tuple[float, float]:
    """Mean and variance of one episode's total seconds under ``model`` (exact)."""
    lo, hi = model.tokens_per_turn
    r, med, sig = model.decode_rate_tok_s, model.tool_median_s, model.tool_sigma
    m_t = (lo + hi) / 2 / r + med * math.exp(sig * sig / 2)
    v_t = (hi - lo) ** 2 / 12 / r**2 + med * med * (math.exp(sig * sig) - 1) * math.exp(sig * sig)
    en, vn = _turn_moments(model.max_turns, model.mean_turns)
    return en * m_t, en * v_t + vn * m_t * m_t


def _scaled(base: AgentDurations, mean_turns: float, target_mean: float) -> AgentDurations:
    """``base`` with ``mean_turns`` and its per-turn seconds scaled so that the mean is ``target_mean``."""
    shaped = AgentDurations(
        mean_turns=mean_turns,
        max_turns=base.max_turns,
        tokens_per_turn=base.tokens_per_turn,
        decode_rate_tok_s=base.decode_rate_tok_s,
        tool_median_s=base.tool_median_s,
        tool_sigma=base.tool_sigma,
        draws="numpy",
    )
    c = target_mean / agent_moments(shaped)[0]
    return AgentDurations(
        mean_turns=mean_turns,
        max_turns=base.max_turns,
        tokens_per_turn=base.tokens_per_turn,
        decode_rate_tok_s=base.decode_rate_tok_s / c,
        tool_median_s=base.tool_median_s * c,
        tool_sigma=base.tool_sigma,
        draws="numpy",
    )


@lru_cache(maxsize=8)
def turn_mean_curve(max_turns: int) -> tuple[np.ndarray, np.ndarray]:
    """The grid of ``mean_turns`` a turn column is matched on, and the mean turn count at each
    (cached and read-only, like :func:`agent_cv2_curve`)."""
    grid = np.geomspace(1.0001, max(4 * max_turns, 2.0), 4000)
    means = np.array([_turn_moments(max_turns, g)[0] for g in grid])
    grid.flags.writeable = means.flags.writeable = False
    return grid, means


def agent_cv2_curve(base: AgentDurations) -> tuple[np.ndarray, np.ndarray]:
    """The grid of ``mean_turns`` the spread is matched on, and the model's CV^2 at each (it does
    not depend on the seconds per turn); cached, since the bootstrap reads it again."""
    lo, hi = base.tokens_per_turn
    return _cv2_curve(base.max_turns, lo, hi, base.decode_rate_tok_s, base.tool_median_s, base.tool_sigma)


@lru_cache(maxsize=8)
def _cv2_curve(max_turns: int, *shape: float) -> tuple[np.ndarray, np.ndarray]:
    lo, hi, rate, med, sig = shape
    base = AgentDurations(
        max_turns=max_turns, tokens_per_turn=(lo, hi), decode_rate_tok_s=rate, tool_median_s=med,
        tool_sigma=sig, draws="numpy",
    )  # fmt: skip
    grid = np.geomspace(1.0001, max(50 * max_turns, 2.0), 3000)
    moments = [agent_moments(_scaled(base, g, 1.0)) for g in grid]
    curve = np.array([v / (m * m) for m, v in moments])
    grid.flags.writeable = curve.flags.writeable = False  # shared by every caller of the cache
    return grid, curve


def cv2_standard_error(x: np.ndarray) -> float:
    """Standard error of the sample's squared coefficient of variation ``var/mean**2`` (the delta
    method: ``(4 s^6/m^6 + (m4 - s^4)/m^4 - 4 s^2 m3/m^5) / n``, with ``m3``, ``m4`` the central
    moments; ``2/sqrt(n)`` for exponential data)."""
    m, d = float(x.mean()), x - x.mean()
    s2, m3, m4 = float((d**2).mean()), float((d**3).mean()), float((d**4).mean())
    var = (4 * s2**3 / m**6 + (m4 - s2 * s2) / m**4 - 4 * s2 * m3 / m**5) / len(x)
    return math.sqrt(max(var, 0.0))


def _spread_note(
    x: np.ndarray, cv2: float, grid: np.ndarray, model_cv2: np.ndarray, out_of_reach: bool
) -> str:
    """What the spread says about the turn count, where it says little. The model's CV^2 over
    ``mean_turns`` rises from one turn's, peaks (the ``max_turns`` cap bends it back: about 7 turns
    for the default shape) and falls towards one turn's over ``max_turns``; a trace's spread above
    the peak is matched at the peak, an interior point, not at the search's edge."""
    peak_i = int(np.argmax(model_cv2))
    peak, at = float(model_cv2[peak_i]), float(grid[peak_i])
    se = cv2_standard_error(x)
    parts, interior = [], False
    if out_of_reach:
        i = int(np.argmin(np.abs(model_cv2 - cv2)))
        interior = i not in (0, len(grid) - 1)
        where = "an interior point" if interior else "the edge of the search"
        side = "above the model's largest" if cv2 > peak else "below the model's smallest"
        parts.append(
            f"the trace's spread (CV^2 {cv2:.3g}) is {side} ({float(model_cv2[i]):.3g}, reached at "
            f"mean_turns ~{float(grid[i]):.4g}, {where}): that closest turn count is reported"
        )
    if abs(cv2 - peak) <= 2 * se:
        parts.append(
            f"the trace's CV^2 is within sampling error (2 SE = {2 * se:.2g}) of the model's peak "
            f"({peak:.3g} at mean_turns ~{at:.4g}), so the spread alone does not identify the turn count"
        )
    elif interior:
        parts.append("mean_turns is poorly identified there")
    if not parts:
        return ""
    return "agent model: " + "; ".join(parts) + " (--turns-column measures the turns)."


def fit_agent(
    x: np.ndarray, base: AgentDurations | None = None, turns: np.ndarray | None = None, seed: int = 0
) -> ModelFit:
    """Fit the agent model by moments (see the module docstring for what is identified)."""
    base = base or AgentDurations()
    n_draws = agent_draws(base)
    note = ""
    turn_roots: tuple[tuple[float, float], ...] = ()
    mean, cv2 = float(x.mean()), float(x.var() / x.mean() ** 2)
    if turns is not None:
        target = float(np.mean(turns))
        grid, means = turn_mean_curve(base.max_turns)
        mean_turns = float(grid[int(np.argmin(np.abs(means - target)))])
        how = f"{n_draws:,} draws of the fit (turns from the turn column)"
        if target > float(means.max()) * 1.001:  # the cap bends the mean: the search's edge
            how += f" (a mean of {target:.3g} turns is beyond max_turns {base.max_turns}: the closest)"
    else:
        grid, curve = agent_cv2_curve(base)

        def cv2_of(mt: float) -> float:
            m, v = agent_moments(_scaled(base, mt, 1.0))
            return v / (m * m)

        gap = curve - cv2
        roots = []
        for i in np.nonzero(np.sign(gap[:-1]) != np.sign(gap[1:]))[0].tolist():
            lo_g, hi_g = float(grid[i]), float(grid[i + 1])
            for _ in range(60):  # bisection between the grid points that bracket a root
                mid = (lo_g + hi_g) / 2
                if np.sign(cv2_of(mid) - cv2) == np.sign(gap[i]):
                    lo_g = mid
                else:
                    hi_g = mid
            roots.append((lo_g + hi_g) / 2)
        out_of_reach = not roots
        if out_of_reach:  # the spread is out of the model's reach: the closest one
            roots = [float(grid[int(np.argmin(np.abs(gap)))])]
        # the mean and the spread can fit two turn counts (the cap bends the spread back down):
        # the shape of the distribution (KS against draws) chooses between them
        ks_of = {
            r: ks_statistic(x, other=_scaled(base, r, mean).sample(n_draws, np.random.default_rng(seed)))
            for r in roots
        }
        mean_turns = float(min(ks_of, key=lambda r: ks_of[r]))
        if not out_of_reach:
            n_eff = len(x) * n_draws / (len(x) + n_draws)
            turn_roots = tuple((float(r), kolmogorov_p(d, n_eff)) for r, d in ks_of.items())
        how = f"{n_draws:,} draws of the fit"
        if len(roots) > 1:
            how += f" (mean turns {', '.join(f'{r:.3g}' for r in roots)} fit the mean and spread; KS chose)"
        note = _spread_note(x, cv2, grid, gap + cv2, out_of_reach)
        if out_of_reach:
            how += " (no turn count reaches the trace's spread: see the note)"
    model = _scaled(base, mean_turns, mean)
    draws = model.sample(n_draws, np.random.default_rng(seed))
    d = ks_statistic(x, other=draws)
    lo, hi = model.tokens_per_turn
    turn_s = agent_moments(model)[0] / _turn_moments(model.max_turns, mean_turns)[0]
    params = {
        "mean_turns": mean_turns,
        "seconds_per_turn": turn_s,
        "decode_rate_tok_s": model.decode_rate_tok_s,
        "tool_median_s": model.tool_median_s,
        "tokens_per_turn_lo": lo,
        "tokens_per_turn_hi": hi,
    }
    n_eff = len(x) * n_draws / (len(x) + n_draws)
    return ModelFit("agent", model, params, d, kolmogorov_p(d, n_eff), how, note, turn_roots=turn_roots)


def fit_empirical(x: np.ndarray, seed: int = 0) -> ModelFit:
    """The values, shuffled, replayed in a cycle; above :data:`EMPIRICAL_MAX_VALUES` values, that
    many evenly spaced order statistics of them (the data's quantiles at ``(i + 0.5)/K``), so that
    the scenario file holding them stays loadable (the note gives the largest CDF gap and the mean's
    error: at most ``1/(2K)`` plus ``1/n`` in probability)."""
    rng = np.random.default_rng(seed)
    shuffled = rng.permutation(x)
    half = len(shuffled) // 2
    d = ks_statistic(shuffled[:half], other=shuffled[half:])
    n_eff = half * (len(x) - half) / len(x)
    kept, note = shuffled, ""
    if len(x) > EMPIRICAL_MAX_VALUES:
        k = EMPIRICAL_MAX_VALUES
        order = np.sort(x)
        kept = rng.permutation(order[((np.arange(k) + 0.5) * len(x) / k).astype(np.int64)])
        gap = ks_statistic(kept, other=order)
        mean_err = abs(float(kept.mean()) / float(x.mean()) - 1)
        note = (
            f"empirical model: it replays {k:,} evenly spaced order statistics of the {len(x):,} values "
            f"(quantiles (i + 0.5)/{k:,}), not all of them, so that a scenario file holding it stays "
            f"under the 16 MiB a scenario file may have; their CDF is within {gap:.2g} of the data's "
            f"(KS D) and their mean within {100 * mean_err:.2g}% of the data's."
        )
    model = TraceDurations(values=tuple(kept.tolist()), cycle=True)
    q = np.quantile(x, [0.5, 0.9, 0.99])
    params = {
        "n_values": float(len(x)),
        "n_replayed": float(len(kept)),
        "median": float(q[0]),
        "p90": float(q[1]),
        "p99": float(q[2]),
    }
    return ModelFit("empirical", model, params, d, kolmogorov_p(d, n_eff), "a held-out half", note)
