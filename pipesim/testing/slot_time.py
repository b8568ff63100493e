"""The kit's checks of each slot's time: intervals ordered, inside the run and never overlapping
(:func:`_check_slots`), and busy + paused + idle adding up to the run's time against two other
books, the episodes' records and the summary's idle share (:func:`_check_time`).
:func:`pipesim.testing.check_invariants` calls both.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from pipesim.results.columns import S_ABORTED
from pipesim.results.run import RunResult
from pipesim.testing.failure import EPS, _fail


def _check_slots(ev: Any, T: float, n_slots: int) -> None:
    gen = ev[ev["kind"].isin(["gen", "pause"])].sort_values(["lane", "start_s", "end_s"])
    if len(gen) and (gen["end_s"] < gen["start_s"] - EPS).any():
        _fail("intervals are ordered", "an interval ends before it starts")
    if len(gen) and ((gen["start_s"] < -EPS) | (gen["end_s"] > T + EPS)).any():
        _fail("intervals inside the run", f"an interval lies outside [0, {T}]")
    for lane, g in gen.groupby("lane"):
        starts, ends = g["start_s"].to_numpy(), g["end_s"].to_numpy()
        if len(starts) > 1 and (starts[1:] < ends[:-1] - 1e-7 * max(1.0, T)).any():
            i = int((starts[1:] < ends[:-1] - 1e-7 * max(1.0, T)).argmax())
            _fail(
                "no overlap per slot",
                f"lane {lane}: [{starts[i]}, {ends[i]}) overlaps the next from {starts[i + 1]}",
            )
    lanes = gen["slot"].unique() if len(gen) else []
    if len(lanes) and (max(lanes) >= n_slots or min(lanes) < 0):
        _fail("slot indices", f"slots used {sorted(lanes)[:5]}... outside [0, {n_slots})")


def _check_time(result: RunResult, ev: Any, T: float, n_slots: int) -> None:
    """busy + paused + idle = T on each slot. The slot's intervals lie inside ``[0, T]`` and never
    overlap (:func:`_check_slots`), so their sum is at most T and idle is what is left; what is
    checked here is that the sum is the right one, from two other books: per slot, the slot time of
    the episodes it ran, from their records (``start_s`` to ``end_s``, or to T for one still
    running; an aborted one that never ended has no rows), and in all, the summary's idle share
    (``rollouter/idle_ratio``, computed from the records apart from the events table). A table
    that loses or invents a stretch of generation, or a summary that miscounts idle time, fails."""
    gen = ev[ev["kind"].isin(["gen", "pause"])]
    c = result.columns
    tol = 1e-7 * max(1.0, T)
    if c.n:
        ended = c.ended
        keep = ~(c.status_is(S_ABORTED) & ~ended)
        slot_s = np.where(ended, c.end_s, T) - c.start_s
        ep_key = c.replica.astype(np.int64)[keep] * n_slots + c.slot.astype(np.int64)[keep]
        want = pd.Series(slot_s[keep]).groupby(ep_key).sum()
    else:
        want = pd.Series(dtype=float)
    key = gen["replica"].to_numpy(np.int64) * n_slots + gen["slot"].to_numpy(np.int64)
    got = pd.Series((gen["end_s"] - gen["start_s"]).to_numpy()).groupby(key).sum()
    both = pd.concat([got.rename("events"), want.rename("episodes")], axis=1).fillna(0.0)
    off = (both["events"] - both["episodes"]).abs() > tol
    if off.any():
        k = int(both.index[int(off.to_numpy().argmax())])
        row = both.loc[k]
        _fail(
            "time conservation",
            f"lane r{k // n_slots}/slot{k % n_slots}: busy+paused {row['events']} s in the events, "
            f"but its episodes ran {row['episodes']} s on it (start to end)",
        )
    idle = result.summary()["rollouter/idle_ratio"]
    if T > 0 and math.isfinite(idle):
        busy = float(both["events"].sum())
        total = busy + idle * n_slots * T
        if abs(total - n_slots * T) > 1e-6 * n_slots * max(1.0, T):
            _fail(
                "time conservation",
                f"busy+paused {busy} s + idle {idle} x {n_slots} slots x {T} s = {total} s, "
                f"not {n_slots} x {T} s",
            )
