"""Per replica over time (issue 17): the binned series of a compute-engine replica, the step-time
breakdown and the idle ratios in verl's names; the series integrates to the replica's totals."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute import cluster as cluster_mod
from pipesim.compute.closedloop import ClosedLoop
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.engine import ComputeReplica, replica_timeline, step_breakdown, verl_metrics
from pipesim.compute.series import ReplicaSeries
from pipesim.compute.workload import AgentTurns, LogNormalLengths, TokenWorkload
from pipesim.core.validate import FieldError
from tests.test_refusals_core import check_refusal

ENGINE = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=2048, max_num_seqs=64)
WORK = TokenWorkload(response=LogNormalLengths(200.0, 0.7), prompt=128, max_response_tokens=1024)
AGENT = TokenWorkload(
    response=LogNormalLengths(64.0, 0.6),
    prompt=128,
    max_response_tokens=256,
    agent=AgentTurns(turns=3, tool_latency_s=1.0, tool_latency_sigma=0.5, observation_tokens=32),
)


def assert_integrates(rep: ComputeReplica, end_s: float | None = None) -> None:
    """The series' bins (up to ``end_s``) sum to the replica's own counters."""
    tl = rep.timeline_frame(end_s)
    assert rep.series is not None
    w = tl["t_end_s"] - tl["t_start_s"]
    assert len(tl) <= rep.series.max_bins
    assert np.allclose(w.iloc[:-1], rep.series.width_s) and 0 < w.iloc[-1] <= rep.series.width_s * (1 + 1e-12)
    assert tl["tokens"].sum() == pytest.approx(rep.tokens_generated, rel=1e-9)
    assert (tl["decode_tokens_per_s"] * w).sum() == pytest.approx(rep.tokens_generated, rel=1e-9)
    assert (tl["running"] * w).sum() == pytest.approx(rep.seq_time_integral, rel=1e-9)
    assert (tl["busy_share"] * w).sum() == pytest.approx(rep.busy_s, rel=1e-9)
    assert (tl["compute_bound_share"] * w).sum() == pytest.approx(rep.compute_bound_s, rel=1e-9, abs=1e-12)
    shares = tl["busy_share"] + tl["paused_share"]
    assert (shares <= 1 + 1e-9).all() and (tl["busy_share"] >= -1e-12).all()
    assert (tl["kv_occupancy"] <= 1 + 1e-9).all()
    assert (tl["memory_bound_share"] >= -1e-12).all()
    busy = tl["busy_share"] > 0
    assert (tl.loc[~busy, "bound"] == "idle").all() and (tl.loc[busy, "bound"] != "idle").all()


def test_closed_loop_series_integrates_to_the_totals() -> None:
    loop = ClosedLoop(ENGINE, WORK, 48, seed=1, series=True)
    loop.run(2000)
    rep = loop.replica
    assert_integrates(rep)
    tl = rep.timeline_frame()
    busy = tl["busy_share"] > 0.99
    # a full batch of 48 (all fit): the running count sits near 48 while busy, KV is occupied
    assert tl.loc[busy, "running"].median() > 40
    assert tl.loc[busy, "kv_occupancy"].median() > 0


def test_series_stays_bounded_and_exact_when_it_coarsens() -> None:
    """A 16-bin series over a long run doubles its width many times; the sums do not move."""
    loop = ClosedLoop(ENGINE, WORK, 32, seed=2)
    loop.replica.series = ReplicaSeries(width_s=1e-3, max_bins=16)
    loop.run(3000)
    rep = loop.replica
    assert rep.series is not None and rep.series.width_s > 1.0
    assert len(rep.timeline_frame()) <= 16
    assert_integrates(rep)


def test_series_splits_an_interval_over_bins() -> None:
    s = ReplicaSeries(width_s=1.0, max_bins=64)
    s.add(0.5, 3.5, True, 4, 2, 100.0, 400.0, True, False, tokens=30.0)
    a = s.arrays()
    assert a["busy_s"].tolist() == [0.5, 1.0, 1.0, 0.5]
    assert a["seq_s"].sum() == pytest.approx(12.0)
    assert a["queued_s"].sum() == pytest.approx(6.0)
    assert a["tokens"].tolist() == pytest.approx([5.0, 10.0, 10.0, 5.0])
    assert a["kv_s"].sum() == pytest.approx(0.5 * (100 + 400) * 3.0)  # the trapezoid
    assert a["compute_bound_s"].sum() == pytest.approx(3.0)
    s.add(70.0, 70.0, False, 0, 0, 0.0, 0.0, False, False, tokens=1.0)  # beyond 64 bins: coarsens
    assert s.width_s == 2.0 and len(s.arrays()["tokens"]) <= 64
    assert s.arrays()["tokens"].sum() == pytest.approx(31.0)
    check_refusal(lambda: ReplicaSeries(max_bins=1), FieldError, "max_bins")
    check_refusal(lambda: ReplicaSeries(width_s=0.0), FieldError, "width_s")


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[ComputeReplica]:
    """The replicas ``run_compute`` builds (it keeps only their stats)."""
    made: list[ComputeReplica] = []

    class Capturing(ComputeReplica):
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, **kw)
            made.append(self)

    monkeypatch.setattr(cluster_mod, "ComputeReplica", Capturing)
    return made


@pytest.mark.parametrize(
    ("design", "trainer_gpus", "work"),
    [("sync", 0, WORK), ("async", 2, WORK), ("async", 2, AGENT)],
)
def test_run_series_steps_and_idle_ratios(
    captured: list[ComputeReplica], design: str, trainer_gpus: int, work: TokenWorkload
) -> None:
    """A full run: each replica's series integrates to its counters (pauses for syncs and, when
    colocated, for training included); the step breakdown tiles the trainer's timeline; the idle
    ratios follow verl's definitions."""
    if design == "sync":
        cfg = pipesim.PipelineConfig(batch_size=128, steps=3, max_staleness=0)
        sc = pipesim.Scenario(pipeline=cfg, weight_update=pipesim.Drain())
    else:
        cfg = pipesim.PipelineConfig(batch_size=128, steps=4, max_staleness=1)
        sc = pipesim.Scenario(pipeline=cfg, weight_update=pipesim.PartialRollout())
    cluster = Cluster(engine=ENGINE, n_gpus=4, trainer_gpus=trainer_gpus)
    run = run_compute(sc, cluster, work, seed=3, record=True)  # record: the replicas keep their series
    assert captured and len(captured) == len(run.engines)
    T = run.result.sim_time_s
    for rep, stats in zip(captured, run.engines, strict=True):
        assert_integrates(rep)
        assert_integrates(rep, T)
        # cut at the run's end, the last bin's means are over the time it covers
        last = rep.timeline_frame(T).iloc[-1]
        assert last["t_start_s"] < T == last["t_end_s"]
        assert 0 <= last["busy_share"] + last["paused_share"] <= 1 + 1e-9
        assert rep.timeline_frame()["tokens"].sum() == pytest.approx(stats["tokens_generated"], rel=1e-9)
        tl = rep.timeline_frame()
        w = rep.series.width_s  # type: ignore[union-attr]
        assert ((tl["busy_share"] + tl["paused_share"]) * w).sum() <= T * (1 + 1e-9)
    assert run.replica_timeline is not None
    assert (run.replica_timeline.groupby("replica")["t_end_s"].max() == T).all()
    if design == "sync" and trainer_gpus == 0:  # colocated: the engines pause while the trainer trains
        assert max((rep.timeline_frame()["paused_share"]).sum() for rep in captured) > 0
        # the run ends training: its last bin, cut at the end, is paused throughout when the last
        # training outlasts a bin (averaged over the bin's full width it read as partly idle)
        train_s = run.result.train_log[-1][2] - run.result.train_log[-1][1]
        for rep in captured:
            tl = rep.timeline_frame(T)
            if train_s > 2 * rep.series.width_s:  # type: ignore[union-attr]
                assert tl["paused_share"].iloc[-1] == pytest.approx(1.0, rel=1e-9)
    stacked = replica_timeline(captured, T)
    assert sorted(stacked["replica"].unique()) == [r.index for r in captured]
    steps = step_breakdown(run.result)
    assert len(steps) == len(run.result.train_log)
    assert steps["timing_s/step"].sum() == pytest.approx(run.result.train_log[-1][2])
    parts = steps[["timing_s/gen", "timing_s/param_sync", "timing_s/update_actor"]].sum(axis=1)
    assert np.allclose(parts, steps["timing_s/step"])
    assert (steps[["timing_s/gen", "timing_s/param_sync", "timing_s/update_actor"]] >= 0).all().all()
    m = verl_metrics(run.result, run.engines)
    assert m["fully_async/trainer/idle_ratio"] == pytest.approx(
        steps["timing_s/gen"].sum() / steps["timing_s/step"].sum()
    )
    assert 0 <= m["fully_async/trainer/idle_ratio"] <= 1
    mean_busy = sum(e["busy_share"] for e in run.engines) / len(run.engines)
    assert m["fully_async/rollouter/idle_ratio"] == pytest.approx(1 - mean_busy)
    assert not math.isnan(m["timing_s/update_actor"]) and m["timing_s/update_actor"] > 0
    # the run itself carries both: the stacked series and verl's names in its summary
    assert run.replica_timeline is not None
    pd.testing.assert_frame_equal(run.replica_timeline, stacked)
    summary = run.summary()
    # the summary's breakdown is the trainer's phases' (issue 41): the same call with its phase log
    assert {k: summary[k] for k in m} == {
        **m,
        **verl_metrics(run.result, run.engines, run.phase_log, run.cluster.n_gpus),
    }


