"""A log-normal length distribution from its mean *after* the cap, as training logs report it
(verl's ``response_length/mean`` and ``clip_ratio``): :func:`capped_solution` solves for the mean
before the cap and the spread, by a 1-D bisection on the closed form :func:`capped_ratio`.
:class:`~pipesim.compute.trajectory.LengthPoint` (``capped=True``, a CSV's ``mean_capped_tokens``)
uses it. ``pipesim calibrate`` fits its lengths with its own variant
(:func:`pipesim.calibrate.fit.capped_mean`), which also reads a batch maximum."""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

from pipesim.core.errors import FieldError, shown

__all__ = ["capped_ratio", "capped_solution"]


def _log_phi(x: float) -> float:
    """``ln Phi(x)``, the standard normal CDF, finite far into the lower tail."""
    if x > -30.0:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))
    return -x * x / 2 - math.log(-x) - 0.5 * math.log(2 * math.pi) + math.log1p(-1.0 / (x * x))


def capped_ratio(u: float, s: float) -> float:
    """``E[min(X, C)] / C`` for a log-normal ``X`` of log-space spread ``s`` whose cap ``C`` sits
    ``u`` spreads above its log-median (``P(X > C) = 1 - Phi(u)``): ``exp(s**2/2 - u s) Phi(u - s)
    + 1 - Phi(u)``. Decreasing in ``u`` at a fixed ``s``, and in ``s`` at a fixed ``u``."""
    return math.exp(s * s / 2 - u * s + _log_phi(u - s)) + 0.5 * math.erfc(u / math.sqrt(2.0))


def _bisect(f: Callable[[float], float], lo: float, hi: float) -> float:
    """The root of the decreasing ``f`` in ``[lo, hi]`` (``f(lo) > 0 > f(hi)``), to float precision."""
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def capped_solution(
    mean_capped: float, cap: int, spread: float | None, clip_share: float | None
) -> tuple[float, float]:
    """``(mean before the cap, spread)`` of the log-normal whose mean after the cap ``cap`` is
    ``mean_capped``, with the share ``clip_share`` past the cap (the spread solved) or, where that
    is None, the spread ``spread`` (the scale solved). ValueError (a :class:`FieldError` naming
    ``mean_tokens``) where none has both."""
    if not mean_capped < cap:
        raise FieldError(
            f"mean_tokens: a mean after the cap ({shown(mean_capped)}) must be below the cap {cap}",
            "mean_tokens",
        )
    t = mean_capped / cap
    if clip_share is not None:
        z = NormalDist().inv_cdf(1.0 - clip_share)
        if not t > (least := capped_ratio(z, z + 30.0)):
            raise FieldError(
                f"mean_tokens: no log-normal has mean {shown(mean_capped)} after the cap {cap} with "
                f"{clip_share} of samples past it (with that share it is at least {least * cap:,.0f})",
                "mean_tokens",
            )
        s = _bisect(lambda x: capped_ratio(z, x) - t, 0.0, z + 30.0)
        return cap * math.exp(s * s / 2 - z * s), s
    assert spread is not None
    if spread == 0.0:
        return mean_capped, 0.0
    # the log-mean m puts the cap u = (ln C - m + s**2/2) / s spreads above the log-median: the
    # capped mean rises with m, from at most mean_capped (m = ln mean_capped) to about C (u = -40)
    lc, half = math.log(cap), spread * spread / 2
    m = _bisect(
        lambda x: t - capped_ratio((lc - x + half) / spread, spread),
        math.log(mean_capped),
        lc + half + 40.0 * spread,
    )
    return math.exp(m), spread
