"""The co-simulation's tables: time to a target, final held-out with intervals, paired races.

Pure functions of run records (:func:`scenarios.cosim_report.run_record`'s plain dicts), so a
stored JSON file re-tables without running anything:

* :func:`aggregate` / :func:`format_table` -- one row per (design, correction): the median time to
  the target over seeds (a seed that never reached it counts as slowest), how many reached it,
  the final pass rate (mean±SD over seeds, the population SD: :data:`SD_LEGEND`), staleness,
  mixed-version share and mismatch.
* :func:`claims_table` -- the final held-out pass rate as ``mean [lo, hi]`` (95% t interval), the
  collapsed count and the paired differences on shared seeds.
* :func:`race_table` -- who reached a target first on each shared seed, against sync, with an
  exact sign test: the paired claim behind "reaches it first".
* :func:`in_design_order` -- records sorted as :data:`~scenarios.cosim.DESIGNS` lists the designs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from offpolicy import CORRECTIONS
from scenarios.cosim import DESIGNS

SUMMARY_MEANS = ("final_pass_rate", "staleness_mean", "mixed_share", "mismatch", "sim_hours", "lone_share")
"""The summary keys a table row averages over a cell's runs."""
TABLE_SUMMARY_KEYS = (
    *SUMMARY_MEANS, "staleness_max", "token_staleness_mean", "trained_duration_s", "launched_duration_s",
)  # fmt: skip
"""Every summary key of a stored run the tables read (:func:`scenarios.cosim_checks` refuses a
record without one: it stopped ``--retable`` with a KeyError)."""

TABLE_KEYS = (
    "time_to_target_h",
    "final_pass_rate",
    "staleness_mean",
    "staleness_max",
    "mixed_share",
    "mismatch",
)


