"""Seeds in :func:`pipesim.compare`: each design's mean and 95% interval, and the paired difference.

A design that ``compare`` runs (a Scenario, a run spec) at ``seeds=N`` > 1 runs at seeds 0..N-1,
and every such design runs at the same seeds. Per headline metric:

- **a design's interval** is the two-sided 95% Student t interval of the mean over its seeds,
  ``mean +- t(0.975, n - 1) sd / sqrt(n)`` (``sd`` with ``ddof=1``), computed by the sweep's
  :func:`~pipesim.io.sweep_grid.aggregate`: so a sweep and a comparison of the same seeds give the
  same interval. As there, it stops at 0 (every headline metric is a count, a time, a rate or a
  share; a metric with a value below 0 is taken as signed, its interval left whole) and a
  share's at 1, and a design whose seeds all gave the same run (durations replayed
  from a trace, nothing else drawn) has none (NaN): a width of 0 would read as certainty.
- **the difference** ``B - A`` of each later design with the first is paired by seed: ``d_s =
  B_s - A_s``, and its interval is the t interval of the mean of ``d`` over the shared seeds (as
  :mod:`pipesim.plan.stats` compares a plan's designs). A seed fixes the workload's draws, so the
  two runs of one seed see the same samples and the pairing removes that shared noise; identical
  designs give ``d_s = 0`` and the interval ``[0, 0]``. The difference is *distinguishable* from
  seed noise when its interval excludes 0; it is not corrected for several comparisons.
- **a run given as a result** (a RunResult, a ComputeRun, a loaded saved run) has one seed: its
  value stands alone, with no interval, and a difference with it has none either (``lo``, ``hi``
  NaN, ``distinguishable`` None): one run says nothing of its own seed noise. :func:`notes` says so.
- **across engines** (a slot run against a compute run) a seed is matched, not its draws: each
  engine draws its own workload from it, so the pairing removes no shared noise (the interval is
  still the t interval of the per-seed differences). The rows of :data:`ENGINE_BOUND_KEYS` mean
  different things in the two engines, so such a pair has no difference there (mean, ``lo``,
  ``hi`` NaN, ``distinguishable`` None), and :func:`notes` says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipesim.io.sweep_grid import aggregate, shares_of, t975

__all__ = [
    "ENGINE_BOUND_KEYS",
    "MAX_SEEDS",
    "STATS",
    "cell",
    "diff_name",
    "difference",
    "notes",
    "repeated",
    "seed_table",
]

MAX_SEEDS = 64
"""The most seeds per design (each is a whole run of every design that runs)."""
STATS = ("mean", "lo", "hi")
"""A design's columns under its name in a table of several seeds."""
DIFF_STATS = (*STATS, "distinguishable")
"""A difference's columns."""
ENGINE_BOUND_KEYS = {
    "gen_util": "a slot run's share of its slots, a compute run's share of its max_num_seqs places",
    "episodes_truncated": "a slot run's episodes cut at its timeout, a compute run's cut at the response cap",
}
"""The summary keys whose meaning differs between the slot and the compute engine, and how: no
difference is taken between a slot run's value and a compute run's."""


def diff_name(b: str, a: str) -> str:
    """The column of the difference ``b - a``."""
    return f"{b} - {a}"


def _numeric(runs: pd.DataFrame) -> list[str]:
    """The summary keys of ``runs`` that hold numbers."""
    return [str(c) for c in runs.columns if pd.api.types.is_numeric_dtype(runs[c])]


def repeated(runs: pd.DataFrame, keys: Sequence[str] = ()) -> bool:
    """Whether ``runs`` (one row per seed) are one run repeated: two or more seeds, every number of
    the summary the same in each (the seed draws nothing the summary sees); ``keys``: more
    columns to hold to it."""
    cols = list(dict.fromkeys([*_numeric(runs), *(k for k in keys if k in runs)]))
    return len(runs) > 1 and bool(cols) and bool((runs[cols].nunique(dropna=False) <= 1).all())


def _design_stats(runs: pd.DataFrame, keys: Sequence[str], single: bool) -> pd.DataFrame:
    """Rows ``keys``, columns mean, lo, hi: the sweep's aggregate over the rows of ``runs`` (a run
    given as a result: its value, no interval)."""
    frame = runs.reindex(columns=list(keys)).astype(float)
    if single:
        mean = frame.iloc[0] if len(frame) else pd.Series(math.nan, index=list(keys))
        return pd.DataFrame({"mean": mean, "lo": math.nan, "hi": math.nan}, index=list(keys))
    # the whole summary decides whether the seeds repeated one run, not the rows asked for (a
    # count that every seed gives alike is a metric without spread, not a run repeated)
    every = list(dict.fromkeys([*keys, *_numeric(runs)]))
    ok = runs.reindex(columns=every).astype(float).assign(status="ok")
    floor = [k for k in every if bool((ok[k].dropna() >= 0).all())]  # a value below 0: a signed metric
    agg = aggregate(ok, (), every, nonnegative=floor, shares=shares_of(floor)).iloc[0]
    return pd.DataFrame({s: [float(agg[f"{k}_{s}"]) for k in keys] for s in STATS}, index=list(keys))


