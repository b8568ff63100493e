"""A replica that answers numpy numbers (``accepting`` a ``numpy.bool_``, ``n_running`` a
``numpy.int64``) runs exactly as one that answers Python's, in the pure and the compiled build
(``make test-compiled`` runs this file on the compiled kernel, where a declared ``bool`` read off
such a replica was a bare ``TypeError`` from inside the run); an answer that is no count is named.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pipesim
from pipesim.core.engine import Pipeline
from pipesim.core.slots import Slots
from pipesim.io.api import draw_pool
from pipesim.policies.replicas import Replicas


class NumpyAnswers:
    """The chapter's slots behind a replica that answers its reads as numpy numbers."""

    def __init__(self, inner: Slots, count: Any = np.int64) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_count", count)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)  # what the kernel sets (the version) is the replica's

    @property
    def accepting(self) -> Any:
        return np.bool_(self._inner.accepting)

    @property
    def n_running(self) -> Any:
        return self._count(self._inner.n_running)

    @property
    def paused(self) -> Any:
        return np.bool_(self._inner.paused)


def _scenario(n_replicas: int) -> pipesim.Scenario:
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(n_slots=6, batch_size=4, steps=6, max_staleness=1, sync_time_s=0.5),
        durations=pipesim.ExponentialDurations(1.0),
        seed=4,
    )
    return sc if n_replicas == 1 else sc.with_(replicas=Replicas(n_replicas=n_replicas))


def _trace(p: Pipeline) -> tuple[Any, ...]:
    eps = p.episodes
    return (
        p.env.now,
        p.started,
        [(e.id, e.slot, e.replica, e.version, e.start_s, e.end_s) for e in eps],
        p.ledger_log,
    )


@pytest.mark.parametrize("n_replicas", [1, 3])
def test_numpy_answers_run_as_python_ones(n_replicas: int) -> None:
    sc = _scenario(n_replicas)
    plain = Pipeline(sc, draw_pool(sc).tolist())
    plain.run()
    wrapped = Pipeline(
        sc, draw_pool(sc).tolist(), engine_factory=lambda p, n, i: NumpyAnswers(Slots(p, n, i))
    )
    wrapped.run()
    assert _trace(wrapped) == _trace(plain)
    assert all(type(x) is int for row in wrapped.ledger_log for x in row)  # counts stay Python ints


def test_a_running_count_that_is_no_int_is_named() -> None:
    sc = _scenario(1)
    p = Pipeline(
        sc, draw_pool(sc).tolist(), engine_factory=lambda q, n, i: NumpyAnswers(Slots(q, n, i), float)
    )
    named = r"NumpyAnswers\.n_running must return an int, got [0-9.]+ \(float\)"
    with pytest.raises(pipesim.PipelineError, match=named):
        p.run()
