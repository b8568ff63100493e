"""A plan's designs as one pandas DataFrame, and its CSV and Parquet files.

One row per design at the longest run length it reached (the full runs, then the screened designs
that were not promoted), with columns

* the design's keys (:meth:`~pipesim.plan.space.Design.as_dict`) and its ``label``;
* ``stage`` (``full`` or ``screened``), ``steps``, ``seeds``, ``feasible``, ``on_front``,
  ``recommended`` and ``tied_with_best`` (a paired test on shared seeds, see
  :mod:`pipesim.plan.stats`), ``verified`` (what the run ``HORIZON`` times as long found,
  :mod:`pipesim.plan.verify`; empty where none was needed), ``why_infeasible`` (empty when
  feasible) and, per constraint, ``<name>_limit``, ``<name>_judged`` (the value the judge read:
  the settled mean, not the whole run's), ``<name>_measured`` and ``<name>_state`` (``met``,
  ``violated``, ``open``; :mod:`pipesim.plan.verdicts`);
* every metric (:func:`pipesim.plan.evaluate.run_design`'s keys, averaged over seeds) and the 95%
  interval of the throughput (``throughput_ci``, ``throughput_lo``, ``throughput_hi``); a
  throughput is never below 0, so ``throughput_lo`` is cut there, and a design run on one seed
  has no interval: the three are NaN (empty in the CSV), never an interval of no width.

Metrics are means over a design's seeds; counts (tokens, preemptions, seeds, samples trained) are
integer columns where every value is a whole number, so a CSV says ``21504``, not ``21504.0``, and
decimal columns where a mean over seeds is not (:data:`COUNTS`). The frame's ``attrs`` (and the
Parquet file's metadata, and a ``#`` header line of the CSV) record pipesim's version, the spec's
hash, the simulation seeds, the search seed and whether the plan was interrupted (``partial``).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from pipesim.plan.search import PlanResult

__all__ = ["COUNTS", "frame", "provenance", "write_csv", "write_parquet"]

COUNTS = frozenset(
    {
        "seeds",
        "preemptions",
        "ledger_closes",
        "recompute_tokens",
        "tokens_generated",
        "tokens_trained",
        "tokens_discarded",
        "tokens_buffered",
        "tokens_in_flight",
        "episodes_trained_run",
        "at_max",
        "below_max",
    }
)
"""Metrics that count things. A design's metric is the mean over its seeds, so a count is an
integer where that mean is whole (``episodes_trained_run`` 6144, every seed training the same
number) and a decimal otherwise (``at_max`` 31.2: the samples at the maximum staleness, averaged
over five seeds)."""


def provenance(result: PlanResult) -> dict[str, Any]:
    """What every output records: pipesim's version, the spec's hash, the seeds, ``partial``."""
    from pipesim.plan.cache import spec_hash, version

    return {
        "pipesim_version": version(),
        "spec_hash": spec_hash(result.spec),
        "sim_seeds": result.sim_seeds(),
        "search_seed": result.seed,
        "partial": result.partial,
    }


def whole(key: str, v: Any) -> Any:
    """A count given as a whole float (``21504.0``) as an int; anything else as it is."""
    if key in COUNTS and isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def frame(result: PlanResult) -> pd.DataFrame:
    """The designs of ``result`` as a DataFrame (see the module docstring)."""
    import pandas as pd

    from pipesim.plan.stats import tied_with_best
    from pipesim.plan.verdicts import constraint_states, why_infeasible

    spec = result.spec
    front = {e.design for e in result.front}
    best = result.best.design if result.best is not None else None
    ties = {e.design for e in tied_with_best(result)}
    full = {e.design for e in result.full}
    rows = []
    for stage, evals in (
        ("full", result.full),
        ("screened", [e for e in result.screened if e.design not in full]),
    ):
        for e in evals:
            m = {k: v for k, v in e.metrics.items() if k != "error"}
            ci = float(m.get("throughput_ci", 0.0))  # NaN: one seed; 0.0: a failed design
            lo, hi = (math.nan, math.nan)
            if math.isfinite(ci):
                lo, hi = max(e.throughput - ci, 0.0), e.throughput + ci
            rows.append(
                {
                    **e.design.as_dict(),
                    "label": e.design.label(spec.n_gpus),
                    "stage": stage,
                    "steps": e.steps,
                    "feasible": e.feasible,
                    "on_front": e.design in front,
                    "recommended": e.design == best,
                    "tied_with_best": e.design in ties,
                    "verified": e.verified,
                    "why_infeasible": why_infeasible(spec, e),
                    **m,
                    **{
                        f"{name}_{k}": v
                        for name, st in constraint_states(spec, e).items()
                        for k, v in st.items()
                    },
                    "failed": bool(m.get("failed", 0.0)),  # a flag (the metrics hold every value as a float)
                    "throughput_lo": lo,
                    "throughput_hi": hi,
                    "error": str(e.metrics.get("error", "")),
                }
            )
    df = pd.DataFrame(rows)
    for col in df.columns:
        if col in COUNTS or col in ("trainer_gpus", "tp", "eta", "sync_every", "steps"):
            values = df[col]
            if len(values) and values.notna().all() and (values.astype(float) % 1 == 0).all():
                df[col] = values.astype("int64")
    df.attrs.update(provenance(result))
    return df


def write_csv(result: PlanResult, path: str) -> None:
    """:func:`frame` as CSV, after one ``#`` line of :func:`provenance` as JSON (``pandas.read_csv(
    path, comment="#")`` reads it back); ``-``: standard output."""
    import sys

    from pipesim.io.interrupts import write_text_atomic

    text = "# " + json.dumps(provenance(result)) + "\n" + frame(result).to_csv(index=False)
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_text_atomic(path, text)


def write_parquet(result: PlanResult, path: str) -> None:
    """:func:`frame` as Parquet, :func:`provenance` in the file's key-value metadata
    (``pipesim_plan``, JSON)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipesim.io.interrupts import write_atomic

    table = pa.Table.from_pandas(frame(result), preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[b"pipesim_plan"] = json.dumps(provenance(result)).encode()
    table = table.replace_schema_metadata(meta)
    write_atomic(path, lambda p: pq.write_table(table, p))
