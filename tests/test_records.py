"""Archived episode records read exactly as the objects they replace (``pipesim.core.records``).

The trainer hands each trained batch to the records, which keep it as arrays and drop the objects
(``EngineOptions.archive_block_episodes``). Nothing a user reads may change: for drawn scenarios
of every policy family, a run that archives every batch at once (block 1), one that archives in
odd blocks (3) and one that never archives (0) give the same event trace, the same episodes
attribute for attribute (rebuilt ones included), the same summary and the same tables.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings

from pipesim import (
    AbortReprefill,
    AbortRestart,
    DropStale,
    PartialRollout,
    PipelineConfig,
    PipelineError,
    RequeueFailed,
    RetryFailed,
    Scenario,
    Timeout,
)
from pipesim.core.engine import Pipeline
from pipesim.core.episode import ABORTED, DISCARDED, EPISODE_FIELDS, FAILED, RARE_DEFAULTS, TRAINED, Episode
from pipesim.core.records import EpisodeRecords
from pipesim.core.seams import EngineOptions
from pipesim.core.validate import FieldError
from pipesim.io.api import draw_pool
from pipesim.results.columns import EpisodeColumns
from pipesim.results.run import RunResult
from pipesim.testing.promises import pipeline_trace
from pipesim.testing.strategies import policy_scenarios
from tests.test_refusals_core import check_refusal

pytestmark = pytest.mark.timeout(300)

FIELDS = [name for name in EPISODE_FIELDS if name != "offset_start"]
RARE = list(RARE_DEFAULTS)


def ran(sc: Scenario, block: int) -> tuple[Pipeline, RunResult] | str:
    opts = EngineOptions(archive_block_episodes=block, archive_min_episodes=0)
    p = Pipeline(sc, draw_pool(sc).tolist(), options=opts)
    try:
        p.run()
    except PipelineError as exc:
        return str(exc)
    return p, RunResult(
        sc, p.env.now, p.episodes, p.updates, p.train_log, p.sync_log, ledger_log=p.ledger_log
    )


def attributes(e: Episode) -> tuple[Any, ...]:
    return tuple(getattr(e, n) for n in FIELDS + RARE)


def same_value(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def assert_same_runs(sc: Scenario) -> None:
    runs = [ran(sc, block) for block in (0, 1, 3)]
    if isinstance(runs[0], str):
        assert runs[1:] == [runs[0]] * 2  # the same error
        return
    (p0, r0), *others = runs  # type: ignore[misc]
    objects = [attributes(e) for e in p0.episodes]
    for p, r in others:
        assert pipeline_trace(p) == pipeline_trace(p0)
        assert [attributes(e) for e in p.episodes] == objects
        s, s0 = r.summary(), r0.summary()
        assert list(s) == list(s0) and all(same_value(s[k], s0[k]) for k in s0), "summary"
        for table in ("events", "trained", "episode_table"):
            pd.testing.assert_frame_equal(getattr(r, table), getattr(r0, table))


@settings(max_examples=40)
@given(policy_scenarios())
def test_archived_records_read_as_the_objects(sc: Scenario) -> None:
    assert_same_runs(sc)


def test_rare_fields_survive_archiving() -> None:
    # timeouts (truncated, work_s below duration_s) and re-prefills (reprefill tokens and seconds)
    cfg = PipelineConfig(n_slots=6, batch_size=6, train_time_s=30, sync_time_s=5, max_staleness=2, steps=12)
    sc = Scenario(pipeline=cfg, weight_update=AbortReprefill(), timeout=Timeout(120.0), seed=3)
    assert_same_runs(sc)
    got = ran(sc, 1)
    assert not isinstance(got, str)
    p, _ = got
    assert p.episodes.n_archived > 0
    archived = [e for e in p.episodes if e.id not in p.episodes.live]
    assert any(e.truncated and e.work_s < e.duration_s for e in archived)
    assert any(e.reprefill_tokens > 0 for e in archived)


def test_a_long_run_keeps_few_objects() -> None:
    cfg = PipelineConfig(
        n_slots=32, batch_size=32, train_time_s=60, sync_time_s=10, max_staleness=2, steps=80
    )
    sc = Scenario(pipeline=cfg, weight_update=PartialRollout())
    got = ran(sc, 64)
    assert not isinstance(got, str)
    p, r = got
    rec = p.episodes
    assert len(rec) == p.started and rec.n_archived + len(rec.live) == len(rec)
    # the live objects are the running and buffered ones and one block at most
    assert len(rec.live) <= cfg.n_slots + len(p.buffer.items) + 64 + cfg.batch_size
    assert rec.n_archived >= (cfg.steps - 2) * cfg.batch_size
    assert r.summary()["episodes_trained"] == cfg.steps * cfg.batch_size


def test_records_are_a_sequence_in_id_order() -> None:
    cfg = PipelineConfig(n_slots=4, batch_size=4, train_time_s=60, sync_time_s=10, max_staleness=1, steps=6)
    got = ran(Scenario(pipeline=cfg, weight_update=PartialRollout()), 2)
    assert not isinstance(got, str)
    rec = got[0].episodes
    assert isinstance(rec, EpisodeRecords) and rec.n_archived > 0 and rec.live
    n = len(rec)
    assert [e.id for e in rec] == list(range(n))
    assert [e.id for e in rec[1:5]] == [1, 2, 3, 4] and rec[-1].id == n - 1
    first_live = min(rec.live)
    assert rec[first_live] is rec.live[first_live]  # a live episode is the object itself
    archived = next(i for i in range(n) if i not in rec.live)
    assert rec[archived].status == TRAINED and rec[archived] is not rec[archived]  # rebuilt each time
    assert math.isnan(rec[archived].offset_start)  # the engine-internal offset is not kept
    with pytest.raises(IndexError):  # a sequence's refusal: its type is the protocol
        rec[n]
    assert np.array_equal(RunResult(got[1].scenario, 0.0, rec, [], [], []).columns.id, np.arange(n))


def test_a_small_run_keeps_its_objects() -> None:
    cfg = PipelineConfig(n_slots=16, batch_size=16, train_time_s=60, sync_time_s=10, steps=40)
    sc = Scenario(pipeline=cfg, weight_update=PartialRollout())
    small = Pipeline(sc, draw_pool(sc).tolist())  # 640 to train: below the default minimum
    small.run()
    assert small.episodes.n_archived == 0
    opts = EngineOptions(archive_block_episodes=64, archive_min_episodes=640)
    big = Pipeline(sc, draw_pool(sc).tolist(), options=opts)  # at the minimum: archives
    big.run()
    assert big.episodes.n_archived >= 640 - 64
    assert pipeline_trace(big) == pipeline_trace(small)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"archive_block_episodes": -1}, "archive_block_episodes"),
        ({"archive_block_episodes": True}, "archive_block_episodes"),
        ({"archive_min_episodes": -5}, "archive_min_episodes"),
    ],
    ids=["block-negative", "block-bool", "min-negative"],
)
def test_archive_block_is_validated(kw: dict[str, object], field: str) -> None:
    check_refusal(lambda: EngineOptions(**kw), FieldError, field)  # type: ignore[arg-type]


def test_live_episodes_beyond_the_archived_ids_are_read() -> None:
    # 5,000 live episodes and the first ten archived: the arrays were sized for the archived ids
    records, plain = EpisodeRecords(archive_block=1), []
    for i in range(5000):
        ep = Episode(i, i, 1.0 + i, 0, slot=i % 7)
        ep.start_s, ep.end_s = float(i), float(i) + 1.0 + i
        ep.status = "buffered"
        records.append(ep)
        plain.append(ep)
    for ep in plain[:10]:
        ep.status, ep.trained_step, ep.trained_version = TRAINED, 0, 0
    records.archive(plain[:10], 0, 0)
    assert records.n_archived == 10 and len(records.live) == 4990
    got, want = EpisodeColumns(records), EpisodeColumns(plain)
    for name in ("id", "task_id", "slot", "start_s", "end_s", "duration_s", "trained_step", "status"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name


@pytest.mark.parametrize(
    "kw",
    [
        dict(batching=DropStale(requeue=True), weight_update=PartialRollout()),
        dict(weight_update=AbortRestart()),
        dict(failures=RequeueFailed(hazard_per_s=1 / 2000), weight_update=PartialRollout()),
        dict(failures=RetryFailed(hazard_per_s=1 / 600), timeout=Timeout(200.0)),
    ],
    ids=["discarded", "aborted", "failed-requeued", "failed-retried"],
)
def test_dropped_episodes_are_archived_and_read_the_same(kw: dict[str, Any]) -> None:
    cfg = PipelineConfig(n_slots=8, batch_size=8, train_time_s=30, sync_time_s=5, max_staleness=2, steps=14)
    sc = Scenario(pipeline=cfg, seed=5, **kw)
    assert_same_runs(sc)  # the same trace, episodes, summary and tables as a run that keeps objects
    got = ran(sc, 1)
    assert not isinstance(got, str)
    p, r = got
    rec = p.episodes
    dropped = [e for e in rec if e.status in (DISCARDED, ABORTED, FAILED)]
    assert dropped, "the scenario drops episodes"
    archived = [e for e in dropped if e.id not in rec.live]
    assert archived and all(e is not rec[e.id] for e in archived)  # rebuilt from the arrays
    # every drop before the last training step is archived; the later ones wait for a next step
    assert len(archived) >= sum(1 for e in dropped if e.end_s is not None and e.end_s < r.train_log[-1][1])
    assert len(rec.live) <= cfg.n_slots + len(p.buffer.items) + len(dropped) - len(archived)


def test_an_episode_pickles_and_copies_with_every_field() -> None:
    """Pickling and copying an episode (a slotted dataclass) carries every field."""
    import copy
    import pickle

    ep = Episode(3, 1, 2.5, 4, parent=0, slot=2, replica=1, start_s=1.25, update_from=5)
    ep.end_s, ep.status, ep.truncated, ep.lost_s, ep.fail_at_s = 9.0, ABORTED, True, 0.5, 7.0
    for other in (pickle.loads(pickle.dumps(ep)), copy.deepcopy(ep), copy.copy(ep)):
        assert other is not ep and attributes(other) == attributes(ep)
        assert [getattr(other, f) for f in EPISODE_FIELDS] == [getattr(ep, f) for f in EPISODE_FIELDS]


def test_an_episode_has_its_fields_only() -> None:
    """A field outside EPISODE_FIELDS is refused in both builds (no ``__dict__``), and every rare
    field starts at its default."""
    ep = Episode(0, 0, 1.0, 0)
    with pytest.raises(AttributeError):
        ep.tag = "mine"  # type: ignore[attr-defined]
    assert {name: getattr(ep, name) for name in RARE_DEFAULTS} == RARE_DEFAULTS
