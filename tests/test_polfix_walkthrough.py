"""What a user's walkthrough of policies found (round 2), each a policy written as a user would.

1. ``check_promises`` compares every field of every episode: a ``min_items`` that hides a batch
   policy's discards moves only ``discarded_s``, and went unseen.
2. State a policy keeps on itself between runs is named as that, an attribute added lazily
   included, not as an unseeded source.
3. ``requeue`` and ``relaunch`` take as parent only an episode of the run that was dropped and ran
   the same task.
4. The run table and ``pipesim.compare`` account for every launched episode, aborted ones too.
5. A stall from dropped episodes names the class that dropped them.
6. A batch policy that takes episodes out of its buffer without returning them is named alone;
   an exception in ``select`` shows no SimPy frame.
"""

from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import pipesim
from pipesim import PipelineConfig, PipelineError, Scenario
from pipesim.io.html import HEADLINE_KEYS, LAUNCHED_PARTS, run_html
from pipesim.io.registry import get_scenario
from pipesim.policies.admission import AReaLThrottle
from pipesim.policies.base import CountThrottle
from pipesim.policies.batching import DropStale
from pipesim.policies.faults import RequeueFailed, RetryFailed
from pipesim.policies.updates import AbortRestart
from pipesim.testing import InvariantError, check_invariants, check_promises
from pipesim.workload.durations import LogNormalDurations

BASE = get_scenario("async-eta2").with_(n_slots=8, batch_size=4, steps=4)


def _take(buffer: list[Any], n: int) -> list[Any]:
    batch = buffer[:n]
    del buffer[:n]
    return batch


# -- 1. every episode field is compared -----------------------------------------------------------
@dataclass(frozen=True)
class MinItemsLies:
    """Promises min_items = batch_size, but discards stale episodes below it."""

    def min_items(self, p: Any) -> int:
        return p.batch_size

    def select(self, buffer: list[Any], p: Any) -> tuple[list[Any] | None, list[Any]]:
        stale = [e for e in buffer if p.version - e.version > 1]
        for e in stale:
            buffer.remove(e)
        if len(buffer) < p.batch_size:
            return None, stale
        return _take(buffer, p.batch_size), stale


@pytest.mark.parametrize("admission", [CountThrottle(), AReaLThrottle()], ids=["count", "areal"])
def test_a_min_items_that_hides_discards_is_caught(admission: Any) -> None:
    sc = BASE.with_(steps=6, batching=MinItemsLies(), admission=admission)
    with pytest.raises(InvariantError) as info:
        check_promises(sc)
    assert info.value.invariant == "promises hold"
    assert "MinItemsLies.min_items" in str(info.value)


def test_the_trace_holds_every_episode_field_but_the_engines_own_offset() -> None:
    from pipesim.core.episode import EPISODE_FIELDS
    from pipesim.testing.promises import EPISODE_COLUMNS, run_trace

    assert set(EPISODE_FIELDS) - set(EPISODE_COLUMNS) == {"offset_start"}
    trace = run_trace(BASE.with_(batching=DropStale(), admission=AReaLThrottle()))
    episodes = trace[1]
    assert all(len(row) == len(EPISODE_COLUMNS) for row in episodes)
    at = EPISODE_COLUMNS.index("discarded_s")
    status = EPISODE_COLUMNS.index("status")
    assert all((row[at] is not None) == (row[status] == "discarded") for row in episodes)


# -- 2. state kept between runs --------------------------------------------------------------------
@dataclass(frozen=True)
class LazyRunCounter:
    """Keeps a run counter created lazily on itself (not a field)."""

    def admits(self, p: Any) -> bool:
        if p.started == 0 and p.now == 0:
            object.__setattr__(self, "_runs", getattr(self, "_runs", 0) + 1)
        return bool(p.started < (p.version + 1) * p.batch_size + getattr(self, "_runs", 0))


@dataclass(frozen=True)
class FieldRunCounter:
    _runs: int = 0

    def admits(self, p: Any) -> bool:
        if p.started == 0 and p.now == 0:
            object.__setattr__(self, "_runs", self._runs + 1)
        return bool(p.started < (p.version + 1) * p.batch_size + self._runs)