def in_design_order(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` sorted by design (as :data:`DESIGNS` lists them), then correction, stably, so
    the tables read sync first whatever order the runs were made in."""
    designs, corrections = list(DESIGNS), list(CORRECTIONS)

    def key(r: dict[str, Any]) -> tuple[int, int]:
        d, c = r["design"], r["correction"]
        return (
            designs.index(d) if d in designs else len(designs),
            corrections.index(c) if c in corrections else 0,
        )

    return sorted(records, key=key)


def time_to(evals: Sequence[dict[str, Any]], target: float) -> float:
    """Simulated hours at the first evaluation reaching ``target``; inf if none did."""
    return next((float(e["sim_h"]) for e in evals if e["pass_rate"] >= target), math.inf)


def aggregate(
    records: Sequence[dict[str, Any]], target: float, also_target: float | None = None
) -> list[dict[str, Any]]:
    """One row per (design, correction) over its seeds (``records`` from :func:`run_record`).

    Time to target is the **median** over seeds with a seed that never reached it counted as
    slowest (inf, printed "never"): a mean over only the seeds that made it would reward a design
    for losing its slow seeds. ``also_target`` adds the same for a second pass rate.
    """
    rows: list[dict[str, Any]] = []
    keys = list(dict.fromkeys((r["design"], r["correction"]) for r in records))
    for design, corr in keys:
        runs = [r for r in records if (r["design"], r["correction"]) == (design, corr)]
        sums = [r["summary"] for r in runs]
        times = [time_to(r["evals"], target) for r in runs]
        row: dict[str, Any] = dict(design=design, correction=corr, seeds=len(runs), target=target)
        row.update(time_to_target_h=statistics.median(times), reached=sum(math.isfinite(t) for t in times))
        if also_target is not None:
            also = [time_to(r["evals"], also_target) for r in runs]
            row.update(also_target=also_target, time_to_also_h=statistics.median(also))
            row["reached_also"] = sum(math.isfinite(t) for t in also)
        for key in SUMMARY_MEANS:
            row[key] = _mean(s[key] for s in sums)
        finals = [s["final_pass_rate"] for s in sums if s["final_pass_rate"] is not None]
        row["final_pass_rate_sd"] = statistics.pstdev(finals) if finals else math.nan
        row["staleness_max"] = max(
            (s["staleness_max"] for s in sums if s["staleness_max"] is not None), default=math.nan
        )
        row["token_staleness_mean"] = _mean(s["token_staleness_mean"] for s in sums)
        row["length_bias"] = _mean(
            s["trained_duration_s"] / s["launched_duration_s"]
            if s["trained_duration_s"] is not None and s["launched_duration_s"]
            else None
            for s in sums
        )
        rows.append(row)
    return rows


def _mean(values: Iterable[float | None]) -> float:
    """The mean of the values a run has (a stored NaN is None: a run that diverged in its first
    step has no mismatch, for one); NaN when none has one."""
    have = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.fmean(have) if have else math.nan


def _hours(x: float) -> str:
    return f"{x:9.3f}" if math.isfinite(x) else f"{'never':>9s}"


def _corr_width(corrections: Iterable[str]) -> int:
    """The correction column's width: ``none`` and ``tis`` fit in 5, ``seq-tis`` needs 7 (it
    pushed every later column of its row out of line)."""
    return max([5, *(len(c) for c in corrections)])


SD_LEGEND = "final: mean±SD of the seeds' final held-out (population SD, not an interval)"
"""The line under :func:`format_table`: its ``0.934±0.064`` is the spread of the seeds
(``statistics.pstdev``, divisor n), not an interval of the mean; printed unexplained beside
:func:`claims_table`'s 95% t intervals of the same means, it could be read as one."""


def format_table(rows: Sequence[dict[str, Any]], target: float) -> str:
    """One line per row of :func:`aggregate` under a header and a rule, then :data:`SD_LEGEND`
    padded to the header's width (every line of the table is as wide, for a reader's columns)."""
    cw = _corr_width(r["correction"] for r in rows)
    head = (
        f"{'design':11s} {'corr':{cw}s} {'h to ' + format(target, '.2f'):>9s} {'reached':>7s} {'final':>12s} "
        f"{'stale':>6s} {'max':>4s} {'mixed':>6s} {'mismatch':>8s} {'sim h':>6s}"
    )
    also = rows[0].get("also_target") if rows else None
    if also is not None:
        head += f" {'h to ' + format(also, '.2f'):>9s} {'reached':>7s}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['design']:11s} {r['correction']:{cw}s} {_hours(r['time_to_target_h'])} "
            f"{r['reached']:>3d}/{r['seeds']:<3d} {r['final_pass_rate']:6.3f}±{r['final_pass_rate_sd']:.3f} "
            f"{r['staleness_mean']:6.2f} {r['staleness_max']:4.0f} {r['mixed_share']:6.3f} "
            f"{r['mismatch']:8.4f} {r['sim_hours']:6.2f}"
            + (
                f" {_hours(r['time_to_also_h'])} {r['reached_also']:>3d}/{r['seeds']:<3d}"
                if also is not None
                else ""
            )
        )
    lines.append(SD_LEGEND.ljust(len(head)))
    return "\n".join(lines)


def claims_table(records: Sequence[dict[str, Any]]) -> str:
    """The final held-out pass rate per (design, correction) as ``mean [lo, hi]`` (95% t interval
    over seeds, as offpolicy's tables, cut at [0, 1] with the cut end marked ``*`` and a line
    under the rows saying why), the collapsed count (final < 0.05), and the paired differences on
    shared seeds: TIS (and any other correction) - none per design, and each design - sync per
    correction, marked significant where the exact sign-flip p printed beside it is below 0.05
    (:func:`offpolicy.experiment.paired_table`; the interval is descriptive)."""
    from offpolicy.experiment import COLLAPSED, bounds_of, fmt_ci, group_runs, paired_table
    from offpolicy.stats import clip_note

    runs = [
        dict(
            design=r["design"],
            correction=r["correction"],
            seed=r["seed"],
            heldout=dict(pass_rate=r["summary"]["final_pass_rate"]),
        )
        for r in records
    ]
    groups = group_runs(runs, ("design", "correction"))
    cw = _corr_width(c for _, c in groups)
    lines = [f"{'design':11s} {'corr':{cw}s} | n  | final held-out [95% t interval] | collapsed"]
    printed: list[str] = []
    for (design, corr), group in groups.items():
        finals = [g["heldout"]["pass_rate"] for g in group]
        n_bad = sum(f < COLLAPSED for f in finals)
        printed.append(fmt_ci(finals, bounds=bounds_of("pass_rate")))
        lines.append(
            f"{design:11s} {corr:{cw}s} | {len(group):<2d} | {printed[-1]:30s} | {n_bad}/{len(group)}"
        )
    if (note := clip_note(printed)) is not None:  # an interval cut at [0, 1]: say what * means
        lines.append(note)
    cells = list(groups)
    pairs = [((d, c), (d, "none")) for d, c in cells if c != "none" and (d, "none") in groups]
    pairs += [((d, c), ("sync", c)) for d, c in cells if d != "sync" and ("sync", c) in groups]
    if pairs:
        lines += ["", paired_table(runs, pairs, ("design", "correction"))]
    return "\n".join(lines)


def race_table(records: Sequence[dict[str, Any]], target: float) -> str:
    """Paired time to ``target`` against sync, per correction: on how many shared seeds each
    design reached it first, later, or tied with sync's run of the same seed (both never
    counts as a tie), and the exact two-sided sign test of wins against losses. A design whose
    correction has no sync run (a resumed file can hold ``async-eta2 tis`` beside only
    ``sync none``), or none on a shared seed, gets a row saying so rather than no row. The median
    times in :func:`format_table` describe; this is the paired claim behind "reaches it first"."""
    from offpolicy.experiment import MIN_CLAIM_SEEDS
    from offpolicy.stats import holm_line, sign_test

    times = {(r["design"], r["correction"], r["seed"]): time_to(r["evals"], target) for r in records}
    family: list[tuple[str, float]] = []  # the races of >= MIN_CLAIM_SEEDS shared seeds: Holm's family
    cells = list(dict.fromkeys((r["design"], r["correction"]) for r in records))
    title = f"paired time to {target:.2f} against sync (same seeds)"
    if not any(d == "sync" for d, _ in cells):  # a header over no rows read as a table lost
        return f"{title}: none (no sync runs to race against; add sync to --designs)"
    if not any(d != "sync" for d, _ in cells):
        return f"{title}: none (only sync runs; add another design to --designs)"
    width = max([16, *(len(f"{d} {c}") for d, c in cells)])  # async-eta4 seq-tis is 18
    lines = [f"{title}: first / later / tied | sign test"]
    for design, corr in cells:
        if design == "sync":
            continue
        if ("sync", corr) not in cells:  # a row left out read as a race never asked for
            lines.append(f"{design + ' ' + corr:{width}s} | none (no sync {corr} runs to race against)")
            continue
        seeds = [s for (d, c, s) in times if (d, c) == (design, corr) and ("sync", corr, s) in times]
        if not seeds:  # 0 / 0 / 0 of 0 with p = 1 read as a race run and lost
            lines.append(f"{design + ' ' + corr:{width}s} | none (no seed shared with sync {corr})")
            continue
        pairs = [(times[(design, corr, s)], times[("sync", corr, s)]) for s in seeds]
        wins = sum(a < b for a, b in pairs)
        losses = sum(a > b for a, b in pairs)
        p = sign_test(wins, losses)
        if len(pairs) < MIN_CLAIM_SEEDS:
            verdict = f"p {'<' if p < 0.05 else '>='} 0.05 (n < {MIN_CLAIM_SEEDS}: no claim)"
        else:
            verdict = "significant" if p < 0.05 else "not significant"
            family.append((f"{design} {corr}", p))
        lines.append(
            f"{design + ' ' + corr:{width}s} | {wins:2d} / {losses:2d} / {len(pairs) - wins - losses:2d} "
            f"of {len(pairs):2d} | p = {p:.3f}, {verdict}"
        )
    # each row's verdict is its own p; a claim over the table needs the family's
    if (holm := holm_line(family, f"races of >= {MIN_CLAIM_SEEDS} seeds (sign test, 5%)")) is not None:
        lines.append(holm)
    return "\n".join(lines)
