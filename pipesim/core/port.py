"""The port: what a policy sees of a running pipeline, and the few things it may do to it.

Policies never hold the engine. Every policy method receives a :class:`PipelineView`: read-only
counters and versions, the running and buffered episodes by count, one :class:`ReplicaView` per
engine replica, the clock, and a handful of named actions. The engine (``pipesim.core.engine``)
implements the view itself, so a policy call costs a plain attribute read, but a policy is typed
against the view alone and mypy rejects anything beyond it. What the actions may change is
exactly what a real scheduler can change:

* the task queue: :meth:`PipelineView.requeue` (put tasks back, at the front or the back) and
  :meth:`PipelineView.relaunch` (start a task again at once on one replica);
* the fate of launched episodes: :meth:`PipelineView.drop` (never to be trained),
  :meth:`PipelineView.abort_running` (take every running episode off its slot, work lost);
* the cost of running episodes: :meth:`PipelineView.stretch_running` (a re-prefill, say);
* the weights: :meth:`PipelineView.begin_sync`, :meth:`PipelineView.pause_engines`,
  :meth:`PipelineView.end_sync`, :meth:`PipelineView.skip_sync`, and per replica
  :meth:`PipelineView.pause_replica` / :meth:`PipelineView.publish_replica`;
* waiting: :meth:`PipelineView.timeout`, :meth:`PipelineView.all_of`,
  :meth:`PipelineView.process`, :meth:`PipelineView.drained`.

Every action that can open admission (a requeue, a drop, a published version) asks the
controller to look again at the end of the instant; a policy never has to.

Promises
--------
A policy may make promises that let the engine take a shortcut or let ``pipesim.testing`` check
it. Each is a small runtime-checkable Protocol, found with ``isinstance``, never by attribute
probing:

* :class:`ClosedHint` (admission): ``closed(p)`` -- once true, no completion can make the rule
  admit before a start, a drop or a new version. It enables quiet completions.
* :class:`StartLimitHint` (admission): ``start_limit(p)`` -- the rule admits exactly while
  ``p.started`` is below it, and only a new version or a drop moves it; the engine compares the
  counter itself instead of calling ``admits`` before every start.
* :class:`AdmissionGateHint` (weight update): ``admission_gate()`` names the flag
  ``blocks_admission`` reads (never, ``p.syncing``, or ``p.syncing or p.sync_pending``); the
  engine reads its own flag instead of calling the policy at every controller pass.
* :class:`ReadyHint` / :class:`MinItemsHint` (batching): a cheap necessary condition for a batch,
  and the fewest buffered episodes that can form one.
* :class:`ReadyCountHint` (batching): ``ready_count(p)`` -- ``ready`` is exactly "the buffer holds
  at least this many", a count only a new version or a drop moves; the engine compares the
  buffer's length itself instead of calling ``ready`` at every pass the trainer waits.
* :class:`PausesOnly` (weight update): ``pauses_only()`` true means the sync touches episodes in
  flight only by pausing all of them together (or not at all).
* :class:`StalenessPromise`, :class:`PausePromise`, :class:`SingleVersionPromise`: bounds that
  ``check_invariants`` holds the run to.

``pipesim.testing.check_promises(scenario)`` runs a scenario with and without the shortcuts its
promises enable and compares the event traces, so a promise that lies is caught.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import simpy

    from pipesim.config import PipelineConfig, Scenario
    from pipesim.core.episode import Episode


class ReplicaView(Protocol):
    """One engine replica as a policy sees it."""

    @property
    def index(self) -> int: ...
    @property
    def n_slots(self) -> int: ...
    @property
    def version(self) -> int:
        """The weights this replica generates with."""

    @property
    def n_running(self) -> int: ...
    @property
    def accepting(self) -> bool:
        """Whether an episode may start here now (a slot is free and generation is not paused)."""

    @property
    def paused(self) -> bool: ...


class PipelineView(Protocol):
    """The read-only view of a running pipeline, plus the actions a policy may take."""

    # -- what a policy reads --------------------------------------------------------------------
    @property
    def config(self) -> PipelineConfig: ...
    @property
    def scenario(self) -> Scenario: ...
    @property
    def now(self) -> float:
        """The simulated time, seconds."""

    @property
    def version(self) -> int:
        """The trainer's version: training steps handed to the weight sync so far."""

    @property
    def batch_size(self) -> int: ...
    @property
    def max_staleness(self) -> int: ...
    @property
    def started(self) -> int:
        """Episodes launched so far (relaunches included)."""

    @property
    def n_dropped(self) -> int:
        """Launched episodes that will never be trained and hold no slot or buffer place."""

    @property
    def n_running(self) -> int: ...
    @property
    def n_buffered(self) -> int:
        """Finished episodes waiting for the trainer."""

    @property
    def buffered(self) -> Sequence[Episode]:
        """The buffer, oldest finished first (read only: batch policies get it to edit)."""

    @property
    def batches_taken(self) -> int: ...
    @property
    def started_at_version(self) -> Sequence[int]:
        """``started`` at the moment each trainer version was published (index = version)."""

    @property
    def syncing(self) -> bool: ...
    @property
    def sync_pending(self) -> bool:
        """The trainer asked for a sync that has not begun (a drain is waiting, say)."""

    @property
    def replicas(self) -> Sequence[ReplicaView]: ...
    @property
    def upcoming_task(self) -> int:
        """The task the next admitted episode starts: the oldest requeued task, else the next new
        one (what a routing rule that keeps a prompt group together needs to know)."""

    @property
    def policy_state(self) -> dict[object, Any]:
        """A policy's own state for this run, under a key of the policy's choosing (a module's
        constant, say): it lives as long as the run. Keep per-run data here, not in a weak
        dictionary keyed by the pipeline: the compiled build's pipeline takes no weak reference
        and no attribute of its own."""

    # -- waiting ----------------------------------------------------------------------------------
    def timeout(self, delay_s: float) -> simpy.Event: ...
    def all_of(self, events: Iterable[simpy.Event]) -> simpy.Event: ...
    def process(self, generator: Generator[Any, Any, None]) -> simpy.Event: ...
    def drained(self) -> simpy.Event:
        """Succeeds once no replica runs an episode (at once if none does)."""

    # -- tasks and episodes ---------------------------------------------------------------------
    def requeue(self, tasks: Iterable[tuple[int, int]], first: bool = False) -> None:
        """Put ``(task id, id of the episode it replaces)`` pairs back in the queue (``first``: ahead
        of the queue, in the given order); they are launched before any new task."""

    def relaunch(self, replica: int, task: int, parent: int) -> None:
        """Start ``task`` again now on replica ``replica`` (a retry on a fresh worker)."""

    def drop(self, episodes: list[Episode], status: str) -> None:
        """Record launched episodes, no longer on a slot or in the buffer, that will never be trained.

        They are final from the trainer's next step on: in a long run the records then keep them
        as arrays (:mod:`pipesim.core.records`), so a change made to one after that is not kept."""

    def abort_running(self) -> list[Episode]:
        """Take every running episode off its slot now: aborted, its generated seconds lost."""

    def stretch_running(self, extra: Callable[[Episode, float], tuple[float, float]]) -> None:
        """Charge each running episode ``extra(ep, generated_s) -> (seconds, re-prefill tokens)``."""

    # -- weights ----------------------------------------------------------------------------------
    def begin_sync(self, pause: bool) -> None: ...
    def pause_engines(self) -> None: ...
    def end_sync(self, engines: bool = True) -> None: ...
    def skip_sync(self) -> None: ...
    def pause_replica(self, replica: int) -> None: ...
    def publish_replica(self, replica: int, version: int, since_s: float) -> None:
        """Replica ``replica`` switches to ``version`` (its update began at ``since_s``) and resumes."""


