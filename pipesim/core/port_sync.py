"""The weight sync's steps on the port: the actions of :class:`~pipesim.core.port.PipelineView`
that move weights.

:class:`SyncActions` is a base of :class:`~pipesim.core.port_impl.PolicyPort` (and so of
:class:`~pipesim.core.engine.Pipeline`). It holds no state of its own: each action changes the
pipeline's records (declared below) the one way the engine knows to be consistent. A weight
update's ``sync`` generator composes them:

* **one sync for every replica** -- :meth:`~SyncActions.begin_sync` (optionally pausing),
  :meth:`~SyncActions.pause_engines` (a sync that started without pausing may pause later), then
  one :meth:`~SyncActions.end_sync`, which publishes the next version: every replica switches to
  it and resumes, the update record spans the pause (or is an instant swap where generation never
  paused), the episode source hears of it and may re-cost the episodes in flight
  (:meth:`~SyncActions._publish_to_source`; a :class:`~pipesim.core.port.FixedWork` source is
  shown none of them), and the sync log gets its entry. One sync is open at a time: an
  ``end_sync`` with no sync begun is refused (the log would take an old start and the request
  stay pending), and so are a second ``begin_sync`` before ``end_sync`` (the log's start would
  move and the pause taken go unrecorded) and a ``pause_engines`` outside a sync (no
  ``end_sync`` would record or end it). A second ``pause_engines`` is harmless, as a replica's
  own pause is: the record keeps the first pause's start.
* **a skipped sync** -- :meth:`~SyncActions.skip_sync`: the trainer's version advances and no
  weights move (sync every k steps).
* **per replica** -- :meth:`~SyncActions.pause_replica` and :meth:`~SyncActions.publish_replica`,
  for updates that move one replica at a time and record their own updates; a replica may
  publish any version from its own up to the one being synced. They keep no start of their own
  to overwrite: ``pause_replica`` twice leaves the replica paused, and the record's start is the
  ``since_s`` the policy passes, which is refused when later than now (a record would start after
  it ends).

Every action that can open admission pokes the controller, so no policy has to. Publishing is
the only way ``version`` moves: a pass or a sync that finds it written otherwise says so
(:func:`~pipesim.core.errors.version_written`).

Split out of :mod:`pipesim.core.port_impl` (past 400 lines) along this seam: port_impl keeps the
reads, the waits and the actions on tasks and episodes; this module is the weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from pipesim.core import errors
from pipesim.core.episode import Episode, UpdateRecord
from pipesim.core.errors import PipelineError, shown

if TYPE_CHECKING:
    from pipesim.core.clock import Clock
    from pipesim.core.engine import Pipeline
    from pipesim.core.seams import EngineReplica, EpisodeSource

__all__ = ["SyncActions"]


class SyncActions:
    """The weight sync's actions of the port (module docstring)."""

    env: Clock
    engines: list[EngineReplica]
    updates: list[UpdateRecord]
    weight_update: Any
    source: EpisodeSource | None
    _source_reprices: bool  # a source that is not FixedWork: publish sees the episodes in flight
    version: int
    started: int
    started_at_version: list[int]
    sync_log: list[tuple[float, float, int]]
    sync_pending: bool
    syncing: bool
    _sync_start: float
    _pause_start: float | None

    if TYPE_CHECKING:  # the pipeline's, from its other bases (none exists here at run time)

        def poke(self) -> None: ...

        def _replica(self, replica: object, action: str) -> int: ...

    def begin_sync(self, pause: bool) -> None:
        """Open the sync (the sync log's start) and, with ``pause``, stop generation now.

        One sync at a time: a second ``begin_sync`` before ``end_sync`` is refused, as an
        ``end_sync`` with none begun is -- it would move the log's start and drop the pause taken.
        """
        if self.syncing:
            raise PipelineError(
                f"{type(self.weight_update).__name__}.sync called begin_sync while a sync is open "
                f"(begun at t={self._sync_start:g}) at t={self.env.now:g}: end it with end_sync "
                "first; a sync starts with one begin_sync(pause=...) and ends with one end_sync"
            )
        self.sync_pending = False
        self.syncing = True
        self._sync_start = self.env.now
        self._pause_start = None
        if pause:
            self.pause_engines()

    def pause_engines(self) -> None:
        """Stop generation on every replica, within a sync (one begun without pausing, too).

        Idempotent, as a replica's own pause is (``pause_replica``): asked again while paused, the
        replicas stay paused and the update record keeps the first pause's start, so it spans the
        pause they took. Outside a sync it is refused: no ``end_sync`` would record or end it.
        """
        if not self.syncing:
            raise PipelineError(
                f"{type(self.weight_update).__name__}.sync called pause_engines with no sync begun "
                f"at t={self.env.now:g}: pause within a sync, with begin_sync(pause=True) or "
                "pause_engines() after begin_sync(pause=False), and end_sync resumes"
            )
        if self._pause_start is None:
            self._pause_start = self.env.now
        for e in self.engines:  # each is idempotent: a replica paused already keeps its start
            e.pause()

    def end_sync(self, engines: bool = True) -> None:
        """Publish the next version; with ``engines`` the replicas switch to it now, and resume.

        The update record spans the pause (from ``pause_engines``), or is an instant swap if
        generation never paused. Per-replica syncs pass ``engines=False`` and record their own.
        """
        if not self.syncing:  # the sync log would take an old start, and the request stay pending
            raise PipelineError(
                f"{type(self.weight_update).__name__}.sync called end_sync with no sync begun at "
                f"t={self.env.now:g}: a sync starts with begin_sync(pause=...) and ends with one "
                "end_sync (or publishes with skip_sync alone)"
            )
        now = self.env.now
        if self.source is not None:
            self._publish_to_source(self.version + 1, engines)
        self.version += 1
        self.started_at_version.append(self.started)
        if engines:
            start = self._pause_start if self._pause_start is not None else now
            self.updates.append(UpdateRecord(start, now, self.version, self._pause_start is not None))
            for e in self.engines:
                e.version = self.version
                e.resume()
        self.sync_log.append((self._sync_start, now, self.version))
        self._pause_start = None
        self.syncing = False
        self.poke()

    def _publish_to_source(self, version: int, engines: bool) -> None:
        """Tell the episode source that ``version`` is published; re-cost what it says changed."""
        assert self.source is not None
        running = (
            [(ep, e.generated_s(ep)) for e in self.engines for ep in e.running_episodes()]
            if engines and self._source_reprices  # a FixedWork source reads none of them
            else []
        )
        publish: Callable[[int, list[tuple[Episode, float]]], object] = self.source.publish
        answer = publish(version, running)  # checked here: the error names the source
        who = f"{type(self.source).__name__}.publish (version {version})"
        if not isinstance(answer, dict):  # None too: the seam says a dict, {} for no change
            raise PipelineError(
                f"{who} must return a dict of episode id to seconds ({{}}: no change), got {shown(answer)}"
            )
        if not answer:
            return
        p = cast("Pipeline", self)
        new_work = {i: errors.source_seconds(p, w, "publish") for i, w in answer.items()}
        handed = {ep.id: g for ep, g in running}
        for i, w in new_work.items():  # a re-costed episode is one handed, and keeps what it made
            if (g := handed.get(i)) is None:
                raise PipelineError(
                    f"{who} answered episode id {shown(i)}, which is not one of the {len(running)} "
                    "episodes in flight it was handed: it may re-cost only those"
                )
            if w < g:
                raise PipelineError(
                    f"{who} gave episode {i} a total work of {w:g} s, below the {g:g} s it has "
                    "already generated: the new total counts what was generated (at least that)"
                )
        for ep, _ in running:
            if ep.id in new_work:
                ep.duration_s = new_work[ep.id]
        for e in self.engines:
            e.stretch_all(lambda ep, _g: new_work[ep.id] - ep.work_s if ep.id in new_work else 0.0)

    def skip_sync(self) -> None:
        """The trainer's version advances but no weights move (sync every k steps)."""
        self.sync_pending = False
        self.version += 1
        self.started_at_version.append(self.started)
        self.poke()

    # -- weights, per replica ---------------------------------------------------------------------
    def pause_replica(self, replica: int) -> None:
        self.engines[self._replica(replica, "pause_replica")].pause()

    def publish_replica(self, replica: int, version: int, since_s: float) -> None:
        e = self.engines[self._replica(replica, "publish_replica")]
        if (
            isinstance(version, bool)
            or not isinstance(version, int)
            or not e.version <= version <= self.version + 1
        ):
            # + 1: the one being synced
            raise PipelineError(
                f"publish_replica: replica {replica} runs version {e.version}; it can publish one from there "
                f"to the one being synced ({self.version + 1}), got {shown(version)}"
            )
        since, now = errors.seconds(since_s, "publish_replica's since_s"), self.env.now
        if since > now:  # the record would start after it ends (its pause is in the past)
            raise PipelineError(
                f"{type(self.weight_update).__name__}.sync called publish_replica({replica}, {version}) "
                f"with since_s={since:g}, later than now (t={now:g}): since_s is when the replica's "
                "update began, at most p.now (the time it paused, or p.now for an instant swap)"
            )
        self.updates.append(UpdateRecord(since, now, version, True, e.index))
        e.version = version
        e.resume()
        self.poke()
