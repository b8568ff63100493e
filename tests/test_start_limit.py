"""The StartLimitHint: a rule's ``start_limit`` must say exactly what its ``admits`` says, the
engine must act on it only where it describes the rule, and a bad limit is named.

Acting on the hint is part of the engine's one shortcut (``EngineOptions(hints=False)`` turns it
off): ``check_promises`` compares the traces with it and without, here for every rule that
declares it, and ``tests/test_engine_paths.py`` does so for the drawn families.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesim import (
    CountThrottle,
    DropStale,
    ExponentialDurations,
    PartialRollout,
    PipelineConfig,
    PipelineError,
    Scenario,
)
from pipesim.core.engine import Pipeline
from pipesim.core.port import start_limit
from pipesim.io.api import draw_pool
from pipesim.policies.admission import LagBound
from pipesim.policies.systems import PipelineRLLag, RollGroupAdmission
from pipesim.testing import check_promises

RULES = [CountThrottle(), LagBound(12), RollGroupAdmission(2), PipelineRLLag(max_lag=5, attempts=2)]


@given(
    rule=st.sampled_from(RULES),
    version=st.integers(0, 50),
    dropped=st.integers(0, 200),
    started=st.integers(0, 2_000),
    batch=st.integers(1, 64),
    eta=st.integers(0, 4),
)
def test_the_limit_says_what_admits_says(
    rule: Any, version: int, dropped: int, started: int, batch: int, eta: int
) -> None:
    p = SimpleNamespace(
        version=version, n_dropped=dropped, started=started, batch_size=batch, max_staleness=eta
    )
    limit = rule.start_limit(p)
    assert type(limit) is int
    assert rule.admits(p) is (started < limit)


def test_the_limit_is_acted_on_only_where_admits_is_defined_or_above() -> None:
    class Stricter(CountThrottle):  # a new rule: the inherited limit no longer describes it
        def admits(self, p: Any) -> bool:
            return p.started < 3

    class Both(CountThrottle):
        def admits(self, p: Any) -> bool:
            return p.started < 3

        def start_limit(self, p: Any) -> int:
            return 3

    assert start_limit(CountThrottle()) is not None
    assert start_limit(Stricter()) is None
    assert start_limit(Both()) is not None
    assert start_limit(DropStale()) is None  # no admission rule at all
    sc = Scenario(pipeline=PipelineConfig(n_slots=4, batch_size=2, steps=3), admission=Stricter())
    p = Pipeline(sc, draw_pool(sc).tolist())
    with pytest.raises(PipelineError, match="stalled"):  # its own admits holds: 3 starts, no more
        p.run()
    assert p.started == 3


@pytest.mark.parametrize("rule", RULES, ids=lambda r: type(r).__name__)
@pytest.mark.parametrize("update", [PartialRollout(), "drop-stale"])
def test_the_hint_changes_no_trace(rule: Any, update: object) -> None:
    eta = 0 if isinstance(rule, RollGroupAdmission | PipelineRLLag) else 1  # their own bound
    sc = Scenario(
        pipeline=PipelineConfig(n_slots=12, batch_size=8, steps=12, max_staleness=eta),
        durations=ExponentialDurations(1.0),
        admission=rule,
        seed=3,
    )
    if update == "drop-stale":  # drops move LagBound's limit
        sc = sc.with_(batching=DropStale(), pool_size=40 * 8)
    check_promises(sc)


class _Limit:
    """A rule whose limit is what the test gives it."""

    def __init__(self, value: object) -> None:
        self.value = value

    def admits(self, p: Any) -> bool:
        return bool(p.started < self.value)

    def start_limit(self, p: Any) -> object:
        return self.value


@pytest.mark.parametrize("value", [2.5, "3", None, True])
def test_a_limit_that_is_no_int_is_named(value: object) -> None:
    sc = Scenario(pipeline=PipelineConfig(n_slots=2, batch_size=2, steps=2), admission=_Limit(value))  # type: ignore[arg-type]
    with pytest.raises(PipelineError, match=r"_Limit\.start_limit must return an int"):
        Pipeline(sc, draw_pool(sc).tolist()).run()


def test_a_numpy_limit_counts_as_its_int() -> None:
    cfg = PipelineConfig(n_slots=4, batch_size=2, steps=3, max_staleness=1)
    numpy_rule = Scenario(pipeline=cfg, admission=_Limit(np.int64(4)))  # type: ignore[arg-type]
    p = Pipeline(numpy_rule, draw_pool(numpy_rule).tolist())
    with pytest.raises(PipelineError, match="stalled"):  # a fixed limit of 4 starts: 2 batches
        p.run()
    assert p.started == 4 and p.version == 2
