"""The task pool a plan's design draws, and its bound: :func:`pool_tasks` counts the tasks a run of a
design takes (the count throttle's default pool, or a larger one where episodes are dropped or left
over), :func:`max_steps` the most steps that stay within
:data:`~pipesim.core.errors.MAX_DURATION_POOL`, and :func:`check_pool` refuses a run past it with a
PlanError naming the key to change. :mod:`pipesim.plan.build` checks a run spec's pool and a plan's
(``check_run_pool``, ``check_plan_pool``) with them; split from it to keep the arithmetic in one
place.

:func:`worst_pool` is the plan's check over every design, memoised: a design's engine slots depend
on its ``(tp, trainer_gpus)`` alone (its engine is the spec's at ``tp``, its replicas the GPUs
``trainer_gpus`` leaves over ``tp``), and its pool and most steps on ``(slots, eta, over,
oversample where over)`` alone (``over``: ``oversample > 1`` or ``update = "abort"``; :func:`pool_tasks`
reads nothing else of a design). Building each design's engine and cluster took 12 s of 767,200
designs (``cluster.n_gpus = 6400`` on ``examples/plan_qwen3_8b.toml``) before the plan said more than
its count; ``tests/test_pool_memo.py`` checks every design's verdict equal without the memo."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from pipesim.core.errors import MAX_DURATION_POOL
from pipesim.plan.checks import PlanError
from pipesim.plan.space import Design, PlanSpec

__all__ = ["check_pool", "max_steps", "pool_tasks", "pool_key", "worst_pool"]


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


def pool_key(d: Design, n_slots: int) -> tuple[int, int, bool, float]:
    """What :func:`pool_tasks` and :func:`max_steps` read of ``d`` with ``n_slots`` slots: the slots,
    ``eta``, whether the pool is the larger one, and ``oversample`` there (0.0 where unread)."""
    over = d.oversample > 1 or d.update == "abort"
    return n_slots, d.eta, over, d.oversample if over else 0.0


def worst_pool(
    spec: PlanSpec, designs: Iterable[Design], steps: int, n_slots_of: Callable[[Design], int]
) -> tuple[Design, int, int] | None:
    """The design of ``designs`` whose run of ``steps`` steps draws past :data:`MAX_DURATION_POOL`
    with the fewest steps fitting (the first in order on a tie), that :func:`max_steps` and its slots;
    None where every run fits. ``n_slots_of`` (a design's engine slots) is called once per
    ``(tp, trainer_gpus)``, on the first design in order with them, so an error it raises names the
    design the unmemoised loop named; the verdicts are memoised by :func:`pool_key` (module docstring)."""
    slots: dict[tuple[int, int], int] = {}
    tops: dict[tuple[int, int, bool, float], int | None] = {}  # None: the run fits
    worst, fewest = None, (MAX_DURATION_POOL, 0)
    for d in designs:
        place = (d.tp, d.trainer_gpus)
        n_slots = slots.get(place)
        if n_slots is None:
            n_slots = slots[place] = n_slots_of(d)
        key = pool_key(d, n_slots)
        if key in tops:
            top = tops[key]
        else:
            top = tops[key] = (
                max_steps(spec, d, n_slots)
                if pool_tasks(spec, d, steps, n_slots) > MAX_DURATION_POOL
                else None
            )
        if top is not None and (worst is None or top < fewest[0]):
            worst, fewest = d, (top, n_slots)
    return None if worst is None else (worst, fewest[0], fewest[1])