@pytest.mark.parametrize("policy", [LazyRunCounter, FieldRunCounter])
def test_state_kept_between_runs_is_named_as_that(policy: type) -> None:
    with pytest.raises(InvariantError) as info:
        check_promises(BASE.with_(admission=policy()))
    assert info.value.invariant == "policies keep no state between runs"
    assert f"{policy.__name__}._runs" in str(info.value)


@dataclass(frozen=True)
class HoldsALock:
    """An attribute that does not pickle, and that no run changes: nothing to report."""

    lock: Any = field(default_factory=threading.Lock, compare=False)

    def admits(self, p: Any) -> bool:
        return bool(p.started < (p.version + 2) * p.batch_size)


def test_an_attribute_that_does_not_pickle_and_stays_passes() -> None:
    check_promises(BASE.with_(admission=HoldsALock()))


# -- 3. requeue's parent ---------------------------------------------------------------------------
def _sync_calling(fn: Any, name: str) -> Any:
    @dataclass(frozen=True)
    class Update:
        def blocks_admission(self, p: Any) -> bool:
            return bool(p.syncing)

        def sync(self, p: Any) -> Any:
            p.begin_sync(pause=True)
            fn(p)
            yield p.timeout(p.config.sync_time_s)
            p.end_sync()

    Update.__name__ = Update.__qualname__ = name
    return Update()


def _trained(p: Any) -> Any:
    return next(e for e in p.episodes if e.status == "trained")


REQUEUES = {
    "never-launched": lambda p: p.requeue([(0, 99999)]),
    "another-task": lambda p: p.requeue([(_trained(p).task_id + 1, _trained(p).id)]),
    "trained": lambda p: p.requeue([(_trained(p).task_id, _trained(p).id)]),
    "buffered": lambda p: p.requeue([(p.buffered[0].task_id, p.buffered[0].id)]) if p.buffered else None,
    "relaunch-trained": lambda p: p.relaunch(0, _trained(p).task_id, _trained(p).id),
}


@pytest.mark.parametrize("case", sorted(REQUEUES))
def test_requeue_refuses_a_parent_that_is_not_a_dropped_episode_of_its_task(case: str) -> None:
    name = f"Update_{case.replace('-', '_')}"
    sc = BASE.with_(weight_update=_sync_calling(REQUEUES[case], name), n_slots=16, batch_size=4)
    with pytest.raises(PipelineError) as info:
        pipesim.run(sc)
    message = str(info.value)
    assert name in message and "parent" in message  # the policy that called it, and what it gave
    assert ("requeue" in message) or ("relaunch" in message)


@dataclass(frozen=True)
class RequeuesWhatItTrains:
    """Requeues the task of an episode it then trains, not discards."""

    def select(self, buffer: list[Any], p: Any) -> tuple[list[Any] | None, list[Any]]:
        if len(buffer) < p.batch_size:
            return None, []
        p.requeue([(buffer[0].task_id, buffer[0].id)])
        return _take(buffer, p.batch_size), []


def test_a_batch_policy_requeues_only_what_it_discards() -> None:
    with pytest.raises(PipelineError, match="RequeuesWhatItTrains") as info:
        pipesim.run(BASE.with_(batching=RequeuesWhatItTrains()))
    assert "requeue" in str(info.value)


CFG = PipelineConfig(n_slots=16, batch_size=8, train_time_s=20.0, sync_time_s=5.0, max_staleness=1, steps=8)
SMALL = Scenario(pipeline=CFG, durations=LogNormalDurations(40.0, 1.0), pool_size=4000, seed=3)


@pytest.mark.parametrize(
    "kw",
    [
        dict(batching=DropStale(requeue=True), admission=AReaLThrottle()),
        dict(weight_update=AbortRestart(), admission=AReaLThrottle()),
        dict(failures=RequeueFailed(1 / 1000), admission=AReaLThrottle()),
        dict(failures=RetryFailed(1 / 1000)),
    ],
    ids=["dropstale-requeue", "abort-restart", "requeue-failed", "retry-failed"],
)
def test_every_parent_is_a_dropped_episode_of_the_same_task(kw: dict[str, Any]) -> None:
    r = pipesim.run(SMALL.with_(**kw))
    check_invariants(r)
    by_id = {e.id: e for e in r.episodes}
    children = [e for e in r.episodes if e.parent >= 0]
    assert children  # each scenario relaunches
    for e in children:
        parent = by_id[e.parent]
        assert parent.status in ("aborted", "discarded", "failed") and parent.task_id == e.task_id
    assert r.summary()["episodes_restarted"] == len(children)