# -- promises -----------------------------------------------------------------------------------
@runtime_checkable
class ClosedHint(Protocol):
    """Admission: ``closed(p)`` true means no completion alone can make the rule admit again."""

    def closed(self, p: PipelineView) -> bool: ...


@runtime_checkable
class ReadyHint(Protocol):
    """Batching: ``ready`` is a cheap necessary condition for ``select`` to form a batch."""

    def ready(self, buffer: Sequence[Episode], p: PipelineView) -> bool: ...


@runtime_checkable
class StartLimitHint(Protocol):
    """Admission: the rule admits exactly while ``p.started < start_limit(p)``, an int that only
    a new version or a drop (``p.version``, ``p.n_dropped``) can change. The engine asks once per
    version and drop count and compares the counter itself, instead of calling ``admits`` before
    every start."""

    def start_limit(self, p: PipelineView) -> int: ...


@runtime_checkable
class ReadyCountHint(Protocol):
    """Batching: ``ready(buffer, p)`` is exactly ``len(buffer) >= ready_count(p)``, an int that
    only a new version or a drop (``p.version``, ``p.n_dropped``) can change. The engine asks once
    per version and drop count and compares the buffer's length itself."""

    def ready_count(self, p: PipelineView) -> int: ...


@runtime_checkable
class AdmissionGateHint(Protocol):
    """Weight update: ``admission_gate()`` says which of the pipeline's flags ``blocks_admission``
    is, whatever the rest of the state: ``"never"`` (always false), ``"syncing"`` (``p.syncing``)
    or ``"syncing_or_pending"`` (``p.syncing or p.sync_pending``); None makes no promise. The
    engine then reads the flag itself instead of calling ``blocks_admission`` at every pass."""

    def admission_gate(self) -> str | None: ...


