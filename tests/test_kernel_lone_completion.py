"""The replica's own completion path and the per-field episode readers (issue 38, speed).

* ``Slots._run`` finishes a lone completion it takes in place itself and runs the controller pass
  there (``Pipeline.reports_in_place``), without ``_finish_due`` and ``on_finished``. It must be
  taken where it applies, and be invisible: the same trace as the general path, which
  ``reports_in_place = False`` (set before the run) forces.
* ``episode_values`` reads a field of many episodes through a comprehension written per field: each
  must read its own field.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim import Drain, PartialRollout, PipelineConfig, Scenario, TraceDurations
from pipesim.core.engine import Pipeline
from pipesim.core.episode import EPISODE_FIELDS, Episode, episode_column, episode_values
from pipesim.core.slots import Slots
from pipesim.io.api import draw_pool
from pipesim.testing.promises import pipeline_trace


class CountingSlots(Slots):
    """Counts the calls of the general completion path."""

    general = 0

    def _finish_due(self, now: float, in_pass: bool = False, awake: Slots | None = None) -> None:
        CountingSlots.general += 1
        super()._finish_due(now, in_pass, awake)


def counted_run(sc: Scenario, pool: Any, in_place: bool) -> tuple[Pipeline, int, tuple[Any, ...]]:
    CountingSlots.general = 0
    p = Pipeline(sc, pool, engine_factory=CountingSlots)
    p.reports_in_place = in_place
    p.run()
    return p, CountingSlots.general, pipeline_trace(p)


# times on a grid of quarter seconds: many completions tie, some are alone at their instant
TIES = TraceDurations(tuple(float(1 + (7 * i) % 5) * (1.0 if i % 3 else 1.125) for i in range(400)))
CASES = [
    (PipelineConfig(n_slots=16, batch_size=16, max_staleness=2, steps=12), PartialRollout(), None),
    (PipelineConfig(n_slots=16, batch_size=8, max_staleness=1, steps=12), Drain(), None),
    (PipelineConfig(n_slots=8, batch_size=8, max_staleness=0, steps=6), PartialRollout(), None),
    (
        PipelineConfig(n_slots=6, batch_size=4, train_time_s=2.0, sync_time_s=1.0, max_staleness=2, steps=20),
        PartialRollout(),
        TIES,
    ),
]


@pytest.mark.parametrize("cfg,update,durations", CASES)
def test_the_lone_completion_path_gives_the_general_paths_trace(
    cfg: PipelineConfig, update: Any, durations: Any
) -> None:
    kw = {} if durations is None else {"durations": durations, "pool_size": 400}
    sc = Scenario(pipeline=cfg, weight_update=update, **kw)
    pool = draw_pool(sc).tolist()
    fast, n_fast, trace_fast = counted_run(sc, pool, True)
    slow, n_slow, trace_slow = counted_run(sc, pool, False)
    assert trace_fast == trace_slow
    assert (
        n_fast < n_slow
    )  # the replica finished some completions itself, never more through the general path


def test_an_asynchronous_run_finishes_most_completions_on_the_replica() -> None:
    """With spare staleness budget every completion starts the next episode: the replica finishes
    it and runs the pass itself, and the general path handles only the rest (ties, syncs)."""
    sc = Scenario(pipeline=PipelineConfig(n_slots=32, batch_size=32, max_staleness=2, steps=30))
    pool = draw_pool(sc).tolist()
    fast, n_fast, trace_fast = counted_run(sc, pool, True)
    slow, n_slow, trace_slow = counted_run(sc, pool, False)
    assert trace_fast == trace_slow
    n = fast.started
    assert n_slow > n / 2  # the general path: one call per completion (quiet ones aside)
    assert n_fast < n / 10  # the replica's own path: (nearly) none


def test_a_subclass_that_watches_on_finished_sees_every_report() -> None:
    class Watching(Pipeline):
        reports = 0

        def on_finished(
            self, episodes: list[Episode], now: float, in_pass: bool = False, awake: Any = None
        ) -> None:
            self.reports += 1
            super().on_finished(episodes, now, in_pass, awake)

    sc = Scenario(pipeline=PipelineConfig(n_slots=16, batch_size=16, max_staleness=2, steps=10))
    p = Watching(sc, draw_pool(sc).tolist())
    assert not p.reports_in_place
    p.run()
    assert p.reports > p.started / 2


FIELD_VALUES: dict[str, Any] = {
    "id": st.integers(0, 10**6),
    "task_id": st.integers(0, 10**6),
    "duration_s": st.floats(0, 1e4),
    "version": st.integers(0, 100),
    "parent": st.integers(-1, 10**6),
    "slot": st.integers(-1, 10**4),
    "replica": st.integers(0, 64),
    "start_s": st.floats(0, 1e6),
    "update_from": st.integers(0, 1000),
    "offset_start": st.floats(0, 1e6),
    "end_s": st.none() | st.floats(0, 1e6),
    "update_to": st.integers(0, 1000),
    "status": st.sampled_from(["running", "buffered", "trained", "discarded", "aborted", "failed"]),
    "trained_step": st.integers(-1, 1000),
    "trained_version": st.integers(-1, 1000),
    "work_s": st.floats(0, 1e4),
    "truncated": st.booleans(),
    "lost_s": st.floats(0, 1e4),
    "fail_at_s": st.none() | st.floats(0, 1e4),
    "reprefill_tokens": st.floats(0, 1e6),
    "reprefill_s": st.floats(0, 1e4),
    "discarded_s": st.none() | st.floats(0, 1e6),
    "tokens_before_update": st.floats(0, 1e6),
}
field_values = st.fixed_dictionaries(FIELD_VALUES)


def made(values: dict[str, Any]) -> Episode:
    ep = Episode(values["id"], values["task_id"], values["duration_s"], values["version"])
    for name, value in values.items():
        setattr(ep, name, value)
    return ep


@settings(max_examples=40, deadline=None)
@given(st.lists(field_values, max_size=6))
def test_each_field_reader_reads_its_own_field(rows: list[dict[str, Any]]) -> None:
    assert set(EPISODE_FIELDS) == set(FIELD_VALUES)  # every field drawn
    eps = [made(r) for r in rows]
    for name in EPISODE_FIELDS:
        got = episode_values(eps, name)
        assert got == [r[name] for r in rows], name
        assert all(a is b for a, b in zip(got, (getattr(e, name) for e in eps))), name
    for name in ("slot", "version", "start_s", "duration_s"):
        col = episode_column(eps, name, np.float64)
        assert col.tolist() == [float(r[name]) for r in rows]
