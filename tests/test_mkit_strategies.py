"""The promises of :mod:`pipesim.testing.strategies` (each family's docstring), put to the test
over draws: what a strategy can draw (a search finds one), what it never draws (a search of a few
hundred draws comes back empty), and how its arguments are refused.

A mutation audit changed each of these promises in turn and no test failed; each test here fails
on its mutant. Every search runs from fixed seeds and is bounded (a few hundred draws at most, no
shrinking), so the suite is deterministic and each test takes a second or two. Where a search's
draws are named "(mutant: ...)", its size was cut to where that mutant, applied to the kit, still
gives at least 9 offending draws in at least 5 of the 8 runs (counted at the size given; the
larger sizes before gave more of the same). Which scenario can drop
work is decided here by :func:`drops_itself`, written from the docstring of
:func:`pipesim.testing.adjustments.drops_work`, not by that function: an oracle that shared a
mutant with the code under test would agree with it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import pipesim
from pipesim.core.validate import FieldError
from pipesim.policies.admission import LagBound, StaleFraction
from pipesim.policies.base import CountThrottle, OldestFinishedFirst, PartialRollout
from pipesim.policies.batching import DropOverlong, DropStale, EvictStalest
from pipesim.policies.faults import DropFailed, Timeout
from pipesim.policies.groups import WholeGroups
from pipesim.policies.updates import AbortRestart, SyncEveryK
from pipesim.testing import (
    admissions,
    batchings,
    duration_lists,
    failure_policies,
    pipeline_configs,
    policy_scenarios,
    replica_configs,
    scenarios,
)
from pipesim.testing.adjustments import drops_work
from tests.test_refusals_core import check_refusal


class _Found(Exception):
    """Raised by a search's probe at the first draw that satisfies the predicate."""


CHUNKS = 8
"""A search is this many runs of Hypothesis, each from its own fixed seed: one run's draws are
correlated (groups of 4 came up in 0 of 400 draws of one derandomized run and 34 of another), so
several short runs see more of the space than one long one, and each stays deterministic."""


