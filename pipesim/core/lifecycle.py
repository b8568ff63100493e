"""The episode lifecycle: timeout and failure draws at launch, failures sorted out at finish.

The scenario's :class:`~pipesim.policies.faults.Timeout` caps each episode's generation and its
failure policy (:class:`~pipesim.policies.faults.FailurePolicy`) gives a constant hazard and what
to do with a failed episode. Both are read through their fields alone, so the kernel needs no
policy module. Draws come from a generator seeded with the scenario's seed and a salt of its own,
so adding failures never changes the duration pool.

**What a timeout does to an episode.** An episode drawn longer than the cap is given the cap as
its work at launch; its record keeps the length it was drawn with (``duration_s``), and the
results report the cap for it (:meth:`pipesim.results.columns.EpisodeColumns.generated_s`), so a
run with a timeout reports what a run on the pool clamped at the cap reports, failed, aborted and
in-flight episodes included. It is flagged ``truncated`` only when it *finishes* at the cap
(:meth:`EpisodeLifecycle.on_finished`): one that fails first, is aborted by a weight update, or is
still generating when the run ends never reached the cap, so the timeout cut nothing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from pipesim.core.episode import FAILED, Episode
from pipesim.core.validate import FieldError, check_number

if TYPE_CHECKING:
    from pipesim.core.port import PipelineView
    from pipesim.core.roles import FailurePolicy, RunSpec, TimeoutRule

FAILURE_SEED_SALT = 0xFA11


class EpisodeLifecycle:
    """Applies the scenario's timeout and failure draws at launch, and sorts out failures at finish."""

    def __init__(
        self, timeout: TimeoutRule | None, failures: FailurePolicy | None, rng: np.random.Generator
    ) -> None:
        self.cap_s = timeout.cap_s if timeout is not None else math.inf
        self.failures = failures
        if failures is not None:  # a user's failure policy: its hazard checked once, here
            try:
                check_number("failures.hazard_per_s", failures.hazard_per_s, 0.0, strict=True)
            except FieldError as exc:
                raise FieldError(f"{exc} (the failure policy {type(failures).__name__})", exc.field) from None
        self.mean_life_s = 1.0 / failures.hazard_per_s if failures is not None else math.inf
        self.rng = rng

    @classmethod
    def build(cls, scenario: RunSpec) -> EpisodeLifecycle:
        rng = np.random.default_rng([scenario.seed, FAILURE_SEED_SALT])
        return cls(scenario.timeout, scenario.failures, rng)

    def work_s(self, ep: Episode) -> float:
        """Seconds the episode will generate: its duration, capped, cut short by a failure.

        Not flagged truncated here: only an episode that finishes at the cap was cut (on_finished)."""
        work = ep.duration_s
        if work > self.cap_s:
            work = self.cap_s
        if self.failures is not None:
            life = float(self.rng.exponential(self.mean_life_s))
            if life < work:
                ep.fail_at_s = life
                work = life
        return work

    def on_finished(self, p: PipelineView, episodes: list[Episode]) -> list[Episode]:
        """Return the episodes that really finished; failed ones are dropped and handled.

        A finished episode drawn longer than the cap ran to it: the timeout cut it."""
        cap = self.cap_s
        if self.failures is None:
            for ep in episodes:
                if ep.duration_s > cap:
                    ep.truncated = True
            return episodes  # (a lifecycle without failures has a timeout: cap is finite)
        ok = [ep for ep in episodes if ep.fail_at_s is None]
        if len(ok) < len(episodes):
            for ep in episodes:
                if ep.fail_at_s is not None:  # it failed before the cap: not truncated
                    ep.lost_s = ep.work_s  # the seconds it spent on its slot, pauses excluded
                    ep.truncated = False
                    p.drop([ep], FAILED)
                    self.failures.on_failure(p, ep)
        if cap < math.inf:
            for ep in ok:
                if ep.duration_s > cap:
                    ep.truncated = True
        return ok
