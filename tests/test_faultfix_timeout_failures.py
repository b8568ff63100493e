"""Timeouts beside failures and aborts, and the refusals of runs that failures starve.

* A run with ``Timeout(cap)`` reports what the same run on the pool clamped at ``cap`` reports,
  failed, aborted and in-flight episodes included (a failed episode once reported its drawn
  length).
* ``truncated`` (``episodes_truncated``, the timeline's "timed out" marks) flags only episodes the
  cap cut: those that finished at it, never one aborted, failed or still running.
* The pool-exhausted and no-progress refusals name the failure policy when failures dropped the
  episodes, and the no-progress one does not claim a batch "can never be formed" where failures
  are random.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import pipesim
from pipesim import AReaLThrottle, PipelineConfig, Scenario
from pipesim.core.errors import PipelineError
from pipesim.policies.admission import OverSample
from pipesim.policies.base import Drain, PartialRollout
from pipesim.policies.faults import DropFailed, RequeueFailed, RetryFailed, Timeout
from pipesim.policies.updates import AbortReprefill, AbortRestart
from pipesim.results.run import RunResult
from pipesim.testing.strategies import failure_policies, policy_scenarios
from pipesim.workload.durations import TraceDurations

TRUNCATION_KEYS = {"episodes_truncated", "truncated_share"}
"""The summary keys that say what the timeout cut: the only ones a clamped pool cannot report."""
NOT_CUT = {"aborted", "failed", "running"}
VALS = [100.0, 900.0, 200.0, 50.0, 400.0, 300.0, 700.0, 120.0, 80.0, 60.0] * 30


def _run(sc: Scenario, pool: list[float] | None = None) -> RunResult | str:
    try:
        return pipesim.run(sc, pool) if pool is not None else pipesim.run(sc)
    except PipelineError as exc:
        return str(exc)


def _assert_clamped_equal(timed: RunResult | str, clamped: RunResult | str) -> None:
    """The timed run and the clamped-pool run agree on everything but what the cap cut."""
    assert type(timed) is type(clamped)
    if isinstance(timed, str) or isinstance(clamped, str):
        assert timed == clamped  # the same run: the same refusal
        return
    assert timed.sim_time_s == clamped.sim_time_s
    assert not clamped.truncated.any()
    for name in ("episode_table", "trained"):
        a, b = getattr(timed, name), getattr(clamped, name)
        pd.testing.assert_frame_equal(a.drop(columns="truncated"), b.drop(columns="truncated"))
    s, c = timed.summary(), clamped.summary()
    assert s.keys() == c.keys()
    differ = {k for k in s if not (s[k] == c[k] or (s[k] != s[k] and c[k] != c[k]))}  # NaN == NaN
    assert differ <= TRUNCATION_KEYS, {k: (s[k], c[k]) for k in differ}


def _assert_cut_means_finished_at_cap(r: RunResult, drawn: np.ndarray, cap: float) -> None:
    """Truncated exactly where the episode was drawn over the cap and finished (at the cap)."""
    et = r.episode_table
    over = drawn[et["task_id"].to_numpy()] > cap
    finished = ~et["status"].isin(NOT_CUT).to_numpy()
    cut = et["truncated"].to_numpy(dtype=bool)
    np.testing.assert_array_equal(cut, over & finished)
    assert (et["duration_s"] <= cap).all()
    assert (et.loc[cut, "duration_s"] == cap).all()
    spans = et.loc[cut, "end_s"].astype(float) - et.loc[cut, "start_s"]
    assert (spans >= cap - 1e-9).all()  # it generated the cap (pauses only add)
    s = r.summary()
    assert s["episodes_truncated"] == int(cut.sum())
    trained = (et["status"] == "trained").to_numpy()
    assert s["truncated_share"] == (int((cut & trained).sum()) / trained.sum() if trained.any() else 0.0)


# -- the property: Timeout(cap) == the pool clamped at cap --------------------------------------------
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    sc=policy_scenarios(
        admissions=st.sampled_from([AReaLThrottle(), OverSample(1.5)]),
        failures=st.none() | failure_policies() | st.builds(RetryFailed, st.floats(2e-3, 1e-2)),
        with_timeouts=False,
    ),
    quantile=st.floats(0.3, 0.95),
    pool_seed=st.integers(0, 2**16),
)
def test_a_timeout_run_is_the_clamped_pool_run(sc: Scenario, quantile: float, pool_seed: int) -> None:
    assert sc.pool_size is not None
    drawn = np.random.default_rng(pool_seed).lognormal(np.log(40.0), 1.0, sc.pool_size)
    cap = float(np.quantile(drawn, quantile))
    timed = _run(sc.with_(timeout=Timeout(cap)), drawn.tolist())
    clamped = _run(sc, np.minimum(drawn, cap).tolist())
    _assert_clamped_equal(timed, clamped)
    if isinstance(timed, RunResult):
        _assert_cut_means_finished_at_cap(timed, drawn, cap)
    event("ran" if isinstance(timed, RunResult) else "refused")
    if isinstance(timed, RunResult):
        failed = timed.summary()["episodes_failed"] > 0
        event(f"truncated>0: {bool(timed.truncated.any())}; failed>0: {failed}")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "extra",
    [
        dict(failures=RetryFailed(hazard_per_s=0.0015)),
        dict(failures=RequeueFailed(hazard_per_s=0.0015), weight_update=AbortRestart()),
        dict(failures=DropFailed(hazard_per_s=0.001), weight_update=AbortReprefill()),
        dict(weight_update=AbortRestart()),
        dict(weight_update=Drain(), failures=RetryFailed(hazard_per_s=0.003)),
    ],
    ids=["retry", "requeue+abort", "drop+reprefill", "abort", "drain+retry"],
)
def test_failed_and_aborted_episodes_report_the_clamped_length(seed: int, extra: dict[str, Any]) -> None:
    """The walkthrough's trace (lengths 50-900 s, cap 600): a failed episode drawn at 900 s reported
    900 and moved launched_duration_mean and length_bias off the clamped run's."""
    cfg = PipelineConfig(n_slots=4, batch_size=4, train_time_s=10, sync_time_s=5, max_staleness=1, steps=6)
    base = Scenario(pipeline=cfg, admission=AReaLThrottle(), seed=seed, pool_size=300).with_(**extra)
    timed = _run(
        base.with_(durations=TraceDurations.from_values(VALS, cycle=True), timeout=Timeout(cap_s=600))
    )
    clamped = _run(
        base.with_(durations=TraceDurations.from_values([min(v, 600.0) for v in VALS], cycle=True))
    )
    _assert_clamped_equal(timed, clamped)
    assert isinstance(timed, RunResult), timed
    _assert_cut_means_finished_at_cap(timed, np.array(VALS), 600.0)


