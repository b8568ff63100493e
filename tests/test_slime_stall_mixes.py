"""Two mixes of slime's submit loop (``SlimeSubmit``) that stalled, now run to their last step.

(a) ``AbortRestart(restart=True)`` without partial rollout, colocated: the round begins after the
sync, when the next task to start is a relaunch of an aborted sample, so the loop read its first
fresh task too low and submitted fewer groups than slime's chunks (18 of 41 random draws
stalled). It reads the pipeline's next new task (``p.next_new_task``) instead.

(b) Failures (``DropFailed``): a group whose every begun sample failed never reaches the buffer,
and the loop counted it alive for good (carried, or a leftover), so rounds ran out of groups (24
of 40 random mixes stalled). ``WholeGroups`` abandons such unseen groups once the run is stuck,
and the loop replaces them as dropped groups.

Both were checked against the code before the fix on the same draws: every draw that finished
before keeps its event trace, except those of mix (a) (and ``colocated=False`` with a restart)
whose round began with a relaunch waiting; those now submit slime's count of fresh groups.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim import Scenario
from pipesim.core.validate import FieldError
from pipesim.policies.base import WeightUpdate
from pipesim.policies.faults import DropFailed
from pipesim.policies.slime_submit import slime_round_groups
from pipesim.policies.updates import AbortReprefill, AbortRestart
from tests.test_slime_filter import rounds
from tests.test_slime_stale_mix import MIX, check_runs
from tests.test_slime_stale_mix import _mix as slime_mix

UPDATES: dict[str, WeightUpdate] = {
    "reprefill": AbortReprefill(),
    "restart": AbortRestart(),
    "drop": AbortRestart(restart=False),
}


def _mix(
    chunk: int,
    n: int,
    prompts: int,
    rate: float,
    eta: int,
    seed: int,
    n_slots: int,
    *,
    update: str = "restart",
    partial: bool = False,
    colocated: bool = True,
    stale: bool = False,
    hazard_per_s: float | None = None,
) -> Scenario:
    """:func:`tests.test_slime_stale_mix._mix` with the weight update named in :data:`UPDATES`,
    without partial rollout or ``drop_stale`` by default, and ``DropFailed(hazard_per_s)``."""
    return slime_mix(
        chunk,
        n,
        prompts,
        rate,
        eta,
        seed,
        n_slots,
        colocated,
        partial=partial,
        update=UPDATES[update],
        stale=stale,
        failures=None if hazard_per_s is None else DropFailed(hazard_per_s),
    )


def check_fresh_groups_reach_slimes_chunks(
    result: pipesim.RunResult, chunk: int, n: int, prompts: int
) -> None:
    """Each round begins at least slime's count of fresh groups given its rejections (more where
    a leftover group is rejected: the loop counts every rejection), unless every slot was busy as
    it ended. Before the fix most finished runs of mix (a) began fewer."""
    for fresh, _, filtered, full in rounds(result, n, partial=False):
        assert fresh >= slime_round_groups(chunk, prompts, filtered) or full, (fresh, filtered)


@settings(max_examples=10, deadline=None)
@given(
    **MIX,
    stale=st.booleans(),
)
def test_restart_without_partial_rollout_runs_slimes_rounds(
    chunk: int, n: int, prompts: int, rate: float, eta: int, seed: int, n_slots: int, stale: bool
) -> None:
    """Mix (a): about 18 of 41 random draws stalled before the fix."""
    result = check_runs(_mix(chunk, n, prompts, rate, eta, seed, n_slots, stale=stale))
    if not stale:  # drop_stale's drops are replaced too: slime's count from rejections is a floor
        check_fresh_groups_reach_slimes_chunks(result, chunk, n, prompts)


def test_a_restarted_round_reads_its_first_fresh_task_past_the_relaunches() -> None:
    """One draw of mix (a) that stalled at version 1 of 5 before the fix, and one that finished
    with fewer fresh groups than slime's chunks (4 for 8 in a round of no rejection)."""
    check_runs(_mix(2, 2, 1, 0.0, 0, 681098, 19, stale=True))
    result = check_runs(_mix(8, 4, 4, 0.0, 2, 254531, 25))
    check_fresh_groups_reach_slimes_chunks(result, 8, 4, 4)


@settings(max_examples=10, deadline=None)
@given(
    **MIX,
    update=st.sampled_from(sorted(UPDATES)),
    partial=st.booleans(),
    colocated=st.booleans(),
    stale=st.booleans(),
    hazard_per_s=st.sampled_from([0.001, 0.003]),
)
def test_mixes_with_failures_run_or_are_refused_at_once(
    chunk: int,
    n: int,
    prompts: int,
    rate: float,
    eta: int,
    seed: int,
    n_slots: int,
    update: str,
    partial: bool,
    colocated: bool,
    stale: bool,
    hazard_per_s: float,
) -> None:
    """Mix (b): most random mixes with DropFailed stalled. Each now runs to its last step, keeping
    the staleness bound it promises, or is one the loop refuses at the first start (an abort that
    drops the groups it counts), with a FieldError naming weight_update."""
    sc = _mix(
        chunk,
        n,
        prompts,
        rate,
        eta,
        seed,
        n_slots,
        update=update,
        partial=partial,
        colocated=colocated,
        stale=stale,
        hazard_per_s=hazard_per_s,
    )
    if update == "drop" and (partial or not colocated):
        with pytest.raises(FieldError) as err:
            pipesim.run(sc)
        assert err.value.field == "weight_update"
        return
    result = check_runs(sc)
    if stale:
        assert int(result.trained["staleness"].max()) <= eta


@pytest.mark.parametrize(
    ("n", "kw", "args"),
    [
        # one sample a group: a failed sample is a whole group lost unseen (a leftover, uncounted)
        (1, dict(update="reprefill", stale=True, hazard_per_s=0.01), (3, 6, 0.0, 0, 120820, 32)),
        # partial rollout: the unseen group was carried for good, one fresh group short a round
        (4, dict(update="reprefill", partial=True, hazard_per_s=0.003), (5, 4, 0.4, 0, 158456, 3)),
    ],
    ids=["one-sample-groups", "partial-rollout"],
)
def test_a_group_whose_every_sample_failed_is_abandoned_and_replaced(n: int, kw: dict, args: tuple) -> None:
    """Draws of mix (b) that stalled before the fix. Not vacuous: a group there has every begun
    sample failed, so nothing of it reached the buffer."""
    chunk, prompts, rate, eta, seed, n_slots = args
    sc = _mix(chunk, n, prompts, rate, eta, seed, n_slots, **kw)
    result = check_runs(sc)
    table = result.episode_table
    failed_only = table.groupby(table["task_id"] // n)["status"].agg(lambda s: set(s) == {"failed"})
    assert failed_only.any()


def test_next_new_task_is_past_the_requeued_tasks() -> None:
    """The port's next new task: ``upcoming_task`` when nothing is requeued, else past the requeued
    (older) tasks ahead of it."""
    from pipesim.core.engine import Pipeline

    p = Pipeline(pipesim.Scenario(), [1.0] * 50)
    assert p.next_new_task == p.upcoming_task == 0
    p.next_task = 5
    p.requeue([(2, -1), (3, -1)])
    assert (p.upcoming_task, p.next_new_task) == (2, 5)
    p.requeued.clear()
    assert p.next_new_task == p.upcoming_task == 5
