"""Calibrating from a trace: fit duration models to a column of a table file (CSV, TSV, JSON, JSONL,
Parquet: :func:`~pipesim.io.fit_readers.read_table`).

``pipesim fit TRACE --column C`` (and :func:`fit_trace` in Python) fits three models to the
positive values of one column (episode seconds, or token counts with ``--scale`` seconds per
token), prints the parameters and a goodness of fit, writes a QQ plot, and can write the chosen
model into a scenario file (by default the one :func:`choose_model` picks, and says why):

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

Each fit comes with 95% intervals of what the trace identifies (:mod:`pipesim.io.fit_intervals`):
exact ones for the log-normal's median and sigma, a seeded percentile bootstrap of the episodes
(:data:`BOOTSTRAP_RESAMPLES` resamples) for the agent model's mean turns and seconds per turn, and
none for the empirical replay, which has no parameters. They assume independent episodes.

No scipy: the normal CDF is an erf approximation (Abramowitz and Stegun 7.1.26, error < 1.5e-7).

The parts: :mod:`pipesim.io.fit_readers` reads a column of a trace, :mod:`pipesim.io.fit_models`
fits the three models, :mod:`pipesim.io.fit_qq` draws the QQ plot; this module runs them on one
column (:func:`fit_values`, :func:`fit_trace`), explains what the trace could not identify
(:attr:`FitResult.notes`), and writes the results as text and JSON. Every public name of the
parts is re-exported here.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipesim.core.errors import shown
from pipesim.io.fit_choice import (
    KS_REJECT_P,
    MEAN_TOLERANCE,
    SLOWEST_DECODE_TOK_S,
    choose_model,
    fit_problems,
    model_mean,
    unit_notes,
)
from pipesim.io.fit_intervals import BOOTSTRAP_RESAMPLES, INTERVAL_LEVEL, turn_choice_note, with_intervals
from pipesim.io.fit_models import (
    AGENT_DRAWS,
    EMPIRICAL_MAX_VALUES,
    ModelFit,
    agent_draws,
    agent_moments,
    fit_agent,
    fit_empirical,
    fit_lognormal,
    kolmogorov_p,
    ks_statistic,
    normal_cdf,
    normal_ppf,
)
from pipesim.io.fit_models import (
    _turn_moments as _turn_moments,  # the tests check the turn moments directly
)
from pipesim.io.fit_qq import log_ticks, model_quantiles, qq_figure, write_qq
from pipesim.io.fit_readers import (
    MIN_VALUES,
    Dropped,
    DroppedRow,
    FitError,
    check_turns,
    describe_dropped,
    read_column,
    read_fit_columns,
    read_table,
)
from pipesim.workload.durations import AgentDurations

FIT_RANGE_S = (1e-6, 1e9)
"""Episode seconds a fit accepts (a microsecond to about 30 years): values outside are in another
unit (``--scale`` converts them) or would overflow the models' moments."""

__all__ = [
    "AGENT_DRAWS",
    "AGENT_NOTE",
    "BOOTSTRAP_RESAMPLES",
    "EMPIRICAL_MAX_VALUES",
    "KS_REJECT_P",
    "MEAN_TOLERANCE",
    "SLOWEST_DECODE_TOK_S",
    "Dropped",
    "DroppedRow",
    "FitError",
    "FitResult",
    "INTERVAL_LEVEL",
    "ModelFit",
    "agent_draws",
    "agent_moments",
    "choose_model",
    "fit_agent",
    "fit_empirical",
    "fit_lognormal",
    "fit_problems",
    "fit_trace",
    "fit_values",
    "format_result",
    "kolmogorov_p",
    "ks_statistic",
    "log_ticks",
    "model_mean",
    "model_quantiles",
    "normal_cdf",
    "normal_ppf",
    "qq_figure",
    "read_column",
    "read_table",
    "to_json",
    "write_qq",
]

AGENT_NOTE = (
    "agent model: total durations identify only the mean number of turns (from their spread) and "
    "the seconds per turn (from their mean); the tokens per turn and the decode rate enter only as "
    "their ratio, and the split of a turn between decoding and tool calls, the token range and the "
    "tool latency's spread are kept from the base model. Give a per-episode turn count "
    "(--turns-column) to measure the turns, and per-turn decode and tool times to separate the rest."
)


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
    chosen: str = "empirical"
    """The model ``--scenario-out`` writes without ``--model`` (:func:`choose_model`)."""
    chosen_why: str = ""
    dropped: tuple[Dropped, ...] = ()
    """Why rows of the trace were left out, by column and reason, the first few named."""

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
            "dropped": [_dropped_dict(d) for d in self.dropped],
            "fits": {
                k: {
                    "params": f.params,
                    "ks": f.ks,
                    "p_value": f.p_value,
                    "ks_against": f.how,
                    "intervals": {name: [_finite(v) for v in lo_hi] for name, lo_hi in f.intervals.items()},
                    "intervals_how": f.interval_how,
                    **(
                        {"turns_identified": not math.isnan(f.intervals["mean_turns"][0])}
                        if "mean_turns" in f.intervals
                        else {}
                    ),
                    **({"turn_roots": [list(r) for r in f.turn_roots]} if f.turn_roots else {}),
                }
                for k, f in self.fits.items()
            },
            "notes": self.notes,
            "chosen": {"model": self.chosen, "why": self.chosen_why},
            "interval_level": INTERVAL_LEVEL,
            "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
        }


def _num(v: float) -> str:
    """4 significant figures below 1,000, whole and grouped from there: an interval's ends share a
    style (``13,666 [1,980, 19,131]``, not ``[1980, 19,131]``), and 9,999.7 is 10,000, not 1e+04."""
    return f"{v:,.0f}" if abs(v) >= 999.5 else f"{v:.4g}"