def test_series_off_by_default() -> None:
    loop = ClosedLoop(ENGINE, WORK, 8, seed=0)
    assert loop.replica.series is None
    loop.run(50)
    check_refusal(loop.replica.timeline_frame, FieldError, "series")
    assert replica_timeline([loop.replica]).empty


def test_a_run_without_record_keeps_no_series() -> None:
    cfg = pipesim.PipelineConfig(batch_size=64, steps=2, max_staleness=0)
    run = run_compute(pipesim.Scenario(pipeline=cfg), Cluster(engine=ENGINE, n_gpus=2), WORK, seed=1)
    assert run.replica_timeline is None
    assert "fully_async/trainer/idle_ratio" in run.summary()


def test_the_compute_scenario_checks_its_json_path_before_running(capsys: pytest.CaptureFixture[str]) -> None:
    from scenarios import compute

    with pytest.raises(SystemExit) as exc:
        compute.main(["--json", "/nonexistent-dir/rows.json", "--steps", "1"])
    assert exc.value.code == 2
    assert "no directory /nonexistent-dir" in capsys.readouterr().err


def test_compute_view_checks_n_bins() -> None:
    from pipesim.io.viz import compute_view

    check_refusal(lambda: compute_view(object(), n_bins=-1), FieldError, "n_bins")
