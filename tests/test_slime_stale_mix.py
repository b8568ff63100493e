"""slime's submit loop with partial rollout beside stale dropping: ``SlimeSubmit(partial_rollout=True)``
with ``WholeGroups(drop_stale=True)``.

APRIL carries a round's unfinished groups into the next round; at eta 0 a carried group's samples
from the old weights are stale there, so ``drop_stale`` expires it (and at eta > 0, a few versions
later). The loop counts a carried group as one of the round's submitted groups, so it must replace
the ones that expire, as slime's loop replaces the ones its filter rejects (``remaining -= 1``):
otherwise a round can run out of groups below its batch and the run stalls. These mixes run to
their last step and keep ``drop_stale``'s promise: no trained sample is older than eta.

Without partial rollout, generating through the sync (``colocated=False``), the groups a round
began before the sync expire in that round: the loop replaces the drops beyond its leftovers (the
groups alive at its start, which it does not count). An abort that drops the groups the loop
counts (``AbortRestart(restart=False)`` with partial rollout, or mid-round) is refused.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim import PipelineConfig, Scenario
from pipesim.core.validate import FieldError
from pipesim.policies.base import WeightUpdate
from pipesim.policies.groups import WholeGroups
from pipesim.policies.slime_submit import SlimeSubmit
from pipesim.policies.updates import AbortReprefill, AbortRestart, AfterNextBatch, SyncEveryK
from pipesim.testing import check_invariants
from scenarios.systems_slime import april, slime

MIX = {
    "chunk": st.integers(1, 12),
    "n": st.sampled_from([1, 2, 4]),
    "prompts": st.integers(1, 6),
    "rate": st.sampled_from([0.0, 0.2, 0.4, 0.6]),
    "eta": st.sampled_from([0, 0, 1, 2]),
    "seed": st.integers(0, 10**6),
    "n_slots": st.integers(2, 32),
}
"""A random mix: chunk, group size, prompts per step, filter rate, eta, seed, slots (these
properties and tests/test_slime_stall_mixes.py's draw it)."""


def _mix(
    chunk: int,
    n: int,
    prompts: int,
    rate: float,
    eta: int,
    seed: int,
    n_slots: int,
    colocated: bool = True,
    restart: bool = False,
    steps: int = 5,
    partial: bool = True,
    *,
    update: WeightUpdate | None = None,
    stale: bool = True,
    failures: Any = None,
) -> Scenario:
    """slime's submit loop over ``prompts`` groups of ``n`` a step, filtered at ``rate``; the weight
    update ``update``, else ``AbortRestart()`` with ``restart`` and ``AbortReprefill()`` without
    (both keep an aborted group); ``drop_stale`` as ``stale``."""
    cfg = PipelineConfig(
        n_slots=n_slots, batch_size=prompts * n, steps=steps, max_staleness=eta, colocated=colocated
    )
    return Scenario(
        pipeline=cfg,
        seed=seed,
        pool_size=2000,  # over-sampling: a large pool
        admission=SlimeSubmit(chunk, partial_rollout=partial),
        weight_update=update if update is not None else AbortRestart() if restart else AbortReprefill(),
        batching=WholeGroups(n, filter_rate=rate, drop_stale=stale),
        failures=failures,
    )


def check_runs(sc: Scenario) -> pipesim.RunResult:
    result = pipesim.run(sc)  # before the fix: PipelineError, the pipeline stalled
    check_invariants(result, sc)  # conservation, full batches, and the staleness bound promised
    assert len(result.train_log) == sc.pipeline.steps
    return result


def check_runs_and_keeps_the_bound(sc: Scenario) -> pipesim.RunResult:
    result = check_runs(sc)
    assert int(result.trained["staleness"].max()) <= sc.pipeline.max_staleness
    return result


@settings(max_examples=15, deadline=None)
@given(
    chunk=st.integers(1, 12),
    n=st.sampled_from([1, 2, 4]),
    prompts=st.integers(1, 6),
    rate=st.sampled_from([0.2, 0.4, 0.6]),
    eta=st.sampled_from([0, 0, 1, 2]),
    seed=st.integers(0, 10**6),
    n_slots=st.integers(2, 32),
    colocated=st.booleans(),
    restart=st.booleans(),
)
def test_filtered_partial_rollout_with_stale_dropping_runs(
    chunk: int,
    n: int,
    prompts: int,
    rate: float,
    eta: int,
    seed: int,
    n_slots: int,
    colocated: bool,
    restart: bool,
) -> None:
    check_runs_and_keeps_the_bound(_mix(chunk, n, prompts, rate, eta, seed, n_slots, colocated, restart))


def test_a_round_replaces_its_expired_groups() -> None:
    """Not vacuous: on this mix (it stalled at version 1 of 5 before the loop replaced expired
    groups) groups the filter keeps expire, and every step still trains a full batch."""
    n = 4
    result = check_runs_and_keeps_the_bound(_mix(4, n, 3, 0.5, 0, 86, 17))
    table = result.episode_table
    dropped = table.loc[table["status"] == "discarded", "task_id"].to_numpy() // n
    kept = ~result.scenario.batching.rejected(int(table["task_id"].max()) // n + 1, result.scenario.seed)
    assert len(set(dropped[kept[dropped]])) >= 2  # the filter would keep them: drop_stale expired them


def test_the_promise_is_checked_where_it_can_break() -> None:
    """At eta 1, generating through the sync, carried groups train a version stale (the bound is
    reached, so the check of it could fail) and none older."""
    stalest = [
        int(
            check_runs_and_keeps_the_bound(_mix(3, 2, 3, 0.4, 1, seed, 6, colocated=False, steps=6))
            .trained["staleness"]
            .max()
        )
        for seed in range(4)
    ]
    assert max(stalest) == 1, stalest


@settings(max_examples=15, deadline=None)
@given(**MIX, restart=st.booleans())
def test_without_partial_rollout_a_round_replaces_groups_expiring_in_it(
    chunk: int, n: int, prompts: int, rate: float, eta: int, seed: int, n_slots: int, restart: bool
) -> None:
    """Generating through the sync, a round's groups begun before it expire in the round (at eta 0
    their finished samples are a version old); before the fix about half of these draws stalled."""
    sc = _mix(chunk, n, prompts, rate, eta, seed, n_slots, colocated=False, restart=restart, partial=False)
    check_runs_and_keeps_the_bound(sc)


def test_a_round_without_partial_rollout_replaces_its_own_expired_groups() -> None:
    """One draw of the property above that stalled at version 1 of 5 before the fix."""
    check_runs_and_keeps_the_bound(_mix(10, 2, 6, 0.4, 0, 881168, 16, colocated=False, partial=False))


DROPPING = AbortRestart(restart=False)


@pytest.mark.parametrize(
    ("partial", "colocated", "weight_update"),
    [
        (True, True, DROPPING),
        (True, False, DROPPING),
        (False, False, DROPPING),
        (True, True, SyncEveryK(2, DROPPING)),
        (False, False, AfterNextBatch(DROPPING)),
    ],
)
def test_an_abort_that_drops_the_groups_the_loop_counts_is_refused(
    partial: bool, colocated: bool, weight_update: WeightUpdate
) -> None:
    """partial_rollout counts the aborted groups as carried, and with colocated=False the sync
    aborts a round's own groups mid-round: AbortRestart(restart=False) drops them unseen and the
    round runs out of groups (most draws stalled), so the mix is refused at the first start."""
    sc = _mix(4, 2, 3, 0.4, 0, 7, 8, colocated=colocated, partial=partial)
    with pytest.raises(FieldError) as err:
        pipesim.run(dataclasses.replace(sc, weight_update=weight_update))
    assert err.value.field == "weight_update"


def test_slime_sync_drops_its_leftovers_between_rounds() -> None:
    """Not refused: colocated, without partial rollout (``slime("sync")``), the abort falls
    between rounds and drops only leftovers the loop does not count."""
    sc = _mix(4, 2, 3, 0.4, 0, 7, 8, partial=False)
    check_runs_and_keeps_the_bound(dataclasses.replace(sc, weight_update=DROPPING))


PRESETS_SPLIT = {
    "slime sync, a filter": lambda: slime(
        "sync", filter_rate=0.3, n_samples_per_prompt=4, batch_size=16, colocated=False
    ),
    "slime sync, over-sampled": lambda: slime(
        "sync", n_samples_per_prompt=4, over_sampling_batch_size=6, batch_size=16, colocated=False
    ),
    "april, no partial rollout": lambda: april(
        filter_rate=0.3, partial_rollout=False, n_samples_per_prompt=4, batch_size=16, colocated=False
    ),
}


@pytest.mark.parametrize("name", list(PRESETS_SPLIT))
def test_a_preset_whose_abort_needs_colocated_refuses_split_at_once_naming_colocated(name: str) -> None:
    """The presets set the abort themselves, so the refusal names what their user set, at once,
    rather than weight_update at the run's first start."""
    with pytest.raises(FieldError) as e:
        PRESETS_SPLIT[name]()
    assert e.value.field == "colocated"


def test_the_presets_that_carry_or_colocate_are_not_refused() -> None:
    assert april(filter_rate=0.3, n_samples_per_prompt=4, batch_size=16, colocated=False).name == "APRIL"
    assert slime("sync", filter_rate=0.3, n_samples_per_prompt=4, batch_size=16).name == "slime sync"
    assert slime("sync", batch_size=16, colocated=False).name == "slime sync"  # no filter: Drain


def test_a_round_replaces_the_groups_a_failure_abandons() -> None:
    """A failed sample leaves its group incomplete; WholeGroups abandons it, and the round replaces
    it as a rejected one (before the abandoned count was added, this run stalled at version 3)."""
    from pipesim.policies.faults import DropFailed

    sc = Scenario(
        pipeline=PipelineConfig(n_slots=2, batch_size=20, steps=5, max_staleness=0, colocated=True),
        seed=665845,
        pool_size=2000,
        admission=SlimeSubmit(4, partial_rollout=False),
        weight_update=AbortReprefill(),
        batching=WholeGroups(4, filter_rate=0.4, drop_stale=False),
        failures=DropFailed(hazard_per_s=0.001),
    )
    r = pipesim.run(sc)
    assert len(r.train_log) == 5
    assert r.summary()["episodes_failed"] > 0
