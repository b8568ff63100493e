"""The limits a feasible design meets: :class:`Constraints`, and the run metric each one reads
(:data:`CONSTRAINT_METRICS`).

A constraint caps one metric of a design's runs: the mean and the largest staleness, the discarded
share of generated tokens, the off-policy share of trained tokens and the price of a million
trained tokens; ``min_trainer_gpus`` bounds the placements instead. :meth:`Constraints.violations`
says how far a run is past each limit, and :meth:`Constraints.feasible` whether it meets them all;
the evaluation (:mod:`pipesim.plan.evaluate`), the explanation (:mod:`pipesim.plan.explain`) and
the verification (:mod:`pipesim.plan.verify`) read them.

They live apart from the space (:mod:`pipesim.plan.space`) because they judge results rather than
describe candidates: a constraint reads a run's metrics by name, and nothing of the cluster, the
model or the search.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipesim.plan.checks import MAX_GPUS, integer, optional_number

__all__ = ["CONSTRAINT_METRICS", "Constraints"]

CONSTRAINT_METRICS = {
    "mean_staleness": "staleness_mean",
    "max_staleness": "staleness_max",
    "discarded_share": "discarded_share",
    "offpolicy_token_share": "offpolicy_token_share",
    "cost_per_mtok": "cost_per_mtok",
}
"""Each constraint of :class:`Constraints` -> the run metric it limits."""


@dataclass(frozen=True)
class Constraints:
    """Limits a feasible design meets; None: no limit."""

    mean_staleness: float | None = None
    max_staleness: float | None = None
    discarded_share: float | None = None
    """Discarded generated tokens / generated tokens."""
    offpolicy_token_share: float | None = None
    """Trained tokens an older policy than the trainer's generated / trained tokens (stale samples
    whole, and the prefixes partial rollouts generated before their last weight update:
    ``docs/compute.md``, "Off-policy tokens")."""
    min_trainer_gpus: int = 1
    cost_per_mtok: float | None = None
    """Budget: the price of a million trained tokens (``cluster.cost_per_gpu_hour`` x GPU-hours)."""

    def __post_init__(self) -> None:
        optional_number("constraints.cost_per_mtok", self.cost_per_mtok, 0)
        optional_number("constraints.mean_staleness", self.mean_staleness, 0)
        optional_number("constraints.max_staleness", self.max_staleness, 0)
        optional_number("constraints.discarded_share", self.discarded_share, 0, 1)
        optional_number("constraints.offpolicy_token_share", self.offpolicy_token_share, 0, 1)
        integer("constraints.min_trainer_gpus", self.min_trainer_gpus, 0, MAX_GPUS)

    def violations(self, m: dict[str, float]) -> dict[str, float]:
        """Constraint name -> how far metric ``m`` is past its limit (<= 0: met)."""
        out = {}
        for name, key in CONSTRAINT_METRICS.items():
            limit = getattr(self, name)
            if limit is not None and (key in m or name != "cost_per_mtok"):  # a run's raw metrics
                out[name] = float(m[key]) - float(limit)  # have no price (evaluate.priced adds it)
        return out

    def feasible(self, m: dict[str, float]) -> bool:
        return not m.get("failed") and all(v <= 1e-12 for v in self.violations(m).values())