def difference(a: pd.Series, b: pd.Series) -> tuple[float, float, float]:
    """Mean, lo and hi of the paired difference ``b - a`` over the seeds both hold (the index):
    the 95% t interval of the mean of the per-seed differences; NaN bounds below two seeds."""
    d = (b - a).dropna().to_numpy(dtype=float)
    if len(d) == 0:
        return math.nan, math.nan, math.nan
    mean = float(np.mean(d))
    half = t975(len(d)) * float(np.std(d, ddof=1)) / math.sqrt(len(d)) if len(d) > 1 else math.nan
    return mean, mean - half, mean + half


def seed_table(
    per_seed: Mapping[str, pd.DataFrame],
    keys: Sequence[str],
    labels: Mapping[str, str],
    single: set[str],
    engines: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """The table of a comparison over several seeds: one row per metric of ``keys`` (labelled by
    ``labels``); under each design's name its mean, lo and hi; under ``"B - A"`` (each later design
    with the first) the paired difference and whether it is distinguishable from seed noise (True,
    False, or None where there is no interval). ``single``: the designs given as one run;
    ``engines``: each design's engine (``"slots"``, ``"compute"``): a pair of two engines has no
    difference in the rows of :data:`ENGINE_BOUND_KEYS`."""
    names = list(per_seed)
    engines = engines or {}
    columns: dict[tuple[str, str], list[Any]] = {}
    stats = {n: _design_stats(per_seed[n], keys, n in single) for n in names}
    for n in names:
        for s in STATS:
            columns[(n, s)] = list(stats[n][s])
    first = names[0]
    for other in names[1:]:
        no_interval = bool({first, other} & single) or any(
            repeated(per_seed[n], keys) for n in (first, other)
        )
        col = diff_name(other, first)
        rows = []
        across = engines.get(first, "slots") != engines.get(other, "slots")
        for k in keys:
            if across and k in ENGINE_BOUND_KEYS:  # a slot share less a share of places: no number
                rows.append((math.nan, math.nan, math.nan))
            elif no_interval:
                gap = cell(stats[other], k, "mean") - cell(stats[first], k, "mean")
                rows.append((gap, math.nan, math.nan))
            else:
                a, b = (_column(per_seed[n], k) for n in (first, other))
                rows.append(difference(a, b))
        columns[(col, "mean")] = [r[0] for r in rows]
        columns[(col, "lo")] = [r[1] for r in rows]
        columns[(col, "hi")] = [r[2] for r in rows]
        columns[(col, "distinguishable")] = [
            None if not (math.isfinite(lo) and math.isfinite(hi)) else not lo <= 0.0 <= hi
            for _, lo, hi in rows
        ]
    table = pd.DataFrame(columns, index=pd.Index([labels.get(k, k) for k in keys], name="metric"))
    table.columns = pd.MultiIndex.from_tuples(list(columns), names=["column", "stat"])
    for c in [c for c in columns if c[1] == "distinguishable"]:  # True, False, None: not numpy's
        table[c] = pd.Series(columns[c], index=table.index, dtype=object)
    return table


def cell(frame: pd.DataFrame, row: Any, col: Any) -> float:
    """``frame.at[row, col]`` as a float."""
    return float(frame.at[row, col])  # type: ignore[arg-type]


def _column(runs: pd.DataFrame, key: str) -> pd.Series:
    """``runs[key]`` as floats by seed (NaN where the run's summary lacks the key)."""
    return runs[key].astype(float) if key in runs else pd.Series(math.nan, index=runs.index)


def notes(
    per_seed: Mapping[str, pd.DataFrame],
    keys: Sequence[str],
    single: set[str],
    seeds: int,
    engines: Mapping[str, str] | None = None,
) -> list[str]:
    """What the reader of a table over several seeds must know: a design given as one run, a
    design whose seeds repeated one run, and a pair of engines (``engines``: each design's)."""
    out = []
    engines = engines or {}
    names = list(per_seed)
    across = [n for n in names[1:] if engines.get(n, "slots") != engines.get(names[0], "slots")]
    bound = [k for k in keys if k in ENGINE_BOUND_KEYS]
    if across and bound:
        what = "; ".join(f"{k}: {ENGINE_BOUND_KEYS[k]}" for k in bound)
        out.append(
            f"{', '.join(diff_name(n, names[0]) for n in across)}: a slot run against a compute run, "
            f"so no difference where the rows mean different things ({what}); the seeds are "
            "matched, not the draws (each engine draws its own workload from a seed)"
        )
    for n, runs in per_seed.items():
        if n in single:
            seed = float(runs.index[0]) if len(runs) else math.nan
            at = f" (seed {int(seed)})" if math.isfinite(seed) else ""
            out.append(
                f"{n}: one run{at}, a saved run or a result, not rerun at {seeds} seeds: its value "
                "stands alone, with no interval, and a difference with it has none"
            )
        elif repeated(runs, keys):
            out.append(
                f"{n}: its {len(runs)} seeds gave the same run (nothing it draws depends on the seed, "
                "e.g. durations replayed from a trace): no interval, and none for a difference with it"
            )
    return out
