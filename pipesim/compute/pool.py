r"""The environment workers a compute replica's tool calls queue for.

:class:`EnvWorkers` is the pool of sandboxes shared by the replicas of a cluster, compiled with
the engine (``setup.py``); :mod:`pipesim.compute.driver` uses it. A replica's own events on
SimPy's queue are :class:`pipesim.core.clock.Wakeup`\ s.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import simpy

if TYPE_CHECKING:
    from pipesim.compute.batch import Seq
    from pipesim.compute.driver import ReplicaDriver


class EnvWorkers:
    """Environment workers (sandboxes) shared by replicas: at most ``n`` tool calls run at once,
    the others wait FIFO. A counting semaphore on the SimPy clock (what a ``simpy.Resource`` of
    capacity ``n`` does, without its O(n) release). A replica's calls (:meth:`call_for`) end with
    a :class:`~pipesim.core.clock.Wakeup` for it (:meth:`ReplicaDriver._on_pool`, which calls
    :meth:`done`); any other caller's (:meth:`call`) with a timeout that runs its callback."""

    def __init__(self, env: simpy.Environment, n: int) -> None:
        self.env, self.n = env, n
        self.busy = 0
        self.queue: deque[tuple[float, ReplicaDriver | None, Seq | None, Callable[[], None] | None]] = deque()
        self.calls = 0
        self.busy_s = 0.0  # worker-seconds spent in tool calls

    def call(self, seconds: float, then: Callable[[], None]) -> None:
        """Run a tool call of ``seconds`` on a free worker (or when one frees), then ``then()``."""
        self._call(seconds, None, None, then)

    def call_for(self, seconds: float, replica: ReplicaDriver, seq: Seq) -> None:
        """:meth:`call` for ``seq``'s tool call on ``replica``, which takes the sequence back."""
        self._call(seconds, replica, seq, None)

    def done(self) -> None:
        """A call ended: its worker takes the next queued call, or goes idle."""
        if self.queue:
            self._run(*self.queue.popleft())
        else:
            self.busy -= 1

    def _call(
        self, seconds: float, replica: ReplicaDriver | None, seq: Seq | None, then: Callable[[], None] | None
    ) -> None:
        self.calls += 1
        if self.busy < self.n:
            self.busy += 1
            self._run(seconds, replica, seq, then)
        else:
            self.queue.append((seconds, replica, seq, then))

    def _run(
        self, seconds: float, replica: ReplicaDriver | None, seq: Seq | None, then: Callable[[], None] | None
    ) -> None:
        self.busy_s += seconds
        if replica is not None:  # what env.timeout(seconds) schedules
            replica._schedule(self.env.now + seconds, replica._on_pool_cb, seq)
            return
        assert then is not None

        def finished(_ev: simpy.Event) -> None:
            self.done()
            then()

        self.env.timeout(seconds).callbacks.append(finished)  # type: ignore[union-attr]
