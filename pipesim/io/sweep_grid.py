"""Sweep grids and tables: the cells of a sweep, their labels, and the aggregate over seeds.

Design: a sweep is planned completely before anything runs. :func:`grid` expands designs x the
product of the ``over`` values x seeds into :class:`Cell` objects and rejects a bad key, or a value
or seed given twice, here, before a worker starts. A cell is labelled by its values
(:func:`cell_label`: numbers and strings as they are, None as ``none``, policy objects by their repr
with arguments, so ``InFlightUpdate(load_time_s=0.5)`` and ``InFlightUpdate(load_time_s=30.0)`` are
two rows); a value twice in one axis is an error, since it would count the same runs twice.

After the run, :func:`collect` turns the cells' result rows (in cell order, whatever order they
completed in) into a :class:`SweepResult`, whose :attr:`~SweepResult.aggregate` is the mean and a
95% Student t interval over seeds of every numeric metric. Running the cells is
:mod:`pipesim.io.sweep_exec`; :func:`pipesim.io.sweeps.sweep` joins the two.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from pipesim.config import Scenario
from pipesim.core.errors import shown
from pipesim.core.validate import FieldError, refuse
from pipesim.io.overrides import cell_label
from pipesim.io.overrides_dotted import fold, whole_and_field, whole_and_field_refusal

__all__ = [
    "Cell",
    "SweepResult",
    "aggregate",
    "all_failed_message",
    "cell_label",
    "collect",
    "grid",
    "t975",
    "t_quantile_975",
]

# two-sided 95% Student t quantiles by degrees of freedom, 1..30, to 10 significant digits:
# the root of the regularized incomplete beta I_{v/(v+t^2)}(v/2, 1/2) = 0.05 (mpmath, 30 digits),
# as scipy.stats.t.ppf(0.975, df) and the published tables (12.7062047, 4.3026527, 3.1824463,
# 2.2281389 at 10, 2.0422725 at 30). They were held to 3 decimals (3.182 at df 3: 1.4e-4 off),
# coarser than the expansion used past 30.
_T975 = [
    12.70620474, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851, 2.364624252,
    2.306004135, 2.262157163, 2.228138852, 2.200985160, 2.178812830, 2.160368656, 2.144786688,
    2.131449546, 2.119905299, 2.109815578, 2.100922040, 2.093024054, 2.085963447, 2.079613845,
    2.073873068, 2.068657610, 2.063898562, 2.059538553, 2.055529439, 2.051830516, 2.048407142,
    2.045229642, 2.042272456,
]  # fmt: skip


@dataclass(frozen=True)
class Cell:
    """One run of a sweep: its labels (design, grid values, seed) and the scenario to run."""

    index: int
    labels: dict[str, Any]
    scenario: Scenario


def t975(n: int) -> float:
    """The 97.5% quantile of Student's t with ``n - 1`` degrees of freedom (nan for n < 2)."""
    return float("nan") if n < 2 else t_quantile_975(n - 1)


