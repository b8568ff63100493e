"""The per-sample path of :class:`~pipesim.compute.closedloop.ClosedLoop`, compiled with the engine.

A closed loop replaces every finished sequence at once: for each one, an episode and its tokens,
and a start on the replica. In Python that was about a third of a closed loop's time in the
compiled build, more than the replica spent on the sample; here, compiled (``setup.py``), the
calls to the token table and to the replica are direct. :class:`Refill` is the smallest object a
replica needs of a pipeline (an environment, the update log, ``on_finished``);
:class:`~pipesim.compute.closedloop.ClosedLoop` checks the arguments, builds it and reports.
"""

from __future__ import annotations

from typing import Any

from pipesim.compute.engine import ComputeReplica
from pipesim.compute.source import TokenSource
from pipesim.core.clock import Clock
from pipesim.core.episode import Episode


class Refill:
    """Keeps ``replica`` full: each finished sequence is replaced, until ``limit`` have started."""

    def __init__(self, env: Clock, source: TokenSource) -> None:
        self.env = env
        self.updates: list[Any] = []  # no weight syncs
        self.source = source
        self.replica: ComputeReplica | None = None
        self.started = 0
        self.finished = 0
        self.limit = 0

    def start(self) -> None:
        """Start the next sample (its task is its number) on the replica, now."""
        i = self.started
        replica = self.replica
        assert replica is not None
        self.source.work_s(i, i, 0, -1)
        replica.start(Episode(i, i, 0.0, 0), self.env.now)
        self.started = i + 1

    def on_finished(self, episodes: list[Episode], now: float, in_pass: bool = False) -> None:
        """What the replica reports to its pipeline: ``episodes`` finished by ``now``."""
        self.finished += len(episodes)
        for _ in episodes:
            if self.started < self.limit:
                self.start()
