"""The task pool a plan's design draws, and its bound: :func:`pool_tasks` counts the tasks a run of a
design takes (the count throttle's default pool, or a larger one where episodes are dropped or left
over), :func:`max_steps` the most steps that stay within
:data:`~pipesim.core.errors.MAX_DURATION_POOL`, and :func:`check_pool` refuses a run past it with a
PlanError naming the key to change. :mod:`pipesim.plan.build` checks a run spec's pool and a plan's
(``check_run_pool``, ``check_plan_pool``) with them; split from it to keep the arithmetic in one
place."""

from __future__ import annotations

import math

from pipesim.core.errors import MAX_DURATION_POOL
from pipesim.plan.checks import PlanError
from pipesim.plan.space import Design, PlanSpec

__all__ = ["check_pool", "max_steps", "pool_tasks"]


def pool_tasks(spec: PlanSpec, d: Design, steps: int, n_slots: int) -> int:
    """The tasks a run of ``d`` for ``steps`` steps draws with ``n_slots`` engine sequences: the
    count throttle's default, ``(steps + eta + 1) x batch_size + n_slots``; where episodes are
    dropped or left over (``oversample > 1``, ``update = "abort"``), a pool beyond it,
    ``ceil((steps + eta + 2) x batch_size x oversample x 3) + 2 x n_slots``."""
    if d.oversample > 1 or d.update == "abort":
        return math.ceil((steps + d.eta + 2) * spec.batch_size * d.oversample * 3) + 2 * n_slots
    return (steps + d.eta + 1) * spec.batch_size + n_slots


def max_steps(spec: PlanSpec, d: Design, n_slots: int) -> int:
    """The most steps :func:`pool_tasks` keeps within :data:`MAX_DURATION_POOL` (0: not one)."""
    lo, hi = 0, MAX_DURATION_POOL  # pool_tasks grows with steps by at least batch_size >= 1 each
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pool_tasks(spec, d, mid, n_slots) <= MAX_DURATION_POOL:
            lo = mid
        else:
            hi = mid - 1
    return lo


def check_pool(spec: PlanSpec, d: Design, steps: int, n_slots: int, steps_key: str = "search.steps") -> None:
    """PlanError naming ``steps_key`` where a run of ``d`` for ``steps`` steps draws more tasks than
    :data:`MAX_DURATION_POOL`, with the most steps it may run and the spec keys that size the pool;
    ``model.max_num_seqs`` (``model.episodes_per_replica`` where given) where no number of steps
    fits and the engines' sequences are the bulk."""
    need = pool_tasks(spec, d, steps, n_slots)
    if need <= MAX_DURATION_POOL:
        return
    top, over = max_steps(spec, d, n_slots), d.oversample > 1 or d.update == "abort"
    batches = f"steps {steps:,} + design.eta {d.eta} + {1 + over}) x batch {spec.batch_size:,}"
    sizes = (
        f"ceil(({batches} x design.oversample {d.oversample:g} x 3) + 2 x {n_slots:,} engine sequences"
        if over
        else f"({batches} + {n_slots:,} engine sequences"
    )
    key, said = steps_key, f"{steps_key} ({steps:,})"
    per, slots_key = spec.max_num_seqs, "model.max_num_seqs"
    if spec.episodes_per_replica is not None:  # the slots a replica holds (PlanSpec's field)
        per, slots_key = spec.episodes_per_replica, "model.episodes_per_replica"
    replicas, rest = divmod(n_slots, per)
    if top < 1 and not rest and n_slots >= pool_tasks(spec, d, 1, 0):  # no step fits: not the steps
        key, said = (
            slots_key,
            f"{slots_key} ({per:,}) x {replicas:,} replicas (the engine GPUs of "
            "cluster.n_gpus over design.tp)",
        )
    fix = f"at most {top:,} steps with this design" if top >= 1 else "no number of steps fits"
    raise PlanError(
        f"{said}: the run draws a task pool of {need:,} tasks ({sizes}), more than the "
        f"{MAX_DURATION_POOL:,} a run may draw: {fix}; or a smaller batch (workload.prompts_per_step x "
        f"workload.samples_per_prompt) or fewer engine sequences ({slots_key} x the replicas)",
        key,
    )
