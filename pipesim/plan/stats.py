"""Which designs a plan cannot separate from its best: a paired test on shared seeds.

Every full run of a plan uses the same simulation seeds (``sim_seed, sim_seed + 1, ...``), and a
seed fixes the workload's draws (prompt difficulties, response lengths, tool latencies), so two
designs' runs under one seed see the same samples. The paired difference ``d_s = best_s - other_s``
removes that shared noise; the other design is *tied* with the best when the two-sided 95% Student
t interval of the mean difference contains 0 (with one seed: when the two throughputs are equal).
The tests are not corrected for multiplicity: a tie says "not separated by these seeds", which is
what the page reports, and :func:`seeds_to_separate` says how many seeds would separate the pair
at the observed spread (the normal approximation ``n = (2.0 * sd / mean)^2``, at least one more
than now). With one seed there is no interval (:attr:`Paired.half_width` is NaN, not 0): no claim
either way can be made, and a caller says so rather than "separated by the paired test".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipesim.io.sweep_grid import t_quantile_975  # io sits below plan: one quantile for both

if TYPE_CHECKING:
    from pipesim.plan.evaluate import Evaluated
    from pipesim.plan.search import PlanResult

__all__ = [
    "Paired",
    "merge_duplicates",
    "merged_label",
    "paired",
    "seeds_to_separate",
    "t95",
    "tied_with_best",
]


def t95(df: int) -> float:
    """The two-sided 95% t quantile for ``df`` degrees of freedom: the sweep's
    (:func:`pipesim.io.sweep_grid.t_quantile_975`, tabulated to 30, a Cornish-Fisher expansion
    beyond), so a plan and a sweep give one seed count one interval. It took the next tabulated
    lower df above 10 and 1.96 beyond 30 (t(31) = 2.040). A df below 1 is a ValueError."""
    return t_quantile_975(df)


@dataclass(frozen=True)
class Paired:
    """The paired comparison of two designs' throughputs on shared seeds."""

    mean_diff: float
    """Mean over seeds of ``a - b`` (samples per hour)."""
    half_width: float
    """Half the 95% interval of the mean difference (NaN with one seed: there is none)."""
    n: int
    sd: float

    @property
    def tested(self) -> bool:
        """Whether there is a test at all (at least 2 seeds): one seed separates nothing."""
        return self.n >= 2

    @property
    def tied(self) -> bool:
        """Not separated by the paired test; with one seed (no test: see :attr:`tested`), whether
        the two throughputs are equal."""
        if self.n < 2:
            return self.mean_diff == 0
        return abs(self.mean_diff) <= self.half_width


def paired(a: Sequence[float], b: Sequence[float]) -> Paired:
    """The paired comparison of ``a`` and ``b`` (same length: one value per shared seed)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired samples must have the same non-zero length, got {len(a)} and {len(b)}")
    d = [x - y for x, y in zip(a, b, strict=True)]
    n = len(d)
    mean = statistics.fmean(d)
    if n < 2:
        return Paired(mean, math.nan, n, 0.0)
    sd = statistics.stdev(d)
    return Paired(mean, t95(n - 1) * sd / math.sqrt(n), n, sd)


def seeds_to_separate(p: Paired) -> int | None:
    """About how many shared seeds would separate a tied pair at the spread seen (None: the two
    are identical on every seed, so no number of seeds separates them)."""
    if p.mean_diff == 0:
        return None
    need = math.ceil((2.0 * p.sd / abs(p.mean_diff)) ** 2)
    return max(need, p.n + 1)


def _throughputs(e: Evaluated) -> list[float]:
    return [float(r["throughput_per_hour"]) for r in e.runs]


def tied_with_best(result: PlanResult) -> list[Evaluated]:
    """The feasible full-run designs other than the best that a paired test on shared seeds does
    not separate from it, by throughput descending."""
    best = result.best
    if best is None:
        return []
    ref = _throughputs(best)
    out = []
    for e in result.feasible:
        if e.design == best.design or len(e.runs) != len(ref):
            continue
        if paired(ref, _throughputs(e)).tied:
            out.append(e)
    return out


def comparison(best: Evaluated, other: Evaluated) -> Paired:
    """The paired comparison of ``best`` against ``other`` (their runs on the same seeds)."""
    return paired(_throughputs(best), _throughputs(other))


def _signature(e: Evaluated) -> tuple[Any, ...]:
    keys = ("throughput_per_hour", "staleness_mean", "staleness_max", "discarded_share", "tokens_generated")
    return (e.steps, tuple(tuple(r.get(k) for k in keys) for r in e.runs))


def merge_duplicates(evals: Sequence[Evaluated]) -> list[tuple[Evaluated, list[Evaluated]]]:
    """The designs whose runs are identical seed by seed (throughput, staleness, discards,
    tokens: e.g. drain, partial and abort-reprefill at eta 0, where no sync meets a sequence in
    flight) as one row: (the first in ``evals``' order, the others), order kept."""
    groups: dict[tuple[Any, ...], tuple[Evaluated, list[Evaluated]]] = {}
    for e in evals:
        if e.metrics.get("failed"):
            groups[(id(e),)] = (e, [])
            continue
        sig = _signature(e)
        if sig in groups:
            groups[sig][1].append(e)
        else:
            groups[sig] = (e, [])
    return list(groups.values())


def merged_label(first: Evaluated, same: Sequence[Evaluated], n_gpus: int) -> str:
    """``first``'s label, with what differs in the identical designs after ``=``: ``colocated tp2
    eta=0 drain = partial = abort_reprefill``."""
    label = first.design.label(n_gpus)
    words = set(label.split())
    extra = [" ".join(w for w in o.design.label(n_gpus).split() if w not in words) for o in same]
    return " = ".join([label, *[x for x in extra if x]])
