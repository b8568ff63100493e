"""The columnar, vectorised results against the per-episode reference, and the truncation fix.

``tests/reference_results.py`` keeps the per-episode ``RunResult`` (the code before the columnar
rewrite, with truncated episodes reporting their generated seconds). Every table must equal the
reference frame for frame, and every summary value must be the same float (NaN where it is NaN),
on random scenarios of every policy family: replicas, timeouts, failures, aborts, in-flight
updates, and trace pools with many exact ties.

Three deliberate differences are normalised before comparing: ``events.kind`` and ``events.lane``
are Categoricals (the reference has strings), a time column the reference inferred as int64
because every value in it was a Python int (a run that never left t = 0) is float64, and integer
columns are int32 where every value fits (``pipesim.results.columns.int_dtype``).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pipesim import PipelineConfig, Scenario, run
from pipesim.core.episode import ABORTED, RUNNING, TRAINED, Episode, UpdateRecord
from pipesim.core.errors import PipelineError
from pipesim.core.validate import FieldError
from pipesim.policies.base import PartialRollout
from pipesim.policies.faults import Timeout
from pipesim.policies.replicas import PerReplicaSync, Replicas
from pipesim.results.columns import EpisodeColumns, UpdateIndex, seq_sum
from pipesim.results.run import RunResult
from pipesim.testing import policy_scenarios, scenarios
from pipesim.workload.durations import LogNormalDurations, TraceDurations
from tests.reference_results import ReferenceRunResult
from tests.test_refusals_core import check_refusal

pytestmark = pytest.mark.timeout(300)

SUMMARY_KEYS_MEANING_CAPPED = ("trained_duration_mean", "launched_duration_mean", "length_bias")


def reference(r: RunResult, fix: bool = True) -> ReferenceRunResult:
    return ReferenceRunResult(
        r.scenario, r.sim_time_s, r.episodes, r.updates, r.train_log, r.sync_log, dict(r.extra), fix
    )


def _normalised(new: pd.DataFrame, old: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    new, old = new.copy(), old.copy()
    for col in new.columns:
        if isinstance(new[col].dtype, pd.CategoricalDtype):
            new[col] = new[col].astype(str)
        if new[col].dtype == np.float64 and old[col].dtype in (np.int64, object):  # a list of None:
            old[col] = old[col].astype(np.float64)  # the table's float columns are float64 NaN there
        if len(old) == 0:  # the reference's empty columns are object; the table's keep their types
            old[col] = old[col].astype(new[col].dtype)
        if new[col].dtype == np.int32 and old[col].dtype == np.int64:  # ints are int32 where they fit
            new[col] = new[col].astype(np.int64)
    return new, old


def assert_same_frame(new: pd.DataFrame, old: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(*_normalised(new, old))


EXACT_SUMS = sys.version_info < (3, 12)
"""Python 3.12 made ``sum`` of floats compensated; the columns add left to right as 3.10 and 3.11
do, so on 3.12+ a sum may differ from the reference's in the last bits."""


def assert_same_summary(new: dict[str, float], old: dict[str, float]) -> None:
    assert list(new) == list(old)
    for key, want in old.items():
        got = new[key]
        same = got == want or (isinstance(got, float) and math.isnan(got) and math.isnan(want))
        if not same and not EXACT_SUMS:
            same = math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12)
        assert same, (key, got, want)


def assert_matches_reference(r: RunResult) -> None:
    ref = reference(r)
    assert_same_summary(r.summary(), ref.summary())
    assert_same_frame(r.events, ref.events)
    assert_same_frame(r.trained, ref.trained)
    assert_same_frame(r.episode_table, ref.episode_table)


def most_draws_match_the_reference(strategy: Any, examples: int) -> None:
    """Each draw of ``strategy`` that runs matches the reference. A drawn combination that stalls
    (a :class:`PipelineError`; issue 16, item 7) is not this test's concern and is skipped, but
    at least 90% of the draws must run: skipped silently, a strategy whose every draw stalled
    passed this test comparing nothing (the strategies stall in none of 800 draws today)."""
    tried, ran = [0], [0]

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(strategy)
    def check(sc: Scenario) -> None:
        tried[0] += 1
        try:
            r = run(sc)
        except PipelineError:
            assume(False)
            raise
        ran[0] += 1
        assert_matches_reference(r)

    check()
    assert ran[0] >= 0.9 * tried[0], f"{tried[0] - ran[0]} of {tried[0]} draws stalled"


def test_every_policy_family_matches_the_per_episode_reference() -> None:
    most_draws_match_the_reference(policy_scenarios(), 150)


def test_tie_heavy_trace_pools_match_the_reference() -> None:
    most_draws_match_the_reference(scenarios(), 60)


