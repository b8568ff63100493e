"""What can happen to one episode between its start and its finish: timeouts and worker failures.

* :class:`Timeout` -- a wall-clock cap on an episode's generation time (the pauses of a partial
  rollout do not count; it caps the agent's own time, as a per-episode timer in the environment
  worker does). A truncated episode finishes at the cap, is flagged ``truncated`` and is trained
  like any other; ``RunResult.summary()`` reports the truncated share of trained episodes.
* Environment failures -- a worker fails with a constant hazard ``hazard_per_s`` per second of
  episode time, so the time to failure is exponential and long episodes fail more often
  (Section 13.7). Three policies decide what happens next:

  - :class:`DropFailed` -- the episode is lost and nothing replaces it (biased toward short tasks);
  - :class:`RetryFailed` -- the same task restarts at once on a fresh worker on the same replica,
    bypassing admission; the failed attempt's seconds are counted as lost work;
  - :class:`RequeueFailed` (the chapter's default) -- the episode is marked an infrastructure
    failure, gets no gradient, and its task goes back to the queue, launched before new tasks
    whenever admission next allows.

  A failed episode ends with status ``failed`` (infrastructure failures are counted apart from
  agent failures, which are ordinary finished episodes with a low reward and are not simulated).
  Every one of the three needs an admission rule that counts failed episodes out
  (:class:`~pipesim.policies.admission.AReaLThrottle` or ``OverSample``, as the chapter's own
  scenarios pair them): the default ``CountThrottle`` counts them as started, runs out of
  admissions and stalls (docs/policies.md).

Every failure time is drawn from one ``numpy.random.Generator`` seeded from ``scenario.seed``, in
launch order, so the same seed gives the same trace. The draws cost one call per launched
episode, and only when failures are configured: the default path never builds a lifecycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipesim.core.episode import Episode
from pipesim.core.errors import check_number
from pipesim.core.roles import FailurePolicy as FailurePolicy  # the role lives in core; re-exported

if TYPE_CHECKING:
    from pipesim.core.port import PipelineView


def check_positive(name: str, value: object) -> None:
    """Raise ValueError naming ``name`` unless ``value`` is a finite number > 0 (not a bool)."""
    check_number(name, value, 0, strict=True)


@dataclass(frozen=True)
class Timeout:
    """Cap each episode's generation time at ``cap_s`` seconds; truncated episodes are flagged."""

    cap_s: float

    def __post_init__(self) -> None:
        check_positive("cap_s", self.cap_s)


@dataclass(frozen=True)
class DropFailed:
    """Drop failed episodes: their tasks are lost, which biases training toward short tasks."""

    hazard_per_s: float

    def __post_init__(self) -> None:
        check_positive("hazard_per_s", self.hazard_per_s)

    def on_failure(self, p: PipelineView, ep: Episode) -> None:
        return None


@dataclass(frozen=True)
class RetryFailed:
    """Retry the same task at once on a fresh worker (same replica); the lost seconds are counted."""

    hazard_per_s: float

    def __post_init__(self) -> None:
        check_positive("hazard_per_s", self.hazard_per_s)

    def on_failure(self, p: PipelineView, ep: Episode) -> None:
        p.relaunch(ep.replica, task=ep.task_id, parent=ep.id)


@dataclass(frozen=True)
class RequeueFailed:
    """Mark an infrastructure failure and put the task back in the queue (the chapter's default;
    pair it with an admission rule that counts failures out, as the module docstring says)."""

    hazard_per_s: float

    def __post_init__(self) -> None:
        check_positive("hazard_per_s", self.hazard_per_s)

    def on_failure(self, p: PipelineView, ep: Episode) -> None:
        p.requeue([(ep.task_id, ep.id)])
