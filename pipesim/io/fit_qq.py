"""The QQ plot of a fit (``pipesim fit --qq``): each model's quantiles against the data's.

A model's quantiles: the log-normal's from the normal quantile function; the agent model's from
seeded draws of the fitted model (as many as :func:`~pipesim.io.fit_models.agent_draws` says);
the empirical replay's from a random half of the data (as its KS statistic is taken: fitted on
one half, tested on the other). Both axes are logarithmic, ticked at full values
in 1-2-5 steps (:func:`log_ticks`), with the line ``y = x`` drawn for reference.

Split from :mod:`pipesim.io.fit`, which re-exports every name here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pipesim.io.fit_models import ModelFit, agent_draws, normal_ppf

if TYPE_CHECKING:
    from pipesim.io.fit import FitResult

__all__ = ["log_ticks", "model_quantiles", "qq_figure", "write_qq"]


def model_quantiles(fit: ModelFit, p: np.ndarray, x: np.ndarray, seed: int = 0) -> np.ndarray:
    if fit.name == "log-normal":
        m = fit.model
        return m.median_s * np.exp(m.sigma * normal_ppf(p))  # type: ignore[no-any-return]
    if fit.name == "agent":
        n = agent_draws(fit.model)  # type: ignore[arg-type]
        return np.quantile(fit.model.sample(n, np.random.default_rng(seed)), p)  # type: ignore[no-any-return]
    half = np.random.default_rng(seed).permutation(x)[: len(x) // 2]
    return np.quantile(half, p)  # type: ignore[no-any-return]


def qq_figure(result: FitResult, n_points: int = 200) -> Any:
    """A Plotly QQ plot: each model's quantiles against the data's, on log axes, with y = x."""
    import plotly.graph_objects as go

    from pipesim.io.viz.sweep import NUM, PALETTE

    x = result.values
    p = (np.arange(1, n_points + 1) - 0.5) / n_points
    data_q = np.quantile(x, p)
    fig = go.Figure()
    for i, f in enumerate(result.fits.values()):
        fig.add_trace(
            go.Scatter(
                x=data_q,
                y=model_quantiles(f, p, x),
                mode="markers",
                marker=dict(size=5, color=PALETTE[i % len(PALETTE)]),
                name=f"{f.name} (KS D = {f.ks:.3f})",
                hovertemplate=f"{f.name}<br>data %{{x:{NUM}}} s, model %{{y:{NUM}}} s<extra></extra>",
            )
        )
    lo, hi = float(data_q.min()), float(data_q.max())
    fig.add_trace(
        go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="y = x", line=dict(color="#999", dash="dash"))
    )
    drawn = [np.asarray(t.y if axis == "y" else t.x, dtype=np.float64) for t in fig.data for axis in "xy"]
    vals = np.concatenate(drawn)
    vals = vals[np.isfinite(vals) & (vals > 0)]
    ticks = log_ticks(float(vals.min()), float(vals.max())) if len(vals) else []
    fig.update_layout(
        title=f"QQ plot of {result.column} ({result.source}, {result.n:,} values)",
        xaxis_title=f"data quantile of {result.column} (s)",  # seconds, after --scale
        yaxis_title="model quantile (s)",
        legend_title_text="model",
        height=560,
        width=720,
        plot_bgcolor="white",
    )
    # full values at 1-2-5 steps (decades over a wide span): plotly's own log ticks printed the
    # minor ones as single digits, so 500 read "5" beside "100"
    axis = dict(type="log", showgrid=True, gridcolor="#eee")
    if ticks:
        axis.update(tickmode="array", tickvals=ticks, ticktext=[f"{t:,g}" for t in ticks])
    fig.update_xaxes(**axis)
    fig.update_yaxes(**axis)
    return fig


def log_ticks(lo: float, hi: float, most: int = 12) -> list[float]:
    """The ticks of a log axis over ``[lo, hi]`` (both > 0): the first of 1 to 9, of 1, 2 and 5,
    and of 1 alone (decades) x 10^k that gives ``most`` ticks or fewer; the one beyond each end is
    kept (the axis pads its range a little past the data)."""
    k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    ticks: list[float] = []
    for mults in (range(1, 10), (1, 2, 5), (1,)):
        every = [float(f"{m * 10.0**k:.12g}") for k in range(k0, k1 + 1) for m in mults]
        below = [t for t in every if t <= lo][-1:]
        above = [t for t in every if t >= hi][:1]
        ticks = list(dict.fromkeys(below + [t for t in every if lo < t < hi] + above))
        if len(ticks) <= most:
            break
    return ticks


def write_qq(result: FitResult, path: str | Path) -> Path:
    from pipesim.io.interrupts import write_text_atomic
    from pipesim.io.viz import figures_to_html

    p = Path(path)  # whole or not at all, as the other pages are written
    write_text_atomic(p, figures_to_html([qq_figure(result)], title=f"QQ plot: {result.column}"))
    return p
