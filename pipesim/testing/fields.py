"""An episode's fields against the run's own books (a kit invariant).

A policy sees the kernel's episodes as plain objects (``select`` gets the buffer's list), and
Python does not stop ``ep.version = 0``: the run goes on, and its staleness, its tables and its
figures are computed from the edited fields. The kernel does not copy every episode to guard it
(that would cost every run for a mistake few make); the kit checks afterwards, from what the run
recorded elsewhere, that each episode's fields are the ones the kernel gave it:

* **identity**: the ``i``-th launched episode has id ``i`` (the kernel numbers them in order), and
  (slots engine) its replica and slot are among the scenario's;
* **version**: an episode's ``version`` is the version its replica ran when it started, replayed
  from the update log: 0, then every update that applies to the replica (``replica`` -1 or its
  own) up to ``update_from``, the log's length when it started;
* **start**: ``start_s`` lies between the update before it and the one after
  (``update_from`` counts the updates logged by then, and the log is appended in time order);
* **time**: a finished episode (trained, buffered or discarded) of the slots engine spent exactly
  its generated seconds on the slot, plus any re-prefill, outside the pauses of its replica:
  ``end_s - start_s`` less the paused time equals ``duration_s`` (capped by a timeout) plus
  ``reprefill_s``. The compute engine writes ``duration_s`` from the same clock at the end, so
  it is not checked here.

An edit that keeps all of these (``task_id``, which no other record holds) is not seen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pipesim.core.episode import BUFFERED, DISCARDED, TRAINED

if TYPE_CHECKING:
    from pipesim.core.episode import UpdateRecord
    from pipesim.results.run import RunResult

FINISHED = (TRAINED, BUFFERED, DISCARDED)
"""The statuses of an episode that generated to its end (a discarded one was finished, then dropped)."""

LIMIT = 5
"""Errors listed per check (the count says how many more)."""


def episode_field_errors(result: RunResult) -> list[str]:
    """What in the episodes' fields disagrees with the run's books (empty: nothing)."""
    eps, updates = result.episodes, list(result.updates)
    for i, ep in enumerate(eps):
        if ep.id != i:
            return [f"episode {i} launched has id {ep.id!r}"]  # everything after is read through ids
    if result.engine == "slots":
        reps = result.scenario.replicas
        n = reps.n_replicas if reps is not None else 1
        if wrong := [ep for ep in eps if not 0 <= ep.replica < n]:
            return [f"episode {ep.id}: replica {ep.replica!r} of {n} (0..{n - 1})" for ep in wrong]
        slots = result.scenario.pipeline.n_slots
        if wrong := [ep for ep in eps if not 0 <= ep.slot < slots]:
            return [f"episode {ep.id}: slot {ep.slot!r} of {slots} (0..{slots - 1})" for ep in wrong]
    bad = _version_and_start_errors(result)
    if result.engine == "slots":
        bad += _time_errors(result, updates)
    return bad


def _version_and_start_errors(result: RunResult) -> list[str]:
    """Episodes whose version is not the one their replica ran at ``update_from`` (the run's own
    :class:`~pipesim.results.columns.UpdateIndex`, as ``newest_versions`` reads it, from 0), or
    whose start lies outside the updates around that index."""
    c, u = result.columns, result.update_index
    if c.n == 0:
        return []
    k, m = c.update_from.astype(np.int64), u.m
    if (outside := np.nonzero((k < 0) | (k > m))[0]).size:
        return [
            f"episode {i}: update_from {int(k[i])} outside the update log (0..{m})" for i in outside.tolist()
        ]
    zero = np.zeros(c.n, dtype=np.int64)
    expect = u.newest_version(u.rows(c.replica), zero, k, zero)
    v, r = c.version, c.replica
    bad = [
        f"episode {i}: version {int(v[i])}, its replica {int(r[i])} ran {int(expect[i])} at its start"
        for i in np.nonzero(v != expect)[0].tolist()
    ]
    if m:
        start = c.start_s
        after_prev = (k == 0) | (u.end_s[np.maximum(k - 1, 0)] <= start)
        before_next = (k == m) | (start <= u.end_s[np.minimum(k, m - 1)])
        bad += [
            f"episode {i}: start_s {float(start[i])!r} is not where update {int(k[i])} of the log places it"
            for i in np.nonzero(~(after_prev & before_next))[0].tolist()
        ]
    return bad


def _time_errors(result: RunResult, updates: list[UpdateRecord]) -> list[str]:
    """Finished episodes whose time on the slot is not their generated seconds plus re-prefill."""
    c = result.columns
    if c.n == 0:
        return []
    codes = [i for i, name in enumerate(c.status_names) if name in FINISHED]
    end = c.end_s
    keep = np.isin(c.status, codes) & ~np.isnan(end) & (c.lost_s == 0)
    start, replica = c.start_s, c.replica
    on_slot = end - start
    for r in np.unique(replica[keep]).tolist():
        mine = keep & (replica == r)
        pauses = [(u.start_s, u.end_s) for u in updates if u.paused and u.applies_to(r)]
        on_slot[mine] -= _paused_within(pauses, start[mine], end[mine])
    want = result.generated_s + c.reprefill_s
    tol = 1e-9 * max(1.0, result.sim_time_s)
    bad = []
    for i in np.nonzero(keep & (np.abs(on_slot - want) > tol))[0].tolist():
        extra = f" + re-prefill {float(c.reprefill_s[i])!r}" if c.reprefill_s[i] else ""
        bad.append(
            f"episode {i}: {float(on_slot[i])!r} s on its slot outside pauses, "
            f"for duration_s {float(result.generated_s[i])!r}{extra}"
        )
    return bad


def _paused_within(pauses: list[tuple[float, float]], start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per interval ``[start, end)``, the seconds the ``pauses`` cover of it. Disjoint pauses (the
    usual log) go through their cumulative total, O(log P) per interval; overlapping ones are
    summed pairwise, in chunks, as the engine would charge each."""
    if not pauses:
        return np.zeros(len(start))
    s, e = (np.asarray(x, dtype=np.float64) for x in zip(*sorted(pauses), strict=True))
    if len(s) == 1 or (s[1:] >= e[:-1]).all():
        cum = np.concatenate(([0.0], np.cumsum(e - s)))

        def covered(t: np.ndarray) -> np.ndarray:  # pause seconds in [0, t)
            k = np.searchsorted(s, t, side="right")  # pauses starting at or before t
            last = np.maximum(k - 1, 0)
            part = np.where(k > 0, np.clip(t - s[last], 0.0, e[last] - s[last]), 0.0)
            return cum[last] * (k > 0) + part

        return covered(end) - covered(start)
    out = np.empty(len(start))
    for lo in range(0, len(start), 4096):
        a, b = start[lo : lo + 4096, None], end[lo : lo + 4096, None]
        out[lo : lo + 4096] = np.clip(np.minimum(e, b) - np.maximum(s, a), 0.0, None).sum(axis=1)
    return out


def first(bad: list[str]) -> str:
    """The first few of ``bad``, and how many more."""
    more = f" (and {len(bad) - LIMIT} more)" if len(bad) > LIMIT else ""
    return "; ".join(bad[:LIMIT]) + more


__all__ = ["episode_field_errors", "first"]