# -- 4. the run table accounts for every launched episode ------------------------------------------
def test_the_headline_rows_add_up_to_the_episodes_launched() -> None:
    labels = dict(HEADLINE_KEYS)
    assert set(LAUNCHED_PARTS) <= set(labels) and "episodes_launched" in labels
    assert "dropped" not in labels.values()  # "dropped" is discarded + aborted + failed elsewhere
    designs = {
        "aborts": SMALL.with_(weight_update=AbortRestart(), admission=AReaLThrottle()),
        "drops": SMALL.with_(batching=DropStale(), admission=AReaLThrottle()),
    }
    table = pipesim.compare(designs).table
    for name in designs:
        col = table[name]
        parts = sum(col[labels[k]] for k in LAUNCHED_PARTS)
        assert col[labels["episodes_launched"]] == parts
    assert table.loc[labels["episodes_aborted"], "aborts"] > 0  # the aborted ones have a row
    page = run_html(pipesim.run(designs["aborts"]))
    assert all(f">{labels[k]}<" in page for k in LAUNCHED_PARTS)


# -- 5. a stall from dropped episodes names who dropped them ---------------------------------------
@dataclass(frozen=True)
class FiltersThirds:
    """Discards every episode of a task divisible by 3 (a reward filter, say)."""

    drops_work = True

    def select(self, buffer: list[Any], p: Any) -> tuple[list[Any] | None, list[Any]]:
        out = [e for e in buffer if e.task_id % 3 == 0]
        buffer[:] = [e for e in buffer if e.task_id % 3]
        if len(buffer) < p.batch_size:
            return None, out
        return _take(buffer, p.batch_size), out


def test_a_stall_from_dropped_episodes_names_the_class_that_dropped_them() -> None:
    with pytest.raises(PipelineError, match="CountThrottle admits no further episode") as info:
        pipesim.run(SMALL.with_(steps=20, batching=FiltersThirds()))
    assert "FiltersThirds.select" in str(info.value)


# -- 6. a batch policy that loses episodes, and one that raises ------------------------------------
@dataclass(frozen=True)
class LosesWhileWaiting:
    """Pops an episode from the buffer when there are too few for a batch (returns none)."""

    def select(self, buffer: list[Any], p: Any) -> tuple[list[Any] | None, list[Any]]:
        if len(buffer) < p.batch_size:
            if buffer and p.version > 0:
                buffer.pop()
            return None, []
        return _take(buffer, p.batch_size), []


def test_a_stall_from_episodes_taken_out_of_the_buffer_names_the_batch_policy_alone() -> None:
    """It stalled later and was traced back; the select that loses the episodes is refused now."""
    with pytest.raises(PipelineError, match="took episode .* out of the buffer") as info:
        pipesim.run(BASE.with_(steps=8, batching=LosesWhileWaiting()))
    message = str(info.value)
    assert "LosesWhileWaiting.select" in message
    assert "CountThrottle" not in message and "PartialRollout" not in message


@dataclass(frozen=True)
class SelectRaises:
    def select(self, buffer: list[Any], p: Any) -> tuple[list[Any] | None, list[Any]]:
        if p.version >= 2:
            raise ZeroDivisionError("select bug")
        if len(buffer) < p.batch_size:
            return None, []
        return _take(buffer, p.batch_size), []


def test_an_exception_in_select_shows_no_simpy_frame() -> None:
    import simpy

    simpy_dir = str(Path(simpy.__file__).resolve().parent)
    with pytest.raises(ZeroDivisionError) as info:
        pipesim.run(BASE.with_(batching=SelectRaises()))
    frames = traceback.extract_tb(info.value.__traceback__)
    assert frames[-1].name == "select" and frames[-1].filename == __file__
    assert not [f for f in frames if str(Path(f.filename).resolve()).startswith(simpy_dir)]
