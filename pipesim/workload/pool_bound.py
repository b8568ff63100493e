"""The default task pool's size, and the refusal of one past ``MAX_DURATION_POOL``.

A scenario that sets no ``pool_size`` draws ``(steps + max_staleness + 1) x batch_size + n_slots``
tasks (:func:`pool_tasks`; more for a filtering ``WholeGroups``), what the count throttle launches
when every episode is trained. Past ``MAX_DURATION_POOL`` that pool is refused where the scenario
is built (:func:`pool_too_big`), a CrossFieldError, since any of those sizes, or a ``pool_size``
set, settles it: a later ``--set`` may (:func:`pipesim.io.overrides.apply_overrides`). The
refusal names the field of the largest term, shows every term's value and offers each change that
alone fits, each checked against the scenario's other rules (a batch of whole groups, a whole
draw's bound: :func:`pipesim.workload.pools.check_whole_draw`) before it is offered. The scenario
is typed ``Any`` here: the workload layer sits below ``config``.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

from pipesim.core.errors import MAX_DURATION_POOL
from pipesim.core.validate import CrossFieldError, int_shown

__all__ = ["FILTER_POOL_MARGIN", "pool_too_big", "pool_tasks"]

FILTER_POOL_MARGIN = 1.5
"""The default pool of a filtering ``WholeGroups`` holds this many times the tasks its filter's
mean rate needs (:meth:`Scenario.pool_for`): the filter's draws vary, and a run short of tasks stops."""


def pool_tasks(
    steps: int, max_staleness: int, batch_size: int, n_slots: int, filter_rate: float = 0.0
) -> int:
    """The default pool of these sizes (:meth:`Scenario.pool_for`): ``(steps + max_staleness + 1) x
    batch_size + n_slots``, and for a filter of rate ``filter_rate`` > 0 :data:`FILTER_POOL_MARGIN`
    times that over ``1 - filter_rate``, plus a batch."""
    base = (steps + max_staleness + 1) * batch_size + n_slots
    if filter_rate <= 0:
        return base
    if base < 2**53:  # a float holds it exactly: the arithmetic every pool drawn so far had
        return math.ceil(FILTER_POOL_MARGIN * base / (1.0 - filter_rate)) + batch_size
    # past a float's range (steps=10**400) only a refusal's message reads it: exact, no OverflowError
    margin = Fraction(FILTER_POOL_MARGIN) / (1 - Fraction(filter_rate))
    return math.ceil(margin * base) + batch_size


_POOL_TERMS = ("steps", "max_staleness", "batch_size", "n_slots")
"""The pipeline fields that size the default pool, in :func:`pool_tasks`'s order; the smallest
value each may take (``_POOL_FLOOR``)."""
_POOL_FLOOR = {"steps": 1, "max_staleness": 0, "batch_size": 1, "n_slots": 1}


def _largest_that_fits(sizes: dict[str, int], name: str, rate: float) -> int | None:
    """The largest value of ``name`` below its value in ``sizes`` whose default pool, the other
    sizes kept, is within ``MAX_DURATION_POOL`` (None where even its smallest value is not):
    a bisection, since the pool grows with each term (and ``filter_rate`` may round it)."""

    def fits(value: int) -> bool:
        return pool_tasks(**{**sizes, name: value}, filter_rate=rate) <= MAX_DURATION_POOL

    lo, hi = _POOL_FLOOR[name], sizes[name]  # fits(lo) is asked first; fits(hi) is False
    if not fits(lo):
        return None
    while hi - lo > 1:  # invariant: fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


_FIX_TRIES = 256
"""How far below the largest size that fits the pool a fix looks for one the scenario accepts (a
batch of whole groups of up to this many samples)."""


def _accepts(scenario: Any, name: str, value: int) -> bool:
    """Whether ``scenario`` with the pipeline's ``name`` at ``value`` is a scenario: a fix the
    message offers must not meet another refusal (a batch that is not whole groups, fewer slots
    than replicas, a ``max_staleness`` its admission rule does not read)."""
    try:
        dataclasses.replace(scenario, pipeline=dataclasses.replace(scenario.pipeline, **{name: value}))
    except (ValueError, TypeError):
        return False
    return True


