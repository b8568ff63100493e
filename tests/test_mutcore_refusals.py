"""The core's refusals of a user's policy that misbehaves, pinned where a mutation audit of the core
found single-line mutants no test killed: each row is a policy written as a user writes it (plain
classes against the port), and the error it must get (its type, and the policy, method or value it
must name; never the sentence). Where a weakened check would let the run go on, the row also names
what the message must not be (a later stall, SimPy's own error, a bare IndexError).

Shorthand: LN is ``LogNormalDurations(40.0, 1.0)`` with ``pool_size=3000``, ``train_time_s=20``
and ``sync_time_s=8``; the seeds are fixed so each row reaches the fault in a few simulated steps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from typing import Any

import pytest

import pipesim
from pipesim import CountThrottle, PipelineConfig, Scenario
from pipesim.core.engine import Pipeline
from pipesim.core.errors import PipelineError
from pipesim.core.validate import CrossFieldError, FieldError
from pipesim.policies.admission import AReaLThrottle
from pipesim.policies.faults import DropFailed
from pipesim.policies.replicas import PerReplicaSync, Replicas
from pipesim.policies.updates import AbortRestart
from pipesim.workload.durations import LogNormalDurations

LN = LogNormalDurations(40.0, 1.0)


def _cfg(n_slots: int, batch_size: int, max_staleness: int, steps: int) -> PipelineConfig:
    return PipelineConfig(
        n_slots=n_slots,
        batch_size=batch_size,
        train_time_s=20.0,
        sync_time_s=8.0,
        max_staleness=max_staleness,
        steps=steps,
    )


def _ln(cfg: PipelineConfig, **kw: Any) -> Scenario:
    return Scenario(pipeline=cfg, durations=LN, pool_size=3000, seed=5, **kw)


# -- weight updates written by a user ------------------------------------------------------------
class AbortOpen:
    """Pauses, aborts what runs, and never blocks admission: the pause alone must keep slots shut."""

    def blocks_admission(self, p: Any) -> bool:
        return False

    def sync(self, p: Any) -> Generator[Any, Any, None]:
        p.begin_sync(pause=True)
        p.abort_running()
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


class RelaunchFull:
    """Relaunches on replica 0 while all its slots are busy."""

    def blocks_admission(self, p: Any) -> bool:
        return bool(p.syncing)

    def sync(self, p: Any) -> Generator[Any, Any, None]:
        p.begin_sync(pause=True)
        p.relaunch(0, task=0, parent=-1)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


class PublishAhead:
    """Publishes a version two past the trainer's on a replica (one past is the most there is)."""

    def blocks_admission(self, p: Any) -> bool:
        return False

    def sync(self, p: Any) -> Generator[Any, Any, None]:
        p.begin_sync(pause=False)
        p.pause_replica(0)
        yield p.timeout(p.config.sync_time_s)
        p.publish_replica(0, p.version + 2, since_s=p.now)
        p.end_sync(engines=False)


class DropTwiceAtSync:
    """Drops the same buffered episode twice in one call, at the first sync."""

    def blocks_admission(self, p: Any) -> bool:
        return bool(p.syncing)

    def sync(self, p: Any) -> Generator[Any, Any, None]:
        p.begin_sync(pause=True)
        if p.version == 0 and p.buffered:
            ep = p.buffered[0]
            p.drop([ep, ep], "discarded")
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


# -- batch policies written by a user ------------------------------------------------------------
class WrongHalf:
    """Returns the second ``batch_size`` episodes but takes the first out; records what it returned."""

    def __init__(self) -> None:
        self.returned: list[int] = []

    def select(self, buffer: list[Any], p: Any) -> object:
        b = p.batch_size
        if len(buffer) < 2 * b:
            return None, []
        batch = buffer[b : 2 * b]
        del buffer[:b]
        self.returned = [ep.id for ep in batch]
        return batch, []


