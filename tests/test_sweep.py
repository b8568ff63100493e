"""Sweeps: grid validation, same numbers on every executor, failures reported, intervals correct."""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from pipesim.config import Scenario
from pipesim.policies import Drain, PartialRollout
from pipesim.registry import get_scenario
from pipesim.sweeps import SweepResult, grid, run_summary, sweep, t975

METRICS = ["throughput_per_hour", "staleness_mean", "staleness_max", "gen_util"]


def small() -> Scenario:
    return get_scenario("synchronous").with_(pool_size=None, n_slots=8, batch_size=8, steps=3)


def die_on_eta2(scenario: Scenario) -> dict[str, float]:
    """Kills its worker process for eta=2 (a crash, not an exception)."""
    if scenario.pipeline.max_staleness == 2:
        os._exit(3)
    return run_summary(scenario)


def test_grid_validates_keys_and_expands_seeds() -> None:
    with pytest.raises(ValueError, match="valid fields: .*max_staleness"):
        grid(small(), over={"max_stalenes": [1]})
    with pytest.raises(ValueError, match="over\\['max_staleness'\\]"):
        grid(small(), over={"max_staleness": []})
    with pytest.raises(ValueError, match="seeds"):
        grid(small(), seeds=0)
    cells = grid(
        small().with_(seed=5),
        over={"max_staleness": [0, 1], "weight_update": [PartialRollout(), Drain()]},
        seeds=2,
    )
    assert len(cells) == 8
    assert sorted({c.scenario.seed for c in cells}) == [5, 6]
    assert {c.labels["weight_update"] for c in cells} == {"PartialRollout", "Drain"}
    assert all(c.scenario.pipeline.max_staleness == c.labels["max_staleness"] for c in cells)


def test_same_numbers_on_threads_and_dask_and_failures_kept() -> None:
    distributed = pytest.importorskip("distributed")
    over = {"max_staleness": [0, 1], "pool_size": [None, 1]}  # pool_size=1 runs dry: a failing cell
    a = sweep(small(), over, seeds=2, executor=ThreadPoolExecutor(2), progress=False)
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None
    ) as client:
        b = sweep(small(), over, seeds=2, executor=client.get_executor(), progress=False)
    assert a.runs.equals(b.runs)
    ok, failed = a.runs[a.runs["status"] == "ok"], a.failures
    assert len(ok) == 4 and len(failed) == 4
    assert failed["pool_size"].isna().sum() == 0 and (failed["pool_size"] == 1).all()
    assert failed["error"].str.len().gt(0).all()
    assert (ok["throughput_per_hour"] > 0).all()
    # eta=1 is faster than synchronous on every seed
    piv = ok.pivot(index="seed", columns="max_staleness", values="throughput_per_hour")
    assert (piv[1] > piv[0]).all()


def test_process_pool_matches_threads_and_survives_a_dead_worker() -> None:
    over = {"max_staleness": [0, 1, 2, 3]}
    res = sweep(small(), over, seeds=1, workers=2, fn=die_on_eta2, progress=False)
    assert list(res.runs["status"]) == ["ok", "ok", "failed", "ok"]
    assert "died" in res.runs.loc[2, "error"]
    ref = sweep(small(), over, seeds=1, executor=ThreadPoolExecutor(1), progress=False)
    ok = res.runs["status"] == "ok"
    assert res.runs.loc[ok, METRICS].equals(ref.runs.loc[ok, METRICS])


def test_aggregate_mean_and_95_interval_over_seeds() -> None:
    res = sweep(small(), {"max_staleness": [0, 1]}, seeds=3, executor=ThreadPoolExecutor(1), progress=False)
    assert isinstance(res, SweepResult) and res.keys == ("design", "max_staleness")
    agg = res.aggregate
    assert list(agg["n_seeds"]) == [3, 3]
    for eta, row in agg.set_index("max_staleness").iterrows():
        vals = res.runs.loc[res.runs["max_staleness"] == eta, "throughput_per_hour"]
        half = t975(3) * vals.std(ddof=1) / math.sqrt(3)
        assert row["throughput_per_hour_mean"] == pytest.approx(vals.mean())
        assert row["throughput_per_hour_hi"] - row["throughput_per_hour_mean"] == pytest.approx(half)
        assert row["throughput_per_hour_lo"] < row["throughput_per_hour_mean"] < row["throughput_per_hour_hi"]


def test_t_quantiles() -> None:
    assert math.isnan(t975(1))
    assert t975(2) == pytest.approx(12.706) and t975(1000) == pytest.approx(1.96)


def test_sweep_designs_mapping_labels_rows() -> None:
    designs = {"sync": small(), "async": small().with_(max_staleness=2)}
    res = sweep(designs, seeds=1, executor=ThreadPoolExecutor(1), progress=False)
    assert list(res.runs["design"]) == ["sync", "async"]
    assert res.runs.loc[1, "throughput_per_hour"] > res.runs.loc[0, "throughput_per_hour"]
    assert "length_bias" in res.runs
