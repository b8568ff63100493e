"""ROLL's agentic get_batch hands the trainer groups in creation order, waiting for the oldest.

alibaba/ROLL ``roll/distributed/scheduler/rollout_scheduler.py``: ``GroupQueue.get`` "must consume
the first group (smallest episode_id)" and waits until it is complete; ``GroupQueueManager.get_batch``
takes one group from each env group's queue per round. With ``max_traj_per_env`` groups per queue
per step and ``num_env_groups * max_traj_per_env`` groups a batch (ROLL's example configs), step s
trains the s-th step's worth of groups in creation order, whatever finished first, and none expires.
The preset used to take the first B to finish and expire the rest (0 of 20 chapter steps matched).
"""

from __future__ import annotations

from typing import Any

import pytest

from pipesim import run
from pipesim.core.validate import FieldError
from pipesim.policies.systems import RollGroupQueue
from pipesim.results.run import RunResult
from pipesim.testing import check_invariants, check_promises
from pipesim.workload.durations import LogNormalDurations, TraceDurations
from scenarios import systems
from tests.test_refusals_core import check_refusal

SMALL: dict[str, Any] = dict(n_slots=16, batch_size=8, train_time_s=20.0, sync_time_s=8.0, steps=8)


def _checked(sc: Any) -> RunResult:
    r = run(sc)
    check_invariants(r, sc)
    return r


def _tasks_by_step(r: RunResult) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for ep_id, step in zip(r.trained["episode_id"], r.trained["step"], strict=True):
        out.setdefault(int(step), []).append(r.episodes[int(ep_id)].task_id)
    return {s: sorted(t) for s, t in out.items()}


@pytest.mark.parametrize("ratio", [0, 1, 2])
@pytest.mark.parametrize("seed", [0, 1])
def test_roll_trains_each_step_the_groups_created_for_it(ratio: int, seed: int) -> None:
    """Step s trains tasks s*B .. (s+1)*B - 1 (the first-finished order took others), nothing is
    discarded (the first-finished order expired about B of them), staleness stays <= ratio."""
    sc = systems.roll(ratio, seed=seed, **SMALL).with_(durations=LogNormalDurations(20.0, 1.0))
    r = _checked(sc)
    b = SMALL["batch_size"]
    assert _tasks_by_step(r) == {s: list(range(s * b, (s + 1) * b)) for s in range(SMALL["steps"])}
    assert r.summary()["episodes_discarded"] == 0
    assert r.trained["staleness"].max() <= ratio


def test_roll_waits_for_the_oldest_group() -> None:
    """Task 0 runs 100 s, the rest 1 s: the first batch is tasks {0, 1}, taken once task 0 is done
    (GroupQueue.get waits on its head), not the first two to finish ({1, 2})."""
    trace = TraceDurations.from_values([100.0] + [1.0] * 63)
    kw = dict(n_slots=4, batch_size=2, train_time_s=5.0, sync_time_s=1.0, steps=3)
    r = _checked(systems.roll(1, **kw).with_(durations=trace))
    assert _tasks_by_step(r) == {0: [0, 1], 1: [2, 3], 2: [4, 5]}
    first_train = min(start for step, start, _, _ in r.train_log if step == 0)
    assert first_train >= 100.0


def test_roll_takes_whole_groups_in_creation_order() -> None:
    """samples_per_prompt n: step s trains groups s*B/n .. (s+1)*B/n - 1, each whole."""
    n = 4
    r = _checked(
        systems.roll(1, samples_per_prompt=n, **SMALL).with_(durations=LogNormalDurations(20.0, 1.0))
    )
    b = SMALL["batch_size"]
    by_step = _tasks_by_step(r)
    assert by_step == {s: list(range(s * b, (s + 1) * b)) for s in range(SMALL["steps"])}
    assert r.summary()["episodes_discarded"] == 0


def test_roll_order_keeps_its_promises() -> None:
    check_promises(systems.roll(1, **SMALL).with_(durations=LogNormalDurations(20.0, 1.0)))
    check_promises(systems.roll(1, samples_per_prompt=4, **SMALL))


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: RollGroupQueue(-1), "ratio"),
        (lambda: RollGroupQueue(1.5), "ratio"),  # type: ignore[arg-type]
        (lambda: RollGroupQueue(1, 0), "samples_per_group"),
        (lambda: systems.roll(1, samples_per_prompt=3, batch_size=16), "samples_per_prompt"),
    ],
)
def test_roll_group_queue_refuses_bad_input(make: Any, field: str) -> None:
    check_refusal(make, FieldError, field)
