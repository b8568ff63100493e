"""When a multi-turn run's slots, not its engines, look like its limit: :func:`tool_slot_note`
and :class:`ToolSlotWarning`, which :func:`~pipesim.compute.cluster.run_compute` warns. An
episode keeps its replica slot through its tool calls (vLLM runs only what is on the engine), so
with the default ``max_num_seqs`` slots a replica whose episodes mostly wait on tools decodes a
fraction of ``max_num_seqs`` (a run or plan spec's ``model.episodes_per_replica`` raises it). A
plan does not let its runs warn: it records each run's verdict and names the designs in its report
(:mod:`pipesim.plan.slots`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from pipesim.compute.compute_run import ComputeRun

__all__ = ["TOOL_SLOT_RESIDENT_SHARE", "ToolSlotWarning", "tool_slot_note"]


class ToolSlotWarning(UserWarning):
    """A multi-turn run whose episodes in tool calls held its replicas' slots while the engines
    decoded well under ``max_num_seqs`` (:func:`tool_slot_note`): more slots per replica would
    likely run more episodes at once."""


TOOL_SLOT_RESIDENT_SHARE = 0.5
""":func:`tool_slot_note` speaks when the engines' mean resident sequences are under this share of
``max_num_seqs``."""


def tool_slot_note(run: ComputeRun) -> str | None:
    """Why ``run`` looks held back by its slots rather than its engines, one line; None otherwise.

    Said when the run made tool calls, started more episodes than it has slots, held every slot at
    once for at least half of the time it held any (the slots, not the admission rule, looked like
    the limit), its replicas' mean resident sequences (the summary's ``concurrency_mean`` over the
    replicas) were under :data:`TOOL_SLOT_RESIDENT_SHARE` of ``max_num_seqs``, and the slots held
    off the GPU (in tool calls, or queued) outnumbered the resident ones. It cannot tell whether
    the admission rule would have started more episodes given room: a heuristic, as the text says.
    The text holds no measured figure (the settings only), so a plan's many runs of one spec say
    it once."""
    engines, T = run.engines, run.result.sim_time_s
    if T <= 0 or not engines or sum(e["tool_calls"] for e in engines) == 0:
        return None
    c = run.cluster
    n_rep, mns = c.n_replicas, c.engine.max_num_seqs
    n_slots = run.result.scenario.pipeline.n_slots
    resident = sum(e["mean_running"] * e["busy_share"] for e in engines)  # over the run, all replicas
    if resident >= TOOL_SLOT_RESIDENT_SHARE * mns * n_rep:
        return None
    cols = run.result.columns
    start = cols.start_s
    end = np.where(np.isfinite(cols.end_s), cols.end_s, T)
    ok = np.isfinite(start)
    start, end = start[ok], np.maximum(end[ok], start[ok])
    if start.size <= n_slots:  # every episode the run started had a slot of its own
        return None
    held_mean = float(np.sum(end - start)) / T
    if held_mean <= 2 * resident:  # the places held off the GPU do not outnumber the resident ones
        return None
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones(start.size), -np.ones(end.size)])
    order = np.lexsort((steps, times))  # at one instant, ends before starts
    times, held = times[order], np.cumsum(steps[order])
    span = np.diff(times, append=times[-1])
    full, active = float(span[held >= n_slots].sum()), float(span[held > 0].sum())
    if active <= 0 or full < 0.5 * active:
        return None
    per = n_slots // n_rep
    return (
        f"episodes waiting on tool calls held every slot ({per:,} per replica) for much of the run, "
        f"while each replica decoded under {TOOL_SLOT_RESIDENT_SHARE:.0%} of its max_num_seqs "
        f"({mns:,}) on average: an episode keeps its slot through a tool call, so the slots, not the "
        "engines, may have limited the run; raise the slots per replica (a run or plan spec's "
        "model.episodes_per_replica, run_compute's slots_per_replica; default max_num_seqs) "
        "(docs/compute.md, Multi-turn episodes)"
    )
