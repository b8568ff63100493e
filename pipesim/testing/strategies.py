"""Hypothesis strategies for every policy family, re-exported by :mod:`pipesim.testing`.

``admissions()``, ``weight_updates()``, ``batchings()``, ``failure_policies()``, ``timeouts()``,
``replica_configs()`` and ``duration_models()`` draw valid policy objects with small parameters;
``policy_scenarios(...)`` composes them into runnable scenarios. Pass a list of objects or a
strategy for any family to pin it, e.g. ``policy_scenarios(admissions=[MyRule()])`` to test a
rule of your own against every other policy.

Combinations that cannot make progress are not drawn: the chapter's ``CountThrottle`` and
verl's ``StaleFraction`` count dropped episodes against their cap and can stall, so they are only
combined with policies that never drop work. (Such a combination, built by hand, ends with
a :class:`~pipesim.PipelineError`, never a hang.) pipesim knows its own policies that drop; a
batch policy or weight update of yours that drops episodes says so with a class attribute
``drops_work = True``; such a batch policy is then not drawn under ``SyncEveryK`` either (the
trainer runs ``k - 1`` versions ahead of the weights there, so a policy dropping what is older
than its own bound may drop everything), unless the weight updates are pinned. Hypothesis is
imported lazily.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


def as_strategy(x: Any, default: Any, name: str = "policies") -> Any:
    """``x`` as a strategy: None -> ``default``, a non-empty list or tuple -> one of its items, a
    strategy as it is; anything else is a FieldError naming the argument ``name`` (one policy
    instead of a list reached Hypothesis as "object has no attribute 'validate'")."""
    from hypothesis import strategies as st
    from hypothesis.strategies import SearchStrategy

    from pipesim.core.errors import shown
    from pipesim.core.validate import FieldError

    if x is None:
        return default
    if isinstance(x, list | tuple):
        if not x:
            raise FieldError(f"{name}: an empty list draws nothing; give at least one, or None", name)
        return st.sampled_from(list(x))
    if isinstance(x, SearchStrategy):
        return x
    raise FieldError(
        f"{name}: must be a list of objects or a Hypothesis strategy, got {shown(x)}; "
        f"one object: {name}=[{type(x).__name__}(...)]",
        name,
    )


def admissions() -> SearchStrategy[Any]:
    from hypothesis import strategies as st

    from pipesim.policies.admission import (
        AReaLThrottle,
        AsyncRatio,
        LagBound,
        OverSample,
        QueueAhead,
        StaleFraction,
    )
    from pipesim.policies.base import CountThrottle

    return st.one_of(
        st.just(CountThrottle()),
        st.builds(AReaLThrottle, st.none() | st.integers(1, 16)),
        st.builds(QueueAhead, st.floats(1.0, 3.0)),
        st.builds(AsyncRatio, st.floats(0.0, 3.0)),
        st.builds(LagBound, st.integers(10, 40)),  # >= the largest batch drawn, or no batch fills
        st.builds(StaleFraction, st.floats(0.0, 1.0), st.integers(1, 2)),
        st.builds(OverSample, st.floats(1.0, 2.0)),
    )


def weight_updates() -> SearchStrategy[Any]:
    from hypothesis import strategies as st

    from pipesim.policies.base import Drain, PartialRollout
    from pipesim.policies.updates import (
        AbortReprefill,
        AbortRestart,
        InFlightUpdate,
        OverlappedSwap,
        SyncEveryK,
    )

    return st.one_of(
        st.sampled_from([PartialRollout(), Drain(), OverlappedSwap()]),
        st.builds(AbortReprefill, st.floats(1.0, 100.0), st.floats(10.0, 10_000.0)),
        st.builds(AbortRestart, st.booleans()),
        st.builds(InFlightUpdate, st.floats(0.0, 5.0)),
        st.builds(SyncEveryK, st.integers(1, 3), st.sampled_from([PartialRollout(), Drain()])),
    )


def batchings(min_capacity: int = 12) -> SearchStrategy[Any]:
    from hypothesis import strategies as st

    from pipesim.policies.base import OldestFinishedFirst
    from pipesim.policies.batching import DropStale, EvictStalest, LowestVersionFirst, WindowedFIFO

    return st.one_of(
        st.sampled_from([OldestFinishedFirst(), LowestVersionFirst()]),
        st.builds(WindowedFIFO, st.integers(1, 40)),
        st.builds(DropStale, st.booleans()),
        st.builds(EvictStalest, st.integers(min_capacity, 3 * min_capacity)),
    )


def failure_policies() -> SearchStrategy[Any]:
    from hypothesis import strategies as st

    from pipesim.policies.faults import DropFailed, RequeueFailed, RetryFailed

    hazard = st.floats(1e-4, 2e-3)  # mean life >= 500 s: most episodes survive
    return st.one_of(
        st.builds(DropFailed, hazard), st.builds(RetryFailed, hazard), st.builds(RequeueFailed, hazard)
    )


def timeouts() -> SearchStrategy[Any]:
    from hypothesis import strategies as st

    from pipesim.policies.faults import Timeout

    return st.builds(Timeout, st.floats(1.0, 200.0))


def replica_configs(routings_: Any = None) -> SearchStrategy[Any]:
    """``Replicas`` of 1-3 engines routed by one of ``routings_`` (a list or a strategy; default:
    the built-in rules)."""
    from hypothesis import strategies as st

    from pipesim.policies.replicas import GroupAffinity, LeastLoaded, Replicas, RoundRobin

    builtin = [RoundRobin(), LeastLoaded(), GroupAffinity(2), GroupAffinity(4, RoundRobin())]
    return st.builds(
        Replicas, st.integers(1, 3), as_strategy(routings_, st.sampled_from(builtin), "routings_")
    )


def duration_models() -> SearchStrategy[Any]:
    from hypothesis import strategies as st

    from pipesim.workload.durations import AgentDurations, ExponentialDurations, LogNormalDurations

    return st.one_of(
        st.builds(ExponentialDurations, st.floats(1.0, 100.0)),
        st.builds(LogNormalDurations, st.floats(1.0, 100.0), st.floats(0.0, 1.5)),
        st.builds(AgentDurations, mean_turns=st.floats(1.5, 6.0), max_turns=st.integers(1, 10)),
    )


def drops_work(sc: Any) -> bool:
    """Whether a scenario can drop launched episodes (so count-all admission could stall)."""
    from pipesim.policies.batching import DropStale, EvictStalest
    from pipesim.policies.updates import AbortRestart

    return (
        sc.failures is not None
        or isinstance(sc.batching, DropStale | EvictStalest)
        or isinstance(sc.weight_update, AbortRestart)
        or any(getattr(q, "drops_work", False) is True for q in (sc.batching, sc.weight_update))
    )


def _at_staleness(sc: Any, k: int) -> Any:
    """``sc`` at ``max_staleness`` k, or as it is where none of its policies reads the field
    (an admission rule with a bound of its own: such a scenario is refused, not run)."""
    from pipesim.policies.base import UnreadStaleness

    try:
        return sc.with_(max_staleness=k)
    except UnreadStaleness:
        return sc


def policy_scenarios(
    admissions_: Any = None,
    weight_updates_: Any = None,
    batchings_: Any = None,
    failures: Any = None,
    durations: Any = None,
    with_timeouts: bool = True,
    with_replicas: bool = True,
    routings_: Any = None,
) -> SearchStrategy[Any]:
    """Small runnable scenarios drawing every policy family (pin one with a list or a strategy).

    ``admissions_``, ``weight_updates_``, ``batchings_``: the policies of each role to draw from
    (default: the built-in ones); ``failures`` and ``durations``: strategies of failure policies
    and duration models; ``with_timeouts`` / ``with_replicas``: whether a timeout / several
    replicas may be drawn; ``routings_``: the routing rules the replicas draw from (default: the
    built-in ones; giving it makes every scenario have replicas, 1-3 of them)."""
    from hypothesis import strategies as st

    from pipesim.config import Scenario
    from pipesim.policies.admission import AReaLThrottle, StaleFraction
    from pipesim.policies.base import CountThrottle
    from pipesim.policies.batching import DropStale, EvictStalest
    from pipesim.policies.updates import SyncEveryK
    from pipesim.testing import pipeline_configs

    ad = as_strategy(admissions_, admissions(), "admissions_")
    wu = as_strategy(weight_updates_, weight_updates(), "weight_updates_")
    ba = as_strategy(batchings_, batchings(), "batchings_")
    fa = as_strategy(failures, st.none() | failure_policies(), "failures")
    du = as_strategy(durations, duration_models(), "durations")

    @st.composite
    def build(draw: Any) -> Scenario:
        cfg = draw(pipeline_configs(max_slots=12, max_batch=10, max_steps=5))
        if routings_ is not None:
            replicas = draw(replica_configs(routings_))
        else:
            replicas = draw(st.none() | replica_configs()) if with_replicas else None
        if replicas is not None and replicas.n_replicas > cfg.n_slots:
            # more replicas than slots: as many as there are slots where the routing is pinned
            pinned = routings_ is not None
            replicas = dataclasses.replace(replicas, n_replicas=cfg.n_slots) if pinned else None
        sc = Scenario(
            pipeline=dataclasses.replace(cfg, max_staleness=0),
            durations=draw(du),
            admission=draw(ad),
            weight_update=draw(wu),
            batching=draw(ba),
            failures=draw(fa),
            timeout=draw(st.none() | timeouts()) if with_timeouts else None,
            replicas=replicas,
            seed=draw(st.integers(0, 2**16)),
        )
        sc = _at_staleness(sc, cfg.max_staleness)
        if admissions_ is None and isinstance(sc.admission, CountThrottle | StaleFraction) and drops_work(sc):
            sc = sc.with_(admission=AReaLThrottle())
        k = getattr(sc.weight_update, "k", 1) if isinstance(sc.weight_update, SyncEveryK) else 1
        if k > 1 and weight_updates_ is None and getattr(sc.batching, "drops_work", False) is True:
            # a user's dropping batch policy keeps a bound of its own, which no max_staleness
            # moves: under SyncEveryK it may drop every episode, so it gets the inner update
            sc, k = sc.with_(weight_update=sc.weight_update.inner), 1
        if isinstance(sc.batching, DropStale | EvictStalest) and k - 1 > sc.pipeline.max_staleness:
            # the trainer's version runs k - 1 ahead of the weights between real syncs, so every
            # episode is staler than eta and dropped: a dead end by construction, not a finding
            sc = _at_staleness(sc, k - 1)
        return sc.with_(pool_size=20 * sc.default_pool_size)

    return build()
