"""Calibrating from a trace: fit duration models to a column of a CSV or JSONL file.

``pipesim fit TRACE --column C`` (and :func:`fit_trace` in Python) fits three models to the
positive values of one column (episode seconds, or token counts with ``--scale`` seconds per
token), prints the parameters and a goodness of fit, writes a QQ plot, and can write the chosen
model into a scenario file:

* **log-normal** (:class:`~pipesim.workload.durations.LogNormalDurations`): the maximum-likelihood
  fit, ``median = exp(mean(log x))`` and ``sigma = std(log x)``; both identified by any sample.
* **agent** (:class:`~pipesim.workload.durations.AgentDurations`): a total duration is a sum over
  a truncated-geometric number of turns of (decode + tool) seconds. From totals alone two numbers
  are identified: the mean number of turns (from the spread, the coefficient of variation) and
  the seconds of a turn (from the mean), *given* the per-turn shape of a base model (the ratio of
  the token range's ends, the tool latency's sigma, and the split between decode and tool time),
  which is kept. Tokens per turn and the decode rate enter only through their ratio, and the
  decode/tool split is not identified by totals; :attr:`FitResult.notes` says so. A per-episode
  turn count (``--turns-column``) identifies the mean number of turns directly, and the totals
  then give the seconds per turn.
* **empirical** (:class:`~pipesim.workload.durations.TraceDurations`, ``cycle=True``): the values
  themselves, replayed in a shuffled order.

Goodness of fit is the Kolmogorov-Smirnov statistic ``D`` (the largest gap between the CDFs):
against the fitted log-normal's CDF; for the agent model, against 20,000 draws from the fitted
model (two-sample); for the empirical model, between two random halves of the data (fit on one,
tested on the other: in-sample it would be 0). The p-values use the asymptotic Kolmogorov
distribution and are optimistic for the log-normal, whose parameters come from the same data.

No scipy: the normal CDF is an erf approximation (Abramowitz and Stegun 7.1.26, error < 1.5e-7).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipesim.workload.durations import AgentDurations, LogNormalDurations, TraceDurations

__all__ = [
    "AGENT_NOTE",
    "FitError",
    "FitResult",
    "ModelFit",
    "agent_moments",
    "fit_agent",
    "fit_lognormal",
    "fit_trace",
    "fit_values",
    "ks_statistic",
    "qq_figure",
    "read_column",
]

AGENT_NOTE = (
    "agent model: total durations identify only the mean number of turns (from their spread) and "
    "the seconds per turn (from their mean); the tokens per turn and the decode rate enter only as "
    "their ratio, and the split of a turn between decoding and tool calls, the token range and the "
    "tool latency's spread are kept from the base model. Give a per-episode turn count "
    "(--turns-column) to measure the turns, and per-turn decode and tool times to separate the rest."
)
AGENT_DRAWS = 20_000


class FitError(ValueError):
    """A trace that cannot be fitted (names the file, the column and what is wrong)."""


@dataclass(frozen=True)
class ModelFit:
    """One fitted model: its pipesim object, parameters, KS statistic and p-value."""

    name: str
    model: Any
    params: dict[str, float]
    ks: float
    p_value: float
    how: str


@dataclass(frozen=True)
class FitResult:
    """Every model fitted to one column, and what the trace could not identify."""

    source: str
    column: str
    n: int
    n_dropped: int
    values: np.ndarray
    fits: dict[str, ModelFit]
    notes: list[str] = field(default_factory=list)

    def table(self) -> pd.DataFrame:
        rows = [
            {
                "model": f.name,
                "parameters": ", ".join(f"{k}={_num(v)}" for k, v in f.params.items()),
                "KS D": f.ks,
                "p": f.p_value,
                "KS against": f.how,
            }
            for f in self.fits.values()
        ]
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "column": self.column,
            "n": self.n,
            "n_dropped": self.n_dropped,
            "fits": {
                k: {"params": f.params, "ks": f.ks, "p_value": f.p_value, "ks_against": f.how}
                for k, f in self.fits.items()
            },
            "notes": self.notes,
        }


def _num(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1e4 else f"{v:.4g}"


# -- reading ---------------------------------------------------------------------------------------
def read_table(path: str | Path) -> pd.DataFrame:
    p = Path(path)
    if not p.is_file():
        raise FitError(f"{p}: no such file")
    suffix = p.suffix.lower()
    try:
        if suffix in (".jsonl", ".ndjson"):
            return pd.read_json(p, lines=True)
        if suffix == ".json":
            return pd.read_json(p)
        if suffix in (".csv", ".tsv", ".txt"):
            return pd.read_csv(p, sep="\t" if suffix == ".tsv" else ",")
        if suffix == ".parquet":
            return pd.read_parquet(p)
    except (ValueError, OSError) as exc:
        raise FitError(f"{p}: cannot read it as {suffix[1:]}: {' '.join(str(exc).split())}") from None
    raise FitError(f"{p}: give a .csv, .tsv, .jsonl, .json or .parquet file, got {suffix or 'no suffix'!r}")


def _column(df: pd.DataFrame, path: str | Path, column: str) -> pd.Series:
    if column not in df.columns:
        raise FitError(f"{path}: no column {column!r}; the columns are {', '.join(map(str, df.columns))}")
    col = pd.to_numeric(df[column], errors="coerce")
    if col.notna().sum() == 0:
        raise FitError(f"{path}: column {column!r} holds no numbers")
    return col


def read_column(path: str | Path, column: str, scale: float = 1.0) -> tuple[np.ndarray, int]:
    """The finite positive values of ``column`` (times ``scale``) and how many rows were dropped."""
    col = _column(read_table(path), path, column).to_numpy(dtype=np.float64) * scale
    keep = np.isfinite(col) & (col > 0)
    if keep.sum() < 10:
        raise FitError(f"{path}: column {column!r} has {int(keep.sum())} positive values; at least 10 needed")
    return col[keep], int((~keep).sum())


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


def fit_agent(
    x: np.ndarray, base: AgentDurations | None = None, turns: np.ndarray | None = None, seed: int = 0
) -> ModelFit:
    """Fit the agent model by moments (see the module docstring for what is identified)."""
    base = base or AgentDurations()
    mean, cv2 = float(x.mean()), float(x.var() / x.mean() ** 2)
    if turns is not None:
        target = float(np.mean(turns))
        grid = np.geomspace(1.0001, max(4 * base.max_turns, 2.0), 4000)
        means = np.array([_turn_moments(base.max_turns, g)[0] for g in grid])
        mean_turns = float(grid[int(np.argmin(np.abs(means - target)))])
        how = "20,000 draws of the fit (turns from the turn column)"
    else:
        grid = np.geomspace(1.0001, max(50 * base.max_turns, 2.0), 3000)

        def cv2_of(mt: float) -> float:
            m, v = agent_moments(_scaled(base, mt, 1.0))
            return v / (m * m)

        gap = np.array([cv2_of(g) - cv2 for g in grid])
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
        if not roots:  # the spread is out of the model's reach: the closest one
            roots = [float(grid[int(np.argmin(np.abs(gap)))])]
        # the mean and the spread can fit two turn counts (the cap bends the spread back down):
        # the shape of the distribution (KS against draws) chooses between them
        ks_of = {
            r: ks_statistic(x, other=_scaled(base, r, mean).sample(AGENT_DRAWS, np.random.default_rng(seed)))
            for r in roots
        }
        mean_turns = float(min(ks_of, key=lambda r: ks_of[r]))
        how = "20,000 draws of the fit"
        if len(roots) > 1:
            how += f" (mean turns {', '.join(f'{r:.3g}' for r in roots)} fit the mean and spread; KS chose)"
    model = _scaled(base, mean_turns, mean)
    draws = model.sample(AGENT_DRAWS, np.random.default_rng(seed))
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
    n_eff = len(x) * AGENT_DRAWS / (len(x) + AGENT_DRAWS)
    return ModelFit("agent", model, params, d, kolmogorov_p(d, n_eff), how)


def fit_empirical(x: np.ndarray, seed: int = 0) -> ModelFit:
    rng = np.random.default_rng(seed)
    shuffled = rng.permutation(x)
    half = len(shuffled) // 2
    d = ks_statistic(shuffled[:half], other=shuffled[half:])
    n_eff = half * (len(x) - half) / len(x)
    model = TraceDurations(values=tuple(float(v) for v in shuffled), cycle=True)
    q = np.quantile(x, [0.5, 0.9, 0.99])
    params = {"n_values": float(len(x)), "median": float(q[0]), "p90": float(q[1]), "p99": float(q[2])}
    return ModelFit("empirical", model, params, d, kolmogorov_p(d, n_eff), "a held-out half")


def fit_values(
    x: np.ndarray,
    *,
    source: str = "<values>",
    column: str = "values",
    turns: np.ndarray | None = None,
    base: AgentDurations | None = None,
    n_dropped: int = 0,
    seed: int = 0,
) -> FitResult:
    x = np.asarray(x, dtype=np.float64)
    fits = {
        "lognormal": fit_lognormal(x),
        "agent": fit_agent(x, base, turns, seed),
        "empirical": fit_empirical(x, seed),
    }
    notes = [AGENT_NOTE] if turns is None else [AGENT_NOTE.split(". Give")[0] + "."]
    if turns is not None:
        notes[0] = (
            "agent model: the turn column gives the mean number of turns and the totals the seconds per "
            "turn; the split of a turn between decoding and tool calls, the token range and the tool "
            "latency's spread are kept from the base model (per-turn times would separate them)."
        )
    if "KS chose" in fits["agent"].how:
        notes.append(
            "agent model: the turn cap bends the spread back down, so two mean turn counts match the "
            "mean and the spread of the totals; the one whose distribution fits better (KS) is reported."
        )
    return FitResult(source, column, len(x), n_dropped, x, fits, notes)


def fit_trace(
    path: str | Path,
    column: str,
    *,
    turns_column: str | None = None,
    scale: float = 1.0,
    base: AgentDurations | None = None,
    seed: int = 0,
) -> FitResult:
    """Read ``column`` (and optionally ``turns_column``) of a trace and fit every model."""
    if not (math.isfinite(scale) and scale > 0):
        raise FitError(f"--scale must be a finite number > 0, got {scale!r}")
    df = read_table(path)
    col = _column(df, path, column).to_numpy(dtype=np.float64) * scale
    keep = np.isfinite(col) & (col > 0)
    turns = None
    if turns_column is not None:
        t = _column(df, path, turns_column).to_numpy(dtype=np.float64)
        keep &= np.isfinite(t) & (t >= 1)
        turns = t[keep]
    if keep.sum() < 10:
        raise FitError(f"{path}: column {column!r} has {int(keep.sum())} positive values; at least 10 needed")
    return fit_values(
        col[keep],
        source=str(path),
        column=column,
        turns=turns,
        base=base,
        n_dropped=int((~keep).sum()),
        seed=seed,
    )


# -- the QQ plot -----------------------------------------------------------------------------------
def model_quantiles(fit: ModelFit, p: np.ndarray, x: np.ndarray, seed: int = 0) -> np.ndarray:
    if fit.name == "log-normal":
        m = fit.model
        return m.median_s * np.exp(m.sigma * normal_ppf(p))  # type: ignore[no-any-return]
    if fit.name == "agent":
        return np.quantile(fit.model.sample(AGENT_DRAWS, np.random.default_rng(seed)), p)  # type: ignore[no-any-return]
    half = np.random.default_rng(seed).permutation(x)[: len(x) // 2]
    return np.quantile(half, p)  # type: ignore[no-any-return]


def qq_figure(result: FitResult, n_points: int = 200) -> Any:
    """A Plotly QQ plot: each model's quantiles against the data's, on log axes, with y = x."""
    import plotly.graph_objects as go

    from pipesim.io.viz.sweep import PALETTE

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
                hovertemplate="data %{x:.4g}, model %{y:.4g}<extra></extra>",
            )
        )
    lo, hi = float(data_q.min()), float(data_q.max())
    fig.add_trace(
        go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="y = x", line=dict(color="#999", dash="dash"))
    )
    fig.update_layout(
        title=f"QQ plot of {result.column} ({result.source}, {result.n:,} values)",
        xaxis_title=f"data quantile ({result.column})",
        yaxis_title="model quantile",
        legend_title_text="model",
        height=560,
        width=720,
        plot_bgcolor="white",
    )
    fig.update_xaxes(type="log", showgrid=True, gridcolor="#eee")
    fig.update_yaxes(type="log", showgrid=True, gridcolor="#eee")
    return fig


def write_qq(result: FitResult, path: str | Path) -> Path:
    from pipesim.io.viz import figures_to_html

    p = Path(path)
    p.write_text(figures_to_html([qq_figure(result)], title=f"QQ plot: {result.column}"))
    return p


def format_result(result: FitResult) -> str:
    """What ``pipesim fit`` prints: the sample, one line per model, then the notes."""
    lines = [
        f"{result.source}: column {result.column!r}, {result.n:,} values"
        + (
            f" ({result.n_dropped:,} rows dropped: missing, non-positive or not numbers)"
            if result.n_dropped
            else ""
        )
    ]
    w = max(len(f.name) for f in result.fits.values())
    for f in result.fits.values():
        params = ", ".join(f"{k}={_num(v)}" for k, v in f.params.items())
        lines.append(f"  {f.name:<{w}}  KS D={f.ks:.4f} (p={f.p_value:.3g}, against {f.how})  {params}")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def to_json(result: FitResult) -> str:
    return json.dumps(result.to_dict(), indent=2)
