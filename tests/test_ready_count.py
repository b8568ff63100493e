"""The ReadyCountHint: a batch policy's ``ready_count`` must say exactly what its ``ready`` says,
the engine must act on it only where it describes the policy, and a count that is no int is named.

Acting on the hint is part of the engine's one shortcut (``EngineOptions(hints=False)`` turns it
off): ``check_promises`` compares the traces with it and without, here for every policy that
declares it.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesim import (
    DropStale,
    ExponentialDurations,
    LowestVersionFirst,
    OldestFinishedFirst,
    PipelineConfig,
    PipelineError,
    Scenario,
)
from pipesim.core.engine import Pipeline
from pipesim.core.port import ready_count
from pipesim.io.api import draw_pool
from pipesim.policies.batching import DropOverlong, WindowedFIFO
from pipesim.testing import check_promises

POLICIES: list[Any] = [OldestFinishedFirst(), LowestVersionFirst(), WindowedFIFO(window=5), DropOverlong()]


@given(
    policy=st.sampled_from(POLICIES),
    buffered=st.integers(0, 300),
    batch=st.integers(1, 256),
    version=st.integers(0, 40),
    dropped=st.integers(0, 100),
)
def test_the_count_says_what_ready_says(
    policy: Any, buffered: int, batch: int, version: int, dropped: int
) -> None:
    p = SimpleNamespace(batch_size=batch, version=version, n_dropped=dropped, max_staleness=1)
    count = policy.ready_count(p)
    assert type(count) is int
    assert policy.ready([None] * buffered, p) is (buffered >= count)


class _Pairs(OldestFinishedFirst):
    """Ready only with twice the batch: a new rule the inherited count no longer describes."""

    def ready(self, buffer: Sequence[Any], p: Any) -> bool:
        return len(buffer) >= 2 * p.batch_size


def test_the_count_is_acted_on_only_where_ready_is_defined_or_above() -> None:
    assert ready_count(OldestFinishedFirst()) is not None
    assert ready_count(_Pairs()) is None
    assert ready_count(DropStale()) is None  # no such promise
    # the subclass's own ready holds in the run: no batch is served before twice the batch size
    # has finished, so the trainer's first step starts later than its parent's
    cfg = PipelineConfig(n_slots=8, batch_size=4, steps=3, max_staleness=2)
    sc = Scenario(pipeline=cfg, durations=ExponentialDurations(1.0), seed=2)
    firsts = []
    for batching in (OldestFinishedFirst(), _Pairs()):
        run = sc.with_(batching=batching)
        p = Pipeline(run, draw_pool(run).tolist())
        p.run()
        firsts.append(p.train_log[0][1])
    assert firsts[1] > firsts[0]


@pytest.mark.parametrize("policy", POLICIES, ids=repr)
@pytest.mark.parametrize("eta", [0, 2])
def test_the_hint_changes_no_trace(policy: Any, eta: int) -> None:
    sc = Scenario(
        pipeline=PipelineConfig(n_slots=10, batch_size=6, steps=10, max_staleness=eta, sync_time_s=0.3),
        durations=ExponentialDurations(1.0),
        batching=policy,
        seed=13,
    )
    check_promises(sc)


class _Count(OldestFinishedFirst):
    def __init__(self, value: object) -> None:
        self.value = value

    def ready_count(self, p: Any) -> Any:
        return self.value


@pytest.mark.parametrize("value", [2.5, "3", None, True])
def test_a_count_that_is_no_int_is_named(value: object) -> None:
    sc = Scenario(pipeline=PipelineConfig(n_slots=2, batch_size=2, steps=2), batching=_Count(value))
    with pytest.raises(PipelineError, match=r"_Count\.ready_count must return an int"):
        Pipeline(sc, draw_pool(sc).tolist()).run()


def test_a_numpy_count_counts_as_its_int() -> None:
    cfg = PipelineConfig(n_slots=4, batch_size=2, steps=3)
    sc = Scenario(pipeline=cfg, batching=_Count(np.int64(2)), durations=ExponentialDurations(1.0), seed=1)
    p = Pipeline(sc, draw_pool(sc).tolist())
    p.run()
    assert p.version == 3
