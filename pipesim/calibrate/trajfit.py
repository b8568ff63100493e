"""The response lengths and their trajectory fitted together with the cap: a synchronous log whose
lengths drift while some responses are cut at ``max_response_tokens``.

**Why**: :func:`pipesim.calibrate.fit.fit_lengths` pools the steps' mean and clip ratio, as if
every step drew from one distribution, and :func:`pipesim.calibrate.fit.fit_drift` fits a line to
the log of the steps' mean. Where lengths grow while the cap cuts more of them, both are wrong in
a known direction: the growth over the steps widens the pooled spread (sigma biased high), and the
capped mean grows more slowly than the lengths (drift biased towards 0), so the median taken back
to the first step is biased high. On a walkthrough's 40-step log (median 1,200, sigma 0.6, drift
0.02, clip ratio 0.04 to 0.35): 1313 [1208, 1411], 0.648 [0.618, 0.678], 0.0165 [0.0142, 0.0189].

**Model**: at the log's row ``k`` (trainer step ``t_k``, :func:`pipesim.calibrate.rows.centres`)
the uncapped ``ln L ~ N(mu0 + b t_k, s**2)``, with ``b = ln(1 + drift_per_version)`` and ``s**2 =
sigma**2 + difficulty_sigma**2`` (the groups' spread folded in, as the pooled fit does). The row's
mean is the capped mean ``E min(L, cap)`` (:func:`pipesim.calibrate.fit.capped_mean`'s formula)
and its clip ratio ``1 - Phi((ln cap - mu_k) / s)``.

**Fit** (:func:`fit_trajectory`): ``(mu0, b, ln s)`` by Levenberg-Marquardt on both residuals at
every row, ``ln mean - ln capped mean`` and ``clip - predicted clip``, each series weighed by the
inverse of its root mean square residual in a first, unweighted fit (their noise differs, as
:func:`pipesim.compute.phasefit.fit_profile` weighs phases). Started from the pooled fit at the
mean step and the least-squares slope. Intervals: :data:`~pipesim.calibrate.fit.BOOTSTRAP`
resamples of the rows (pairs: a row's step, mean and clip ratio together), each refitted from the
point's values at the point's weights, all solved at once as one batch of 3x3 systems, each end
widened for a short log by :func:`~pipesim.calibrate.fit.small_sample`. (Weighing each resample
anew doubled the time and moved the ends on the walkthrough's logs by at most 4% of the interval's
width; another bootstrap seed moves them by 3-20%.) The median written is ``exp(mu0)``: the median
at trainer step 0, where a run of the calibrated spec starts (the pooled fit's was taken back
there by ``(1 + drift) ** mean step``; this one needs no such step). No ``scipy``: the normal CDF
is ``math.erfc`` element by element (exact); a fit of 40 rows takes about 20 ms (2,000 rows:
under 1 s), a calibration two.

**Use** (:func:`pipesim.calibrate.fitspec.fit_spec`, synchronous designs, a clip ratio above 0 at
some row): the joint drift's interval decides whether a drift is seen; if so the three values
replace the pooled ones, else the pooled ones stay. Where a drift is seen but this fit cannot run
(no clip ratio; a log at the cap), the least-squares drift stays and, where the responses reach the
cap (:func:`cap_seen`), a note says which way each value is biased (:func:`capped_drift_note`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pipesim.calibrate.fit import (
    AT_CAP_SLACK,
    BOOTSTRAP,
    MIN_DRIFT_STEPS,
    Fitted,
    _ends,
    _lengths,
    small_sample,
)
from pipesim.core.validate import check_number, refuse, shown
from pipesim.plan.checks import MAX_TOKENS

__all__ = ["HOW", "MIN_CAPPED_SHARE", "S_RANGE", "fit_trajectory", "solve_trajectory"]

HOW = "clip ratio and mean at each step, with the cap"
"""The fitted values' ``how``: read from every step, not from the pooled steps."""
S_RANGE = (1e-3, 4.0)
"""The log-space spread searched (the pooled fit's bisection bracket)."""
MIN_CAPPED_SHARE = 0.01
"""The share of a step's responses above the cap, by the fitted lengths, from which a drift fitted
without a clip ratio or max (an agent spec's, a log without them) is said to be biased by the cap."""
_ITERATIONS = 60  # Levenberg-Marquardt steps a stage; a well-posed fit converges in about 10
_TOLERANCE = 1e-8  # a resample has converged once its step in (a, b, ln s) is under this
_FLOOR = 1e-6  # the least root mean square residual a series is weighed by (a noiseless log's)

_SQRT2 = math.sqrt(2.0)
_SQRT2PI = math.sqrt(2.0 * math.pi)


