"""Hand-over: the commonest instant of an asynchronous run, done in one step by the slots process.

In a run with spare staleness budget (eta >= 1 with partial rollouts, say) nearly every instant
looks the same: one episode finishes, nothing else happens at that time, and the controller
starts the next task on the slot it freed. Done the general way, that instant passes through
five layers -- ``Slots._finish_due``, ``Pipeline.on_finished``, ``EpisodeBuffer.put``, the
controller pass and ``Slots.start`` -- each re-reading the pipeline's state, and at 64 slots those
layers cost more than SimPy itself. :func:`make_handover` builds, once per replica, a function
that does exactly the same steps for that one shape of instant with the state it needs bound
once, and declines (returns -1.0, having changed nothing) whenever the instant has any other
shape; the general path then handles it.

The instant has that shape when no other slot is free, no pass is due, the episode at the top
of the running heap is the one the process slept for (not a later one, past quiet completions),
no other SimPy event is scheduled at ``now`` and the next-earliest episode is not due at ``now``
too. Its steps, in the order the general path takes them: the episode leaves its slot (the slot
goes to the free heap) and joins the buffer, finished at ``now``; then the end-of-instant pass
runs inline: if the run is over, admission is blocked, or the next start is unusual (a requeued
task, an exhausted pool, a progress guard about to trip), the general pass runs; otherwise the
admission policy decides, and a yes starts the next task from the pool on the lowest free slot
-- the one just freed, since no other was free. Last, the trainer's waiting request is served if
a batch may be ready, and the process is re-armed for the new heap top, as ``Slots.rearm`` would
do it (no completion is quiet right after the policy said yes). Policies see the same state at
the same moments as on the general path; ``tests/test_engine_paths.py`` checks that the traces
are equal on every policy family.

It is used only where the general path would run the pass inline too: one replica (no routing),
no episode lifecycle (timeouts, failures) and no episode source (:mod:`pipesim.core.seams`);
``EngineOptions(handover=False)`` turns it off.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING

from pipesim.core.episode import BUFFERED, Episode

if TYPE_CHECKING:
    from pipesim.core.slots import Slots


def make_handover(slots: Slots) -> Callable[[float], float] | None:
    """The hand-over function of ``slots``' replica, or None where the pipeline does not allow one.

    The function takes the current time, at which the slots process just woke for the episode at
    the top of its heap. It returns -1.0 where it declines the instant; where it handles it, it
    also re-arms the process (as ``Slots.rearm`` does) and returns the time of the next wake.
    """
    p = slots.p
    if not p.handover:
        return None
    env, buffer = p.env, p.buffer
    # the records (episodes, updates, the buffer's items) are read at each call, not bound here:
    # Pipeline.release() hands them over to the result, and this function must not keep them
    peek, get_queue, batch_ready, durations = env.peek, buffer.get_queue, buffer.ready, p._durations
    steps, launch_limit = p.config.steps, p._launch_limit
    admits, blocks = p.admission.admits, p.weight_update.blocks_admission
    free, index = slots.free, slots.index
    heappop, heappush = heapq.heappop, heapq.heappush

    def handover(now: float) -> float:
        running = slots.running
        if free or p._pass_due:
            return -1.0  # another slot is free, or a pass is due at this instant
        if running[0] is not slots._target:
            return -1.0  # the process slept past quiet completions, or its target was reset
        # the top is due now: the process wakes at its exact end, and whatever moves an end re-arms
        # the process (a pause, a resume, a stretch) or resets its target (a catch-up, an abort);
        # the process is not paused either (it sleeps without a timer while it is)
        if peek() <= now:
            return -1.0  # something else happens at this instant: the pass waits for its end
        offset = slots.offset
        entry = heappop(running)
        e = entry[2]
        if running:  # the next-earliest episode must not be due now too
            e2 = running[0][2]
            if e2.start_s + e2.work_s + (offset - e2.offset_start) <= now:
                heappush(running, entry)  # as it was (the heap's order is its keys' order)
                return -1.0
        # the episode finishes (Slots._finish_due, EpisodeBuffer.put)
        free.append(e.slot)  # the free heap was empty: appending keeps it a heap
        e.end_s = e.start_s + e.work_s + (offset - e.offset_start)  # its due time (<= now)
        e.update_to = n_upd = len(p.updates)
        e.status = BUFFERED
        (items := buffer.items).append(e)
        # the end-of-instant pass (Pipeline._controller_pass), for the one free slot; the progress
        # guards of Pipeline.launch first (a zero-time relaunch loop, no batch for too long)
        started, task = p.started, p.next_task
        if now != p._instant:
            p._instant, p._instant_first = now, started  # as the pass and launch() would set them
            looping = False
        else:
            looping = started - p._instant_first >= launch_limit
        if (
            p.version >= steps  # the run is over (or ends at this pass)
            or blocks(p)
            or p.requeued
            or task >= len(durations)
            or looping
            or started - p._started_at_batch >= launch_limit
        ):
            slots._target = None
            p._controller_pass(now)  # the general pass decides (and raises if it must)
            if not running:
                slots.signal_drained()  # after the pass, as Slots._finish_due does
            return slots.rearm(now)
        if not admits(p):
            p.admission_refused = True
            if get_queue and (batch_ready is None or batch_ready(items, p)):
                buffer.serve()
            if not running:
                slots.signal_drained()
            return slots.rearm(now)  # quiet completions may follow
        p.next_task = task + 1
        # started on the slot just freed (Slots.start): the lowest free one, since no other is
        d = durations[task]
        ep = Episode(started, task, d, slots.version, -1, free.pop(), index, now, n_upd, offset)
        p.started = started + 1
        p.episodes.live[started] = ep
        heappush(running, ((now - offset) + d, started, ep))
        p.admission_refused = False  # the loop ended for want of a free slot
        if get_queue and (batch_ready is None or batch_ready(items, p)):
            buffer.serve()
        # the re-arm (Slots.rearm, with no quiet completions: the policy just said yes)
        top = running[0]
        slots._target = top
        e = top[2]
        at = e.start_s + e.work_s + (offset - e.offset_start)
        return at if at > now else now

    return handover
