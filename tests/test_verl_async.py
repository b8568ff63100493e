"""verl fully async's rollouter works in prompts (issue 41, verl's fully-async rows).

volcengine/verl ``recipe/fully_async_policy/fully_async_rollouter.py``, ``_processor_worker``: a
``RolloutSample`` is one prompt; its ``rollout.n`` responses start together
(``agent_loop/agent_loop.py``, ``generate_sequences_no_post``) and the prompt is one entry of
``active_tasks`` until all of them are done; ``staleness_samples`` counts prompts and
``max_required_samples`` is ``int(required_samples x (1 + threshold) x k)`` prompts. These tests
run the preset with ``samples_per_prompt`` n > 1 (one episode per response) and check those three
rules on the episodes of a small run. Each failed on the per-response rollouter before (said per
test).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim import run
from pipesim.core.validate import FieldError
from pipesim.policies.groups import WholeGroups
from pipesim.policies.verl import VerlRollouter
from pipesim.results.run import RunResult
from pipesim.testing import check_invariants
from pipesim.workload.durations import LogNormalDurations
from scenarios import systems

SMALL: dict[str, Any] = dict(n_slots=32, train_time_s=20.0, sync_time_s=8.0, steps=6)


def _run(n: int, groups_per_step: int, **kw: Any) -> RunResult:
    sc = systems.verl_fully_async(samples_per_prompt=n, batch_size=groups_per_step * n, **SMALL, **kw)
    sc = sc.with_(durations=LogNormalDurations(10.0, 1.0), seed=kw.get("seed", 0))
    r = run(sc)
    check_invariants(r, sc)
    return r


def _groups(r: RunResult, n: int) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = defaultdict(list)
    for e in r.episodes:
        out[e.task_id // n].append(e)
    return out


@settings(max_examples=12, deadline=None)
@given(n=st.integers(2, 4), cap_groups=st.integers(1, 3), seed=st.integers(0, 50))
def test_a_prompt_group_starts_whole_and_holds_its_place_until_its_last_response(
    n: int, cap_groups: int, seed: int
) -> None:
    """At most ``max_concurrent_samples // n`` prompts in flight, a prompt in flight from its
    start until its last response ends; its n responses start at one instant. Before: the cap
    counted responses, so a new response started as soon as any one finished, and a third prompt
    ran beside two unfinished ones (cap_groups 2, n 4, seed 0: 3 prompts at once)."""
    r = _run(n, 2, max_concurrent_samples=cap_groups * n, seed=seed)
    groups = _groups(r, n)
    span = {}
    for g, eps in groups.items():
        assert len(eps) == n  # every response of a started prompt started
        starts = {e.start_s for e in eps}
        assert len(starts) == 1, (g, sorted(starts))  # together
        ends = [e.end_s if e.end_s is not None else math.inf for e in eps]
        span[g] = (starts.pop(), max(ends))
    for g, (t, _) in span.items():
        beside = sum(s <= t < end for h, (s, end) in span.items() if h != g)
        assert beside < cap_groups, (g, t, beside)


@pytest.mark.parametrize(
    ("threshold", "k", "groups_per_step", "n", "cap_prompts"),
    [
        (0.3, 1, 2, 4, 2),  # int(2 x 1.3) = 2 prompts; in responses int(8 x 1.3) = 10 (2.5 prompts)
        (0.25, 1, 3, 4, 3),  # int(3 x 1.25) = 3 prompts; in responses int(12 x 1.25) = 15
        (0.1, 2, 3, 4, 6),  # int(3 x 1.1 x 2) = int(6.6) = 6; in responses int(26.4) = 26 (6.5)
    ],
)
def test_the_stale_counter_caps_whole_prompts(
    threshold: float, k: int, groups_per_step: int, n: int, cap_prompts: int
) -> None:
    """verl's set_max_required_samples is in prompts: before the first parameter update, with a
    rollouter far faster than the trainer, exactly ``cap_prompts`` whole prompts start. Before:
    the cap was truncated in responses, so a fraction of a prompt (2 of 4 responses in the first
    row) started as well."""
    assert VerlRollouter(threshold, k, samples_per_prompt=n).max_required_samples(groups_per_step * n) == (
        cap_prompts * n
    )
    r = _run(n, groups_per_step, staleness_threshold=threshold, trigger_parameter_sync_step=k)
    first = [e for e in r.episodes if e.version < k]  # started under parameter version 0
    assert len(first) == cap_prompts * n
    assert all(len(eps) == n for eps in _groups(r, n).values())


def _other_batching() -> None:
    sc = systems.verl_fully_async(samples_per_prompt=4, batch_size=8, **SMALL)
    run(sc.with_(batching=WholeGroups(4)))


@pytest.mark.parametrize(
    ("make", "field"),
    [
        # fewer responses than one prompt has: not one prompt could ever start
        (lambda: VerlRollouter(0.5, 1, max_concurrent=3, samples_per_prompt=4), "max_concurrent"),
        # complete prompts are counted in the group book VerlMessageQueue keeps; another batch
        # rule takes groups out without it
        (_other_batching, "samples_per_prompt"),
    ],
)
def test_prompt_rollouter_refusals_name_the_field(make: Any, field: str) -> None:
    with pytest.raises(FieldError) as err:
        make()
    assert err.value.field == field


def test_gen_is_the_trainers_wait_without_the_weight_sync() -> None:
    """fully_async_trainer.py times wait_last_valid and sync_weights into timing_s/param_sync,
    outside the ``step`` and ``gen`` timers: a README step's predicted ``gen`` is its trainer
    steps' span less their training, less the one weight sync of the parameter version. Before:
    the sync was counted as ``gen`` (the 64-GPU row's 1.96 s of ``gen`` was its sync)."""
    from scenarios.published import verl

    k = verl.VERL_SYNC_STEP
    m = verl.verl_async(64, 0.5, True)
    assert m.syncs >= 2 and m.sync_s > 0
    span_less_train = k * (m.steady_step_s - m.steady_train_s)
    assert m.gen_s(k) == pytest.approx(max(span_less_train - m.sync_s, 0.0))
    assert m.gen_s(k) < span_less_train