def _pool_fix(scenario: Any) -> str | None:
    """The ``pool_size`` values that settle a default pool past the bound: from ``steps x
    batch_size`` (:meth:`Scenario.check_pool_size`) to the largest the scenario takes (a whole draw
    of ``pool_size x durations.max_turns`` cells is bounded too: ``check_whole_draw``), with
    ``pool_draw 'stable'`` where a whole draw of the least is past that bound; None where none fits."""
    least, draw = scenario.min_pool_size, scenario.pool_draw

    def takes(size: int, how: str) -> bool:
        try:
            dataclasses.replace(scenario, pool_size=size, pool_draw=how)
        except (ValueError, TypeError):
            return False
        return True

    if least > MAX_DURATION_POOL or not (takes(least, draw) or takes(least, draw := "stable")):
        return None
    lo, hi = least, MAX_DURATION_POOL + 1  # invariant: takes(lo), not takes(hi) (past the bound)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if takes(mid, draw) else (lo, mid)
    how = f" with pool_draw '{draw}'" if draw != scenario.pool_draw else ""
    return f"pool_size from {int_shown(least)} (steps x batch_size) to {lo:,}{how}"


def pool_too_big(scenario: Any, rate: float) -> CrossFieldError:
    """The refusal of a scenario whose default pool (``pool_size`` unset) passes
    ``MAX_DURATION_POOL``. A CrossFieldError: any of the sizes, or a ``pool_size`` set, settles it,
    so ``--set max_staleness=100000 --set pool_size=3000`` runs as the reverse order does
    (:func:`pipesim.io.overrides.apply_overrides`). Its field is the pipeline field of the largest
    term (``max_staleness`` where ``max_staleness x batch_size`` outweighs ``(steps + 1) x
    batch_size`` and ``n_slots``); the message shows every term's value and each change that alone
    fits: a smaller value of one size (the largest that fits) or a ``pool_size`` set, between
    ``steps x batch_size`` (:meth:`Scenario.check_pool_size`) and the bound. ``rate``: the share
    of groups the scenario's batch policy filters (``Scenario.pool_for``), 0 for most."""
    p = scenario.pipeline
    sizes = {k: getattr(p, k) for k in _POOL_TERMS}
    weights = {"steps": (p.steps + 1) * p.batch_size, "max_staleness": p.max_staleness * p.batch_size}
    field = max({**weights, "n_slots": p.n_slots}.items(), key=lambda kv: kv[1])[0]
    shown_ = {k: int_shown(v) for k, v in sizes.items()}
    formula = (
        f"(steps {shown_['steps']} + max_staleness {shown_['max_staleness']} + 1) x batch_size "
        f"{shown_['batch_size']} + n_slots {shown_['n_slots']}"
    )
    if rate > 0:  # a filtering WholeGroups relaunches the groups it drops
        formula = f"{FILTER_POOL_MARGIN:g} x ({formula}) / (1 - filter_rate {rate:g}) + batch_size"
    fixes = []
    for name in sorted(_POOL_TERMS, key=lambda k: k != field):  # the field named first
        top = _largest_that_fits(sizes, name, rate)
        down = _FIX_TRIES if name == "batch_size" else 0  # a batch of whole groups: a few below
        tries = range(top, max(_POOL_FLOOR[name], top - down) - 1, -1) if top is not None else ()
        top = next((v for v in tries if _accepts(scenario, name, v)), None)  # whole groups, replicas
        if top is not None:
            where = " (replicas x max_num_seqs in a compute-grounded run)" if name == "n_slots" else ""
            fixes.append(f"{name} <= {int_shown(top)}{where}")
    if (pool := _pool_fix(scenario)) is not None:
        fixes.append(pool)
    fix = "; any one of these fits: " + ", ".join(fixes) if fixes else "; no one of them alone fits"
    total = int_shown(scenario.default_pool_size)
    return CrossFieldError(
        f"{field} is the largest term of this scenario's default task pool (pool_size unset), {formula} = "
        f"{total} tasks, more than the {MAX_DURATION_POOL:,} a run may draw{fix}",
        f"pipeline.{field}",
    )
