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
  :meth:`PipelineView.process`, :meth:`PipelineView.drained`, :meth:`PipelineView.settled`,
  :meth:`PipelineView.buffered_at_least`.

Every action that can open admission (a requeue, a drop, a published version) asks the
controller to look again at the end of the instant; a policy never has to. An action given what
it cannot take (a requeue of a bare task id, a stretch that is no callable, a drop of an episode
still on a slot) is a ``PipelineError`` naming the policy that called it, the action and the value.

The view is read-only: mypy rejects ``p.version = 3``. At run time the view is the engine itself
(a read is a plain attribute read), so Python does not stop such a write; the engine finds it at
no cost per call: ``p.version`` is compared after each controller pass (a write in ``admits`` or
``select`` is named there), the other counters at each sync, at a stall and at the end of the run.

Promises
--------
A policy may make promises that let the engine take a shortcut or let ``pipesim.testing`` check
it. Each is a small runtime-checkable Protocol, found with ``isinstance``, never by attribute
probing. The speed hints are two, and both feed one algorithmic shortcut (quiet completions,
:mod:`pipesim.core.quiet`: the slots process sleeps past completions that cannot change a
decision, so a synchronous step costs two wake-ups instead of one per episode):

* :class:`ClosedHint` (admission): ``closed(p)`` -- once true, no completion can make the rule
  admit before a start, a drop or a new version.
* :class:`MinItemsHint` (batching): ``min_items(p)`` -- the fewest buffered episodes that can
  form a batch; below it the engine neither wakes for a completion nor asks ``select``.

Two more tell the engine what a weight update or an episode source does, for the same shortcut:
:class:`PausesOnly` (the sync touches episodes in flight only by pausing all of them together,
or not at all) and :class:`FixedWork` (a source's ``publish`` changes no episode's work). The
contracts :class:`StalenessPromise`, :class:`PausePromise` and :class:`SingleVersionPromise` are
bounds that ``check_invariants`` holds the run to.

The per-start hints of pipesim 0.1 (``start_limit``, ``ready_count``, ``ready``,
``admission_gate``) are no longer read: each saved one Python call per start or pass, at the
price of a Protocol, a cache in the engine and a way to lie. A policy that still defines one
runs unchanged and gets one :class:`DroppedHintWarning` (:data:`DROPPED_HINTS`).

``pipesim.testing.check_promises(scenario)`` runs a scenario with and without the shortcuts its
promises enable and compares the event traces, so a promise that lies is caught.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pipesim.core import blame

if TYPE_CHECKING:
    import simpy

    from pipesim.core.episode import Episode
    from pipesim.core.pipeline_config import PipelineConfig
    from pipesim.core.roles import RunSpec


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
    def scenario(self) -> RunSpec: ...
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
    def next_new_task(self) -> int:
        """The next new task: the one the next start takes when no requeued task waits (then it
        is ``upcoming_task``). Tasks below it have each been launched; what a rule that counts
        fresh tasks needs while relaunches wait ahead of them (``SlimeSubmit``)."""

    # -- waiting ----------------------------------------------------------------------------------
    def timeout(self, delay_s: float) -> simpy.Event: ...
    def all_of(self, events: Iterable[simpy.Event]) -> simpy.Event: ...
    def process(self, generator: Generator[Any, Any, None]) -> simpy.Event: ...
    def drained(self) -> simpy.Event:
        """Succeeds once no replica runs an episode (at once if none does)."""

    def settled(self) -> simpy.Event:
        """Succeeds at this instant, after the controller's pass here (one is asked for): what the
        pass starts is running by then. A drain succeeds before that pass, so with fewer slots
        than the batch "nothing runs" can be the instant before the rest of a batch starts
        (:class:`~pipesim.policies.updates.BatchDrain` waits on it); a loop of it stays at one
        instant and is refused as spinning, as any."""

    def buffered_at_least(self, n: int) -> simpy.Event:
        """Succeeds once the buffer holds at least ``n`` finished episodes (at once if it does),
        fired as the completion that reaches ``n`` enters it, before that instant's controller
        pass (:class:`~pipesim.policies.updates.AfterNextBatch` waits on it; :mod:`pipesim.core.waits`).
        A wait nothing can satisfy ends the run as a stall naming the weight update."""

    # -- tasks and episodes ---------------------------------------------------------------------
    def requeue(self, tasks: Iterable[tuple[int, int]], first: bool = False) -> None:
        """Put ``(task id, id of the episode it replaces)`` pairs back in the queue (``first``: ahead
        of the queue, in the given order); they are launched before any new task. Each item is a
        pair: ``p.requeue([(ep.task_id, ep.id)])``, with -1 for a task that replaces no episode."""

    def relaunch(self, replica: int, task: int, parent: int) -> None:
        """Start ``task`` again now on replica ``replica`` (a retry on a fresh worker)."""

    def drop(self, episodes: list[Episode], status: str) -> None:
        """Drop launched episodes for good: ``status`` is ``"discarded"``, ``"aborted"`` or ``"failed"``.

        A buffered episode (one of ``p.buffered``) leaves the buffer and is discarded (it finished,
        so only ``"discarded"`` is accepted): a weight update may drop stale buffered episodes at a
        sync, and the books still close (launched = trained + in flight + buffered + dropped). One
        taken off its slot (``abort_running`` returns them) or out of the buffer already (by a
        batch policy's ``select``, in place) is recorded as given. An episode still running on a
        slot, one trained or dropped already, or one given twice is refused, and nothing changes.
        They are final from the trainer's next step on: in a long run the records then keep them
        as arrays (:mod:`pipesim.core.records`), so a change made to one after that is not kept."""

    def abort_running(self) -> list[Episode]:
        """Take every running episode off its slot now: aborted, its generated seconds lost. For a
        weight update's ``sync``: called from ``admits``, each start is aborted at once, and the
        run is refused as a zero-time loop of starts and aborts."""

    def stretch_running(self, extra: Callable[[Episode, float], tuple[float, float]]) -> None:
        """Charge each running episode ``extra(ep, generated_s) -> (seconds, re-prefill tokens)``:
        ``extra`` is a callable, asked once per running episode with the seconds it has generated
        (``lambda ep, g: (g * 0.1, 0.0)``), not a number."""

    # -- weights ----------------------------------------------------------------------------------
    def begin_sync(self, pause: bool) -> None: ...
    def pause_engines(self) -> None: ...
    def end_sync(self, engines: bool = True) -> None: ...
    def skip_sync(self) -> None: ...
    def pause_replica(self, replica: int) -> None: ...
    def publish_replica(self, replica: int, version: int, since_s: float) -> None:
        """Replica ``replica`` switches to ``version`` (its update began at ``since_s``, at most now)
        and resumes."""


