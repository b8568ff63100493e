"""The one adapter between pipesim and SimPy's internals: :class:`Clock`, an ``Environment``.

The engines need four things SimPy's public API does not give, each for exactness or speed:

* **a wake-up at an absolute time** (:meth:`Clock.wake_at`). ``timeout(delay)`` fires at
  ``now + delay``, and from some ``now`` no float delay reaches a given time (every sum is a tie
  that rounds to even): an episode due at ``at`` must wake its replica at ``at`` itself.
* **taking a wake-up in place** (:meth:`Clock.take_in_place`, :meth:`Clock.free_until`,
  :meth:`Clock.advance_to`,
  :meth:`Clock.first_due`, :meth:`Clock.drop_first`): when a process's next wake-up would be the
  next event of the whole run, it moves the clock and goes on, with no round trip through the
  queue. Exact: SimPy would process that event next anyway. :class:`Wakeup` is the lightest
  thing the queue takes: a callback at an absolute time (:meth:`Clock.call_at`).
* **an event that comes after everything else at its instant** (:meth:`Clock.end_of_instant`):
  the controller's decisions at time t see every completion, sync end and training end at t.
* **whether anything is left to happen** (:meth:`Clock.idle`, :meth:`Clock.run_until`): a run
  that ends before its last sync stalled; that is read from SimPy's state, never from the wording
  of an error.

Like SimPy's own ``RealtimeEnvironment``, the adapter extends ``Environment`` and reads what
``Environment.schedule`` and ``Environment.step`` use: the queue of ``(time, priority, event
id, event)`` entries, the event-id counter, the clock, and an event's ``_ok`` / ``_value`` /
``callbacks``. No other module of pipesim touches a private name of SimPy
(``tests/test_architecture.py`` checks it), and ``tests/test_clock.py`` is the canary: it
checks that layout against the installed SimPy and names this module when it changes.
SimPy is pinned to the versions tested (``pyproject.toml``).
"""

from __future__ import annotations

from collections.abc import Callable, Container
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.core import StopSimulation
from simpy.events import NORMAL, EventPriority

from pipesim.core.validate import shown

__all__ = ["END_OF_INSTANT", "Clock", "EndOfInstant", "Wakeup"]

END_OF_INSTANT = EventPriority(NORMAL + 1)
"""The priority of :class:`EndOfInstant`: after every NORMAL and URGENT event of its time."""


class EndOfInstant(simpy.Event):
    """An event that, once :meth:`fire`\\ d, is processed after every other event at the current time."""

    def fire(self) -> None:
        self._ok = True
        self._value = None
        self.env.schedule(self, END_OF_INSTANT, 0)


class Wakeup:
    """A callback on SimPy's queue at an absolute time (:meth:`Clock.call_at`): what
    ``Environment.step`` reads of an event it pops (``callbacks``, called with the event after
    being set to None; ``_ok``, true: it never fails; ``_value``, what it carries), nothing
    more. A compute replica pushes one per timer, tool return and settle; a ``simpy.Event``
    would cost an ``__init__`` and two stores more. No process yields these or waits on them."""

    __slots__ = ("_ok", "_value", "callbacks")

    def __init__(self, callback: Callable[[Wakeup], None], value: object = None) -> None:
        self.callbacks: list[Callable[[Wakeup], None]] | None = [callback]
        self._ok = True
        self._value = value

    @property
    def value(self) -> Any:
        """What the wake-up carries (a compute replica's sequence, or None)."""
        return self._value


