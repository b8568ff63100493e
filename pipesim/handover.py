"""Hand-over: the commonest instant of an asynchronous run, done in one step by the slots process.

In a run with spare staleness budget (eta >= 1 with partial rollouts, say) nearly every instant
looks the same: one episode finishes, nothing else happens at that time, and the controller
starts the next task on the slot it freed. Done the general way, that instant passes through
five layers -- ``Slots._finish_due``, ``Pipeline.on_finished``, ``EpisodeBuffer.put``, the
controller pass and ``Slots.start`` -- each re-reading the pipeline's state, and at 64 slots those
layers cost more than SimPy itself. :func:`make_handover` builds, once per replica, a function
that does exactly the same steps for that one shape of instant with the state it needs bound
once, and declines (returns False, having changed nothing) whenever the instant has any other
shape; the general path then handles it.

The steps, in the order the general path takes them: the episode leaves its slot (the slot goes
to the free heap) and joins the buffer, finished at ``now``; then the end-of-instant pass runs
inline, since nothing else is scheduled at ``now``: if the run is over, admission is blocked, or
the next start is unusual (a requeued task, an exhausted pool, a progress guard about to trip),
the general pass runs; otherwise the admission policy decides, and a yes starts the next task
from the pool on the lowest free slot -- the one just freed, since no other was free. Last, the
trainer's waiting request is served if a batch may be ready. Policies see the same state at the
same moments as on the general path; ``tests/test_engine_paths.py`` checks that the traces are
equal on every policy family.

It is used only where the general path would run the pass inline too: one replica (no routing),
no episode lifecycle (timeouts, failures), no subclass overriding ``launch``,
``episode_duration_s`` or ``on_finished``; ``Pipeline.handover = False`` turns it off.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING

from pipesim.episode import BUFFERED, Episode

if TYPE_CHECKING:
    from pipesim.slots import Slots


def make_handover(slots: Slots) -> Callable[[float], bool] | None:
    """The hand-over function of ``slots``' replica, or None where the pipeline does not allow one.

    The function takes the current time, at which the slots process just woke for the episode at
    the top of its heap, and returns whether it handled the instant.
    """
    p = slots.p
    if not p.handover:
        return None
    env, buffer = p.env, p.buffer
    # the records (episodes, updates, the buffer's items) are read at each call, not bound here:
    # Pipeline.release() hands them over to the result, and this function must not keep them
    peek, get_queue, batch_ready, durations = env.peek, buffer.get_queue, buffer.ready, p._durations
    n_pool, steps, launch_limit = len(durations), p.config.steps, p._launch_limit
    admits, blocks = p.admission.admits, p.weight_update.blocks_admission
    free, index = slots.free, slots.index
    heappop, heappush = heapq.heappop, heapq.heappush

    def handover(now: float) -> bool:
        running = slots.running
        if free or slots.behind or p._pass_due or slots.paused_since is not None:
            return False  # another slot is free, quiet completions are pending, or a pass is due
        offset = slots.offset
        e = running[0][2]
        if e.start_s + e.work_s + (offset - e.offset_start) > now:
            return False
        n = len(running)
        if n > 1:  # the next-earliest episode (a child of the heap's root) must not be due now too
            nxt = running[1] if n == 2 or running[1] < running[2] else running[2]
            e2 = nxt[2]
            if e2.start_s + e2.work_s + (offset - e2.offset_start) <= now:
                return False
        if peek() <= now:
            return False  # something else happens at this instant: the pass waits for its end
        # the episode finishes (Slots._finish_due, EpisodeBuffer.put)
        heappop(running)
        free.append(e.slot)  # the free heap was empty: appending keeps it a heap
        e.end_s = now
        e.update_to = n_upd = len(p.updates)
        e.status = BUFFERED
        (items := buffer.items).append(e)
        slots._target = None
        # the end-of-instant pass (Pipeline._controller_pass), for the one free slot
        started, task = p.started, p.next_task
        first = p._instant_first if now == p._instant else started
        if (
            p.finished
            or p.version >= steps
            or blocks(p)
            or p.requeued
            or task >= n_pool
            or started - first >= launch_limit  # the progress guards of Pipeline.launch
            or started - p._started_at_batch >= launch_limit
        ):
            p._controller_pass(now)  # the general pass decides (and raises if it must)
        else:
            p._instant, p._instant_first = now, first
            if admits(p):
                p.next_task = task + 1
                ep = Episode(started, task, durations[task], slots.version)
                p.started = started + 1
                p.episodes.append(ep)
                ep.slot = free.pop()
                ep.replica = index
                ep.start_s = now
                ep.update_from = n_upd
                ep.offset_start = offset
                heappush(running, ((now - offset) + ep.work_s, started, ep))
                p.admission_refused = False  # the loop ended for want of a free slot
            else:
                p.admission_refused = True
            if get_queue and (batch_ready is None or batch_ready(items, p)):
                buffer.serve()
        if not running:
            slots.signal_drained()  # after the pass, as Slots._finish_due does
        return True

    return handover
