"""The port's actions refuse what they cannot take, naming the policy that called them, and keep
the books: a drop of buffered episodes takes them out of the buffer, a written ``p.version`` is
named where it was written, and an ``admits`` that aborts what it admits is a named zero-time loop,
not an exhausted pool (``pipesim.core.port_impl``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

import pipesim
from pipesim import PipelineConfig, PipelineError, Scenario, run
from pipesim.core.episode import BUFFERED, DISCARDED
from pipesim.testing import check_invariants

CFG = PipelineConfig(n_slots=8, batch_size=8, steps=8, max_staleness=3)


def _run(**roles: Any) -> pipesim.RunResult:
    return run(Scenario(pipeline=CFG, **roles))


class DropStaleAtSync:
    """Drops the buffered episodes more than one version behind at each sync (``status``)."""

    def __init__(self, status: str = DISCARDED) -> None:
        self.status = status
        self.dropped: list[int] = []

    def blocks_admission(self, p: Any) -> bool:
        return False

    def sync(self, p: Any) -> Any:
        p.begin_sync(pause=True)
        stale = [e for e in p.buffered if e.version < p.version - 1]
        before = p.n_buffered
        p.drop(stale, self.status)
        assert p.n_buffered == before - len(stale)  # out of the buffer at once
        self.dropped += [e.id for e in stale]
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


def test_a_drop_of_buffered_episodes_takes_them_out_of_the_buffer_and_the_books_close() -> None:
    wu = DropStaleAtSync()
    sc = Scenario(pipeline=CFG, weight_update=wu)  # type: ignore[arg-type]
    res = run(sc)
    check_invariants(res, sc)  # launched = trained + in flight + buffered + dropped, at every step
    assert wu.dropped, "the scenario must leave stale episodes in the buffer at a sync"
    eps = {e.id: e for e in res.episodes}
    assert all(eps[i].status == DISCARDED and eps[i].discarded_s is not None for i in wu.dropped)
    assert res.summary()["episodes_discarded"] == len(wu.dropped)


def test_a_buffered_episode_is_dropped_only_as_discarded_and_a_refusal_changes_nothing() -> None:
    wu = DropStaleAtSync("aborted")
    with pytest.raises(
        PipelineError, match=r"the weight update policy DropStaleAtSync called drop\('aborted'\)"
    ) as info:
        _run(weight_update=wu)
    assert "buffered" in str(info.value) and "'discarded'" in str(info.value)


class DropRunning:
    """Drops a running episode it reads off the replica (not part of the view): refused."""

    def blocks_admission(self, p: Any) -> bool:
        return False

    def sync(self, p: Any) -> Any:
        p.begin_sync(pause=True)
        running = p.replicas[0].running_episodes()
        if running:
            p.drop(running[:1], "discarded")
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


def test_a_drop_of_an_episode_still_on_a_slot_is_refused_naming_abort_running() -> None:
    with pytest.raises(
        PipelineError, match=r"DropRunning called drop\('discarded'\).*still running.*abort_running"
    ):
        _run(weight_update=DropRunning())


@dataclass(frozen=True)
class RequeuesTaskIds:
    """A batch policy that requeues bare task ids, not (task, parent) pairs."""

    def select(self, buffer: list[Any], p: Any) -> Any:
        if len(buffer) < p.batch_size:
            return None, []
        batch = buffer[: p.batch_size]
        del buffer[: p.batch_size]
        p.requeue([batch[0].task_id])
        return batch, []


class StretchesByANumber:
    def blocks_admission(self, p: Any) -> bool:
        return False

    def sync(self, p: Any) -> Any:
        p.begin_sync(pause=True)
        p.stretch_running(3.0)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


@pytest.mark.parametrize(
    ("roles", "needle"),
    [
        (
            {"batching": RequeuesTaskIds()},
            "the batch policy RequeuesTaskIds called requeue: each item must be a (task, parent) pair",
        ),
        (
            {"weight_update": StretchesByANumber()},
            "the weight update policy StretchesByANumber called stretch_running with 3.0 (float): extra "
            "must be a callable",
        ),
    ],
    ids=["requeue-task-id", "stretch-float"],
)
def test_a_misused_action_names_the_policy_that_called_it(roles: dict[str, Any], needle: str) -> None:
    with pytest.raises(PipelineError, match=re.escape(needle)):
        _run(**roles)


@dataclass(frozen=True)
class AdmitWritesVersion:
    def admits(self, p: Any) -> bool:
        if p.version == 1:
            p.version = 0  # mypy rejects this on a typed view; at run time the engine finds it
        return bool(p.started < (p.version + 2) * p.batch_size)


@dataclass(frozen=True)
class SelectWritesVersion:
    def select(self, buffer: list[Any], p: Any) -> Any:
        if len(buffer) < p.batch_size:
            return None, []
        if p.version == 2:
            p.version = 5
        batch = buffer[: p.batch_size]
        del buffer[: p.batch_size]
        return batch, []


@pytest.mark.parametrize(
    ("roles", "who"),
    [
        ({"admission": AdmitWritesVersion()}, "AdmitWritesVersion (admits)"),
        ({"batching": SelectWritesVersion()}, "SelectWritesVersion (select"),
    ],
    ids=["admits", "select"],
)
def test_a_written_version_is_named_where_it_was_written(roles: dict[str, Any], who: str) -> None:
    with pytest.raises(PipelineError, match=re.escape(who) + r".*wrote p\.version") as info:
        _run(**roles)
    assert "stalled" not in str(info.value)


@dataclass(frozen=True)
class AdmitAborts:
    """An admission rule that aborts what runs whenever it is asked (the docs forbid actions in
    admits): each start is aborted before the next, at one instant."""

    def admits(self, p: Any) -> bool:
        if p.version >= 1:
            p.abort_running()
        return bool(p.started - p.n_dropped < (p.version + 2) * p.batch_size)


def test_an_admits_that_aborts_what_it_admits_is_a_named_zero_time_loop() -> None:
    sc = Scenario(pipeline=CFG, admission=AdmitAborts(), pool_size=5000)  # type: ignore[arg-type]
    with pytest.raises(PipelineError, match=r"the admission policy AdmitAborts called abort_running") as info:
        run(sc)
    assert "pool" not in str(info.value) and "OldestFinishedFirst" not in str(info.value)


def test_a_pool_used_up_by_such_a_loop_names_the_loop_not_the_batch_policy() -> None:
    with pytest.raises(PipelineError, match=r"pool exhausted.*zero-time loop.*AdmitAborts\.admits") as info:
        _run(admission=AdmitAborts())  # the default pool runs out before the loop's limit
    assert "OldestFinishedFirst" not in str(info.value)


def test_a_drop_inside_select_of_an_episode_it_took_out_keeps_the_books() -> None:
    """The other way to drop from the buffer: ``select`` takes the episode out and drops it."""

    @dataclass(frozen=True)
    class DropsOneEachStep:
        def select(self, buffer: list[Any], p: Any) -> Any:
            if len(buffer) < p.batch_size + 1:
                return None, []
            gone = buffer.pop()
            assert gone.status == BUFFERED
            p.drop([gone], DISCARDED)
            batch = buffer[: p.batch_size]
            del buffer[: p.batch_size]
            return batch, []

    sc = Scenario(pipeline=CFG, batching=DropsOneEachStep())  # type: ignore[arg-type]
    res = run(sc)
    check_invariants(res, sc)
    assert res.summary()["episodes_discarded"] >= 1
