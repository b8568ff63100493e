"""The generation slots of one inference-engine replica, as one SimPy process.

Running episodes sit in heaps by *epoch* (:mod:`pipesim.core.epochs`): those started since the
last pause in one heap keyed by their end, ``start + work``; those started between two earlier
pauses in one heap an epoch, keyed the same, with each epoch's head due time (the key plus each
pause since, added one at a time as the chapter's loop adds them) in a small heap of heads. A
pause costs O(live epochs), not O(episodes in flight). Free slots are a heap, so starting an
episode costs O(log n_slots) and no event ever scans the slots. The process sleeps until the
first due time; it is interrupted only when that target changes (an earlier episode starts, or
the replica pauses or resumes).

This module says *when* the replica looks. What it then finds due, and the one order in which it
reports it (across replicas too), is its base :class:`~pipesim.core.completions.SlotCompletions`
(:func:`~pipesim.core.completions.finish_together`, re-exported here).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Generator
from heapq import heappop, heappush, heapreplace
from typing import TYPE_CHECKING, Any

import simpy

from pipesim.core import epochs, errors
from pipesim.core.completions import SlotCompletions
from pipesim.core.completions import finish_together as finish_together  # re-exported
from pipesim.core.completions import finishing_order as finishing_order  # re-exported
from pipesim.core.episode import BUFFERED, Episode
from pipesim.core.epochs import Entry, Epoch, Head, fold, push_back, smallest

if TYPE_CHECKING:
    from pipesim.core.clock import Clock
    from pipesim.core.engine import Pipeline


class Slots(SlotCompletions):
    """The generation slots of one engine replica: one SimPy process, heaps of running episodes.

    Invariants: ``len(free) + n_running == n_slots``. An episode ends at ``start + work`` plus
    each pause it lived through, added one at a time (its epoch's ``tail``): the float the
    chapter's loop computes (``end += sync_time`` at each sync), so its exact ties are the
    chapter's. ``_cur`` holds the episodes no pause touched (due exactly at their key), ``_old``
    the heads of the earlier epochs (:mod:`pipesim.core.epochs`). ``offset`` is the paused time
    so far (the virtual clock that ``generated_s`` reads).
    """

    def __init__(self, pipeline: Pipeline, n_slots: int, index: int = 0) -> None:
        self.p = pipeline
        self.env: Clock = pipeline.env
        self._updates = pipeline.updates  # the update log (appended to, never replaced mid-run)
        self.index = index
        self.n_slots = n_slots
        self.free = list(range(n_slots))  # a heap: the lowest free slot starts next
        self._cur: list[Entry] = []  # heap of (start + work, id, episode): started since the last pause
        self._old: list[Head] = []  # heap of the earlier epochs' heads (due, id, epoch)
        self.offset = 0.0  # total paused seconds so far
        self.version = 0  # the weights this replica generates with
        self.paused_since: float | None = None
        self.accepting = n_slots > 0
        """Whether an episode may start here now: a slot is free and generation is not paused
        (an attribute kept in step with both, read before every start)."""
        self._target: tuple[float, int, Any] | None = None  # the (due, id, ...) we sleep until
        self.behind = False  # sleeping past quiet completions (accounted lazily, see catch_up)
        self._sleeping = False  # waiting on a timer or idle (interruptible)
        self._drained: simpy.Event | None = None
        self.process = self.env.process(self._run())

    # -- the process ---------------------------------------------------------------------------
    def _run(self) -> Generator[simpy.Event, Any, None]:
        """Aim at the first due time, sleep until it, finish what is due; repeat.

        This loop runs once per completion instant, or once per completion that matters where
        the others are quiet (:mod:`pipesim.core.quiet`): it then aims past the quiet ones, at the
        first completion that can change a decision, and sets ``behind``. It sleeps without a
        timer while the replica is paused or empty (``_target`` None), until it is interrupted.

        The wake-up is scheduled at the absolute time ``at``, not after a delay: SimPy's
        ``timeout(delay)`` fires at ``now + delay``, and from some ``now`` no float delay reaches
        a given ``at`` (every sum is a tie that rounds to even), so the wake-up time would depend
        on the chain of earlier wake-ups. Pushing the event at ``at`` itself, as SimPy's own
        ``schedule`` pushes ``now + delay``, makes every episode end exactly at its due time.

        A wake-up taken in place whose target is the only completion due then (no tie) is
        finished here, and the controller pass runs at once, as ``_finish_due`` and
        ``Pipeline.on_finished`` would run it (nothing else is scheduled by now, so the end of the
        instant is now), without their calls: this replica is the only one, no lifecycle acts at a
        completion and no subclass watches ``on_finished`` (``Pipeline.reports_in_place``), and no
        pass is due already. At eta > 0 nearly every completion is such a one; it is the chain
        that costs most per episode (``docs/performance.md``).
        """
        env, p = self.env, self.p
        take_in_place, wake_at = env.take_in_place, env.wake_at
        quiet = p.quiet_completions  # None: no quiet completions (the pipeline is built by now)
        alone = p.reports_in_place and p._single is self  # a lone completion is finished here
        items, updates, controller_pass = p._items, self._updates, p._controller_pass
        finish_due = self._finish_due
        never = env.event()  # idle: woken only by an interrupt
        wake = env.wake_up()  # the wake-up: one event, scheduled again once processed
        now = at = env.now  # now: env.now, kept in step with it (read, or the wake-up's own time)
        inf = math.inf
        while True:
            cur, old = self._cur, self._old
            if not (cur or old) or self.paused_since is not None:
                self._target = target = None
                self.behind = False  # paused (pause() caught up) or empty
            else:
                k = quiet(self.n_running) if quiet is not None and p.admission_refused else 0
                if k == 0:  # the first due: the current epoch's top or the first epoch head
                    target = old[0] if old else cur[0]
                    if cur and cur[0] < target:
                        target = cur[0]
                else:  # the k + 1-th due (due times are exact: each earlier one is due by then)
                    target = smallest(k + 1, cur, old)[-1]
                at = due = target[0]
                self._target, self.behind = target, k > 0
                if at < now:
                    at = now
            try:
                if target is None:
                    self._sleeping = True
                    yield never
                else:
                    if not at < inf:  # NaN too: the clock past the largest float
                        raise errors.clock_overflow(p, "an episode's end")
                    # the wake-up would be the next event of the whole run: take it here, else
                    # (something else happens first, or at ``at`` too) sleep until it
                    if not take_in_place(at):
                        wake = wake_at(wake, at)
                        self._sleeping = True
                        yield wake
                        self._sleeping = False
                    elif alone and k == 0 and not p._pass_due and p.pass_in_place:
                        # taken in place: nothing else is scheduled by ``at``, and the target is
                        # still the first due. If it is the only completion due, finish it here and
                        # run the controller pass in place, as _finish_due and on_finished would
                        if old and old[0] is target:  # pop_old(old), inlined
                            entry = heappop(heap := (epoch := old[0][2]).heap)
                            if heap:
                                key, i, _ = heap[0]
                                for pause in epoch.tail:
                                    key += pause
                                heapreplace(old, (key, i, epoch))
                            else:
                                heappop(old)
                        else:
                            entry = heappop(cur)
                            epoch = None
                        ep = entry[2]
                        if cur and cur[0][0] <= at or old and old[0][0] <= at:
                            # a tie: the general path
                            if epoch is None:
                                heappush(cur, entry)
                            else:
                                push_back(old, due, entry, epoch)
                        else:
                            now = at
                            heappush(self.free, ep.slot)
                            ep.end_s = due  # its own due time, as _finish_due sets it
                            ep.update_to = len(updates)
                            self._target = None
                            self.accepting = True  # not paused: a target is only set while running
                            ep.status = BUFFERED
                            items.append(ep)
                            controller_pass(now, self)
                            if not (self._cur or self._old):  # (a stretch replaces the heaps)
                                self.signal_drained()
                            continue
                    now = at  # SimPy fires the wake-up at exactly this time
                    finish_due(now, False, self)
            except simpy.Interrupt:
                self._sleeping = False
                now = env.now
                self.catch_up(now, in_pass=False)  # whoever woke us may not have caught up

    def due(self, ep: Episode) -> float:
        """Real time at which running episode ``ep`` finishes if nothing else pauses it: its
        ``start + work`` plus each pause it lived through, one at a time. O(in-flight): for checks."""
        for _, _, epoch in self._old:
            if any(e is ep for _, _, e in epoch.heap):
                return fold(ep.start_s + ep.work_s, epoch.tail)
        return (ep.start_s + ep.work_s) + (self.offset - ep.offset_start)  # + 0.0 where in _cur

    @property
    def running(self) -> list[tuple[float, int, Episode]]:
        """The running episodes as a heap of ``(vend, id, episode)`` in finishing order, ``vend``
        the end on the virtual clock (start less the offset then, plus work). O(in-flight)."""
        entries = epochs.ordered(self._cur, self._old)
        return [((e.start_s - e.offset_start) + e.work_s, i, e) for _, i, e in entries]

    def _wake(self) -> None:
        if self._sleeping:
            self._sleeping = False
            self.process.interrupt()

    # -- primitives used by the controller and the weight-update policies ----------------------
    @property
    def n_running(self) -> int:
        return self.n_slots - len(self.free)  # the invariant: a slot is free or runs one episode

    @property
    def paused(self) -> bool:
        return self.paused_since is not None

    @property
    def vnow(self) -> float:
        """The virtual clock now (it stands still while the replica is paused)."""
        return (self.paused_since if self.paused_since is not None else self.env.now) - self.offset

    def generated_s(self, ep: Episode) -> float:
        """Seconds running episode ``ep`` has generated so far (pauses excluded)."""
        return max(self.vnow - (ep.start_s - ep.offset_start), 0.0)

    def running_episodes(self) -> list[Episode]:
        """The episodes running now, in finishing order (O(in-flight log in-flight))."""
        return [ep for _, _, ep in epochs.ordered(self._cur, self._old)]

    def start(self, ep: Episode, now: float, work_s: float | None = None) -> None:
        """Start ``ep`` at ``now`` (the current time) on the lowest free slot; it generates for
        ``work_s`` seconds (default its duration)."""
        ep.slot = heappop(free := self.free)
        if not free:
            self.accepting = False
        ep.replica = self.index
        ep.start_s = now
        ep.update_from = len(self._updates)
        ep.offset_start = self.offset
        if work_s is None:
            work_s = ep.work_s
        else:
            ep.work_s = work_s
        heappush(self._cur, (now + work_s, ep.id, ep))

    def abort_all(self) -> list[tuple[Episode, float]]:
        """Take every running episode off its slot now; return each with the seconds it generated.

        O(in-flight), as aborts are. The caller decides the episodes' fate (status, relaunch).
        """
        now, n_upd = self.env.now, len(self.p.updates)
        out = []
        for _, _, ep in epochs.ordered(self._cur, self._old):
            heapq.heappush(self.free, ep.slot)
            ep.end_s = now
            ep.update_to = n_upd
            out.append((ep, self.generated_s(ep)))
        self._cur, self._old = [], []
        self.accepting = self.paused_since is None
        self._target = None
        self._wake()
        self.signal_drained()
        return out

    def stretch_all(self, extra_s: Callable[[Episode, float], float]) -> None:
        """Delay each running episode by ``extra_s(ep, generated_s)`` seconds (re-prefill). O(in-flight)."""
        for _, _, ep in epochs.ordered(self._cur, self._old):
            ep.work_s += extra_s(ep, self.generated_s(ep))
        self._cur, self._old = epochs.rebuild(self._cur, self._old, lambda ep: True)
        self._target = None
        self._wake()

    def kick(self) -> None:
        """Re-arm the timer if a newly started episode finishes before the current target, or if
        the process sleeps past quiet completions (what is quiet may have changed).

        Only a sleeping process needs it: one that is running re-arms when it next yields."""
        cur, target = self._cur, self._target
        if (
            self._sleeping
            and self.paused_since is None
            and (cur or self._old)
            and (target is None or self.behind or (cur and cur[0] < target))  # starts go to _cur
        ):
            self._wake()

    def catch_up(self, now: float, in_pass: bool = True) -> None:
        """Finish the quiet completions due by ``now`` that the process slept past.

        A completion is *quiet* when it cannot change a decision (:mod:`pipesim.core.quiet` decides
        which are). The process sleeps until the first completion that matters, and the quiet
        ones are finished later, each with its own end time, by that wake-up or by whoever looks
        first: the controller pass, a pause, a drain. ``in_pass``: the caller is the controller
        pass, which needs no other.
        """
        if self.behind:
            self._finish_due(now, in_pass)

    def pause(self) -> None:
        """Stop the virtual clock. Episodes due exactly now finish first, as in the chapter."""
        if self.paused_since is not None:
            return
        self._finish_due(self.env.now)
        self.paused_since = self.env.now
        self.accepting = False
        self._wake()

    def resume(self) -> None:
        """Restart the clock. Each running episode lives through the pause: the chapter's loop
        adds ``sync_time`` to its end, so a pause that ends ``sync_time_s`` (or ``train_time_s``)
        after it began, as floats add, counts as exactly that; any other counts as its length."""
        now, since = self.env.now, self.paused_since
        if since is None:
            return
        pause = now - since
        self.offset += pause
        self.paused_since = None
        config = self.p.config
        for nominal in (config.sync_time_s, config.train_time_s):
            if since + nominal == now:
                pause = float(nominal)
                break
        if pause != 0.0:  # x + 0.0 == x: a pause of nothing changes no due time
            if old := self._old:
                epochs.add_pause(old, pause)
            if cur := self._cur:  # the current epoch becomes an earlier one
                heappush(old, (cur[0][0] + pause, cur[0][1], Epoch(cur, (pause,))))
                self._cur = []
        self.accepting = bool(self.free)
        self._wake()

    def release(self) -> None:
        """Drop the episodes still on the slots once the run is over (see ``Pipeline.release``)."""
        self._cur, self._old, self._target = [], [], None

    def drained(self) -> simpy.Event:
        """An event that succeeds when no episode is running on this replica (now, if none is)."""
        ev = self.env.event()
        self.catch_up(self.env.now, in_pass=False)
        if not (self._cur or self._old):
            ev.succeed()
        else:
            self._drained = ev
        return ev

    def remove(self, ep: Episode) -> None:
        """Take a running episode off its slot (aborts); O(n) in the running heap, as aborts are."""
        self._cur, self._old = epochs.rebuild(self._cur, self._old, lambda e: e is not ep)
        heapq.heappush(self.free, ep.slot)
        self.accepting = self.paused_since is None
        self._target = None
        self._wake()
