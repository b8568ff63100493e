"""Batch edges counted by tasks, not starts: ``BatchThrottle`` and ``BatchDrain`` under failures.

A retried (``RetryFailed``) or requeued (``RequeueFailed``) episode is launched again under its own
task id. Counted by starts (``p.started % B``), each relaunch shifted every later batch edge:
``verl_one_step_off_policy`` with 32 slots and ``RetryFailed(1e-4)`` trained 17 of 20 steps on two
versions, ``slime_drain`` with ``RetryFailed(1e-4)`` trained episodes 3 versions stale at eta 1,
and with ``RetryFailed(1e-3)`` ran the durations pool out. ``DropFailed`` cannot keep a batch whole
and is refused, naming ``failures``. Without relaunches the event trace is the one counted by starts.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipesim import Scenario, run
from pipesim.core.port import PipelineView
from pipesim.core.validate import FieldError
from pipesim.policies.admission import BatchThrottle
from pipesim.policies.faults import DropFailed, RequeueFailed, RetryFailed
from pipesim.policies.updates import BatchDrain, SyncEveryK
from pipesim.results.run import RunResult
from pipesim.testing import check_invariants, check_promises, run_trace
from scenarios.chapter13 import chapter_scenario
from scenarios.systems import PRESETS, openrlhf_async, slime_drain, verl_one_step_off_policy

RELAUNCHING = (RetryFailed, RequeueFailed)


def _one_step_ahead(result: RunResult) -> None:
    """The presets' promises: every step trains one version, and no episode is more than 1 stale
    (eta 1; the first batch is fresh), beside every invariant the kit checks."""
    check_invariants(result)
    tr = result.trained
    versions_per_step = tr.groupby("step")["version"].nunique()
    mixed = versions_per_step[versions_per_step > 1]
    assert mixed.empty, f"steps {list(mixed.index)} trained on two versions"
    assert tr["staleness"].max() <= 1
    assert (tr["step"] - tr["version"]).max() <= 1  # batch k was generated under version k - 1 or k


@pytest.mark.parametrize(
    ("preset", "failures"),
    [
        (lambda: verl_one_step_off_policy(n_slots=32), RetryFailed(1e-4)),
        (lambda: verl_one_step_off_policy(n_slots=32), RequeueFailed(1e-4)),
        (slime_drain, RetryFailed(1e-4)),
        (slime_drain, RequeueFailed(1e-4)),
        (slime_drain, RetryFailed(1e-3)),  # ran the pool out, counted by starts
        (lambda: verl_one_step_off_policy(n_slots=32), RequeueFailed(1e-3)),  # stalled, counted by starts
    ],
    ids=[
        "verl32-retry",
        "verl32-requeue",
        "slime-retry",
        "slime-requeue",
        "slime-retry-1e-3",
        "verl32-requeue-1e-3",
    ],
)
def test_reproducers_keep_one_version_per_step(preset: Any, failures: Any) -> None:
    sc = preset().with_(failures=failures)
    result = run(sc)
    assert result.summary()["episodes_failed"] > 0  # the failures happened
    _one_step_ahead(result)


@pytest.mark.parametrize("failures", [RetryFailed(1e-3), RequeueFailed(1e-3)], ids=["retry", "requeue"])
def test_promises_hold_under_relaunches(failures: Any) -> None:
    """The ``closed`` hint reads the next task: the quiet-completion shortcut changes no trace."""
    check_promises(verl_one_step_off_policy(n_slots=24, batch_size=16, steps=6).with_(failures=failures))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    relaunch=st.sampled_from(RELAUNCHING),
    hazard=st.floats(1e-4, 3e-3),
    batch=st.integers(2, 12),
    slots_per_batch=st.sampled_from([0.25, 0.5, 1.0, 1.5]),
    slime=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_drawn_hazards_keep_one_version_per_step(
    relaunch: Any, hazard: float, batch: int, slots_per_batch: float, slime: bool, seed: int
) -> None:
    slots = max(1, round(batch * slots_per_batch))
    preset = slime_drain if slime else verl_one_step_off_policy
    sc = preset(n_slots=slots, batch_size=batch, steps=6, seed=seed).with_(failures=relaunch(hazard))
    _one_step_ahead(run(sc))


@pytest.mark.parametrize("hazard", [1e-4, 1e-3])
@pytest.mark.parametrize("preset", [verl_one_step_off_policy, slime_drain])
def test_drop_failed_is_refused_naming_failures(preset: Any, hazard: float) -> None:
    """A dropped task leaves its batch short: the step would take the next batch's first episode."""
    with pytest.raises(FieldError) as err:
        run(preset(n_slots=32).with_(failures=DropFailed(hazard)))
    assert err.value.field == "failures"