_Z975 = 1.959963984540054
"""The normal distribution's 97.5% quantile."""


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` >= 1 degrees of freedom (a two-sided 95%
    interval's factor): tabulated to 30 (10 significant digits, exact to print), then the
    Cornish-Fisher expansion in the normal quantile z,
    ``z + (z^3 + z) / 4v + (5z^5 + 16z^3 + 3z) / 96v^2 + (3z^7 + 19z^5 + 17z^3 - 15z) / 384v^3``,
    within 2e-6 of the exact value from 31 on (1e-5 at 20). It was 1.96 past 30: 4% too narrow at
    32 seeds, t(31) = 2.040. The sweep's intervals (:func:`t975`) and the plan's
    (``pipesim.plan.stats.t95``) both read it."""
    if isinstance(df, bool) or not isinstance(df, int | np.integer) or df < 1:
        raise FieldError(f"df must be an integer >= 1 (degrees of freedom), got {shown(df)}", "df")
    if df <= len(_T975):
        return _T975[int(df) - 1]
    if df > 10**12:  # the expansion's terms are below 1e-12 there (and float(10**400) overflows)
        return _Z975
    z, v = _Z975, float(df)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / v + g2 / v**2 + g3 / v**3


@dataclass(frozen=True)
class SweepResult:
    """``runs``: one row per cell (labels, status, error, metrics); ``keys``: the grid's label columns."""

    runs: pd.DataFrame
    keys: tuple[str, ...]
    metrics: tuple[str, ...] = field(default=())
    nonnegative: tuple[str, ...] = field(default=())
    """Metrics that cannot be negative (counts, times, rates, shares): their intervals stop at 0."""
    shares: tuple[str, ...] = field(default=())
    """Metrics that are shares of a whole (at most 1): their intervals stop at 1 too."""

    @property
    def failures(self) -> pd.DataFrame:
        """The failed cells with their error, for reporting."""
        return self.runs[self.runs["status"] != "ok"][[*self.keys, "seed", "error"]]

    def with_signed(self, signed: Collection[str]) -> SweepResult:
        """This result with every metric but ``signed`` known to be non-negative (and the shares
        among them at most 1): what :func:`collect` infers for the default cell function, for a
        cell function that wraps it."""
        floor = tuple(m for m in self.metrics if m not in signed)
        return SweepResult(self.runs, self.keys, self.metrics, floor, shares_of(floor))

    @cached_property
    def aggregate(self) -> pd.DataFrame:
        """Per grid cell over seeds: ``<metric>_mean``, ``_lo``, ``_hi`` (95% t interval; NaN for a
        cell of one seed, or of seeds that all gave the same run, which has none), ``n_seeds``."""
        return aggregate(self.runs, self.keys, self.metrics, self.nonnegative, self.shares)


def aggregate(
    runs: pd.DataFrame,
    keys: Sequence[str],
    metrics: Sequence[str],
    nonnegative: Sequence[str] = (),
    shares: Sequence[str] = (),
) -> pd.DataFrame:
    """Mean and 95% interval over seeds of each metric, one row per combination of ``keys``.

    The interval of a metric in ``nonnegative`` stops at 0: with few seeds a t interval of a
    count or a time can reach below zero (2 seeds of ``staleness_max``, 0 and 3: down to -17.6),
    which no mean of such values can be; that of a metric in ``shares`` stops at 1 as well (2 seeds
    of ``gen_util`` reached 1.069). A cell with one successful seed has no interval: its
    ``_lo`` and ``_hi`` are NaN (they were the mean, which read as an interval of width 0). So has
    a cell whose seeds all gave the same value of every metric: they repeated one run (durations
    from a trace, which ignores the seed, and nothing else drawn at random), and an interval of
    width 0 would read as certainty (``274.3 [274.3, 274.3]`` over 3 "seeds"). With no
    successful cell the table is empty but keeps its columns.
    """
    floor, ceiling = set(nonnegative), set(shares)
    ok = runs[runs["status"] == "ok"]
    columns = [*keys, "n_seeds", *(f"{m}_{s}" for m in metrics for s in ("mean", "lo", "hi"))]
    rows = []
    groups = ok.groupby(list(keys), sort=False, dropna=False) if keys else [((), ok)]
    for key, g in groups:
        if len(g) == 0:
            continue
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = dict(zip(keys, key))
        n = len(g)
        row["n_seeds"] = n
        # seeds that repeated one run (a trace's durations, nothing else drawn) are one run: no interval
        same = n > 1 and bool(metrics) and bool((g[list(metrics)].nunique(dropna=False) <= 1).all())
        for m in metrics:
            col = g[m].astype(float)
            mean = float(col.mean())
            half = math.nan if same else t975(n) * float(col.std(ddof=1)) / math.sqrt(n)  # NaN: 1 seed
            lo = max(mean - half, 0.0) if m in floor and mean >= 0 and n > 1 else mean - half
            hi = min(mean + half, 1.0) if m in ceiling and mean <= 1 and n > 1 else mean + half
            row[f"{m}_mean"], row[f"{m}_lo"], row[f"{m}_hi"] = mean, lo, hi
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def _check_unique(what: str, values: Sequence[Any], labels: Sequence[Any], field: str) -> None:
    """FieldError naming ``field[i]`` (the repeat's index) where a label repeats an earlier one."""
    for i, lab in enumerate(labels):
        # equality, not identity: 1 and 1.0 would share a row of the table just the same
        for j in range(i):
            if labels[j] == lab:
                same = "" if values[j] is values[i] else f" ({shown(values[j])} and {shown(values[i])})"
                raise FieldError(
                    f"{what} holds {shown(labels[j])} twice{same}: each value may appear once, since cells "
                    f"are labelled by value and a repeat would count the same runs twice",
                    f"{field}[{i}]",
                )


MAX_CELLS = 100_000
"""The most cells one sweep takes: each is a whole run and holds its own Scenario until the sweep
ends (10^8 seeds used to fill memory before the first cell ran)."""


def grid(
    scenarios: Scenario | Mapping[str, Scenario],
    over: Mapping[str, Sequence[Any]] | None = None,
    seeds: int | Sequence[int] = 1,
) -> list[Cell]:
    """The cells of a sweep: designs x product of ``over`` values x seeds.

    ``seeds`` as an int ``n`` means ``base.seed + i`` for ``i < n``. Values in ``over`` may be typed
    values or policy objects; the label columns hold readable labels (see :func:`cell_label`). A
    dotted key (``weight_update.n``: :mod:`~pipesim.io.overrides_dotted`) sets that field of each
    design's own object; its column is the key, its labels the field's values. A dotted key beside
    an axis over its role's whole object is refused (:func:`~pipesim.io.overrides_dotted.whole_and_field`).
    A bad key, or a value or seed given twice, fails here, before anything is submitted.
    """
    designs = {scenarios.name: scenarios} if isinstance(scenarios, Scenario) else dict(scenarios)
    if not designs:
        raise refuse("scenarios", "must hold at least one Scenario")
    over = dict(over or {})
    if "seed" in over:
        raise FieldError(
            "over['seed']: a sweep runs its seeds in every cell; pass seeds= (a count, a list)", "over.seed"
        )
    for k, vs in over.items():  # the field is over.<key> (a mapping's key is dotted, as in a file)
        if isinstance(vs, str | bytes) or not isinstance(vs, Sequence) or len(vs) == 0:
            msg = f"over[{shown(k)}] must be a non-empty list of values, got {shown(vs)}"
            raise FieldError(msg, f"over.{k}")
        _check_unique(f"over[{shown(k)}]", vs, [cell_label(v) for v in vs], f"over.{k}")
    if (clash := whole_and_field(over)) is not None:  # the field would overwrite the listed objects'
        msg = whole_and_field_refusal(*clash, lambda k: f"over[{shown(k)}]")
        raise FieldError(msg, f"over.{clash[1]}")
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise refuse("seeds", f"must be >= 1, got {seeds}")
    elif not (isinstance(seeds, Sequence) and seeds and all(isinstance(s, int) for s in seeds)):
        raise refuse("seeds", f"must be a count >= 1 or a non-empty list of integers, got {shown(seeds)}")
    else:
        _check_unique("seeds", seeds, seeds, "seeds")
    n_seeds = seeds if isinstance(seeds, int) else len(seeds)
    n_values = math.prod(len(vs) for vs in over.values())
    if len(designs) * n_values * n_seeds > MAX_CELLS:  # each cell holds its own Scenario
        key = "seeds" if len(designs) * n_values <= MAX_CELLS else "over"  # which pushed it over
        raise FieldError(
            f"{key}: a sweep of {len(designs):,} design(s) x {n_values:,} value combination(s) x {n_seeds:,} "
            f"seed(s) = {len(designs) * n_values * n_seeds:,} cells is more than the {MAX_CELLS:,} one "
            "sweep takes (each cell is a whole run); split it",
            key,
        )
    cells: list[Cell] = []
    for design, base in designs.items():
        seed_list = list(range(base.seed, base.seed + seeds)) if isinstance(seeds, int) else list(seeds)
        for combo in itertools.product(*over.values()):
            changes = dict(zip(over, combo))
            folded = fold(base, changes)  # weight_update.n: set on base's own policy
            for seed in seed_list:
                scen = base.with_(**folded, seed=seed)
                labels = {"design": design, **{k: cell_label(v) for k, v in changes.items()}, "seed": seed}
                cells.append(Cell(len(cells), labels, scen))
    return cells


def all_failed_message(res: SweepResult, limit: int = 20) -> str:
    f = res.failures
    lines = [f"every cell of the sweep failed ({len(f)} of {len(res.runs)}):"]
    for _, row in f.head(limit).iterrows():
        where = ", ".join(f"{k}={shown(row[k])}" for k in (*res.keys, "seed"))
        lines.append(f"  {where}: {row['error']}")
    if len(f) > limit:
        lines.append(f"  ... and {len(f) - limit} more (SweepError.result.failures)")
    return "\n".join(lines)


def collect(
    cells: list[Cell], results: Mapping[int, Mapping[str, Any]], signed: Collection[str] | None = None
) -> SweepResult:
    """The tidy result. ``signed``: the metrics that may be negative, where the cell function
    says (the default's); every other metric is then non-negative. None: nothing is known. A
    result key that starts with ``_`` is a side value: a column of ``runs``, never a metric (nor
    aggregated, nor written to ``--csv``)."""
    rows = []
    metrics: list[str] = []
    for c in cells:
        res = dict(results.get(c.index, {"status": "failed", "error": "no result"}))
        res.pop("_index", None)
        for k, v in res.items():  # a key from "_" is a side value the caller reads from runs
            side = k in ("status", "error") or k.startswith("_")
            if not side and k not in metrics and isinstance(v, int | float):
                metrics.append(k)
        rows.append({**c.labels, "status": res.pop("status"), "error": res.pop("error"), **res})
    keys = tuple(k for k in cells[0].labels if k != "seed")
    runs = pd.DataFrame(rows)
    floor = () if signed is None else tuple(m for m in metrics if m not in signed)
    return SweepResult(
        runs=runs, keys=keys, metrics=tuple(metrics), nonnegative=floor, shares=shares_of(floor)
    )


def shares_of(metrics: Sequence[str]) -> tuple[str, ...]:
    """The metrics of a run's summary that are shares of a whole (utilisations, idle ratios,
    ``*_share``): each run's value lies in [0, 1], so their intervals stop at 1 as well as 0."""
    return tuple(
        m for m in metrics if m.startswith("gen_util") or m.endswith("_share") or m.endswith("idle_ratio")
    )
