"""A batch policy's ``select`` must take out of the buffer exactly the episodes it returns.

Found by the policy-kit walkthrough: a ``select`` returning copies of buffered episodes was
accepted and reported throughput 0 with the trainer running every step; one removing one slice
and returning another (``del buffer[:b]; return buffer[b:2 * b]``) trained episodes that stayed
buffered and lost the ones it removed, undetected; one that removed nothing was blamed on every
policy as a written counter. The buffer now checks each ``select`` by identity and names the
class and the episodes. Also here: the stall's remedies (each one named is run), the
``drops_work`` hint, the pause-bound message naming its class, and one relaunch per parent.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import pipesim
from pipesim import PipelineConfig, PipelineError, Scenario, run
from pipesim.policies.faults import DropFailed, RequeueFailed, RetryFailed
from pipesim.testing import InvariantError, check_invariants, policy_scenarios

# ---------------- buggy batch policies: (name, select body) ----------------


@dataclass(frozen=True)
class ForeignEpisodes:
    def select(self, buffer: list, p: Any) -> Any:
        b = p.batch_size
        if len(buffer) < b:
            return None, []
        batch = [copy.copy(e) for e in buffer[:b]]
        del buffer[:b]
        return batch, []


@dataclass(frozen=True)
class HalfForeign:
    def select(self, buffer: list, p: Any) -> Any:
        b = p.batch_size
        if len(buffer) < b:
            return None, []
        batch = buffer[: b - 1] + [copy.copy(buffer[b - 1])]
        del buffer[:b]
        return batch, []


@dataclass(frozen=True)
class ReplacedEpisodes:
    def select(self, buffer: list, p: Any) -> Any:
        b = p.batch_size
        if len(buffer) < b:
            return None, []
        batch = [dataclasses.replace(e) for e in buffer[:b]]
        del buffer[:b]
        return batch, []


@dataclass(frozen=True)
class SwapBatch:
    def select(self, buffer: list, p: Any) -> Any:
        b = p.batch_size
        if len(buffer) < 2 * b:
            return None, []
        batch = buffer[b : 2 * b]
        del buffer[:b]
        return batch, []


@dataclass(frozen=True)
class SecondOldest:
    def select(self, buffer: list, p: Any) -> Any:
        b = p.batch_size
        if len(buffer) < b:
            return None, []
        batch = buffer[b : 2 * b] if len(buffer) >= 2 * b else buffer[:b]
        del buffer[:b]
        return batch, []


@dataclass(frozen=True)
class NotRemoved:
    def select(self, buffer: list, p: Any) -> Any:
        if len(buffer) < p.batch_size:
            return None, []
        return list(buffer[: p.batch_size]), []


@dataclass(frozen=True)
class DiscardNotRemoved:
    def select(self, buffer: list, p: Any) -> Any:
        if len(buffer) < p.batch_size:
            return None, []
        return None, buffer[:1]


@dataclass(frozen=True)
class LosesEpisodes:
    def select(self, buffer: list, p: Any) -> Any:
        b = p.batch_size
        if len(buffer) < 2 * b:
            return None, []
        batch = buffer[:b]
        del buffer[: 2 * b]
        return batch, []


@dataclass(frozen=True)
class TwiceBatch:
    def select(self, buffer: list, p: Any) -> Any:
        b = p.batch_size
        if len(buffer) < b:
            return None, []
        batch = buffer[: b - 1] + [buffer[0]]
        del buffer[: b - 1]
        return batch, []


@dataclass(frozen=True)
class Ahead:
    """Admits two batches ahead: with equal durations the buffer holds 2 * batch_size at once."""

    def admits(self, p: Any) -> bool:
        return bool(p.started - p.n_dropped < (p.version + 3) * p.batch_size)


def _scenario(batching: object, **kw: Any) -> Scenario:
    cfg = kw.pop("pipeline", PipelineConfig(n_slots=16, batch_size=4, steps=4))
    return Scenario(pipeline=cfg, batching=batching, admission=Ahead(), **kw)  # type: ignore[arg-type]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("policy", "wrong"),
    [
        (ForeignEpisodes(), r"returned episodes? [\d, ]+.* in its batch, not from the buffer"),
        (HalfForeign(), r"returned episode \d+ in its batch, not from the buffer"),
        (ReplacedEpisodes(), r"in its batch, not from the buffer"),
        (SwapBatch(), r"in its batch without taking them out of the buffer; took episodes .* \(lost"),
        (SecondOldest(), r"in its batch without taking them out of the buffer; took episodes .* \(lost"),
        (NotRemoved(), r"in its batch without taking them out of the buffer"),
        (DiscardNotRemoved(), r"returned episode \d+ as discarded without taking it out of the buffer"),
        (LosesEpisodes(), r"took episodes [\d, ]+ out of the buffer and returned them neither"),
        (TwiceBatch(), r"returned Episode\(id=\d+.*\) twice in its batch"),
    ],
    ids=lambda x: type(x).__name__ if not isinstance(x, str) else "",
)
def test_a_select_that_returns_other_than_it_took_is_refused_by_name(policy: object, wrong: str) -> None:
    with pytest.raises(PipelineError) as info:
        run(_scenario(policy), [1.0] * 400)
    msg = str(info.value)
    assert type(info.value) is PipelineError
    assert f"batch policy {type(policy).__name__}" in msg  # the class, as the docs promise
    assert re.search(wrong, msg), msg  # what is wrong, and which episodes
    assert "books do not close" not in msg and "p.started" not in msg  # no counter was written


def test_not_removed_names_the_batch_policy_not_a_written_counter() -> None:
    """The walkthrough's case: steps=1, n_slots=4, batch_size=4 blamed 'CountThrottle /
    PartialRollout / NotRemoved changed the pipeline's counters'."""
    cfg = PipelineConfig(n_slots=4, batch_size=4, steps=1)
    with pytest.raises(PipelineError, match=r"the batch policy NotRemoved\.select .* without taking") as info:
        run(Scenario(pipeline=cfg, batching=NotRemoved(), seed=0))  # type: ignore[arg-type]
    assert "CountThrottle" not in str(info.value)


def test_the_returned_ids_are_the_ones_left_in_the_buffer() -> None:
    """The ids named as 'returned without taking them out' are the batch SwapBatch returned:
    the buffer's second slice (checked against the episodes' own order in the buffer)."""
    seen: list[list[int]] = []

    @dataclass(frozen=True)
    class Spy(SwapBatch):
        def select(self, buffer: list, p: Any) -> Any:
            if len(buffer) >= 2 * p.batch_size:
                seen.append([e.id for e in buffer[p.batch_size : 2 * p.batch_size]])
            return super().select(buffer, p)

    with pytest.raises(PipelineError) as info:
        run(_scenario(Spy()), [1.0] * 400)
    kept = re.search(r"returned episodes ([\d, ]+) in its batch without", str(info.value))
    assert kept is not None and [int(i) for i in kept.group(1).split(", ")] == seen[-1]


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(policy_scenarios())
def test_built_in_batch_policies_never_trip_the_identity_check(scenario: Scenario) -> None:
    """Every built-in batch policy, drawn with every policy family, runs and keeps the books."""
    try:
        result = run(scenario)
    except PipelineError as e:  # a stall the kit allows is another error; never this one
        assert ".select at t=" not in str(e), str(e)
        return
    check_invariants(result, scenario)


# ---------------- the stall's remedies, each one run ----------------


def _stall_message(sc: Scenario) -> str:
    with pytest.raises(PipelineError, match="stalled") as info:
        run(sc)
    return str(info.value)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", [0, 1])
def test_every_remedy_the_stall_names_lets_the_run_finish(seed: int) -> None:
    cfg = PipelineConfig(n_slots=8, batch_size=4, steps=4)
    sc = Scenario(pipeline=cfg, failures=DropFailed(hazard_per_s=0.01), seed=seed)
    msg = _stall_message(sc)
    remedies = msg.split("so none is replaced: ")[1]
    assert "RetryFailed" not in remedies and "RequeueFailed" not in remedies
    pool = re.search(r"pool_size of about ([\d,]+)", remedies)
    extra: dict[str, Any] = {} if pool is None else {"pool_size": int(pool.group(1).replace(",", ""))}
    named = [name for name in ("AReaLThrottle", "OverSample") if name in remedies]
    assert named
    for name in named:
        check_invariants(run(sc.with_(admission=getattr(pipesim, name)(), **extra)))
    for retry in (RetryFailed(hazard_per_s=0.01), RequeueFailed(hazard_per_s=0.01)):
        _stall_message(sc.with_(failures=retry))  # why a retry is not offered: it stalls too


@dataclass(frozen=True)
class DropOddNoDecl:
    """Discards buffered episodes with odd task ids; forgets drops_work."""

    def select(self, buffer: list, p: Any) -> Any:
        odd = [e for e in buffer if e.task_id % 2 == 1]
        keep = [e for e in buffer if e.task_id % 2 == 0]
        b = p.batch_size
        if len(keep) < b:
            buffer[:] = keep
            return None, odd
        batch = keep[:b]
        buffer[:] = keep[b:]
        return batch, odd


@dataclass(frozen=True)
class DropOddDeclared(DropOddNoDecl):
    drops_work = True


def test_a_dropping_batch_policy_without_drops_work_is_told_to_declare_it() -> None:
    cfg = PipelineConfig(n_slots=16, batch_size=8, steps=4)
    msg = _stall_message(Scenario(pipeline=cfg, batching=DropOddNoDecl(), seed=0))  # type: ignore[arg-type]
    assert "DropOddNoDecl" in msg and "drops_work = True" in msg
    declared = _stall_message(Scenario(pipeline=cfg, batching=DropOddDeclared(), seed=0))  # type: ignore[arg-type]
    assert "drops_work" not in declared  # it declared it: only the admission remedy is left


# ---------------- the pause promise names its class ----------------


@dataclass(frozen=True)
class LyingPause:
    def blocks_admission(self, p: Any) -> bool:
        return bool(p.syncing)

    def max_pause_s(self) -> float:
        return 0.0

    def sync(self, p: Any) -> Any:
        p.begin_sync(pause=True)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


def test_a_broken_pause_promise_names_the_weight_update() -> None:
    sc = Scenario(pipeline=PipelineConfig(n_slots=8, batch_size=4, steps=2), weight_update=LyingPause())  # type: ignore[arg-type]
    with pytest.raises(InvariantError) as info:
        check_invariants(run(sc), sc)
    assert info.value.invariant == "promised pause bound"
    assert "LyingPause" in str(info.value) and "max_pause_s" in str(info.value)


# ---------------- one relaunch per dropped parent ----------------


@dataclass(frozen=True)
class RequeueTwice:
    hazard_per_s: float = 0.01

    def on_failure(self, p: Any, ep: Any) -> None:
        p.requeue([(ep.task_id, ep.id), (ep.task_id, ep.id)])


@dataclass(frozen=True)
class RequeueAgain:
    hazard_per_s: float = 0.01

    def on_failure(self, p: Any, ep: Any) -> None:
        p.requeue([(ep.task_id, ep.id)])
        p.requeue([(ep.task_id, ep.id)], first=True)


@dataclass(frozen=True)
class RelaunchTwice:
    hazard_per_s: float = 0.01

    def on_failure(self, p: Any, ep: Any) -> None:
        p.relaunch(ep.replica, task=ep.task_id, parent=ep.id)
        p.requeue([(ep.task_id, ep.id)])


@pytest.mark.parametrize(
    "policy", [RequeueTwice(), RequeueAgain(), RelaunchTwice()], ids=lambda x: type(x).__name__
)
def test_a_parent_is_relaunched_at_most_once(policy: object) -> None:
    cfg = PipelineConfig(n_slots=8, batch_size=4, steps=4)
    sc = Scenario(pipeline=cfg, admission=pipesim.AReaLThrottle(), failures=policy, seed=0)  # type: ignore[arg-type]
    with pytest.raises(PipelineError) as info:
        run(sc)
    msg = str(info.value)
    m = re.search(r"with parent (\d+) a second time", msg)
    assert m is not None and f"the failure policy {type(policy).__name__}" in msg, msg
    assert f"episode {m.group(1)} is requeued or relaunched once already" in msg


@pytest.mark.parametrize("failures", [RequeueFailed(hazard_per_s=0.01), RetryFailed(hazard_per_s=0.01)])
def test_one_relaunch_per_parent_keeps_restarts_within_the_drops(failures: object) -> None:
    cfg = PipelineConfig(n_slots=8, batch_size=4, steps=6)
    r = run(Scenario(pipeline=cfg, admission=pipesim.AReaLThrottle(), failures=failures, seed=1))  # type: ignore[arg-type]
    s = r.summary()
    parents = [e.parent for e in r.episodes if e.parent >= 0]
    assert parents and len(parents) == len(set(parents))
    assert s["episodes_restarted"] <= s["episodes_failed"]
