"""Completions: how finished episodes leave a replica's slots, and in what order they are reported.

:class:`SlotCompletions` is the base of :class:`~pipesim.core.slots.Slots` that takes what is due
off the heaps. It holds no state of its own: the heaps, the free slots and the clock are the
replica's (declared below), and the process that decides *when* to look stays in
:mod:`pipesim.core.slots`. What it promises:

* **Each episode ends at its own due time.** :meth:`SlotCompletions.pop_due` takes every episode
  due by ``now`` off the heaps, frees its slot and sets its end to its due time, which is ``now``
  unless the process slept past it as a quiet completion (:mod:`pipesim.core.quiet`; no weight
  update can have happened since, so its update range is the same either way).
* **One finishing order.** Episodes finished together reach the buffer by end time, ties by id
  (:func:`finishing_order`): the chapter's order, whose ``running`` dict yields ties in start
  order.
* **One order across replicas.** With several replicas, whichever looks at an instant first (its
  wake-up, or a pause) finishes what *every* running replica has due then
  (:func:`finish_together`) and reports it once. Otherwise same-instant completions on two
  replicas would reach the buffer in the order SimPy fires their wake-ups, which depends on when
  each was scheduled (a pause of every replica re-arms them in index order). Where nothing else is
  scheduled by now, this replica's completions are the only ones, and it finishes its own alone.
* **A drain is signalled where the heaps empty** (:meth:`SlotCompletions.signal_drained`), so a
  weight update waiting on ``drained()`` resumes at the instant the last episode finishes.

Split out of :mod:`pipesim.core.slots` (past 400 lines) along this seam: slots says when the
replica looks; this module says what it finds and how it reports it.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any

from pipesim.core.epochs import Entry, Head, pop_old

if TYPE_CHECKING:
    import simpy

    from pipesim.core.clock import Clock
    from pipesim.core.engine import Pipeline
    from pipesim.core.episode import Episode, UpdateRecord
    from pipesim.core.slots import Slots

__all__ = ["SlotCompletions", "finish_together", "finishing_order"]


class SlotCompletions:
    """Finishing what is due on one replica's slots (module docstring); the replica's state is
    declared here and set by :class:`~pipesim.core.slots.Slots`."""

    p: Pipeline
    env: Clock
    free: list[int]
    accepting: bool
    paused_since: float | None
    _updates: list[UpdateRecord]
    _cur: list[Entry]
    _old: list[Head]
    _target: tuple[float, int, Any] | None  # the (due, id, ...) the process sleeps until
    _drained: simpy.Event | None

    def _finish_due(self, now: float, in_pass: bool = False, awake: Slots | None = None) -> None:
        """Finish every episode due by ``now`` (the current time), in finishing order; ties go to
        the buffer in start order, as in the chapter. Every episode ends at its own due time,
        quiet completions the process slept past included (no weight update can have happened
        since: see catch_up).

        With several replicas, the first of them to look at an instant (its wake-up, or a pause)
        finishes what every replica has due by then, in one finishing order
        (:func:`finish_together`), unless nothing else is scheduled by now: otherwise
        same-instant completions on two replicas would reach the buffer in the order SimPy fires
        their wake-ups, which depends on when each was scheduled (a pause of every replica
        re-arms them in index order)."""
        if (group := self.p.slot_group) is not None and not self.env.free_until(now):
            # another replica may have something due now: its wake-up (or interrupt) is then in
            # the queue by now, so a free queue means this replica's completions are the only ones
            self._target = None
            finish_together(group, now, in_pass, awake)
            return
        # finish_together((self,), ...) does what follows; inlined, as this is the path of every
        # completion that is not taken in place (a call and a loop more cost 7% of such a run)
        done = self.pop_due(now)
        self._target = None
        if not done:
            return
        if len(done) > 1:
            done.sort(key=finishing_order)
        self.p.on_finished(done, now, in_pass, awake)
        if not (self._cur or self._old):
            self.signal_drained()

    def pop_due(self, now: float) -> list[Episode]:
        """Take every episode due by ``now`` off the slots, each ending at its own due time (in
        heap order; the caller sorts them into finishing order). Reports nothing."""
        cur, old, free = self._cur, self._old, self.free
        n_upd = len(self._updates)
        done = []
        while True:  # the first due: the current epoch's top (due at its key) or an epoch head
            if old and (not cur or old[0] < cur[0]):
                if (due := old[0][0]) > now:
                    break
                e = pop_old(old)[1][2]
            elif cur and (due := cur[0][0]) <= now:
                e = heappop(cur)[2]
            else:
                break
            heappush(free, e.slot)
            e.end_s = due  # its own end (== now, unless a quiet completion the process slept past)
            e.update_to = n_upd
            done.append(e)
        if done:
            self.accepting = self.paused_since is None
        return done

    def signal_drained(self) -> None:
        """Succeed the pending ``drained()`` event, if any (the caller knows nothing is running)."""
        if self._drained is not None:
            ev, self._drained = self._drained, None
            ev.succeed()


def finishing_order(ep: Episode) -> tuple[float, int]:
    """The buffer's order for episodes finished together: by end time, ties by id (start order)."""
    return ep.end_s, ep.id  # type: ignore[return-value]  # end_s is set: the episode finished


def finish_together(group: list[Slots], now: float, in_pass: bool, awake: Slots | None) -> None:
    """Finish what every running replica of ``group`` (all of a pipeline's replicas) has due by
    ``now`` (a paused one has nothing due: its virtual clock stands still), and report it to the
    pipeline once, in finishing order: same-instant completions reach the buffer in start order
    whichever replica looks first. The other replicas' wake-ups at ``now``
    still fire, find nothing due and re-aim; their targets are left alone (a start that would
    finish sooner still interrupts them, as :meth:`~pipesim.core.slots.Slots.kick` decides)."""
    done: list[Episode] = []
    for replica in group:
        if (replica._cur or replica._old) and replica.paused_since is None:  # a paused clock stands still
            done += replica.pop_due(now)
    if not done:
        return
    if len(done) > 1:
        done.sort(key=finishing_order)
    group[0].p.on_finished(done, now, in_pass, awake)
    for replica in group:
        if not (replica._cur or replica._old):
            replica.signal_drained()