def search(strategy: Any, pred: Callable[[Any], bool], n: int) -> list[Any]:
    """The first of ``n`` draws of ``strategy`` that satisfies ``pred`` (in a list), or []."""
    found: list[Any] = []
    for s in range(CHUNKS):

        @seed(s)
        @settings(
            max_examples=max(1, n // CHUNKS),
            database=None,
            deadline=None,
            phases=[Phase.generate],  # a found draw is enough; shrinking it only costs time
            suppress_health_check=list(HealthCheck),
        )
        @given(strategy)
        def probe(x: Any) -> None:
            if pred(x):
                found[:] = [x]
                raise _Found

        try:
            probe()
        except _Found:
            return found
    return []


def can_draw(strategy: Any, pred: Callable[[Any], bool], n: int = 300) -> bool:
    """Whether one of ``n`` draws of ``strategy`` satisfies ``pred``."""
    return bool(search(strategy, pred, n))


def never_draws(strategy: Any, pred: Callable[[Any], bool], n: int = 300) -> None:
    """No draw of ``n`` satisfies ``pred``; the one that does is shown."""
    found = search(strategy, pred, n)
    assert not found, f"drew {found[0]!r}"


def drops_itself(sc: Any) -> bool:
    """Whether ``sc`` can drop a launched episode, as ``drops_work``'s docstring lists it."""
    b, wu = sc.batching, sc.weight_update
    return (
        sc.failures is not None
        or isinstance(b, DropStale | EvictStalest)
        or isinstance(wu, AbortRestart)
        or getattr(b, "drops_work", False) is True
        or getattr(wu, "drops_work", False) is True
        or (isinstance(b, WholeGroups) and (b.drop_stale or b.filter_rate > 0))
        or (isinstance(b, DropOverlong) and sc.timeout is not None)
    )


def counts_drops(sc: Any) -> bool:
    """An admission rule that counts dropped episodes against its cap and can stall."""
    return isinstance(sc.admission, CountThrottle | StaleFraction)


@dataclass(frozen=True)
class Dropper(OldestFinishedFirst):
    """A user's batch policy that says it drops work."""

    drops_work = True


@dataclass(frozen=True)
class DroppingUpdate(PartialRollout):
    """A user's weight update that says it drops work."""

    drops_work = True


@dataclass(frozen=True)
class Bound:
    """A user's admission rule promising a staleness bound ``b`` (and keeping it)."""

    b: int = 4

    def admits(self, p: Any) -> bool:
        return bool(p.started < (p.version + 1) * p.batch_size)

    def staleness_bound(self, scenario: Any) -> int:
        return self.b


# --- the oracle against drops_work itself ----------------------------------------------------


def _base(**kw: Any) -> pipesim.Scenario:
    return pipesim.Scenario(pipeline=pipesim.PipelineConfig(n_slots=8, batch_size=4, steps=2), **kw)


DROPPING: list[tuple[str, Callable[[], pipesim.Scenario]]] = [
    ("failures", lambda: _base(failures=DropFailed(1e-3))),
    ("DropStale", lambda: _base(batching=DropStale())),
    ("EvictStalest", lambda: _base(batching=EvictStalest(12))),
    ("AbortRestart", lambda: _base(weight_update=AbortRestart())),
    ("a batch policy saying so", lambda: _base(batching=Dropper())),
    ("a weight update saying so", lambda: _base(weight_update=DroppingUpdate())),
    ("WholeGroups filtering", lambda: _base(batching=WholeGroups(2, filter_rate=0.2))),
    ("WholeGroups dropping stale", lambda: _base(batching=WholeGroups(2, drop_stale=True))),
    ("DropOverlong under a timeout", lambda: _base(batching=DropOverlong(), timeout=Timeout(60.0))),
]
KEEPING: list[tuple[str, Callable[[], pipesim.Scenario]]] = [
    ("the chapter's", lambda: _base()),
    ("WholeGroups keeping all", lambda: _base(batching=WholeGroups(2))),
    ("DropOverlong without a timeout", lambda: _base(batching=DropOverlong())),
    ("a timeout alone", lambda: _base(timeout=Timeout(60.0))),
]


@pytest.mark.parametrize("make", [r[1] for r in DROPPING], ids=[r[0] for r in DROPPING])
def test_drops_work_names_each_way_a_scenario_drops(make: Callable[[], pipesim.Scenario]) -> None:
    sc = make()
    assert drops_itself(sc)
    assert drops_work(sc) is True


@pytest.mark.parametrize("make", [r[1] for r in KEEPING], ids=[r[0] for r in KEEPING])
def test_drops_work_passes_what_drops_nothing(make: Callable[[], pipesim.Scenario]) -> None:
    sc = make()
    assert not drops_itself(sc)
    assert drops_work(sc) is False


# --- combinations that cannot make progress are not drawn ------------------------------------

UNPINNED_DROPPERS: list[tuple[str, dict[str, Any], int]] = [
    # (mutant: no counting admission swapped for AReaLThrottle) 15-21 offending draws of 48 where
    # a way of dropping is pinned, in all 8 runs; 45 of 200 drawing every family (8 of 48)
    ("failures", {"failures": failure_policies()}, 48),
    ("EvictStalest", {"batchings": [EvictStalest(12)]}, 48),
    ("a dropping weight update", {"weight_updates": [DroppingUpdate()]}, 48),
    (
        "WholeGroups filtering",
        {"batchings": st.builds(WholeGroups, st.just(2), filter_rate=st.floats(0.05, 0.5))},
        48,
    ),
    ("every family", {}, 200),
]


@pytest.mark.parametrize(
    "kw,n", [(r[1], r[2]) for r in UNPINNED_DROPPERS], ids=[r[0] for r in UNPINNED_DROPPERS]
)
def test_a_counting_admission_is_never_drawn_beside_a_policy_that_drops(kw: dict[str, Any], n: int) -> None:
    """``CountThrottle`` and ``StaleFraction`` count drops against their cap: with the admission
    rules drawn, they never meet a scenario that can drop (each way pinned, and all drawn)."""
    never_draws(policy_scenarios(**kw), lambda sc: counts_drops(sc) and drops_itself(sc), n=n)


def test_a_pinned_count_throttle_is_always_the_one_drawn() -> None:
    """Pinned, ``CountThrottle`` is kept even beside a dropping policy (never swapped)."""
    # (mutant: swapped though pinned, and droppers drawn beside it) 58 offending draws of 80
    never_draws(
        policy_scenarios(admissions=[CountThrottle()]),
        lambda sc: not isinstance(sc.admission, CountThrottle),
        n=80,
    )


def test_pinned_weight_updates_keep_sync_every_k_beside_a_dropping_batch_policy() -> None:
    strategy = policy_scenarios(weight_updates=[SyncEveryK(2, PartialRollout())], batchings=[Dropper()])
    # (mutant: the pinned SyncEveryK replaced by its inner update) every one of 24 draws offends
    never_draws(strategy, lambda sc: not isinstance(sc.weight_update, SyncEveryK), n=24)


def test_an_unpinned_sync_every_k_is_not_drawn_beside_a_dropping_batch_policy() -> None:
    """The other side of the rule: with the weight updates drawn, a batch policy that drops never
    runs under ``SyncEveryK`` with k > 1 (control for the test above)."""
    strategy = policy_scenarios(batchings=[Dropper()])
    # (mutant: SyncEveryK with k > 1 kept beside the dropping batch policy) 19 offending draws of
    # 120 in 6 runs (29 of 300): the rarest of these mutants, so this search stays the longest
    never_draws(
        strategy, lambda sc: isinstance(sc.weight_update, SyncEveryK) and sc.weight_update.k > 1, n=120
    )


# --- what each family can and cannot draw ----------------------------------------------------


def test_lag_bound_is_drawn_with_a_lag_of_at_least_the_largest_batch() -> None:
    assert can_draw(admissions(max_batch=20), lambda a: isinstance(a, LagBound))
    never_draws(admissions(max_batch=20), lambda a: isinstance(a, LagBound) and a.max_lag_samples < 20)


def test_whole_groups_is_drawn_filtering() -> None:
    assert can_draw(batchings(group_sizes=(2,)), lambda b: isinstance(b, WholeGroups) and b.filter_rate > 0)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_replica_configs_draw_one_to_three_engines(n: int) -> None:
    assert can_draw(replica_configs(), lambda r: r.n_replicas == n, n=100)
    never_draws(replica_configs(), lambda r: not 1 <= r.n_replicas <= 3, n=100)


def test_policy_scenarios_draw_groups_of_four() -> None:
    """1-4 samples per group at the default sizes (at most max_batch and half of max_slots)."""
    assert can_draw(
        policy_scenarios(),
        lambda sc: isinstance(sc.batching, WholeGroups) and sc.batching.samples_per_group == 4,
        n=800,  # about 1 draw in 20, none at all in some runs of 50
    )


def test_integer_duration_lists_draw_only_integers() -> None:
    never_draws(duration_lists(4, integer=True), lambda v: any(x != int(x) for x in v))
    assert can_draw(duration_lists(4, integer=False), lambda v: any(x != int(x) for x in v))


def test_pipeline_configs_draw_a_staleness_above_zero() -> None:
    assert can_draw(pipeline_configs(), lambda cfg: cfg.max_staleness >= 1, n=100)


def test_policy_scenarios_keep_the_drawn_staleness() -> None:
    """The drawn ``max_staleness`` reaches a scenario whose policies read it (not left at 0)."""
    strategy = policy_scenarios(weight_updates=[PartialRollout()])
    assert can_draw(strategy, lambda sc: sc.pipeline.max_staleness >= 1, n=200)


def test_max_steps_given_fixes_the_range_even_where_a_bound_is_promised() -> None:
    # (mutant: a draw stretched past max_steps to break the bound) 62 offending draws of 80
    never_draws(policy_scenarios(admissions=[Bound(4)], max_steps=3), lambda sc: sc.pipeline.steps > 3, n=80)


def test_a_promised_bound_is_put_to_the_test_without_max_steps() -> None:
    """Control for the test above: left out, the steps go past the bound of 4."""
    assert can_draw(policy_scenarios(admissions=[Bound(4)]), lambda sc: sc.pipeline.steps >= 6, n=100)


def test_a_draw_made_to_break_a_bound_has_two_slots_per_episode_of_the_batch() -> None:
    """Bound 4: a draw of 6 steps or more was stretched by the kit, and its batch is at most half
    the slots (so that a slow episode can fall behind while the other slots fill batches)."""
    strategy = policy_scenarios(admissions=[Bound(4)])
    # (mutant: to_break keeps the drawn batch, not at most half the slots) 16 offending draws of
    # 80, in all 8 runs
    never_draws(
        strategy,
        lambda sc: sc.pipeline.steps >= 6 and sc.pipeline.batch_size > sc.pipeline.n_slots // 2,
        n=80,
    )


def test_with_timeouts_false_never_draws_a_timeout() -> None:
    assert can_draw(policy_scenarios(), lambda sc: sc.timeout is not None, n=100)
    # (mutant: a timeout drawn whatever with_timeouts says) 18 offending draws of 40
    never_draws(policy_scenarios(with_timeouts=False), lambda sc: sc.timeout is not None, n=40)


def test_with_replicas_false_never_draws_replicas() -> None:
    assert can_draw(policy_scenarios(), lambda sc: sc.replicas is not None, n=100)
    # (mutant: replicas drawn whatever with_replicas says) 18 offending draws of 40
    never_draws(policy_scenarios(with_replicas=False), lambda sc: sc.replicas is not None, n=40)


# --- the arguments ---------------------------------------------------------------------------


@pytest.mark.parametrize("make", [scenarios, policy_scenarios], ids=["scenarios", "policy_scenarios"])
def test_max_slots_none_is_refused_naming_it(make: Callable[..., Any]) -> None:
    """Only ``max_steps`` may be None (it then depends on the promises); ``max_slots`` may not."""
    check_refusal(lambda: make(max_slots=None), FieldError, "max_slots")
    check_refusal(lambda: make(max_batch=None), FieldError, "max_batch")
    make(max_steps=None)


def test_a_tuple_of_policies_is_taken_like_a_list() -> None:
    strategy = policy_scenarios(admissions=(CountThrottle(),))
    never_draws(strategy, lambda sc: not isinstance(sc.admission, CountThrottle), n=30)


def test_a_new_name_and_its_deprecated_one_together_are_a_type_error() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(TypeError, match="admissions"):
            policy_scenarios(admissions=[CountThrottle()], admissions_=[CountThrottle()])
        policy_scenarios(admissions_=[CountThrottle()])  # the old name alone still works
