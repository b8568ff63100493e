"""The per-start speed hints of pipesim 0.1 are no longer read (issue 38 item 3).

``start_limit`` (admission), ``ready_count`` and ``ready`` (batching) and ``admission_gate``
(weight update) each saved one Python call per start or pass. A policy that still defines one
runs exactly as without it -- even where the hint lies -- and its class gets one
``DroppedHintWarning`` per hint. No shipped policy defines one.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import pytest

import pipesim
from pipesim.core.port import DROPPED_HINTS, DroppedHintWarning
from pipesim.policies.catalog import policy_classes
from pipesim.testing.promises import run_trace


@dataclass(frozen=True)
class Throttle:
    def admits(self, p: pipesim.PipelineView) -> bool:
        return p.started < (p.version + 2) * p.batch_size


@dataclass(frozen=True)
class ThrottleWithALyingLimit(Throttle):
    def start_limit(self, p: pipesim.PipelineView) -> int:
        return 0  # would admit nothing, were it read


@dataclass(frozen=True)
class BatchWithLyingHints(pipesim.OldestFinishedFirst):
    def ready(self, buffer: Any, p: pipesim.PipelineView) -> bool:
        return False  # would never let a batch form

    def ready_count(self, p: pipesim.PipelineView) -> int:
        return 10**9


@dataclass(frozen=True)
class UpdateWithALyingGate(pipesim.PartialRollout):
    def admission_gate(self) -> str:
        return "never"  # would admit during syncs


def _scenario(**kw: Any) -> pipesim.Scenario:
    cfg = pipesim.PipelineConfig(
        n_slots=8, batch_size=4, train_time_s=5, sync_time_s=2, max_staleness=1, steps=4
    )
    return pipesim.Scenario(pipeline=cfg, **kw)


@pytest.mark.parametrize(
    "field, plain, hinted, hints",
    [
        ("admission", Throttle(), ThrottleWithALyingLimit(), {"start_limit"}),
        ("batching", pipesim.OldestFinishedFirst(), BatchWithLyingHints(), {"ready", "ready_count"}),
        ("weight_update", pipesim.PartialRollout(), UpdateWithALyingGate(), {"admission_gate"}),
    ],
)
def test_a_dropped_hint_is_ignored_and_warned_about_once(
    field: str, plain: Any, hinted: Any, hints: set[str]
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = run_trace(_scenario(**{field: plain}))
        got = run_trace(_scenario(**{field: hinted}))
        again = run_trace(_scenario(**{field: hinted}, seed=3))  # the same class: no second warning
    assert got == expected and again[0] != "error"
    named = {h for h in DROPPED_HINTS if any(h + "()" in str(w.message) for w in caught)}
    assert named == hints
    assert all(issubclass(w.category, DroppedHintWarning) for w in caught)
    assert len(caught) == len(hints)  # once per class and hint, not per run
    assert all(type(hinted).__name__ in str(w.message) for w in caught)


def test_no_shipped_policy_defines_a_dropped_hint() -> None:
    classes = policy_classes()
    offenders = [f"{n}.{hint}" for n, cls in classes.items() for hint in DROPPED_HINTS if hasattr(cls, hint)]
    assert len(classes) > 20 and offenders == []
