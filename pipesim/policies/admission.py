"""Admission rules of real systems: when may a free slot start one more episode?

Each rule answers ``admits(p)`` from the pipeline's counters, in O(1):

* ``p.started`` -- episodes launched; ``p.n_dropped`` -- launched ones that were discarded,
  aborted or failed (they will never be trained and hold no slot);
* ``p.version`` -- the trainer's version v; ``p.batches_taken`` -- batches the trainer took;
* ``p.n_running`` and ``p.n_buffered`` -- episodes in flight and finished-but-untrained.

The chapter's :class:`~pipesim.policies.base.CountThrottle` counts every episode started, dropped or
not, so each dropped episode spends its headroom for good: with drop-at-consumption it degrades
toward synchronous after eta * B drops, and with failures that keep dropping work it eventually
admits nothing and the run stops with a :class:`~pipesim.PipelineError`. The rules here count
only live work, which is what the real systems do.

A rule may also promise a staleness bound through ``staleness_bound(scenario)``;
:func:`pipesim.testing.check_invariants` then checks it on every run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pipesim.core.errors import check_int, check_number
from pipesim.core.validate import FieldError
from pipesim.policies.base import CountsOnly
from pipesim.policies.faults import DropFailed
from pipesim.policies.updates import at_batch_edge

if TYPE_CHECKING:
    from pipesim.core.port import PipelineView


def _ceil(x: float) -> float:
    """``math.ceil(x)``, or infinity where ``x`` is (an argument near 1e308 means no limit)."""
    return math.ceil(x) if x < math.inf else math.inf


@dataclass(frozen=True)
class AReaLThrottle:
    """AReaL's rule: capacity = min(max_concurrent - running, (eta + v + 1) * B - (accepted + running)).

    ``accepted`` counts finished episodes that were not dropped, so accepted + running =
    started - dropped: dropped episodes free their place (AReaL ``max_head_offpolicyness`` is eta,
    the pipeline's ``max_staleness``; ``max_concurrent_rollouts`` is ``max_concurrent``, None
    meaning the slot count alone limits concurrency).
    """

    max_concurrent: int | None = None

    def __post_init__(self) -> None:
        if self.max_concurrent is not None:
            check_int("max_concurrent", self.max_concurrent, 1)

    def admits(self, p: PipelineView) -> bool:
        if self.max_concurrent is not None and p.n_running >= self.max_concurrent:
            return False
        return not self.closed(p)

    def closed(self, p: PipelineView) -> bool:
        """The staleness bound says no: only a start, a drop or a new version changes that (a
        finishing episode can lift the concurrency cap, so that part never closes the rule)."""
        return p.started - p.n_dropped >= (p.version + 1 + p.max_staleness) * p.batch_size


@dataclass(frozen=True)
class BatchThrottle:
    """The chapter's count throttle in whole batches: a batch starts once the last one is done.

    verl's one-step off-policy trainer (``recipe/one_step_off_policy/ray_trainer.py``, ``fit``;
    at verl b178a3c ``verl/experimental/one_step_off_policy/ray_trainer.py``, lines 412-515)
    awaits the batch in generation, syncs the weights, and only then launches the next whole
    batch; slime's ``train_async.py`` launches rollout ``i + 1`` once rollout ``i`` has returned
    and waits for it before each ``update_weights``. Neither starts an episode of the next batch
    in the slots the current batch's stragglers leave free, as
    :class:`~pipesim.policies.base.CountThrottle` does. So at a batch boundary
    (:func:`~pipesim.policies.updates.at_batch_edge`) the next batch starts only when no episode
    is running and its first task is below ``(v + 1 + eta) * B`` (eta the pipeline's
    ``max_staleness``); within a batch every free slot starts the next of its episodes.

    Batches are counted in tasks, not starts: batch k is tasks ``k B`` .. ``k B + B - 1``, and a
    failed episode relaunched (``RetryFailed``) or requeued (``RequeueFailed``) keeps its task, so
    it runs within its batch and spends no budget; counted by starts, each relaunch shifted every
    later edge (steps mixed two versions, and slime's drain preset trained episodes 3 versions
    stale at eta 1), and each spent budget for good (``RequeueFailed(1e-3)`` stalled). Without
    relaunches this is the count by starts, bit for bit. ``DropFailed`` is refused at the first
    start (a :class:`~pipesim.core.validate.FieldError` naming ``failures``): a dropped task
    leaves its batch short of B, so the trainer's step takes the next batch's first episode,
    under another version, and the lost budget stalls the run after eta * B drops. Episodes a
    batch policy discards are counted as started, as in the chapter's throttle.
    """

    def admits(self, p: PipelineView) -> bool:
        task, b = p.upcoming_task, p.batch_size
        if not at_batch_edge(p):
            return task < (p.version + 1 + p.max_staleness) * b  # the rest of the batch in generation
        if p.started == 0:
            self._check(p)
        return p.n_running == 0 and not self.closed(p)

    def _check(self, p: PipelineView) -> None:
        if isinstance(p.scenario.failures, DropFailed):
            raise FieldError(
                "BatchThrottle counts whole batches of tasks, and DropFailed loses a task for good: "
                "its batch falls short of batch_size, the trainer's step takes an episode of the next "
                "batch (generated under another version), and each drop spends budget for good (the "
                "run stalls after max_staleness * batch_size drops); use RetryFailed or "
                "RequeueFailed, which relaunch the task within its batch",
                "failures",
            )

    def closed(self, p: PipelineView) -> bool:
        """The next task is past the version bound: only a new version changes that (a finishing
        episode can end the batch, so waiting for it never closes the rule; a requeued task is
        below the bound, as its batch was admitted). Without relaunches it is a boundary with the
        bound reached, as the next task is ``started``."""
        return p.upcoming_task >= (p.version + 1 + p.max_staleness) * p.batch_size


@dataclass(frozen=True)
class QueueAhead(CountsOnly):
    """A bounded queue between generation and training (OpenRLHF ``async_queue_size``).

    Generation may hold at most ``batches_ahead`` batches in flight or finished-but-untaken:
    running + buffered < ceil(batches_ahead * B). Back-pressure from the queue, not versions,
    limits it. At least one batch must fit, or the trainer could never fill one.
    """

    batches_ahead: float = 1.0

    def __post_init__(self) -> None:
        check_number("batches_ahead", self.batches_ahead, 1.0)

    def admits(self, p: PipelineView) -> bool:
        return p.n_running + p.n_buffered < _ceil(self.batches_ahead * p.batch_size)


@dataclass(frozen=True)
class AsyncRatio(CountsOnly):
    """At most ``ratio`` batches ahead of the trainer's version (ROLL ``async_generation_ratio``).

    started - dropped < (v + 1 + ratio) * B, with a fractional ratio allowed: the chapter's
    throttle with a real-valued eta that does not count dropped episodes.
    """

    ratio: float = 1.0

    def __post_init__(self) -> None:
        check_number("ratio", self.ratio, 0.0)

    def admits(self, p: PipelineView) -> bool:
        return p.started - p.n_dropped < (p.version + 1 + self.ratio) * p.batch_size


@dataclass(frozen=True)
class LagBound(CountsOnly):
    """A lag bound counted in samples, modelled on PipelineRL's ``max_lag``.

    A generic rule, not PipelineRL's exact one: the faithful rule (counted in groups, dropped work
    not subtracted, ``max_lag = 0`` synchronous) is :class:`pipesim.policies.systems.PipelineRLLag`,
    which the ``pipelinerl`` preset uses.

    started - dropped - v * B < max_lag_samples: the samples generated beyond what the trainer has
    consumed and published. With max_lag_samples = (1 + eta) * B it is exactly the count throttle
    (with dropped episodes not counted).
    """

    max_lag_samples: int

    def __post_init__(self) -> None:
        check_int("max_lag_samples", self.max_lag_samples, 1)

    def check_batch_size(self, batch_size: int) -> None:
        """``FieldError`` naming ``max_lag_samples`` below ``batch_size``: the rule could never
        start a whole batch, so the first step would never train (the scenario asks at
        construction; the run stalled with a ``PipelineError`` before)."""
        if self.max_lag_samples < batch_size:
            raise FieldError(
                f"max_lag_samples ({self.max_lag_samples:,}) is below batch_size ({batch_size:,}): "
                "the rule starts at most max_lag_samples samples past what the trainer has taken, "
                "so no batch could fill; give max_lag_samples >= batch_size (equal is synchronous)",
                "max_lag_samples",
            )

    def admits(self, p: PipelineView) -> bool:
        return p.started - p.n_dropped - p.version * p.batch_size < self.max_lag_samples


@dataclass(frozen=True)
class StaleFraction(CountsOnly):
    """A cap on samples generated per weight version, modelled on verl's ``staleness_threshold``.

    A generic rule, not verl's exact one (verl resets its counter to the work in flight and
    queued, not to zero): the faithful rule is :class:`pipesim.policies.systems.VerlRollouter`,
    which the ``verl`` preset uses.

    Between two syncs the rollouter may start at most (1 + staleness_threshold) * B * sync_every
    episodes (verl: ``trigger_parameter_sync_step`` = ``sync_every``); the excess over what the
    trainer needs before the next sync is the stale fraction it tolerates. Counts episodes started
    under the current trainer version (``p.version``), so the counter resets at each version.
    """

    staleness_threshold: float = 0.5
    sync_every: int = 1

    def __post_init__(self) -> None:
        check_number("staleness_threshold", self.staleness_threshold, 0.0)
        check_int("sync_every", self.sync_every, 1)

    def admits(self, p: PipelineView) -> bool:
        cap = _ceil((1 + self.staleness_threshold) * p.batch_size * self.sync_every)
        since = p.started_at_version[(p.version // self.sync_every) * self.sync_every]
        return p.started - since < cap


@dataclass(frozen=True)
class OverSample(CountsOnly):
    """Launch more than B per round and train the first B to finish (APRIL over-sampling).

    started - dropped < (v + 1 + eta) * B + ceil((factor - 1) * B): the count throttle plus
    ``factor - 1`` extra batches' worth of episodes. What happens to the extra ones at the sync is
    the weight update's choice: :class:`~pipesim.policies.updates.AbortRestart` with ``restart=False``
    aborts them; :class:`~pipesim.policies.base.PartialRollout` carries them into the next round, where
    they finish first (APRIL's active partial rollout).
    """

    factor: float = 1.5

    def __post_init__(self) -> None:
        check_number("factor", self.factor, 1.0)

    def admits(self, p: PipelineView) -> bool:
        extra = _ceil((self.factor - 1) * p.batch_size)
        return p.started - p.n_dropped < (p.version + 1 + p.max_staleness) * p.batch_size + extra