@pytest.mark.parametrize("seed", range(4))
def test_per_replica_syncs_match_the_reference(seed: int) -> None:
    cfg = PipelineConfig(
        n_slots=9, batch_size=6, train_time_s=15.0, sync_time_s=4.0, max_staleness=1, steps=6
    )
    sc = Scenario(
        pipeline=cfg,
        durations=LogNormalDurations(30.0, 1.0),
        weight_update=PerReplicaSync((2.0, 7.0, 4.5)),
        replicas=Replicas(3),
        timeout=Timeout(60.0),
        pool_size=2000,
        seed=seed,
    )
    r = run(sc)
    assert {u.replica for u in r.updates} - {-1}, "per-replica updates expected"
    assert_matches_reference(r)


# -- hand-made records: the corners a run rarely reaches -------------------------------------------
def _episode(i: int, start: float, end: float | None, status: str, lo: int, hi: int, **kw: Any) -> Episode:
    ep = Episode(i, i, kw.pop("duration_s", 10.0), kw.pop("version", 0), slot=kw.pop("slot", i % 3))
    ep.replica = kw.pop("replica", 0)
    ep.start_s, ep.end_s, ep.status, ep.update_from, ep.update_to = start, end, status, lo, hi
    for k, v in kw.items():
        setattr(ep, k, v)
    return ep


def _result(episodes: list[Episode], updates: list[UpdateRecord], T: float) -> RunResult:
    cfg = PipelineConfig(n_slots=3, batch_size=2, train_time_s=1.0, sync_time_s=1.0, max_staleness=1, steps=1)
    sc = Scenario(pipeline=cfg, timeout=Timeout(5.0))
    return RunResult(sc, T, episodes, updates, [(0, 1.0, 2.0, 1)], [(2.0, 3.0, 1)])


def test_hand_made_corners_match_the_reference() -> None:
    updates = [
        UpdateRecord(4.0, 6.0, 1, True, replica=1),
        UpdateRecord(3.0, 5.0, 1, True, replica=0),  # starts before the one logged ahead of it
        UpdateRecord(5.0, 5.0, 2, False),  # an update that does not pause
        UpdateRecord(8.0, 9.0, 3, True),
        UpdateRecord(9.0, 9.5, 4, True),
        UpdateRecord(9.5, 12.0, 5, True, kind="train"),
    ]
    eps = [
        _episode(0, 0.0, 10.0, TRAINED, 0, 6, trained_step=0, trained_version=3, truncated=True),
        _episode(1, 0.0, 7.0, TRAINED, 0, 3, replica=1, trained_step=0, trained_version=2),
        _episode(2, 2.0, None, RUNNING, 1, 0),  # in flight: runs to T under every later update
        _episode(3, 1.0, None, ABORTED, 0, 0),  # aborted before it ended: no rows
        _episode(4, 1.0, 4.5, ABORTED, 0, 2, lost_s=3.5, parent=-1),
        _episode(5, 8.5, 8.5, "rescued", 3, 4, parent=4, reprefill_tokens=12.0),  # a status of its own
        _episode(6, 9.0, 9.0, TRAINED, 4, 4, trained_step=0, trained_version=4, slot=2, replica=1),
        _episode(7, 0.0, 4.0, TRAINED, 0, 2, trained_step=0, trained_version=1, slot=7),
    ]
    r = _result(eps, updates, 13.0)
    assert not r.update_index.monotonic
    assert_matches_reference(r)
    assert_matches_reference(_result(eps[::-1], updates, 13.0))  # ids falling along the list
    eps[6].trained_step = 1  # steps that trained different numbers of episodes
    assert_matches_reference(_result(eps, updates, 13.0))
    assert r.episode_table.loc[0, "duration_s"] == 5.0  # truncated: the cap, not the drawn 10 s
    assert r.summary()["episodes_restarted"] == 1.0


def test_episodes_ending_inside_a_shared_update_match_the_reference() -> None:
    updates = [
        UpdateRecord(1.0, 2.0, 1, True),
        UpdateRecord(3.0, 5.0, 2, True),
        UpdateRecord(6.0, 9.0, 3, False),
    ]
    eps = [
        _episode(0, 0.0, 4.0, TRAINED, 0, 2, trained_step=0, trained_version=2),  # ends inside [3, 5)
        _episode(1, 0.0, 10.0, TRAINED, 0, 3, trained_step=0, trained_version=3),  # spans all three
        _episode(2, 2.5, 3.0, TRAINED, 1, 2, trained_step=0, trained_version=2),  # ends at its start
        _episode(3, 5.5, None, RUNNING, 2, 0),
    ]
    r = _result(eps, updates, 11.0)
    assert r.update_index.shared and r.update_index.ends_rise
    assert_matches_reference(r)


def test_empty_and_single_episode_results_match_the_reference() -> None:
    assert_matches_reference(_result([], [], 0.0))
    assert_matches_reference(_result([], [], 3.0))
    assert_matches_reference(_result([_episode(0, 0.0, None, RUNNING, 0, 0)], [], 3.0))
    assert_matches_reference(_result([_episode(0, 0, 2, TRAINED, 0, 0, trained_version=0)], [], 3))


