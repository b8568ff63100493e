"""What the scenario strategies change in a scenario once it is drawn: kept runnable, and made
able to break the staleness bound a pinned policy promises.

:mod:`pipesim.testing.strategies` draws each policy family on its own; composed into a scenario,
some draws need a second look, and these rules give it:

* **runnable**: :func:`drops_work` says whether a scenario can drop launched episodes (so that an
  admission rule counting every episode could stall, and is not drawn beside it), and
  ``_at_staleness`` moves ``max_staleness`` only where a policy of the scenario reads it;
* **a promise put to the test**: :func:`pinned_bound` is the tightest staleness bound the pinned
  policies (:data:`ROLES`) promise, and :func:`to_break` reshapes three draws in four so that a
  slow episode can fall past it (``b + 2`` to ``b + STEPS_PAST_BOUND`` steps, a fast trainer, two
  slots per episode of the batch), changing sizes and times only; :func:`break_whole` does it for
  a batch of whole groups, which :func:`fit_batch` keeps whole;
* **drawn together**: :func:`cap_for` keeps a timeout beside ``DropOverlong`` from cutting
  everything: its cap sits above the top of the durations drawn (:func:`upper_s`).

They read and change a finished scenario, never a strategy, so they live apart from the strategies
that draw: the rules every draw obeys sit in one place, and the strategies stay a plain list of
what each family draws. Like the strategies, they import Hypothesis only when called.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def drops_work(sc: Any) -> bool:
    """Whether a scenario can drop launched episodes (so count-all admission could stall): its
    failures, the policies that always drop, those that say so (``drops_work = True``), and the
    batch policies that drop only in some settings: ``WholeGroups`` filtering or dropping stale
    groups, ``DropOverlong`` under a timeout (what it cuts is dropped)."""
    from pipesim.policies.batching import DropOverlong, DropStale, EvictStalest
    from pipesim.policies.groups import WholeGroups
    from pipesim.policies.updates import AbortRestart

    b = sc.batching
    return (
        sc.failures is not None
        or isinstance(b, DropStale | EvictStalest)
        or isinstance(sc.weight_update, AbortRestart)
        or any(getattr(q, "drops_work", False) is True for q in (b, sc.weight_update))
        or (isinstance(b, WholeGroups) and (b.drop_stale or b.filter_rate > 0))
        or (isinstance(b, DropOverlong) and sc.timeout is not None)
    )


def _at_staleness(sc: Any, k: int) -> Any:
    """``sc`` at ``max_staleness`` k, or as it is where none of its policies reads the field
    (an admission rule with a bound of its own: such a scenario is refused, not run)."""
    from pipesim.policies.base import UnreadStaleness

    try:
        return sc.with_(max_staleness=k)
    except UnreadStaleness:
        return sc


STEPS_PAST_BOUND = 4
"""A draw made to break a staleness bound ``b`` has ``b + 2`` to ``b + STEPS_PAST_BOUND`` steps."""

MAX_PROMISE_STEPS = 32
"""The most steps such a draw has: a bound of ``MAX_PROMISE_STEPS - 1`` or more is not tested."""


def to_break(draw: Any, sc: Any, b: int, max_slots: int) -> Any:
    """``sc``, three draws in four made able to break a staleness bound ``b`` (see the module):
    ``b + 2`` steps or more, a trainer and a sync of 0-5 s, at least 4 slots and 2 slots per
    episode of the batch, so that a slow episode can fall ``b + 1`` versions behind while the
    other slots fill batches. Only sizes and times change: the policies are the ones drawn."""
    from hypothesis import strategies as st

    if not draw(st.sampled_from((True, True, True, False))):
        return sc
    top = min(max(5, b + STEPS_PAST_BOUND), MAX_PROMISE_STEPS)
    n_slots = max(sc.pipeline.n_slots, min(4, max_slots))  # only more: the replicas still fit
    return sc.with_(
        steps=draw(st.integers(min(b + 2, top), top)),
        train_time_s=float(draw(st.integers(0, 5))),
        sync_time_s=float(draw(st.integers(0, 5))),
        n_slots=n_slots,
        batch_size=min(sc.pipeline.batch_size, max(1, n_slots // 2)),
    )


ROLES = ("admission", "weight_update", "batching")
"""The scenario fields the pinned policies of :func:`~pipesim.testing.strategies.policy_scenarios`
fill, in its order."""


def pinned_bound(sc: Any, roles: tuple[str, ...]) -> int | None:
    """The tightest staleness bound the policies of ``roles`` promise in ``sc``, or None. A promise
    that is no count, or raises, is left to ``check_invariants`` to name (its ``promises are
    well-formed``), not refused while drawing."""
    from pipesim.core.port import StalenessPromise

    bounds = []
    for role in roles:
        policy = getattr(sc, role)
        if isinstance(policy, StalenessPromise):
            try:
                b = policy.staleness_bound(sc)
            except Exception:  # noqa: BLE001 - the run and the kit's checks name it
                continue
            if isinstance(b, int) and not isinstance(b, bool) and b >= 0:
                bounds.append(b)
    return min(bounds) if bounds else None


def fit_batch(batch_size: int, batching: Any, most: int | None = None) -> int:
    """``batch_size``, or the nearest size below it (else above) that ``batching`` accepts: a
    policy with ``check_batch_size`` (``WholeGroups``, ROLL's rules) takes whole groups only.
    ``most``: look no higher than this where a smaller size fits."""
    from pipesim.core.validate import FieldError

    check = getattr(batching, "check_batch_size", None)
    if check is None:
        return batch_size
    top = batch_size if most is None else min(batch_size, most)
    for b in [*range(max(top, 1), 0, -1), *range(top + 1, 64 * max(top, 1) + 64)]:
        try:
            check(b)
        except FieldError:
            continue
        return b
    return batch_size  # none found: the scenario names the field


def break_whole(draw: Any, sc: Any, b: int, max_slots: int) -> Any:
    """:func:`to_break` (``b + 2`` steps and more, a batch of at most half the slots), for a batch of
    whole groups too: the slots are raised (within ``max_slots``) to hold two per episode of the
    batch, and a batch that cannot stay whole groups is not reshaped."""
    if getattr(sc.batching, "check_batch_size", None) is not None:
        size = fit_batch(sc.pipeline.batch_size, sc.batching, most=max(1, max_slots // 2))
        slots = max(sc.pipeline.n_slots, min(2 * size, max_slots))
        if min(size, max(1, max(slots, min(4, max_slots)) // 2)) != size:
            return sc  # as to_break would cut it: not whole groups
        sc = sc.with_(batch_size=size, n_slots=slots)
    return to_break(draw, sc, b, max_slots)


def upper_s(durations: Any) -> float | None:
    """The top of what a duration model draws, near enough: the 99.87% point of a log-normal
    (``z = 3``), the 99.9% point of an exponential (``ln 1000 < 7``), a trace's longest value,
    else the longest of 256 draws with a fixed numpy seed (any model that ``sample(n, rng)``
    follows: ``AgentDurations``, a user's); None where none of these is read."""
    import math

    import numpy as np

    from pipesim.workload.durations import ExponentialDurations, LogNormalDurations, TraceDurations

    if isinstance(durations, LogNormalDurations):
        return float(durations.median_s * math.exp(3.0 * durations.sigma))
    if isinstance(durations, ExponentialDurations):
        return float(7.0 * durations.mean_s)
    if isinstance(durations, TraceDurations):
        return float(max(durations.values))
    try:
        top = float(np.max(np.asarray(durations.sample(256, np.random.default_rng(0)), dtype=np.float64)))
    except Exception:  # noqa: BLE001 - a model the kit cannot sample keeps the 50 s floor
        return None
    return top if math.isfinite(top) else None


def cap_for(batching: Any, timeout: Any, durations: Any = None) -> Any:
    """``timeout``, its cap raised beside ``DropOverlong``, which drops what the cap cuts: to at
    least 50 s (a cap far below the durations cut nearly every episode and the pool ran out, 8
    draws in 54), and above the top of ``durations`` (:func:`upper_s`, a quarter over it). A
    fixed 50 s floor was not enough: ``LogNormalDurations(51.0, 0.0)`` lasts 51 s every time, so
    every episode was cut and dropped and the pool ran out, a draw that could make no progress."""
    from pipesim.policies.batching import DropOverlong

    if timeout is None or not isinstance(batching, DropOverlong):
        return timeout
    top = None if durations is None else upper_s(durations)
    floor = 50.0 if top is None else max(50.0, 1.25 * top)
    if timeout.cap_s >= floor:
        return timeout
    return dataclasses.replace(timeout, cap_s=floor)


def hazard_for(failures: Any, durations: Any = None) -> Any:
    """``failures`` (a drawn failure policy), its hazard lowered to at most one over the top of
    ``durations`` (:func:`upper_s`), so the longest episode the model draws survives a launch
    with odds of at least 1 in e. The kit's hazards (:func:`~pipesim.testing.families.failure_policies`,
    a mean life of 500 s or more) assume most episodes survive, which a long tail breaks:
    ``LogNormalDurations(46.0, 1.5)`` beside ``RetryFailed(0.00195)`` relaunched its longest task
    (a task keeps its duration) until the run stopped with "no progress", under the README's own
    example, on 2 seeds of 10 (a draw that could make no progress, not a policy's fault)."""
    hazard = getattr(failures, "hazard_per_s", None)
    top = None if durations is None else upper_s(durations)
    if hazard is None or top is None or top <= 0.0 or hazard * top <= 1.0:
        return failures
    return dataclasses.replace(failures, hazard_per_s=1.0 / top)