def test_sync_every_k_around_batch_drain_under_retries() -> None:
    sc = verl_one_step_off_policy(n_slots=24, batch_size=16, steps=8)
    sc = sc.with_(weight_update=SyncEveryK(2, BatchDrain()), failures=RetryFailed(2e-3))
    result = run(sc)
    check_invariants(result)
    tr = result.trained
    assert (tr.groupby("step")["version"].nunique() == 1).all()


# -- without relaunches: the trace counted by starts, bit for bit -----------------------------------
@dataclass(frozen=True)
class StartsThrottle(BatchThrottle):
    """BatchThrottle as it was: batch edges at ``p.started % B == 0``."""

    def admits(self, p: PipelineView) -> bool:
        if p.started % p.batch_size:
            return True
        return p.n_running == 0 and not self.closed(p)

    def closed(self, p: PipelineView) -> bool:
        b = p.batch_size
        return p.started % b == 0 and p.started >= (p.version + 1 + p.max_staleness) * b


@dataclass(frozen=True)
class StartsDrain(BatchDrain):
    """BatchDrain as it was: batch edges at ``p.started % B == 0``."""

    def blocks_admission(self, p: PipelineView) -> bool:
        return p.syncing or (p.sync_pending and p.started % p.batch_size == 0)

    def sync(self, p: PipelineView) -> Generator[Any, Any, None]:
        while True:
            yield p.drained()
            if p.n_running:
                continue
            if p.started % p.batch_size == 0:
                break
            before = p.started
            yield p.settled()
            if not p.n_running and p.started == before:
                break
        p.begin_sync(pause=True)
        yield p.timeout(p.config.sync_time_s)
        p.end_sync()


def _by_starts(sc: Scenario) -> Scenario:
    changes: dict[str, Any] = {}
    if type(sc.admission) is BatchThrottle:
        changes["admission"] = StartsThrottle()
    if type(sc.weight_update) is BatchDrain:
        changes["weight_update"] = StartsDrain()
    return sc.with_(**changes)


def _identity_cases() -> list[tuple[str, Scenario]]:
    cases = [(name, make(steps=6)) for name, make in PRESETS.items()]
    cases += [
        ("verl32", verl_one_step_off_policy(n_slots=32, steps=6)),
        ("slime-s24-b16", slime_drain(n_slots=24, batch_size=16, steps=6)),
        ("openrlhf-q2", openrlhf_async(async_queue_size=2, n_slots=40, steps=6)),
    ]
    for eta in (0, 1, 2):  # the chapter's pipeline under the batch policies, every start a new task
        base = chapter_scenario(eta, interrupt=False).with_(steps=6, n_slots=24, batch_size=16)
        cases.append((f"chapter-batchdrain-eta{eta}", base.with_(weight_update=BatchDrain())))
        cases.append(
            (f"chapter-both-eta{eta}", base.with_(admission=BatchThrottle(), weight_update=BatchDrain()))
        )
    return cases


@pytest.mark.parametrize(("name", "sc"), _identity_cases(), ids=[n for n, _ in _identity_cases()])
def test_trace_without_relaunches_is_the_count_by_starts(name: str, sc: Scenario) -> None:
    assert run_trace(sc) == run_trace(_by_starts(sc))