# -- truncated means the cap cut it -------------------------------------------------------------------
def test_aborted_episodes_are_not_timed_out() -> None:
    """AbortRestart aborts episodes drawn over the cap after 10-510 s: not truncated, not marked."""
    sc = Scenario(
        pipeline=PipelineConfig(
            n_slots=4, batch_size=4, train_time_s=10, sync_time_s=5, max_staleness=2, steps=6
        ),
        durations=TraceDurations.from_values(VALS),
        admission=AReaLThrottle(),
        weight_update=AbortRestart(),
        timeout=Timeout(cap_s=600),
        seed=3,
    )
    r = pipesim.run(sc)
    et = r.episode_table
    over = np.array(VALS)[et["task_id"].to_numpy()] > 600
    assert (over & (et["status"] == "aborted").to_numpy()).any()  # the case at stake happens
    assert not et.loc[et["status"] == "aborted", "truncated"].any()
    _assert_cut_means_finished_at_cap(r, np.array(VALS), 600.0)
    pytest.importorskip("plotly")
    from pipesim.io.viz import timelines

    fig = timelines(r)
    marks = [tr for tr in fig.data if getattr(tr, "mode", None) == "markers" and tr.name == "timed out"]
    n_marked = sum(len(tr.x) for tr in marks)
    assert n_marked == int(et["truncated"].sum())
    ends = et.loc[et["truncated"], "end_s"].astype(float).tolist()
    assert sorted(x for tr in marks for x in tr.x) == sorted(ends)


def test_an_episode_in_flight_at_the_end_is_not_timed_out() -> None:
    """Drawn at 700 s with a 600 s cap, it has generated 480 s when the run's 12 steps end."""
    sc = Scenario(
        pipeline=PipelineConfig(
            n_slots=2, batch_size=1, train_time_s=10, sync_time_s=5, max_staleness=1, steps=12
        ),
        durations=TraceDurations.from_values([700.0] + [30.0] * 40),
        weight_update=PartialRollout(),
        timeout=Timeout(cap_s=600),
        seed=0,
    )
    r = pipesim.run(sc)
    et = r.episode_table
    assert et.loc[0, "status"] == "running" and et.loc[0, "duration_s"] == 600.0
    assert not et["truncated"].any()
    assert r.summary()["episodes_truncated"] == 0
    longer = sc.with_(pipeline=dataclasses.replace(sc.pipeline, steps=20))
    assert pipesim.run(longer).summary()["episodes_truncated"] == 1  # it finishes at the cap


# -- refusals name the failure policy -----------------------------------------------------------------
def test_pool_exhausted_by_failures_names_the_failure_policy() -> None:
    sc = Scenario(
        pipeline=PipelineConfig(
            n_slots=4, batch_size=4, train_time_s=10, sync_time_s=5, max_staleness=0, steps=6
        ),
        durations=TraceDurations.from_values(VALS),
        admission=AReaLThrottle(),
        timeout=Timeout(cap_s=600),
        failures=DropFailed(hazard_per_s=0.0015),
        seed=3,
    )
    with pytest.raises(PipelineError, match="durations pool exhausted") as info:
        pipesim.run(sc)
    msg = str(info.value)
    dropped = msg.split("and dropped ")[1]  # "... and dropped N (<by cause>) and holds ..."
    assert "DropFailed" in dropped and "failed" in dropped, msg
    assert "OldestFinishedFirst" not in msg, msg  # the batch policy dropped nothing


def test_no_progress_under_random_failures_names_them_and_claims_no_certainty() -> None:
    cfg = PipelineConfig(n_slots=4, batch_size=4, train_time_s=10, sync_time_s=5, max_staleness=0, steps=3)
    sc = Scenario(
        pipeline=cfg,
        durations=TraceDurations.from_values([100.0] * 400),
        admission=AReaLThrottle(),
        failures=RetryFailed(0.055),
        seed=0,
    )
    with pytest.raises(PipelineError, match="no progress") as info:
        pipesim.run(sc)
    msg = str(info.value)
    assert "RetryFailed" in msg and "hazard_per_s=0.055" in msg, msg
    assert "can never be formed" not in msg, msg