class Clock(simpy.Environment):
    """SimPy's environment, with the named extras above. ``queue`` is SimPy's event heap."""

    def __init__(self, initial_time: float = 0) -> None:
        super().__init__(initial_time)
        self.queue: list[tuple[float, EventPriority, int, simpy.Event]] = self._queue  # type: ignore[attr-defined]
        """SimPy's event heap (the same list: SimPy never rebinds it), read by :meth:`free_until`."""

    def schedule(self, event: simpy.Event, priority: EventPriority = NORMAL, delay: Any = 0) -> None:
        """SimPy's own ``schedule`` (the same push, at the same cost), refusing a time that is NaN
        where it is made. ``p.env.timeout(float("nan"))`` passes SimPy's own check (``delay <
        0`` is false for NaN), and the NaN entry then broke the queue's order and the clock: the
        run stopped later, blaming "an episode's end" for an overflow. Raised here, the error
        comes from the code that made the event (a sync, which the note then names)."""
        at = self._now + delay
        if at != at:  # NaN, and only NaN, differs from itself
            raise ValueError(
                f"an event scheduled {shown(delay)} s after t={self._now:g}: a delay must be a "
                "number of seconds >= 0, not NaN (p.timeout checks its delay and names the policy)"
            )
        heappush(self._queue, (at, priority, next(self._eid), event))  # type: ignore[attr-defined]

    # -- wake-ups --------------------------------------------------------------------------------
    def wake_up(self) -> simpy.Event:
        """A fresh wake-up: an event already triggered (value None), not yet scheduled."""
        ev = simpy.Event(self)
        ev._ok, ev._value = True, None
        return ev

    def wake_at(self, wake: simpy.Event, at: float) -> simpy.Event:
        """Schedule a wake-up at the absolute time ``at`` (NORMAL priority); return the event to
        yield. ``wake`` is reused once processed; if it is still scheduled (an interrupt left it
        in the queue, where it fires for no one), a fresh one is made."""
        if wake.callbacks is None:  # processed: reusable
            wake.callbacks = []
        else:
            wake = self.wake_up()
        heappush(self.queue, (at, NORMAL, next(self._eid), wake))  # type: ignore[attr-defined]
        return wake

    def free_until(self, at: float) -> bool:
        """Whether nothing is scheduled at or before ``at``: a wake-up at ``at`` would be the next
        event of the run, and work done now at ``at`` is what that event would do. Always a
        Python bool, also where a user's numpy time made the queue's times numpy floats (the
        compiled compute replica takes no numpy bool)."""
        queue = self.queue
        return not (queue and queue[0][0] <= at)  # `not`: a Python bool whatever the comparison gave

    def take_in_place(self, at: float) -> bool:
        """If nothing is scheduled at or before ``at``, move the clock to ``at`` and return True:
        the caller does now what its wake-up at ``at`` would do. Else False (schedule it)."""
        queue = self.queue
        if queue and queue[0][0] <= at:
            return False
        self._now = at
        return True

    def advance_to(self, at: float) -> None:
        """Move the clock to ``at`` (no earlier than now), as ``step`` does for the next event;
        only after :meth:`free_until` said nothing comes first."""
        self._now = at

    def call_at(self, at: float, callback: Callable[[Wakeup], None], value: object = None) -> Wakeup:
        """Call ``callback(wakeup)`` at the absolute time ``at``, after what is already scheduled
        then (NORMAL priority, as ``Environment.schedule`` pushes an event)."""
        ev = Wakeup(callback, value)
        entry: Any = (at, NORMAL, next(self._eid), ev)  # type: ignore[attr-defined]  # a Wakeup is no Event
        heappush(self.queue, entry)
        return ev

    def first_due(self, at: float) -> tuple[float, object, Any] | None:
        """The next scheduled event if it is due at or before ``at``: ``(its time, its only
        callback or None, its value)``; None if nothing is due by then. For a process that
        recognises its own wake-ups at the head of the queue (:meth:`drop_first` them)."""
        queue = self.queue
        if not queue or float(queue[0][0]) > at:  # float(): a user's numpy time, compared as a float
            return None
        t, _, _, ev = queue[0]
        cbs = ev.callbacks
        return t, cbs[0] if cbs and len(cbs) == 1 else None, ev._value

    def drop_first(self) -> None:
        """Take the next scheduled event off the queue without processing it: the caller does what
        its callback would (a superseded wake-up does nothing; a process's own is handled in place)."""
        ev: Any = heappop(self.queue)[3]
        ev.callbacks = None  # processed, as ``step`` marks it

    def end_of_instant(self) -> EndOfInstant:
        """A new end-of-instant event (scheduled when :meth:`EndOfInstant.fire` is called)."""
        return EndOfInstant(self)

    # -- running ---------------------------------------------------------------------------------
    def idle(self) -> bool:
        """Whether nothing is scheduled: the run can only end."""
        return not self.queue

    def alone(self, event: object) -> bool:
        """Whether ``event`` is the only thing scheduled: once it is processed, nothing else is
        left to happen but what its waiter does (a policy's generator spinning in a stalled run)."""
        queue = self.queue
        return len(queue) == 1 and queue[0][3] is event

    def alone_among(
        self, event: object, waited: Container[int], most: int, busy: Container[int] = ()
    ) -> bool:
        """Whether the queue holds nothing but ``event`` and events whose ``id`` is in ``waited``
        (at most ``most`` of them), none of them one whose ``id`` is in ``busy`` (awaited by
        someone else too): nothing else can happen but what their waiters do. The queue's length
        is compared first, so a busy run pays one comparison."""
        queue = self.queue
        if len(queue) > most + 1:
            return False
        return all(
            (entry[3] is event or id(entry[3]) in waited) and id(entry[3]) not in busy for entry in queue
        )

    def latest_besides(self, event: object, waited: Container[int], most: int) -> float | None:
        """The latest time scheduled for an event other than ``event`` and those whose ``id`` is in
        ``waited``, where the queue holds at most ``most + 1`` entries (None where it holds more,
        or none is other): those are processed before only the waited ones can be left. The
        queue's length is compared first, so a busy run pays one comparison."""
        queue = self.queue
        if len(queue) > most + 1:
            return None
        times = [float(t) for t, _, _, ev in queue if ev is not event and id(ev) not in waited]
        return max(times) if times else None

    def run_until(self, done: simpy.Event) -> bool:
        """Run until ``done`` is processed or nothing is left to happen; return whether ``done``
        came (False: the queue ran dry first, a stall). Errors raised in processes propagate."""
        done.callbacks.append(StopSimulation.callback)  # type: ignore[union-attr]  # SimPy's own stop
        self.run()
        return bool(done.triggered)