class RequeueKept:
    """Requeues the task of an episode it then trains (a parent must be dropped for good)."""

    def select(self, buffer: list[Any], p: Any) -> object:
        if len(buffer) < p.batch_size:
            return None, []
        batch = buffer[: p.batch_size]
        del buffer[: p.batch_size]
        if p.version == 0:
            p.requeue([(batch[0].task_id, batch[0].id)])
        return batch, []


class Swallow:
    """Takes the oldest episode out of the buffer and returns nothing: the episode is lost."""

    def select(self, buffer: list[Any], p: Any) -> object:
        if len(buffer) >= 3:
            buffer.pop(0)
        return None, []


class DropTwice:
    """Drops the same buffered episode twice in one call, from select."""

    def select(self, buffer: list[Any], p: Any) -> object:
        if not buffer:
            return None, []
        if p.version == 0 and len(buffer) == 1:
            ep = buffer[0]
            p.drop([ep, ep], "discarded")
            return None, []
        if len(buffer) < p.batch_size:
            return None, []
        batch = buffer[: p.batch_size]
        del buffer[: p.batch_size]
        return batch, []


class NegativeTrainer:
    """A trainer model whose step time is negative."""

    def train_time_s(self, step: int, batch: list[Any]) -> float:
        return -1.0


class ZeroHazard:
    """A user's failure policy whose hazard is zero (a mean life of 1/0)."""

    hazard_per_s = 0.0

    def on_failure(self, p: Any, ep: Any) -> None:
        return None


def _run(sc: Scenario) -> Callable[[], object]:
    return lambda: pipesim.run(sc)


def _negative_trainer() -> object:
    sc = Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=2), seed=1)
    Pipeline(sc, pipesim.draw_pool(sc).tolist(), trainer=NegativeTrainer()).run()
    return None


