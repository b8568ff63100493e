"""The AdmissionGateHint: a weight-update policy's ``admission_gate()`` must name exactly the flag
its ``blocks_admission`` reads, the engine must act on it only where it describes the policy,
and an answer outside the three gates is named.

Acting on the hint is part of the engine's one shortcut (``EngineOptions(hints=False)`` turns it
off): ``check_promises`` compares the traces with it and without, here for every policy that
declares it.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from pipesim import (
    AbortReprefill,
    AbortRestart,
    Drain,
    ExponentialDurations,
    InFlightUpdate,
    OverlappedSwap,
    PartialRollout,
    PipelineConfig,
    PipelineError,
    Scenario,
    SyncEveryK,
)
from pipesim.core.engine import Pipeline
from pipesim.core.port import ADMISSION_GATES, admission_gate
from pipesim.io.api import draw_pool
from pipesim.policies.replicas import PerReplicaSync, Replicas
from pipesim.testing import check_promises

POLICIES: list[Any] = [
    PartialRollout(),
    Drain(),
    AbortReprefill(),
    AbortRestart(),
    AbortRestart(restart=False),
    InFlightUpdate(load_time_s=0.5),
    OverlappedSwap(),
    PerReplicaSync(),
    SyncEveryK(k=2, inner=Drain()),
    SyncEveryK(k=3, inner=InFlightUpdate()),
]


def _gate_says(gate: str, syncing: bool, pending: bool) -> bool:
    return {"never": False, "syncing": syncing, "syncing_or_pending": syncing or pending}[gate]


@pytest.mark.parametrize("policy", POLICIES, ids=repr)
def test_the_gate_says_what_blocks_admission_says(policy: Any) -> None:
    index = admission_gate(policy)
    assert index is not None, "every shipped weight update declares its gate"
    gate = ADMISSION_GATES[index]
    for syncing, pending in itertools.product([False, True], repeat=2):
        p = SimpleNamespace(syncing=syncing, sync_pending=pending)
        assert policy.blocks_admission(p) is _gate_says(gate, syncing, pending), (gate, syncing, pending)


class _OwnBlock(PartialRollout):
    """A new rule: blocks while a sync is pending too; the inherited gate no longer describes it."""

    def blocks_admission(self, p: Any) -> bool:
        return p.syncing or p.sync_pending


class _Stops(PartialRollout):
    """Admits nothing from version 2 on: a rule its parent's gate does not describe."""

    def blocks_admission(self, p: Any) -> bool:
        return p.version >= 2


class _OwnBoth(_OwnBlock):
    def admission_gate(self) -> str:
        return "syncing_or_pending"


class _NoGate:
    """PartialRollout's rule without its promise."""

    def blocks_admission(self, p: Any) -> bool:
        return p.syncing

    sync = PartialRollout.sync


def test_the_gate_is_acted_on_only_where_blocks_admission_is_defined_or_above() -> None:
    assert admission_gate(_OwnBlock()) is None
    assert admission_gate(_OwnBoth()) == ADMISSION_GATES.index("syncing_or_pending")
    assert admission_gate(_NoGate()) is None
    assert admission_gate(SyncEveryK(k=2, inner=_NoGate())) is None  # the inner makes no promise
    assert admission_gate(SyncEveryK(k=2, inner=_OwnBlock())) is None
    # the subclass's own rule holds in the run: admission closes for good at version 2
    sc = Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=2, steps=5), weight_update=_Stops())
    p = Pipeline(sc, draw_pool(sc).tolist())
    with pytest.raises(PipelineError, match="stalled"):
        p.run()
    assert p.version == 2


@pytest.mark.parametrize("policy", POLICIES, ids=repr)
@pytest.mark.parametrize("eta", [0, 2])
def test_the_hint_changes_no_trace(policy: Any, eta: int) -> None:
    sc = Scenario(
        pipeline=PipelineConfig(n_slots=12, batch_size=8, steps=10, max_staleness=eta, sync_time_s=0.7),
        durations=ExponentialDurations(1.0),
        weight_update=policy,
        seed=11,
        pool_size=40 * 8,
    )
    if isinstance(policy, PerReplicaSync):
        sc = sc.with_(replicas=Replicas(n_replicas=3))
    check_promises(sc)


class _Gate(PartialRollout):
    def __init__(self, value: object) -> None:
        self.value = value

    def admission_gate(self) -> Any:
        return self.value


@pytest.mark.parametrize("value", ["sometimes", 1, True, b"never"])
def test_a_gate_outside_the_three_is_named(value: object) -> None:
    with pytest.raises(ValueError, match=r"_Gate\.admission_gate\(\) must return one of"):
        admission_gate(_Gate(value))
    sc = Scenario(pipeline=PipelineConfig(n_slots=2, batch_size=2, steps=2), weight_update=_Gate(value))
    with pytest.raises((ValueError, PipelineError), match=r"_Gate\.admission_gate\(\) must return one of"):
        Pipeline(sc, draw_pool(sc).tolist()).run()


def test_no_gate_asks_the_policy() -> None:
    assert admission_gate(_Gate(None)) is None