# -- promises -----------------------------------------------------------------------------------
@runtime_checkable
class ClosedHint(Protocol):
    """Admission: ``closed(p)`` true means no completion alone can make the rule admit again."""

    def closed(self, p: PipelineView) -> bool: ...


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

    def staleness_bound(self, scenario: RunSpec) -> int | None: ...


@runtime_checkable
class PausePromise(Protocol):
    """No sync pauses generation for longer than ``max_pause_s()`` seconds."""

    def max_pause_s(self) -> float: ...


@runtime_checkable
class SingleVersionPromise(Protocol):
    """``single_version(scenario)`` true: no episode runs under two versions of the weights."""

    def single_version(self, scenario: RunSpec) -> bool: ...


@runtime_checkable
class BindsPipeline(Protocol):
    """A routing rule that reads the pipeline (``upcoming_task``, say): the engine hands it the
    view once, before the run starts."""

    def bind(self, pipeline: PipelineView) -> None: ...


def pauses_only(policy: object) -> bool:
    """Whether a weight-update policy promises to touch episodes in flight only by pausing them.
    Asked once per run; an answer that is no bool (``None``, ``"yes"``) is a ``PipelineError``
    naming the policy (a truthy one would take the shortcut on a promise never made)."""
    if not isinstance(policy, PausesOnly):
        return False
    yes = policy.pauses_only()
    return yes if type(yes) is bool else blame.bool_answer(policy, "pauses_only", yes)


DROPPED_HINTS = {
    "start_limit": "admits",
    "ready_count": "select",
    "ready": "select",
    "admission_gate": "blocks_admission",
}
"""Speed hints the engine no longer reads (pipesim 0.2.0), each with the decision method it
shadowed: they saved one Python call per start or pass. A policy that still defines one works
unchanged, the hint ignored, and its class gets one :class:`DroppedHintWarning`."""


class DroppedHintWarning(FutureWarning):
    """A policy defines a speed hint the engine no longer reads (:data:`DROPPED_HINTS`)."""


_warned: set[tuple[type, str]] = set()


def warn_dropped_hints(policy: object, role: str) -> None:
    """Warn once per class and hint that ``policy`` (the scenario's ``role``) defines a dropped hint."""
    cls = type(policy)
    for hint, method in DROPPED_HINTS.items():
        if callable(getattr(policy, hint, None)) and (cls, hint) not in _warned:
            _warned.add((cls, hint))
            warnings.warn(
                f"{role} {cls.__name__} defines {hint}(), a speed hint pipesim no longer reads "
                f"(since 0.2.0): {method}() alone decides; the hint can be deleted",
                DroppedHintWarning,
                stacklevel=4,
            )