# rows: id (the audit's mutant), call, exception type, names the message must carry, names it must not
ROWS: list[tuple[str, Callable[[], object], type[Exception], tuple[str, ...], tuple[str, ...]]] = [
    (
        "Q10-publish-two-ahead",
        _run(_ln(_cfg(2, 2, 1, 3), weight_update=PublishAhead())),
        PipelineError,
        ("publish_replica",),
        (),
    ),
    (
        "Q12-relaunch-on-full-replica",
        _run(_ln(_cfg(2, 2, 1, 3), weight_update=RelaunchFull())),
        PipelineError,
        ("RelaunchFull", "relaunch", "no free slot"),
        (),
    ),
    (
        "B6-requeue-a-trained-episode",
        _run(_ln(_cfg(8, 2, 2, 3), batching=RequeueKept(), admission=AReaLThrottle())),
        PipelineError,
        ("RequeueKept", "requeue", "discarded"),
        (),
    ),
    (
        "B3-select-swallows-an-episode",
        _run(_ln(_cfg(8, 2, 2, 3), batching=Swallow())),
        PipelineError,
        ("Swallow.select",),
        ("stalled",),  # named at the step it happened, not by a stall later
    ),
    (
        "Q13-drop-twice-in-select",
        _run(_ln(_cfg(8, 2, 2, 3), batching=DropTwice(), admission=AReaLThrottle())),
        PipelineError,
        ("DropTwice", "given twice"),
        (),
    ),
    (
        "Q13-drop-twice-in-sync",
        _run(_ln(_cfg(8, 2, 2, 3), weight_update=DropTwiceAtSync(), admission=AReaLThrottle())),
        PipelineError,
        ("DropTwiceAtSync", "given twice"),
        (),
    ),
    (
        "E11-negative-trainer-step",
        _negative_trainer,
        PipelineError,
        ("trainer model", "step 0", "-1.0"),
        ("Negative delay",),  # not SimPy's own refusal
    ),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("call", "kind", "names", "never"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_a_misbehaving_policy_is_named(
    call: Callable[[], object], kind: type[Exception], names: tuple[str, ...], never: tuple[str, ...]
) -> None:
    with pytest.raises(kind) as info:
        call()
    assert type(info.value) is kind  # not a subclass raised from elsewhere (IndexError, ValueError)
    msg = str(info.value)
    for name in names:
        assert name in msg, (name, msg)
    for name in never:
        assert name not in msg, (name, msg)


@pytest.mark.timeout(60)
def test_select_returning_episodes_it_kept_names_them() -> None:
    """B5: a batch returned from the part of the buffer select did not take out is named, with the
    ids of the episodes returned (the ones it took out are lost)."""
    policy = WrongHalf()
    with pytest.raises(PipelineError) as info:
        pipesim.run(_ln(_cfg(8, 2, 2, 3), batching=policy))
    msg = str(info.value)
    assert "WrongHalf.select" in msg, msg
    assert policy.returned, "select never returned a batch"
    for ep_id in policy.returned:
        assert re.search(rf"\b{ep_id}\b", msg), (ep_id, msg)


@pytest.mark.timeout(60)
def test_abort_running_keeps_a_paused_sync_closed() -> None:
    """C9: abort_running inside a paused sync must not reopen the slots; with an update that never
    blocks admission, the pause alone keeps every start out of every sync interval."""
    sc = _ln(_cfg(4, 4, 1, 3), admission=AReaLThrottle(), weight_update=AbortOpen())
    run = pipesim.run(sc)
    syncs = [(u.start_s, u.end_s) for u in run.updates]
    assert len(syncs) == 3
    during = [(ep.id, ep.start_s) for ep in run.episodes if any(a <= ep.start_s < b for a, b in syncs)]
    assert during == []
    assert run.summary()["episodes_launched"] == 20


def test_per_replica_sync_times_of_the_wrong_length_are_refused_at_construction() -> None:
    """RP10: more sync times than replicas is refused when the scenario is built, naming the field."""
    with pytest.raises(CrossFieldError) as info:
        Scenario(
            pipeline=PipelineConfig(n_slots=8, batch_size=4, steps=2),
            replicas=Replicas(2),
            weight_update=PerReplicaSync((1.0, 2.0, 3.0)),
        )
    assert "sync_times_s" in info.value.field
    assert "sync_times_s" in str(info.value)


def test_a_user_failure_policy_with_zero_hazard_is_a_field_error() -> None:
    """L7: a zero hazard (a mean life of 1/0) is a FieldError naming it, not a ZeroDivisionError."""
    sc = Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=4, steps=2), failures=ZeroHazard())
    with pytest.raises(FieldError) as info:
        pipesim.run(sc)
    assert info.value.field == "failures.hazard_per_s"
    assert "ZeroHazard" in str(info.value)


def _stall(**kw: Any) -> str:
    with pytest.raises(PipelineError) as info:
        pipesim.run(_ln(_cfg(8, 4, 1, 5), **kw))
    msg = str(info.value)
    assert "stalled" in msg, msg
    return msg


@pytest.mark.timeout(60)
def test_a_stall_names_each_dropper_with_its_count() -> None:
    """S5: where failures and aborts both dropped episodes, each is named with its count, and the
    counts add up to the run's dropped episodes."""
    msg = _stall(failures=DropFailed(0.01), weight_update=AbortRestart(restart=False))
    dropped = int(re.search(r"(\d+) dropped;", msg).group(1))  # type: ignore[union-attr]
    failed = re.search(r"(\d+) failed DropFailed", msg)
    aborted = re.search(r"(\d+) aborted by AbortRestart's abort_running", msg)
    assert failed and aborted, msg
    assert int(failed.group(1)) > 0 and int(aborted.group(1)) > 0
    assert int(failed.group(1)) + int(aborted.group(1)) == dropped, msg


@pytest.mark.timeout(60)
def test_a_stall_with_a_large_pool_gives_no_pool_size_advice() -> None:
    """S6: a pool far larger than the run could use is not told to grow."""
    msg = _stall(failures=DropFailed(0.01), admission=CountThrottle())
    assert "CountThrottle" in msg and "DropFailed" in msg, msg
    assert "pool_size" not in msg, msg
