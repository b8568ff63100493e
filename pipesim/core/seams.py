"""The engine's seams: where a second inference-engine model, a co-simulation or a probe plugs in.

The controller, the trainer and the weight sync (:mod:`pipesim.core.engine`) talk to three kinds of
outside object, each a small Protocol, and to nothing else:

* :class:`EngineReplica` -- one inference-engine replica: what the controller needs to start
  episodes on it, what the weight sync needs to pause, resume, abort or re-cost the episodes it
  runs, and what the kernel needs to account for completions. The chapter's fixed-duration slots
  (:class:`pipesim.core.slots.Slots`) are one implementation; a compute-grounded engine (continuous
  batching, a KV-cache budget) is another, built by an ``engine_factory`` passed to the pipeline.
  A replica reports finished episodes to its pipeline with ``on_finished``.
* :class:`EpisodeSource` -- supplies the work of each started episode (default: the duration
  pool, entry ``task``) and is told when new weights reach the engines, so that it can re-cost
  the episodes in flight (a co-simulation continues real episodes under the new weights).
* :class:`BatchObserver` -- sees every batch the trainer takes, before the simulated training
  time (a co-simulation runs a real update on it).
* :class:`TrainerModel` -- the seconds a training step takes for its batch (default: the fixed
  ``train_time_s`` of the chapter).

The pipeline checks each seam it is given when it is built (``FieldError`` naming ``source``,
``observer``, ``trainer`` or ``engine_factory``, whose replicas are checked as it builds them):
an instance with every member of its Protocol, not a class nor an object lacking one.

No one subclasses the engine: a run is configured by its scenario, these seams and the
:class:`EngineOptions`, the declared switch of the engine's one shortcut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pipesim.core.errors import check_int, shown
from pipesim.core.records import ARCHIVE_BLOCK_EPISODES, ARCHIVE_MIN_EPISODES
from pipesim.core.validate import FieldError

if TYPE_CHECKING:
    import simpy

    from pipesim.core.episode import Episode


class EngineReplica(Protocol):
    """One engine replica as the kernel drives it (the chapter's slots implement it)."""

    index: int
    n_slots: int
    version: int
    behind: bool
    """Whether the replica sleeps past quiet completions (see :mod:`pipesim.core.quiet`)."""

    @property
    def n_running(self) -> int: ...
    @property
    def accepting(self) -> bool: ...
    @property
    def paused(self) -> bool: ...
    def start(self, ep: Episode, now: float, work_s: float | None = None) -> None:
        """Start ``ep`` now; it needs ``work_s`` seconds of generation (default ``ep.work_s``)."""

    def generated_s(self, ep: Episode) -> float:
        """Seconds running episode ``ep`` has generated so far (pauses excluded)."""

    def running_episodes(self) -> list[Episode]:
        """The episodes running now, in finishing order."""

    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def drained(self) -> simpy.Event: ...
    def abort_all(self) -> list[tuple[Episode, float]]: ...
    def stretch_all(self, extra_s: Callable[[Episode, float], float]) -> None: ...
    def catch_up(self, now: float, in_pass: bool = True) -> None: ...
    def kick(self) -> None: ...
    def release(self) -> None: ...


class EpisodeSource(Protocol):
    """The work of each started episode, and its re-costing when new weights arrive."""

    def work_s(self, episode_id: int, task: int, version: int, parent: int) -> float:
        """Seconds of generation of episode ``episode_id`` (task ``task``, weights ``version``;
        ``parent`` >= 0 for a relaunch of that episode)."""

    def publish(self, version: int, running: Sequence[tuple[Episode, float]]) -> dict[int, float]:
        """Weights ``version`` are published; ``running`` pairs each episode in flight on a replica
        switching to them with the seconds it generated. Return the new total work seconds of the
        episodes whose work changes (by episode id); the others keep theirs (``{}``: none changes).
        The kernel refuses (``PipelineError`` naming the source) anything but a dict (``None``
        too), an id not among ``running``, and a total below the seconds that episode generated
        (a total equal to them ends it now)."""


class TrainerModel(Protocol):
    """How long the trainer takes for a batch (default: the pipeline's fixed ``train_time_s``).

    A compute-grounded trainer derives it from the batch's tokens, the model and the trainer GPUs.
    Optional: ``sample_weights(step, batch) -> list[float]``, each sample's relative cost, which a
    streamed step (``PipelineConfig.stream_batches``) splits the time by (equal shares without it).
    """

    def train_time_s(self, step: int, batch: list[Episode]) -> float: ...


class BatchObserver(Protocol):
    """Sees each batch the trainer takes for ``step``, at ``now_s``, trained at ``version``."""

    def on_batch(self, step: int, version: int, batch: list[Episode], now_s: float) -> None: ...


@dataclass(frozen=True)
class EngineOptions:
    """The engine's one shortcut and the records' layout (``tests/test_engine_paths.py``,
    ``tests/test_records.py`` and ``pipesim.testing.check_promises`` compare traces each way).

    The shortcut is acting on the policies' declared hints (:mod:`pipesim.core.port`).
    """

    hints: bool = True
    """Act on the policies' hints: sleep past completions that cannot change a decision (quiet
    completions, :mod:`pipesim.core.quiet`: one replica, no per-episode lifecycle, no episode
    source), skip asking the batch policy for a batch while the buffer is shorter than its ``min_items``,
    and hand a source that promises ``FixedWork`` no episodes in flight at a sync.
    False: a wake-up and the general instant for every completion, ``select`` at every pass
    the trainer waits, and every source handed the episodes in flight."""
    archive_block_episodes: int = ARCHIVE_BLOCK_EPISODES
    """Trained episodes gathered before they are kept as arrays instead of objects
    (:mod:`pipesim.core.records`); 0 keeps every episode an object. Not a shortcut: the records
    read the same either way (``tests/test_records.py``), only their memory and cost differ."""
    archive_min_episodes: int = ARCHIVE_MIN_EPISODES
    """Archive only in a run that will train at least this many episodes (steps x batch size);
    a smaller run keeps every episode an object, which is cheaper in time."""

    def __post_init__(self) -> None:
        if not isinstance(self.hints, bool):
            raise FieldError(f"hints must be a bool, got {shown(self.hints)}", "hints")
        for name in ("archive_block_episodes", "archive_min_episodes"):
            check_int(name, getattr(self, name), 0)

    @classmethod
    def plain(cls) -> EngineOptions:
        """The shortcut off: no hint acted on (see ``hints``)."""
        return cls(hints=False)
