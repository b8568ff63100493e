"""The built-in policies of each family, drawn one family at a time with arguments every small
pipeline can run; :mod:`pipesim.testing.strategies` composes them into scenarios.

``admissions()``, ``weight_updates()``, ``batchings()``, ``failure_policies()``, ``timeouts()`` and
``duration_models()`` each draw pipesim's own policies of one role and nothing else: no pinning,
no argument a user passes to choose among policies, no scenario. Those, and the routings that
``replica_configs`` draws from, belong to the scenario strategies, which turn a user's list or
strategy into a draw (``as_strategy``) and fix what a drawn combination breaks
(:mod:`pipesim.testing.adjustments`). Kept apart, this module is the plain list of what each family
draws and why its ranges are safe: a ``LagBound`` lag of at least the largest batch (or no batch
fills), an ``EvictStalest`` capacity of at least ``min_capacity``, ``WholeGroups`` only with group
sizes the caller says fit, hazards low enough that most episodes survive.

All of them are still importable from :mod:`pipesim.testing.strategies` (and from
:mod:`pipesim.testing`); the scenario strategies call them by that module's names, so a patch of
``strategies.admissions`` reaches ``policy_scenarios``. Hypothesis is imported lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


def admissions(max_batch: int = 10) -> SearchStrategy[Any]:
    """pipesim's admission rules with arguments every pipeline of a batch up to ``max_batch`` can
    run (LagBound's lag at least the batch, or no batch fills)."""
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
        # >= the largest batch drawn, or no batch fills (10-40 at the default batches)
        st.builds(LagBound, st.integers(max(10, max_batch), max(40, 4 * max_batch))),
        st.builds(StaleFraction, st.floats(0.0, 1.0), st.integers(1, 2)),
        st.builds(OverSample, st.floats(1.0, 2.0)),
    )


def weight_updates(keep_work: bool = False) -> SearchStrategy[Any]:
    """pipesim's weight updates. ``keep_work``: only those that drop no episode (no
    ``AbortRestart``, which aborts what is in flight), to draw beside an admission rule that counts
    dropped episodes against its cap (:func:`~pipesim.testing.strategies.policy_scenarios`)."""
    from hypothesis import strategies as st

    from pipesim.policies.base import Drain, PartialRollout
    from pipesim.policies.updates import (
        AbortReprefill,
        AbortRestart,
        BatchDrain,
        InFlightUpdate,
        OverlappedSwap,
        SyncEveryK,
    )

    aborts = [] if keep_work else [st.builds(AbortRestart, st.booleans())]  # it drops what it aborts
    return st.one_of(
        st.sampled_from([PartialRollout(), Drain(), BatchDrain(), OverlappedSwap()]),
        st.builds(AbortReprefill, st.floats(1.0, 100.0), st.floats(10.0, 10_000.0)),
        *aborts,
        st.builds(InFlightUpdate, st.floats(0.0, 5.0)),
        st.builds(SyncEveryK, st.integers(1, 3), st.sampled_from([PartialRollout(), Drain()])),
    )


def batchings(
    min_capacity: int = 12, group_sizes: Sequence[int] = (1,), keep_work: bool = False
) -> SearchStrategy[Any]:
    """pipesim's batch policies; ``EvictStalest`` keeps at least ``min_capacity`` episodes.

    ``WholeGroups`` is drawn with ``samples_per_group`` from ``group_sizes``, filtering or not, and
    with and without ``drop_stale`` (whose staleness bound is a promise the kit checks). A scenario
    refuses it unless ``batch_size`` is a whole number of groups, so the default draws groups of 1,
    which fit every batch; :func:`~pipesim.testing.strategies.policy_scenarios` draws 1-4 (at most
    ``max_batch`` and half of ``max_slots``), and it and :func:`~pipesim.testing.strategies.scenarios`
    make a drawn batch a whole number of the batch policy's groups
    (:func:`~pipesim.testing.adjustments.fit_batch`). ``group_sizes=()`` draws none.

    ``keep_work``: only the batch policies that discard no episode, to draw beside an admission
    rule that counts dropped episodes against its cap: no ``DropStale`` or ``EvictStalest``, no
    ``DropOverlong`` (it drops what a timeout cuts, and a timeout may be drawn beside it), and
    ``WholeGroups`` neither filtering nor dropping stale groups."""
    from hypothesis import strategies as st

    from pipesim.core.validate import check_int
    from pipesim.policies import batching as b
    from pipesim.policies.base import OldestFinishedFirst
    from pipesim.policies.groups import WholeGroups

    overlong = [] if keep_work else [b.DropOverlong()]
    families: list[SearchStrategy[Any]] = [
        st.sampled_from([OldestFinishedFirst(), b.LowestVersionFirst(), *overlong]),
        st.builds(b.WindowedFIFO, st.integers(1, 40)),
    ]
    if not keep_work:
        families += [
            st.builds(b.DropStale, st.booleans()),
            st.builds(b.EvictStalest, st.integers(min_capacity, 3 * min_capacity)),
        ]
    for g in group_sizes:
        check_int("group_sizes", g, 1)
    if group_sizes and keep_work:  # whole groups, every one trained
        families.append(st.builds(WholeGroups, st.sampled_from(list(group_sizes))))
    elif group_sizes:
        rates = st.just(0.0) | st.floats(0.0, 0.5)
        families.append(
            st.booleans().flatmap(
                lambda stale: st.builds(
                    WholeGroups,
                    st.sampled_from(list(group_sizes)),
                    filter_rate=rates,
                    drop_stale=st.just(stale),
                    requeue=st.booleans() if stale else st.just(False),
                )
            )
        )
    return st.one_of(*families)


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


def duration_models() -> SearchStrategy[Any]:
    from hypothesis import strategies as st

    from pipesim.workload.durations import AgentDurations, ExponentialDurations, LogNormalDurations

    return st.one_of(
        st.builds(ExponentialDurations, st.floats(1.0, 100.0)),
        st.builds(LogNormalDurations, st.floats(1.0, 100.0), st.floats(0.0, 1.5)),
        st.builds(AgentDurations, mean_turns=st.floats(1.5, 6.0), max_turns=st.integers(1, 10)),
    )