def _dropped_dict(d: Dropped) -> dict[str, Any]:
    """``--json``'s entry of a :class:`Dropped`: ``column``, ``reason``, ``count`` and the rows named,
    each ``{"row", "line", "cell"}`` (:class:`~pipesim.io.fit_readers.DroppedRow`; a cell that is not
    finite as its text, ``"inf"``: JSON has no infinity)."""
    rows = [
        {
            "row": r.row,
            "line": r.line,
            "cell": f"{r.cell:g}" if isinstance(r.cell, float) and not math.isfinite(r.cell) else r.cell,
        }
        for r in d.rows
    ]
    return {"column": d.column, "reason": d.reason, "count": d.count, "rows": rows}


def _finite(v: float) -> float | None:
    """NaN (an interval the trace does not identify) as JSON's ``null``: ``NaN`` is not JSON."""
    return None if math.isnan(v) else v


def fit_values(
    x: np.ndarray,
    *,
    source: str = "<values>",
    column: str = "values",
    turns: np.ndarray | None = None,
    base: AgentDurations | None = None,
    n_dropped: int = 0,
    seed: int = 0,
    dropped: tuple[Dropped, ...] = (),
) -> FitResult:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or not 0 <= seed < 2**64:
        raise FitError(f"seed must be an integer in [0, 2**64), got {shown(seed)}", "seed", source)
    x = np.asarray(x, dtype=np.float64)
    where = f"{source}: column {shown(column)}"
    if len(x) < MIN_VALUES or not (np.isfinite(x) & (x > 0)).all():
        raise FitError(f"{where}: need at least {MIN_VALUES} finite values > 0, got {len(x)}", column, source)
    lo, hi = float(x.min()), float(x.max())
    if lo < FIT_RANGE_S[0] or hi > FIT_RANGE_S[1]:
        raise FitError(
            f"{where}: values from {lo:.3g} to {hi:.3g} s, outside [{FIT_RANGE_S[0]:g}, "
            f"{FIT_RANGE_S[1]:g}] s; convert them to seconds with --scale",
            column,
            source,
        )
    if lo == hi:
        raise FitError(
            f"{where}: every value is {lo:.6g}: a constant has no distribution to fit", column, source
        )
    if turns is not None:
        check_turns(np.asarray(turns, dtype=np.float64), (base or AgentDurations()).max_turns, source)
    fits = {
        "lognormal": fit_lognormal(x),
        "agent": fit_agent(x, base, turns, seed),
        "empirical": fit_empirical(x, seed),
    }
    fits = with_intervals(fits, x, base, turns, seed)
    notes = [AGENT_NOTE] if turns is None else [AGENT_NOTE.split(". Give")[0] + "."]
    if turns is not None:
        notes[0] = (
            "agent model: the turn column gives the mean number of turns and the totals the seconds per "
            "turn; the split of a turn between decoding and tool calls, the token range and the tool "
            "latency's spread are kept from the base model (per-turn times would separate them)."
        )
    if "KS chose" in fits["agent"].how:
        notes.append(turn_choice_note(fits["agent"]))
    notes += [f.note for f in fits.values() if f.note] + unit_notes(fits["agent"])
    chosen, why = choose_model(fits, x)
    return FitResult(source, column, len(x), n_dropped, x, fits, notes, chosen, why, dropped)


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
        raise FitError(f"--scale must be a finite number > 0, got {shown(scale)}", "--scale")
    cap = (base or AgentDurations()).max_turns
    x, turns, n_dropped, dropped = read_fit_columns(path, column, turns_column, scale, cap)
    return fit_values(
        x,
        source=str(path),
        column=column,
        turns=turns,
        base=base,
        n_dropped=n_dropped,
        seed=seed,
        dropped=dropped,
    )


def format_result(result: FitResult) -> str:
    """What ``pipesim fit`` prints: the sample, one line per model, then the notes."""
    lines = [
        f"{result.source}: column {result.column!r}, {result.n:,} values"
        + (
            f" ({result.n_dropped:,} row{'' if result.n_dropped == 1 else 's'} dropped: "
            f"{describe_dropped(result.dropped) or 'unusable'})"
            if result.n_dropped
            else ""
        )
    ]
    w = max(len(f.name) for f in result.fits.values())
    for f in result.fits.values():
        params = ", ".join(f"{k}={_num(v)}" for k, v in f.params.items())
        lines.append(f"  {f.name:<{w}}  KS D={f.ks:.4f} (p={f.p_value:.3g}, against {f.how})  {params}")
        lines.append(_interval_line(f, w))
    lines += [f"note: {n}" for n in result.notes]
    lines.append(
        f"default model (what --scenario-out writes without --model): {result.chosen}: {result.chosen_why}"
    )
    return "\n".join(lines)


def _interval_line(f: ModelFit, w: int) -> str:
    """``95% intervals: median_s 49.96 [49.71, 50.21], ... (how)``, under the model's line."""
    if not f.intervals:
        return f"  {'':<{w}}  {f.interval_how}"
    items = ", ".join(
        f"{k} {_num(f.params[k])} " + ("[not identified]" if math.isnan(lo) else f"[{_num(lo)}, {_num(hi)}]")
        for k, (lo, hi) in f.intervals.items()
    )
    return f"  {'':<{w}}  {INTERVAL_LEVEL:.0%} intervals: {items} ({f.interval_how})"


def to_json(result: FitResult) -> str:
    return json.dumps(result.to_dict(), indent=2)