def _cdf(x: np.ndarray) -> np.ndarray:
    """The standard normal CDF, elementwise, exact in both tails (``erfc``, not ``1 - erf``)."""
    flat = np.fromiter(map(math.erfc, (-x / _SQRT2).ravel()), float, x.size)
    return 0.5 * flat.reshape(x.shape)


def _pdf(x: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * x * x) / _SQRT2PI


def _model(theta: np.ndarray, tc: np.ndarray, lc: float) -> tuple[np.ndarray, ...]:
    """``ln`` of the capped mean and the clip share at each row, and their Jacobians in ``theta``.

    ``theta``: ``(B, 3)``, ``(a, b, ln s)`` with ``mu_k = a + b tc_k``; ``tc``: ``(B, n)`` centred
    steps. Returns ``ln m (B, n)``, ``clip (B, n)``, ``d ln m (B, n, 3)``, ``d clip (B, n, 3)``.
    With ``u = (ln cap - mu) / s``: ``dm/dmu = E[L; L < cap] = e^(mu + s^2/2) Phi(u - s)``
    (shifting ``mu`` scales every uncut length), ``dm/ds = E[Z L; L < cap] = e^(mu + s^2/2)
    (s Phi(u - s) - phi(u - s))``, ``dclip/dmu = phi(u) / s``, ``dclip/ds = u phi(u) / s``."""
    a, b, s = theta[:, :1], theta[:, 1:2], np.exp(theta[:, 2:3])  # (B, 1) each
    mu = a + b * tc  # (B, n)
    u = (lc - mu) / s
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        grow = np.exp(mu + 0.5 * s * s)  # the uncapped mean
        below = _cdf(u - s)
        head = grow * below  # E[L; L < cap]
        clip = _cdf(-u)
        m = head + math.exp(lc) * clip
        dm_ds = grow * (s * below - _pdf(u - s))
        dc_dmu = _pdf(u) / s
        dl = np.stack([head / m, head * tc / m, dm_ds * s / m], axis=-1)  # (B, n, 3)
        dc = np.stack([dc_dmu, dc_dmu * tc, dc_dmu * u * s], axis=-1)
        return np.log(m), clip, dl, dc


