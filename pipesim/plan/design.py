"""One point of the planner's space: a :class:`Design`, the names of its weight-update policies, and
the check of a design written by hand.

A :class:`Design` is a placement (``trainer_gpus``, 0 = colocated), the engine replicas' TP degree,
the admission bound ``eta`` (the count throttle) with an optional over-sampling ``factor``
(:class:`pipesim.OverSample`), the weight-update policy and the sync interval.
:mod:`pipesim.plan.build` turns a design into what :func:`pipesim.compute.run_compute` runs.

Weight-update policies (``update``, :data:`UPDATES`):

* ``drain`` -- :class:`pipesim.Drain`: wait for the episodes in flight, then sync;
* ``partial`` -- :class:`pipesim.PartialRollout`: pause, sync, resume with the KV cache kept;
* ``abort_reprefill`` -- :class:`pipesim.AbortReprefill`: partial rollout with the KV cache dropped
  (every sequence in flight re-prefills what it holds after the sync);
* ``inflight`` -- :class:`pipesim.InFlightUpdate`: weights stream while generating, each replica
  pausing only to load (a double-buffered transfer; PipelineRL's code pauses for the whole receive);
* ``abort`` -- :class:`pipesim.AbortRestart` ``(restart=False)``: in-flight episodes are dropped at
  the sync (with over-sampling: APRIL); their tokens count as discarded.

``sync_every`` = k > 1 wraps the policy in :class:`pipesim.SyncEveryK`.

A design is the value every stage of a plan hands on (the search, the judge, the report, a run
spec's ``[design]``), while :mod:`pipesim.plan.space` holds what a plan is asked: the ranges a
design is drawn from and the whole spec. Apart from them, a design is built, compared, sorted and
named without the spec's checks; :func:`check_baseline` checks one that did not come from the space
(the ``[baseline]`` a user writes) against the ranges the space's values take.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipesim.core.errors import shown
from pipesim.plan.checks import (
    MAX_ETA,
    MAX_GPUS,
    MAX_OVERSAMPLE,
    MAX_SYNC_EVERY,
    PlanError,
    did_you_mean,
    integer,
    number,
)

__all__ = ["UPDATES", "Design", "check_baseline"]

UPDATES = ("drain", "partial", "abort_reprefill", "inflight", "abort")


@dataclass(frozen=True, order=True)
class Design:
    """One candidate design (see the module docstring)."""

    trainer_gpus: int
    tp: int = 1
    eta: int = 1
    update: str = "partial"
    sync_every: int = 1
    oversample: float = 1.0

    @property
    def colocated(self) -> bool:
        return self.trainer_gpus == 0

    def label(self, n_gpus: int) -> str:
        place = "colocated" if self.colocated else f"split {self.trainer_gpus}:{n_gpus - self.trainer_gpus}"
        extra = f" k={self.sync_every}" if self.sync_every > 1 else ""
        extra += f" os={self.oversample:g}" if self.oversample > 1 else ""
        return f"{place} tp{self.tp} eta={self.eta} {self.update}{extra}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "trainer_gpus": self.trainer_gpus,
            "tp": self.tp,
            "eta": self.eta,
            "update": self.update,
            "sync_every": self.sync_every,
            "oversample": self.oversample,
        }


def check_baseline(d: object, n_gpus: int) -> None:
    """The ``[baseline]`` design holds values a design of the space may: each error names
    ``baseline.KEY`` (a 10**18 eta or oversample was refused as the run's pool, a 1e308 sync interval
    as the design's name, an oversample of 1e308 as an OverflowError)."""
    if not isinstance(d, Design):
        raise PlanError(f"baseline must be a Design, got {shown(d)}", "baseline")
    integer("baseline.placement", d.trainer_gpus, 0, MAX_GPUS)
    if d.trainer_gpus >= n_gpus:
        raise PlanError(
            f"baseline.placement ({d.trainer_gpus} trainer GPUs) must leave engine GPUs of "
            f"cluster.n_gpus ({n_gpus})",
            "baseline.placement",
        )
    integer("baseline.tp", d.tp, 1, MAX_GPUS)
    integer("baseline.eta", d.eta, 0, MAX_ETA)
    if not isinstance(d.update, str) or d.update not in UPDATES:
        raise PlanError(
            f"baseline.update: unknown {shown(d.update)}{did_you_mean(d.update, UPDATES)} "
            f"(choose from {list(UPDATES)})",
            "baseline.update",
        )
    integer("baseline.sync_every", d.sync_every, 1, MAX_SYNC_EVERY)
    number("baseline.oversample", d.oversample, 1, MAX_OVERSAMPLE)