def test_lanes_and_kinds_are_categoricals() -> None:
    sc = Scenario(
        pipeline=PipelineConfig(8, 8, 20.0, 5.0, 1, 4),
        durations=LogNormalDurations(30.0, 1.0),
        replicas=Replicas(2),
        pool_size=500,
    )
    ev = run(sc).events
    assert isinstance(ev["lane"].dtype, pd.CategoricalDtype)
    assert isinstance(ev["kind"].dtype, pd.CategoricalDtype)
    assert list(ev["kind"].cat.categories) == ["gen", "pause", "train", "sync"]
    lanes = list(ev["lane"].cat.categories)
    assert lanes[-2:] == ["trainer", "sync"] and "r1/slot3" in lanes
    assert set(ev.loc[ev["kind"] == "gen", "lane"]) <= set(lanes[:-2])


# -- item 7: truncated episodes report the seconds they generated ----------------------------------
def test_a_timeout_reports_what_the_clamped_pool_reports() -> None:
    cfg = PipelineConfig(
        n_slots=16, batch_size=8, train_time_s=20.0, sync_time_s=5.0, max_staleness=1, steps=8
    )
    pool = [float(x) for x in np.random.default_rng(5).lognormal(np.log(40.0), 1.0, 3000)]
    cap = sorted(pool)[2700]
    base = Scenario(pipeline=cfg, durations=TraceDurations.from_values(pool), pool_size=3000, seed=3)
    timed = run(base.with_(timeout=Timeout(cap)))
    clamped = run(base.with_(durations=TraceDurations.from_values([min(x, cap) for x in pool])))
    assert timed.sim_time_s == clamped.sim_time_s
    assert timed.trained["truncated"].any()
    assert timed.trained["duration_s"].max() <= cap
    pd.testing.assert_series_equal(timed.trained["duration_s"], clamped.trained["duration_s"])
    pd.testing.assert_series_equal(timed.episode_table["duration_s"], clamped.episode_table["duration_s"])
    s, c = timed.summary(), clamped.summary()
    for key in SUMMARY_KEYS_MEANING_CAPPED:
        assert s[key] == c[key], key
    # the code before the fix reported the drawn lengths
    assert reference(timed, fix=False).summary()["trained_duration_mean"] > s["trained_duration_mean"]


def test_chapter_timeout_row_reports_the_chapter_trained_duration() -> None:
    import json
    from pathlib import Path

    from scenarios import chapter13

    want = json.loads((Path(__file__).parent / "data" / "chapter13_expected.json").read_text())
    got = chapter13.timeout_p95()["timeout"]["trained_duration_mean"]
    assert got == pytest.approx(want["timeout_p95"]["timeout"]["trained_duration"], abs=1e-3)


# -- the sequential sums -----------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=60))
def test_sums_add_left_to_right_like_python(values: list[float]) -> None:
    want = 0.0
    for x in values:
        want += x
    assert seq_sum(np.array(values, dtype=np.float64)) == (want if values else 0)
    if EXACT_SUMS:
        assert seq_sum(np.array(values, dtype=np.float64)) == sum(values)


def test_columns_from_arrays_and_update_index() -> None:
    cols = EpisodeColumns.from_arrays({"start_s": [0.0, 1.0], "status": np.array([0, 2], dtype=np.int8)})
    assert cols.n == 2 and cols.status_names[2] == TRAINED and cols.start_s.tolist() == [0.0, 1.0]
    check_refusal(lambda: EpisodeColumns.from_arrays({"a": [1], "b": [1, 2]}), FieldError, "arrays")
    ups = [UpdateRecord(0, 1, 1, True, replica=1), UpdateRecord(1, 2, 2, True)]
    u = UpdateIndex(ups, lambda: np.array([0, 1]))
    assert not u.shared
    rows = u.rows(np.array([0, 1]))
    count, _ = u.applying(rows, np.array([0, 0]), np.array([2, 2]))
    assert count.tolist() == [1, 2]
    assert u.newest_version(rows, np.array([0, 0]), np.array([1, 1]), np.array([7, 7])).tolist() == [7, 1]
    gapped = UpdateIndex(ups, lambda: np.array([0, 5, 5]))  # replica ids with a gap
    gapped_rows = gapped.rows(np.array([5, 0]))
    assert gapped_rows is not None and gapped_rows.tolist() == [1, 0]
    shared = UpdateIndex([UpdateRecord(0, 1, 1, True)], lambda: np.array([0]))
    assert shared.shared and shared.rows(np.array([3])) is None


def test_partial_rollout_run_has_pauses_in_events() -> None:
    cfg = PipelineConfig(
        n_slots=8, batch_size=8, train_time_s=30.0, sync_time_s=10.0, max_staleness=2, steps=6
    )
    r = run(Scenario(pipeline=cfg, weight_update=PartialRollout(), durations=LogNormalDurations(60.0, 1.0)))
    assert (r.events["kind"] == "pause").any()
    assert_matches_reference(r)