def _lm(
    theta: np.ndarray, tc: np.ndarray, lm: np.ndarray, c: np.ndarray, w: np.ndarray, lc: float
) -> np.ndarray:
    """Levenberg-Marquardt from ``theta (B, 3)`` on the residuals ``w_m (ln m_obs - ln m)`` and
    ``w_c (c_obs - c)`` of every row (``w``: ``(B, 2)``), each resample a system of its own. A
    step is kept where it lowers that resample's cost, else its damping grows tenfold; ``ln s``
    stays in :data:`S_RANGE`. A resample stops once its step is under :data:`_TOLERANCE` (the
    rest are evaluated alone: most stop within ten steps)."""
    lo_s, hi_s = math.log(S_RANGE[0]), math.log(S_RANGE[1])

    def evaluate(th: np.ndarray, i: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lmod, cmod, dl, dc = _model(th, tc[i], lc)
        wi = w[i]
        r = np.concatenate([wi[:, :1] * (lm[i] - lmod), wi[:, 1:] * (c[i] - cmod)], axis=1)  # (b, 2n)
        jac = np.concatenate([wi[:, :1, None] * dl, wi[:, 1:, None] * dc], axis=1)  # (b, 2n, 3)
        good = np.isfinite(r).all(axis=1) & np.isfinite(jac).all(axis=(1, 2))
        return r, jac, np.where(good, (r * r).sum(axis=1), np.inf)

    theta = theta.copy()
    every = np.arange(len(theta))
    r, jac, cost = evaluate(theta, every)
    damp = np.full(len(theta), 1e-3)
    active = np.isfinite(cost)
    for _ in range(_ITERATIONS):
        i = np.flatnonzero(active)
        if not len(i):
            break
        ji, ri = jac[i], r[i]
        with np.errstate(over="ignore", invalid="ignore"):
            jtj = np.einsum("bki,bkj->bij", ji, ji)
            diag = np.einsum("bii->bi", jtj)
            ridge = damp[i, None] * diag + 1e-12 * (1.0 + diag.sum(axis=1, keepdims=True))  # (b, 3)
            lhs = jtj + ridge[:, :, None] * np.eye(3)  # (b, 3, 3): never singular
            rhs = np.einsum("bki,bk->bi", ji, ri)
        ok = np.isfinite(lhs).all(axis=(1, 2)) & np.isfinite(rhs).all(axis=1)  # else it stops here
        step = np.zeros((len(i), 3))
        step[ok] = np.linalg.solve(lhs[ok], rhs[ok][:, :, None])[:, :, 0]
        trial = theta[i] + step
        trial[:, 2] = np.clip(trial[:, 2], lo_s, hi_s)
        r2, jac2, cost2 = evaluate(trial, i)
        better = cost2 < cost[i]
        k = i[better]
        theta[k], r[k], jac[k], cost[k] = trial[better], r2[better], jac2[better], cost2[better]
        damp[i] = np.where(better, damp[i] / 10.0, damp[i] * 10.0).clip(1e-12, 1e12)
        active[i] = ok & (np.abs(step).max(axis=1) >= _TOLERANCE) & (damp[i] < 1e12)
    return theta


def _start(t: np.ndarray, mean: np.ndarray, clip: np.ndarray, cap: float) -> np.ndarray:
    """``(a, b, ln s)`` to start from: the pooled fit (at the mean step, where the centred ``a``
    sits) and the least-squares slope of ``ln mean`` on the step."""
    tc = t - t.mean()
    y = np.log(mean)
    b = float((tc * (y - y.mean())).sum() / (tc * tc).sum())
    mu, s, _ = _lengths(float(mean.mean()), float(clip.mean()), None, cap, 1, 0.5)
    return np.array([[mu, b, math.log(min(max(s, S_RANGE[0]), S_RANGE[1]))]])


def _weighted(
    t: np.ndarray, m: np.ndarray, c: np.ndarray, cap: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """The point fit, ``(a, b, ln s)`` centred at the mean step, and the weights ``(w_m, w_c)`` it
    used: the unweighted fit, then the fit weighed by each series' root mean square residual in
    it (floored at :data:`_FLOOR`: a noiseless log's). None where it finds no finite solution."""
    tc, lm, cc, lc = (t - t.mean())[None, :], np.log(m)[None, :], c[None, :], math.log(cap)
    theta = _lm(_start(t, m, c, cap), tc, lm, cc, np.ones((1, 2)), lc)
    lmod, cmod, _, _ = _model(theta, tc, lc)
    with np.errstate(invalid="ignore"):
        rms = np.sqrt([float(((lm - lmod) ** 2).mean()), float(((cc - cmod) ** 2).mean())])
    w = 1.0 / np.maximum(np.nan_to_num(rms, nan=1.0), _FLOOR)
    theta = _lm(theta, tc, lm, cc, w[None, :], lc)
    return (theta[0], w) if np.isfinite(theta).all() else None


def _check(steps: object, mean: object, clip: object, cap: object) -> tuple[np.ndarray, ...]:
    from pipesim.calibrate.frame import check_series

    m = check_series("mean", mean, positive=True)
    c = check_series("clip", clip, len(m))
    if (c > 1).any():
        raise refuse("clip", f"must be shares in [0, 1], got {c.max():g}")
    t = np.asarray(steps, float) if isinstance(steps, np.ndarray | pd.Series | list | tuple) else None
    if t is None or t.shape != m.shape or not np.isfinite(t).all() or len(np.unique(t)) < len(t):
        raise refuse(
            "steps", f"must be {len(m)} distinct finite step numbers (one per mean), got {shown(steps)}"
        )
    check_number("cap", cap, 0.0, strict=True)
    if cap > MAX_TOKENS:  # type: ignore[operator]
        raise refuse("cap", f"must be at most {MAX_TOKENS} tokens (a response cap), got {cap:g}")
    return t, m, c


def solve_trajectory(
    steps: object, mean: object, clip: object, cap: float
) -> tuple[float, float, float] | None:
    """``(mu0, b, s)`` of the model (module docstring) fitted to the rows' ``mean`` and ``clip``
    at ``steps``, no interval: ``mu0`` the ``ln`` median at step 0, ``b = ln(1 + drift)``, ``s``
    the whole log-space spread. None where it does not apply: fewer than two steps, or no step
    clipped (nothing then ties ``s`` to the cap: the pooled fit's case). A FieldError (a LogError
    for a series) names the argument that is not a series of steps, means, shares or a cap."""
    t, m, c = _check(steps, mean, clip, cap)
    if len(t) < 2 or not (c > 0).any():
        return None
    fit = _weighted(t, m, c, cap)
    if fit is None:
        return None
    a, b, ls = (float(x) for x in fit[0])
    return a - b * float(t.mean()), b, math.exp(ls)


def fit_trajectory(
    steps: object, mean: object, clip: object, cap: float, difficulty_sigma: float, rng: np.random.Generator
) -> dict[str, Fitted] | None:
    """``response_median_tokens`` (at step 0), ``response_sigma`` and ``drift_per_version`` fitted
    together with the cap (module docstring), with bootstrap intervals over the rows. None where
    the joint fit does not apply: fewer than :data:`MIN_DRIFT_STEPS` rows, no row clipped, the
    rows' mean at the cap (:data:`~pipesim.calibrate.fit.AT_CAP_SLACK`: the median is then only a
    bound) or no finite solution. Arguments as :func:`solve_trajectory`'s, and ``difficulty_sigma
    >= 0`` and a numpy Generator (a FieldError names the one that is not)."""
    from pipesim.calibrate.frame import check_kind

    t, m, c = _check(steps, mean, clip, cap)
    check_number("difficulty_sigma", difficulty_sigma, 0.0)
    check_kind("rng", rng, np.random.Generator, "a numpy Generator (np.random.default_rng(seed))")
    n = len(t)
    if n < MIN_DRIFT_STEPS or not (c > 0).any() or float(m.mean()) >= cap * (1.0 - AT_CAP_SLACK):
        return None
    fit = _weighted(t, m, c, cap)
    tbar = float(t.mean())
    if fit is None or fit[0][0] - fit[0][1] * tbar < 0.0:  # a median under one token: the floor
        return None
    a, b, ls = (float(x) for x in fit[0])
    # each resample refitted from the point's values, at the point's weights
    idx = rng.integers(0, n, (BOOTSTRAP, n))  # (B, n): the rows of each resample
    theta0, wb = np.tile(fit[0], (BOOTSTRAP, 1)), np.tile(fit[1], (BOOTSTRAP, 1))
    th = _lm(theta0, t[idx] - tbar, np.log(m)[idx], c[idx], wb, math.log(cap))
    th = th[np.isfinite(th).all(axis=1)]
    mu0, s = a - b * tbar, math.exp(ls)
    dsig2 = difficulty_sigma**2

    def fitted(value: float, draws: np.ndarray, floor: float = -math.inf, how: str = HOW) -> Fitted:
        lo, hi = _ends(draws) if len(draws) >= BOOTSTRAP // 2 else (-math.inf, math.inf)
        lo, hi = small_sample(value, lo, hi, n)
        return Fitted(value, max(lo, floor), hi, how)

    sig = np.sqrt(np.maximum(np.exp(2 * th[:, 2]) - dsig2, 0.0))
    with np.errstate(over="ignore"):
        med = np.exp(th[:, 0] - th[:, 1] * tbar)
    return {
        "response_median_tokens": fitted(math.exp(mu0), med, 0.0, HOW + ", at the first step"),
        "response_sigma": fitted(math.sqrt(max(s * s - dsig2, 0.0)), sig, 0.0),
        "drift_per_version": fitted(math.expm1(b), np.expm1(th[:, 1]), -1.0),
    }


def cap_seen(
    steps: np.ndarray,
    clip: np.ndarray | None,
    maxes: np.ndarray | None,
    cap: float,
    lengths: tuple[float, float, float],
) -> str | None:
    """What says the log's responses reach the cap, for a drift fitted without it; None where
    nothing does: a clip ratio above 0; else a ``response_length/max`` at the cap; else (neither
    logged) the fitted lengths, ``(median at step 0, s, drift)``, putting at least
    :data:`MIN_CAPPED_SHARE` of a step's responses above it. A helper of
    :func:`~pipesim.calibrate.fitspec.fit_spec`, which has checked its arguments."""
    if clip is not None:
        return f"response_length/clip_ratio up to {float(clip.max()):.3g}" if (clip > 0).any() else None
    if maxes is not None:
        hit = int((maxes >= cap * (1.0 - AT_CAP_SLACK)).sum())
        return f"response_length/max at the cap in {hit} of {len(maxes)} steps" if hit else None
    median, s, drift = lengths
    if s <= 0:
        return None
    mu = math.log(median) + math.log1p(drift) * float(np.max(steps) if drift > 0 else np.min(steps))
    share = 0.5 * math.erfc((math.log(cap) - mu) / s / _SQRT2)
    if share < MIN_CAPPED_SHARE:
        return None
    return f"no clip ratio or max logged; the fitted lengths put {share:.1%} of a step's responses above it"


def capped_drift_note(drift: Fitted, seen: str, cap: float, why: str, pooled_sigma: bool) -> str:
    """The note on a drift fitted by :func:`pipesim.calibrate.fit.fit_drift` where the responses
    reach the cap (``seen``, :func:`cap_seen`) and the joint fit did not apply (``why``): which way
    each length value is off. ``pooled_sigma``: the sigma was fitted from the pooled clip ratio."""
    up = drift.value > 0
    sigma = (
        "; the sigma, read from the pooled steps, holds the trajectory's spread too (biased high)"
        if pooled_sigma
        else ""
    )
    return (
        f"drift_per_version: {drift.value:.3g} is the least-squares slope of ln mean length, but the "
        f"responses reach the cap ({cap:g} tokens: {seen}) and {why}: the capped mean moves more "
        f"slowly than the lengths, so the drift's size is understated, the median at the first step "
        f"is biased {'high' if up else 'low'} and later steps' lengths are predicted "
        f"{'short' if up else 'long'}{sigma} (a clip ratio per step lets the fit take the cap into "
        "account: docs/calibrate.md)"
    )
