"""What a mutation audit of ``pipesim/policies/verl.py`` found no test catching: the verl fully
async preset once a small ``max_queue_size`` makes its message queue evict. An evicted sample
(or group) gives back its place in the rollouter's stale-sample counter and in its concurrency
cap, a full queue evicts its *oldest* group, and the trainer takes the *oldest* complete groups.
Each test fails under its one-line mutant; they assert relations, not a run's numbers."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

from pipesim import run
from pipesim.core.episode import Episode
from pipesim.core.port import PipelineView
from pipesim.policies.verl import VerlMessageQueue, VerlRollouter
from pipesim.results.run import RunResult
from pipesim.testing import check_invariants
from scenarios import systems

KW: dict[str, Any] = dict(n_slots=16, batch_size=8, train_time_s=60.0, sync_time_s=8.0, steps=8)
N = 4  # samples_per_prompt in the group cases
GROUPS: dict[str, Any] = {**KW, "n_slots": 32, "samples_per_prompt": N}


def _checked(sc: Any) -> RunResult:
    r = run(sc)
    check_invariants(r, sc)
    return r


@dataclass(eq=False)
class _View:
    """The counters of ``PipelineView`` that :class:`VerlRollouter` reads (hashable by identity,
    as the group book, keyed by the view, needs)."""

    started: int
    n_dropped: int
    version: int = 0
    batch_size: int = 8
    n_buffered: int = 0
    n_running: int = 0
    batches_taken: int = 0
    buffered: list[Episode] = field(default_factory=list)
    scenario: Any = None


def _view(**counters: Any) -> PipelineView:
    return cast("PipelineView", _View(**counters))


def test_the_stale_counter_forgets_evicted_samples() -> None:
    """``stale_samples`` = started - dropped - V x B: with threshold 2 the cap is int(8 x 3) = 24,
    so 24 starts close admission, and 3 of them evicted reopen it (the count is 21)."""
    rollouter = VerlRollouter(2.0)
    assert rollouter.max_required_samples(8) == 24
    full = _view(started=24, n_dropped=0)
    assert rollouter.stale_samples(full) == 24 and rollouter.closed(full)
    evicted = _view(started=24, n_dropped=3)
    assert rollouter.stale_samples(evicted) == 21
    assert not rollouter.closed(evicted)
    assert rollouter.admits(evicted)  # nothing runs, so the concurrency cap does not bind


def test_a_run_starts_samples_only_an_eviction_made_room_for() -> None:
    """Over a run (n = 1, a queue of one batch behind a slow trainer): the counter (starts before
    it, less those evicted by then, less V x B for the version V it starts under) is below the cap
    at every start, and some starts happen while the count *with* the evicted would be at the cap:
    evicted samples leave the counter at once."""
    r = _checked(systems.verl_fully_async(2.0, max_queue_size=8, **KW))
    cap, b = VerlRollouter(2.0).max_required_samples(8), 8
    eps = sorted(r.episodes, key=lambda e: e.id)
    assert all(e.parent == -1 for e in eps)  # no relaunch: each episode is one start, in id order
    gone = [e.discarded_s for e in eps if e.status == "discarded"]
    assert gone
    room_from_evictions = 0
    for before, e in enumerate(eps):
        evicted = sum(1 for t in gone if t is not None and t <= e.start_s)
        assert before - evicted - e.version * b < cap
        room_from_evictions += before - e.version * b >= cap
    assert room_from_evictions > 0


def test_active_groups_do_not_count_evicted_groups() -> None:
    """``active_groups`` (verl's ``len(active_tasks)``): groups started less groups trained,
    evicted or buffered whole. 10 groups started, 2 batches of 2 groups taken, 2 groups (8
    samples) evicted, nothing buffered: 4 active."""
    rollouter = VerlRollouter(4.0, samples_per_prompt=N)
    queue = VerlMessageQueue(8, 4.0, samples_per_group=N)
    view = _view(started=10 * N, n_dropped=2 * N, batches_taken=2, scenario=SimpleNamespace(batching=queue))
    assert rollouter.active_groups(view) == 4


def _group_times(r: RunResult) -> tuple[dict[int, float], dict[int, float], dict[int, float], dict[int, int]]:
    """Per group (sample t of group t // N): its first start, when its last sample finished
    (inf while one runs), when it was evicted, and the step that trained it."""
    start: dict[int, float] = {}
    done: dict[int, float] = {}
    evicted: dict[int, float] = {}
    step: dict[int, int] = {}
    for e in r.episodes:
        g = e.task_id // N
        start[g] = min(start.get(g, float("inf")), e.start_s)
        done[g] = max(done.get(g, 0.0), float("inf") if e.end_s is None else e.end_s)
        if e.status == "discarded":
            assert e.discarded_s is not None
            evicted[g] = e.discarded_s
        elif e.status == "trained":
            step[g] = e.trained_step
    return start, done, evicted, step


def test_an_evicted_group_gives_back_its_place_in_both_caps() -> None:
    """n = 4: a group holds a place from its start until its last response finishes. At every
    group start fewer than the cap (max_concurrent_samples None: verl's max_required_samples,
    40 responses = 10 groups, which is also the stale counter's cap) are active, and after
    evictions some group starts while the active groups plus the groups evicted so far reach
    the cap: an evicted group is counted neither as active nor by the counter."""
    r = _checked(systems.verl_fully_async(4.0, max_queue_size=8, **GROUPS))
    cap = VerlRollouter(4.0, samples_per_prompt=N).max_required_samples(8) // N
    assert cap == 10
    start, done, evicted, _ = _group_times(r)
    assert evicted
    room_from_evictions = 0
    for g, t in start.items():
        active = sum(1 for h in start if h != g and start[h] <= t < done[h])
        assert active < cap
        gone = sum(1 for t_gone in evicted.values() if t_gone <= t)
        room_from_evictions += gone > 0 and active + gone >= cap
    assert room_from_evictions > 0


def test_a_full_queue_evicts_its_oldest_groups() -> None:
    """The group version of ``test_verl_message_queue_evicts_the_oldest_sample_when_full``: a
    group evicted at t completed no later than any group queued beside it then (complete by t)
    and trained at a later step."""
    r = _checked(systems.verl_fully_async(4.0, max_queue_size=8, **GROUPS))
    _, done, evicted, step = _group_times(r)
    taken_at = {s: t0 for s, t0, _, _ in r.train_log}
    pairs = [(d, g) for d, t in evicted.items() for g in step if done[g] <= t <= taken_at[step[g]]]
    assert pairs
    assert all(done[d] <= done[g] for d, g in pairs)


def test_the_trainer_takes_the_oldest_complete_groups() -> None:
    """get_samples pops oldest first: each batch is whole groups, and a group completed earlier
    is never trained at a later step than one completed after it."""
    r = _checked(systems.verl_fully_async(4.0, max_queue_size=16, **GROUPS))
    _, done, _, step = _group_times(r)
    per_group: dict[int, int] = {}
    for e in r.episodes:
        if e.status == "trained":
            per_group[e.task_id // N] = per_group.get(e.task_id // N, 0) + 1
    assert per_group and set(per_group.values()) == {N}
    assert len(set(step.values())) > 1
    for g, end in done.items():
        if g in step:
            assert all(step[h] <= step[g] for h in step if done[h] < end)