ADMISSION_GATES = ("never", "syncing", "syncing_or_pending")
"""The answers :class:`AdmissionGateHint` may give (besides None), in the engine's numbering."""


@runtime_checkable
class MinItemsHint(Protocol):
    """Batching: no batch can be formed from fewer than ``min_items(p)`` buffered episodes."""

    def min_items(self, p: PipelineView) -> int: ...


@runtime_checkable
class PausesOnly(Protocol):
    """Weight update: ``pauses_only()`` true means episodes in flight are only paused, all together."""

    def pauses_only(self) -> bool: ...


@runtime_checkable
class FixedWork(Protocol):
    """Episode source: ``fixed_work()`` true means ``publish`` changes no episode's work and
    reads none of the episodes in flight it is handed, so a sync need not collect them (a sync
    under a pausing policy then costs O(1) however many are in flight); it is handed none
    (unless ``EngineOptions(hints=False)``)."""

    def fixed_work(self) -> bool: ...


@runtime_checkable
class StalenessPromise(Protocol):
    """No trained episode is staler than ``staleness_bound(scenario)`` (None: no promise)."""

    def staleness_bound(self, scenario: Scenario) -> int | None: ...


@runtime_checkable
class PausePromise(Protocol):
    """No sync pauses generation for longer than ``max_pause_s()`` seconds."""

    def max_pause_s(self) -> float: ...


@runtime_checkable
class SingleVersionPromise(Protocol):
    """``single_version(scenario)`` true: no episode runs under two versions of the weights."""

    def single_version(self, scenario: Scenario) -> bool: ...


@runtime_checkable
class BindsPipeline(Protocol):
    """A routing rule that reads the pipeline (``upcoming_task``, say): the engine hands it the
    view once, before the run starts."""

    def bind(self, pipeline: PipelineView) -> None: ...


def pauses_only(policy: object) -> bool:
    """Whether a weight-update policy promises to touch episodes in flight only by pausing them."""
    return isinstance(policy, PausesOnly) and bool(policy.pauses_only())


def start_limit(policy: object) -> Callable[[PipelineView], object] | None:
    """An admission rule's ``start_limit``, if it declares :class:`StartLimitHint` where its
    ``admits`` is defined or below (None otherwise): a subclass that overrides ``admits`` alone
    changes the rule, so its inherited limit no longer describes it and is not acted on."""
    if not isinstance(policy, StartLimitHint) or not _declared_with(policy, "start_limit", "admits"):
        return None
    return policy.start_limit


def _declared_with(policy: object, hint: str, method: str) -> bool:
    """Whether ``type(policy)`` defines ``hint`` where its ``method`` is defined or below: a
    subclass that overrides the method alone changes the rule, so an inherited hint no longer
    describes it and is not acted on."""
    mro = type(policy).__mro__
    method_at = next((c for c in mro if method in c.__dict__), object)
    hint_at = next((c for c in mro if hint in c.__dict__), object)
    return issubclass(hint_at, method_at)


def ready_count(policy: object) -> Callable[[PipelineView], object] | None:
    """A batch policy's ``ready_count``, if it declares :class:`ReadyCountHint` where its
    ``ready`` is defined or below (None otherwise: a subclass's own ``ready`` voids it)."""
    if not isinstance(policy, ReadyCountHint) or not _declared_with(policy, "ready_count", "ready"):
        return None
    return policy.ready_count


def admission_gate(policy: object) -> int | None:
    """A weight-update policy's :class:`AdmissionGateHint` as its index in
    :data:`ADMISSION_GATES` (None: no promise, or one a subclass's own ``blocks_admission``
    voids). An answer outside them is a ``ValueError`` naming it."""
    if not isinstance(policy, AdmissionGateHint):
        return None
    if not _declared_with(policy, "admission_gate", "blocks_admission"):
        return None
    got = policy.admission_gate()
    if got is None:
        return None
    if not isinstance(got, str) or got not in ADMISSION_GATES:
        raise ValueError(
            f"{type(policy).__name__}.admission_gate() must return one of {ADMISSION_GATES} or None, "
            f"got {got!r:.60}"
        )
    return ADMISSION_GATES.index(got)
