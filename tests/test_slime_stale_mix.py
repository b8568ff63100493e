"""slime's submit loop with partial rollout beside stale dropping: ``SlimeSubmit(partial_rollout=True)``
with ``WholeGroups(drop_stale=True)``.

APRIL carries a round's unfinished groups into the next round; at eta 0 a carried group's samples
from the old weights are stale there, so ``drop_stale`` expires it (and at eta > 0, a few versions
later). The loop counts a carried group as one of the round's submitted groups, so it must replace
the ones that expire, as slime's loop replaces the ones its filter rejects (``remaining -= 1``):
otherwise a round can run out of groups below its batch and the run stalls. These mixes run to
their last step and keep ``drop_stale``'s promise: no trained sample is older than eta.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim import PipelineConfig, Scenario
from pipesim.policies.groups import WholeGroups
from pipesim.policies.slime_submit import SlimeSubmit
from pipesim.policies.updates import AbortReprefill, AbortRestart
from pipesim.testing import check_invariants


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
) -> Scenario:
    cfg = PipelineConfig(
        n_slots=n_slots, batch_size=prompts * n, steps=steps, max_staleness=eta, colocated=colocated
    )
    return Scenario(
        pipeline=cfg,
        seed=seed,
        pool_size=2000,  # over-sampling: a large pool
        admission=SlimeSubmit(chunk, partial_rollout=True),
        weight_update=AbortRestart() if restart else AbortReprefill(),  # both keep an aborted group
        batching=WholeGroups(n, filter_rate=rate, drop_stale=True),
    )


def check_runs_and_keeps_the_bound(sc: Scenario) -> pipesim.RunResult:
    result = pipesim.run(sc)  # before the fix: PipelineError, the pipeline stalled
    check_invariants(result, sc)  # conservation, full batches, and the staleness bound promised
    assert len(result.train_log) == sc.pipeline.steps
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
