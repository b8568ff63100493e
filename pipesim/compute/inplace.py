"""A replica's batch changes handled in place, without a SimPy event each.

:class:`~pipesim.compute.driver.ReplicaDriver` turns its next batch change into one pending wakeup
on SimPy's queue. When that change comes strictly before every other queued event, SimPy would pop
it next and do nothing else in between, so :func:`drive` handles it at once instead: it sets the
clock as :meth:`simpy.Environment.step` would and runs the change, again and again while the
replica stays first, and arms a timeout only for the first change that does not (or when the
replica's ``handle_in_place`` is off, the reference the tests compare against). The replica's own
tool returns that come first are taken on the way, and its own superseded timeouts dropped.

This module owns that loop and nothing else: the decision of what is first in SimPy's queue and
how to step past it, kept apart from the driver's timer, finishing and tool-call bookkeeping,
which it calls back (``_step``, ``_arm_at``, ``_settle_later``, ``_advance``, ``_snap_tokens``).
:meth:`ReplicaDriver._drive <pipesim.compute.driver.ReplicaDriver._drive>` calls it, so a subclass
that overrides ``_drive`` still replaces it. Results are bit-identical either way
(``tests/test_compute_engine.py``, ``tests/test_compiled.py``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipesim.compute.driver import ReplicaDriver


def drive(r: ReplicaDriver, now: float) -> None:
    """Handle the batch change due now; then, while this replica's next change comes strictly
    before every other event in SimPy's queue, handle it here at its instant instead of
    through a timeout of its own, and arm a timeout for the first one that does not.

    That is exactly what SimPy would do with the timeout: it would pop it next (nothing else
    is due before it, nor at the same instant, where a queued event's lower id would go
    first), set its clock to ``now + delay`` and call the replica's ``_on_timer``. Setting the
    clock (:meth:`~pipesim.core.clock.Clock.advance_to`, as :meth:`simpy.Environment.step` does)
    and handling the change directly leaves every result bit-identical and saves an event,
    its heap push and its pop; in a closed loop on one replica the whole run is one event.
    This replica's own superseded timeouts at the head of the queue are dropped on the way
    (popped, they would do nothing).
    (``pipesim/core/slots.py`` takes its wake-ups in place in the same spirit, and the
    kernel's ``Pipeline.on_finished`` runs its controller pass in place on the same test,
    :meth:`~pipesim.core.clock.Clock.free_until`.)
    """
    env = r.env
    on_timer, on_tool, tooling = r._on_timer_cb, r._on_tool_cb, r.tooling
    while True:
        at = r._step(now, rearm=False)
        if at == math.inf:
            return
        if not r.handle_in_place:  # the reference: every change through a timeout
            timer = env.timeout(at - now if at > now else 0.0)
            timer.callbacks.append(on_timer)  # type: ignore[union-attr]
            r._timer = timer
            return
        t = now + (at - now) if at > now else now + 0.0  # when SimPy's timeout would fire
        at_t = True  # the next change is the one planned for t (not a tool return before it)
        # what SimPy would pop before t (float(): a user's numpy time makes SimPy's clock a
        # numpy float, whose comparison is a numpy bool; the compiled build wants a bool)
        while (head := env.first_due(t)) is not None:
            tt, cb, seq = head
            if cb is on_timer:  # this replica's superseded timeout: popped, it does nothing
                env.drop_first()
                continue
            if cb is not on_tool or float(tt) >= t:
                r._arm_at(t)  # someone else's event comes first
                return
            # this replica's tool call returns first: what SimPy and _on_tool would do
            env.drop_first()
            env.advance_to(tt)
            now = tt
            if seq not in tooling:
                continue  # taken off the replica during the call
            del tooling[seq]
            r.waiting.append(seq)
            if r._settle_pending or not env.free_until(now):
                if not r._settle_pending:  # others at this instant: settle after them
                    r._settle_later()
                r._arm_at(t)
                return
            at_t = False
            break
        if at_t:
            env.advance_to(t)
            now = t
            r._advance(now)
            target = r._target_v  # _snap(now, force=True), inlined
            if r.v != target < math.inf:
                r._snap_tokens(now, target)
        else:
            r._advance(now)
