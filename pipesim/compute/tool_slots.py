"""When a multi-turn run's slots, not its engines, look like its limit: :func:`tool_slot_note`
and :class:`ToolSlotWarning`, which :func:`~pipesim.compute.cluster.run_compute` warns. An
episode keeps its replica slot through its tool calls (vLLM runs only what is on the engine), so
with the default ``max_num_seqs`` slots a replica whose episodes mostly wait on tools decodes a
fraction of ``max_num_seqs`` (a run or plan spec's ``model.episodes_per_replica`` raises it). A
plan does not let its runs warn: it records each run's verdict and names the designs in its report
(:mod:`pipesim.plan.slots`).

**The criterion: admitted episodes waiting for a slot** (:func:`slot_waits`). The records hold
when each episode took a slot and gave it back, not when it was ready, but a start tells on itself.
Routing only picks a replica with a free slot, so an episode that starts at an instant when every
slot of the cluster was held (one ended then and gave it its place) was let in before: it waited
for a slot, not for the admission rule. It waited since the slots were last all held, but not
since before the last weight update or training pause began or ended (where admission rules open
and close). Two shares of the time any slot was held come of it:

* ``delay_share``: how much sooner the slots would have been free had each episode that waited
  started when it was let in, its duration unchanged: the tail a synchronous step gained for
  having waited (0 with a slot for every episode).
* ``wait_share``: how long some admitted episode waited. An asynchronous run whose slots never
  empty has no tail to shorten, and there the slots held back episodes for most of the run.

The note speaks when the run made tool calls (a single-turn run's slots are the engines' own
``max_num_seqs``), its engines had room to decode more (mean resident sequences under
:data:`TOOL_SLOT_RESIDENT_SHARE` of ``max_num_seqs``: a full engine decodes no faster with more
episodes waiting on it), and ``delay_share`` reached :data:`TOOL_SLOT_DELAY_SHARE` or
``wait_share`` :data:`TOOL_SLOT_WAIT_SHARE`. It used to ask instead that every slot be held for
half the time any was, which a synchronous step with a long tail of tool calls never meets: on
Qwen2.5-7B, 64 H100s, 4 turns of 5 s tools, 256 samples a step, TP 2 with 4 slots a replica held
every slot 34% of the time and ran 16% slower than with 256 slots, without a note. Slots are not
the only bound: it cannot tell whether the trainer, not the rollout, bounds an asynchronous run,
nor whether more residents would slow each decode step; a heuristic, as its text says. Over 300
random synchronous agent runs on small clusters (Qwen3-0.6B, 1 to 8 replicas, a quarter to 97% of a
slot per sample), every run it named ran at least 3% faster with a slot per sample, and none it
passed over with its engines under half full ran more than 5% faster; its engine gate is
conservative (some runs at or over half of ``max_num_seqs`` did).
``tests/test_toolslots2_criterion.py`` holds the property.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pipesim.compute.compute_run import ComputeRun

__all__ = [
    "TOOL_SLOT_DELAY_SHARE",
    "TOOL_SLOT_RESIDENT_SHARE",
    "TOOL_SLOT_WAIT_SHARE",
    "SlotWaits",
    "ToolSlotWarning",
    "slot_waits",
    "tool_slot_note",
]


class ToolSlotWarning(UserWarning):
    """A multi-turn run whose admitted episodes waited for a slot (long enough to delay the rollout,
    or for half of it) while the engines decoded well under ``max_num_seqs`` (:func:`tool_slot_note`):
    more slots per replica would likely run more episodes at once."""


TOOL_SLOT_RESIDENT_SHARE = 0.5
""":func:`tool_slot_note` speaks only when the engines' mean resident sequences are under this share
of ``max_num_seqs``."""

TOOL_SLOT_DELAY_SHARE = 0.05
""":func:`tool_slot_note` speaks when the waits for a slot made the rollout at least this share
longer than it would have been (:attr:`SlotWaits.delay_share`) ..."""

TOOL_SLOT_WAIT_SHARE = 0.5
"""... or when an admitted episode waited for a slot for at least this share of it
(:attr:`SlotWaits.wait_share`)."""


@dataclass(frozen=True)
class SlotWaits:
    """How long a run's admitted episodes waited for a slot (:func:`slot_waits`), as shares of the
    time any slot was held (``held_s``: the rollout's busy time, weight updates it held through
    included)."""

    held_s: float
    """The time at least one slot was held."""
    wait_share: float
    """The share of ``held_s`` during which at least one admitted episode waited for a slot."""
    delay_share: float
    """The share of ``held_s`` the waits added: ``held_s`` less the time slots would have been held
    had every episode that waited started when it was let in (its duration unchanged), over
    ``held_s``. A synchronous step's tail: the time its last episodes ended later for having
    waited. Near 0 where the slots were always busy anyway (an asynchronous run that never
    drains), where ``wait_share`` speaks."""


NO_WAITS = SlotWaits(0.0, 0.0, 0.0)


def _admission_bounds(run: ComputeRun) -> np.ndarray:
    """The sorted instants where an admission rule may open or close: every weight update's and
    training pause's start and end."""
    res = run.result
    b = [t for u in res.updates for t in (u.start_s, u.end_s)]
    b += [t for s in res.sync_log for t in s[:2]]
    return np.unique(np.asarray(b, dtype=np.float64))


