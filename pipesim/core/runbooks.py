"""A run from start to end, and its books: the part of :class:`~pipesim.core.engine.Pipeline`
that runs the processes and checks what they left.

:meth:`RunBooks.run` runs SimPy until the last step's sync (a stall, a clock overflow and a
user's own exception each reach the caller as themselves, without SimPy's frames);
:meth:`RunBooks._check_books` then checks that every launched episode was trained, running,
buffered or dropped at every step; :meth:`RunBooks.release` hands the records over. A mixin of
the pipeline, which holds the state it reads (declared below). :func:`scenario_roles` names a
scenario's policies by role, for the notes that say whose exception it was, here and where the
testing kit reads a policy's promises outside the run (:func:`asked`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

from pipesim.core import blame, errors, stall
from pipesim.core.collector import YOUNG_FIRST_MIN_EPISODES, during_run
from pipesim.core.episode import BUFFERED, Episode, UpdateRecord
from pipesim.core.errors import PipelineError
from pipesim.core.records import EpisodeRecords

if TYPE_CHECKING:
    import simpy

    from pipesim.core.buffer import EpisodeBuffer
    from pipesim.core.clock import Clock
    from pipesim.core.engine import Pipeline
    from pipesim.core.seams import EngineReplica


class RunBooks:
    """Running a pipeline, and checking and handing over its records (module docstring)."""

    scenario: Any
    config: Any
    admission: Any
    weight_update: Any
    batching: Any
    source: Any
    observer: Any
    trainer: Any
    batch_size: int
    env: Clock
    done: simpy.Event
    buffer: EpisodeBuffer
    episodes: EpisodeRecords
    updates: list[UpdateRecord]
    engines: list[EngineReplica]
    ledger_log: list[tuple[int, int, int, int, int, int]]
    _live: dict[int, Episode]
    _items: list[Episode]

    def poke(self) -> None:
        raise NotImplementedError  # the pipeline's (pipesim.core.engine)

    def _clock(self) -> float:
        """SimPy's clock, typed: a float, or a numpy float (a float subclass) where a user's time
        made it one."""
        now: float = self.env.now
        return now

    def release(self) -> None:
        """Hand the run's records over to their new owner (a RunResult) and drop them here.

        The processes, the environment and the engines refer to each other, so a finished
        pipeline is garbage only the cyclic collector can free, and everything it refers to waits
        with it. Dropping the records (every Episode) lets them be freed by reference counting as
        soon as the result is, which keeps back-to-back runs (sweeps) from piling up garbage.
        """
        self.episodes, self.updates = EpisodeRecords(0), []
        self._live = self.episodes.live
        self.buffer.items = self._items = []
        for e in self.engines:
            e.release()

    def run(self) -> None:
        """Run to the end of the last step's sync; raise :class:`PipelineError` if that cannot happen.

        A stall is known from SimPy's state: the run's event queue ran dry before the last sync.
        An exception a policy or seam raises inside the run reaches the caller as it was raised
        (its own type, message, cause and traceback, not SimPy's copy of it), with a note naming
        the policy (:func:`pipesim.core.blame.from_user_code`).

        Python's cyclic garbage collector is paused for the run where the caller opted in
        (:func:`pipesim.core.collector.pause_collector_during_runs`): a run allocates many small
        long-lived objects (episodes, heap entries), and each full collection rescans all of them,
        which made large runs markedly slower per episode. Nothing here needs the collector mid-run:
        SimPy breaks each event's reference to its process once the event is processed, so the
        garbage is freed by reference counting; the collector resumes when the run returns.
        """
        self.poke()
        planned = self.config.steps * self.batch_size
        done = self.done
        # the run ends when `done` is processed (SimPy's own stop) or when nothing is left to
        # happen: a stall is read from SimPy's state (its queue ran dry before `done`), never
        # from the wording of an error, so a policy's own exception is never taken for one
        with during_run(young_first=planned >= YOUNG_FIRST_MIN_EPISODES):
            try:
                came = self.env.run_until(done)
                if not self._clock() < math.inf:  # a sync or a completion the clock cannot hold
                    raise errors.clock_overflow(cast("Pipeline", self), "a sync or an episode")
            except PipelineError as exc:  # raised inside a process: re-raise without SimPy's frames
                raise blame.detached(PipelineError(str(exc))) from None
            except OverflowError:  # a time of the run past the largest float (SimPy's clock)
                raise blame.detached(errors.clock_overflow(cast("Pipeline", self), "a time")) from None
            except Exception as exc:  # a policy's or a seam's own error: the user's, unchanged
                original = blame.from_user_code(exc, self._roles())
                raise original  # noqa: B904 (its own cause and traceback are kept, SimPy's copy hidden)
        if not came:  # SimPy's queue ran dry and the last sync never came
            raise stall.stalled(cast("Pipeline", self))
        if (written := errors.view_written(cast("Pipeline", self))) is not None:  # p.version = 9 ended it
            raise written
        self._check_books()

    def _check_books(self) -> None:
        """Every launched episode is trained, running, buffered or dropped, at every step.

        Read from the engine's own counts (``ledger_log``, one line per batch taken), not from
        the episodes' statuses: a batch policy that deletes a buffered episode without returning
        it as discarded leaves its status ``buffered`` and every summary normal, so without this
        check the loss is silent. Costs one pass over ``steps`` tuples per run.
        """
        for line in self.ledger_log:
            _, started, trained, running, buffered, dropped = line
            if started != trained + running + buffered + dropped:
                here = {id(ep) for ep in self.buffer.items}
                lost = next(
                    (ep.id for ep in self.episodes if ep.status == BUFFERED and id(ep) not in here), None
                )
                raise errors.lost_episodes(cast("Pipeline", self), line, lost)

    def _roles(self) -> list[tuple[str, object]]:
        """The user-pluggable objects of this run, by role, for naming the one that raised."""
        return [
            *scenario_roles(self.scenario),
            ("routing", getattr(self, "routing", None)),
            ("episode source", self.source),
            ("batch observer", self.observer),
            ("trainer", self.trainer),
        ]


SCENARIO_ROLES: tuple[tuple[str, str], ...] = (
    ("admission", "admission"),
    ("weight update", "weight_update"),
    ("batch", "batching"),
    ("timeout", "timeout"),
    ("failure", "failures"),
    ("replicas", "replicas"),
)
"""Each policy a scenario holds, as (role, field): the role names it in a note ("raised by the batch
policy X"), in the run and in the testing kit's calls of its promises alike."""


def scenario_roles(scenario: Any) -> list[tuple[str, object]]:
    """The scenario's policies by role (:data:`SCENARIO_ROLES`), None where it has none."""
    return [(role, getattr(scenario, field)) for role, field in SCENARIO_ROLES]


def role_of(scenario: Any, policy: object) -> str:
    """How a note names ``policy`` ("the batch policy X"): by the first role it plays in
    ``scenario``, or by its class alone where it plays none."""
    role = next((r for r, obj in scenario_roles(scenario) if obj is policy), None)
    return f"the {role} policy {type(policy).__name__}" if role else f"the policy {type(policy).__name__}"


def asked(scenario: Any, policy: object, method: str, *args: object) -> Any:
    """``policy.method(*args)``: a promise the testing kit reads outside the run. An exception it
    raises gets a note naming the policy, as one raised during the run does (:func:`blame.note_culprit`),
    "raised by the batch policy X (staleness_bound, asked by check_invariants)", unless one has it."""
    try:
        return getattr(policy, method)(*args)
    except Exception as exc:
        notes = getattr(exc, "__notes__", ())
        if hasattr(exc, "add_note") and not any(str(n).startswith("raised by") for n in notes):
            exc.add_note(f"raised by {role_of(scenario, policy)} ({method}, asked by check_invariants)")
        raise
