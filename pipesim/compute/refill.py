"""The per-sample path of :class:`~pipesim.compute.closedloop.ClosedLoop`, compiled with the engine.

A closed loop replaces every finished sequence at once: for each one, its tokens and a start on
the replica. In Python that was about a third of a closed loop's time in the compiled build, more
than the replica spent on the sample; here, compiled (``setup.py``), the calls to the token table
and to the replica are direct. A closed loop keeps no :class:`~pipesim.core.episode.Episode`
(nothing reads one): :class:`LoopReplica` starts bare sequences and, where a kernel's replica
writes each finished sequence's episode and reports it, refills instead. :class:`Refill` is the
smallest object a replica needs of a pipeline (an environment and the update log);
:class:`~pipesim.compute.closedloop.ClosedLoop` checks the arguments, builds both and reports.
"""

from __future__ import annotations

from typing import Any

from mypy_extensions import mypyc_attr

from pipesim.compute.batch import Seq
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
        self.replica: LoopReplica | None = None
        self.started = 0
        self.finished = 0
        self.limit = 0

    def start(self) -> None:
        """Start the next sample (its task is its number) on the replica, now."""
        i = self.started
        replica = self.replica
        assert replica is not None
        self.source.work_s(i, i, 0, -1)
        replica._launch(None, i, self.env.now)
        self.started = i + 1

    def on_finished(self, episodes: list[Episode], now: float) -> None:
        """The host's report (:class:`~pipesim.compute.driver.Host`); a closed loop has no
        episodes to report: its replica refills through :meth:`LoopReplica._finished`."""
        raise TypeError(f"a closed loop keeps no episodes; got {len(episodes)} at {now}")


@mypyc_attr(allow_interpreted_subclasses=True)
class LoopReplica(ComputeReplica):
    """The replica of a closed loop: what finishes is counted and replaced, no episode written."""

    def _finished(self, done: list[Seq], now: float) -> None:
        loop = self.p
        assert isinstance(loop, Refill)
        loop.finished += len(done)
        for _ in done:
            if loop.started < loop.limit:
                loop.start()