def _union_s(lo: np.ndarray, hi: np.ndarray) -> float:
    """The length of the union of the intervals ``[lo, hi)``."""
    if lo.size == 0:
        return 0.0
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    cut = np.nonzero(np.r_[True, lo[1:] > reach[:-1]])[0]  # each piece's first interval
    return float(np.sum(reach[np.r_[cut[1:] - 1, lo.size - 1]] - lo[cut]))


def slot_waits(run: ComputeRun) -> SlotWaits:
    """How long ``run``'s admitted episodes waited for a slot (the module docstring says why a
    start tells that it waited, and since when).

    Every start and end is an event at its instant (ends first at one instant). A start where all
    ``n_slots`` were held just before its instant waited from the latest of the instant the slots
    were last all held and the last admission bound (:func:`_admission_bounds`). O(n log n) in the
    episodes, no loop over them. :data:`NO_WAITS` for a run that never started more episodes than
    it had slots."""
    res = run.result
    T, n_slots = res.sim_time_s, res.scenario.pipeline.n_slots
    cols = res.columns
    ok = np.isfinite(cols.start_s)
    start = cols.start_s[ok]
    if start.size <= n_slots:  # every episode the run started had a slot of its own
        return NO_WAITS
    end = np.maximum(np.where(np.isfinite(cols.end_s[ok]), cols.end_s[ok], T), start)
    times = np.concatenate([start, end])
    step = np.concatenate([np.ones(start.size, np.int64), -np.ones(end.size, np.int64)])
    order = np.lexsort((step, times))  # at one instant, ends before starts
    times, step = times[order], step[order]
    held = np.cumsum(step)
    at, first = np.unique(times, return_index=True)  # the instants, and each one's first event
    instant = np.repeat(np.arange(at.size), np.diff(np.r_[first, times.size]))  # of each event
    after = held[np.r_[first[1:] - 1, times.size - 1]]  # slots held once the instant is over
    before = np.r_[0, after[:-1]]
    full = after >= n_slots
    # the instant each run of full instants began, carried forward
    began = np.maximum.accumulate(np.where(full & ~np.r_[False, full[:-1]], np.arange(at.size), -1))
    held_s = _union_s(start, end)
    starts = np.nonzero(step > 0)[0]  # the start events; order[e] is event e's episode
    k = instant[starts]
    waited = before[k] >= n_slots  # k >= 1 there, and the instant before it was full
    if held_s <= 0 or not waited.any():
        return SlotWaits(held_s, 0.0, 0.0)
    k = k[waited]
    bounds = _admission_bounds(run)
    j = np.searchsorted(bounds, at[k], side="right") - 1
    since = np.maximum(at[began[k - 1]], np.where(j >= 0, bounds[np.maximum(j, 0)], -np.inf))
    wait = np.zeros(start.size)
    wait[order[starts[waited]]] = at[k] - since
    # each moved interval lies in the old union ([since, start) was full), so the union shrinks
    moved_s = _union_s(start - wait, end - wait)
    return SlotWaits(held_s, _union_s(since, at[k]) / held_s, (held_s - moved_s) / held_s)


def tool_slot_note(run: ComputeRun) -> str | None:
    """Why ``run`` looks held back by its slots rather than its engines, one line; None otherwise.

    Said when the run made tool calls, its replicas' mean resident sequences (the summary's
    ``concurrency_mean`` over the replicas) were under :data:`TOOL_SLOT_RESIDENT_SHARE` of
    ``max_num_seqs``, and its admitted episodes' waits for a slot (:func:`slot_waits`) made the
    rollout at least :data:`TOOL_SLOT_DELAY_SHARE` longer or lasted at least
    :data:`TOOL_SLOT_WAIT_SHARE` of it. The text holds no measured figure (the settings only), so a
    plan's many runs of one spec say it once."""
    engines, T = run.engines, run.result.sim_time_s
    if T <= 0 or not engines or sum(e["tool_calls"] for e in engines) == 0:
        return None
    c = run.cluster
    n_rep, mns = c.n_replicas, c.engine.max_num_seqs
    resident = sum(e["mean_running"] * e["busy_share"] for e in engines)  # over the run, all replicas
    if resident >= TOOL_SLOT_RESIDENT_SHARE * mns * n_rep:
        return None
    w = slot_waits(run)
    if w.delay_share < TOOL_SLOT_DELAY_SHARE and w.wait_share < TOOL_SLOT_WAIT_SHARE:
        return None
    per = run.result.scenario.pipeline.n_slots // n_rep
    return (
        f"episodes waiting on tool calls keep their slots, and episodes the admission rule had let "
        f"in waited for a free one ({per:,} per replica) while each replica decoded under "
        f"{TOOL_SLOT_RESIDENT_SHARE:.0%} of its max_num_seqs ({mns:,}) on average: the slots, not "
        "the engines, may have limited the run; raise the slots per replica (a run or plan spec's "
        "model.episodes_per_replica, run_compute's slots_per_replica; default max_num_seqs) "
        "(docs/compute.md, Multi-turn episodes)"
    )
