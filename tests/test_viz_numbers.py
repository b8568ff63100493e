"""The numbers the views show agree with the run they draw.

* :func:`pipesim.io.viz.compute_view`'s decode tokens/s panel integrates to each replica's own
  ``tokens_generated`` (it once held the batch timeline's rate *if decoding* through prefill
  stalls and sync pauses, and read 7% high), and its KV panel's mean is the series' mean.
* An episode still running at the end of a run reads a newest version no older than any version
  it generated under (``newest_version`` once read only ``update_to``, 0 until an episode ends).
* The timeline's episode information says how much of a running episode was generated, beside the
  length it was sampled to take.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import pipesim
from pipesim.config import Scenario
from pipesim.core.validate import FieldError
from pipesim.io.registry import get_scenario
from pipesim.io.viz import compute_view
from pipesim.io.viz.segments import episode_info
from pipesim.results.run import RunResult
from pipesim.testing.strategies import policy_scenarios


# -- 1. the compute view's panels integrate to the replicas' counters ------------------------------
def _compute_run(n_gpus: int, eta: int, seed: int, batch: int) -> object:
    from pipesim.compute import (
        GPUS,
        MODELS,
        Cluster,
        EngineConfig,
        LogNormalLengths,
        TokenWorkload,
        run_compute,
    )

    engine = EngineConfig(model=MODELS["qwen3-8b"], gpu=GPUS["h100-sxm"], tp=1, max_model_len=16384)
    cluster = Cluster(engine=engine, n_gpus=n_gpus, trainer_gpus=n_gpus // 2)
    work = TokenWorkload(response=LogNormalLengths(1500, 0.8), prompt=512, samples_per_prompt=8)
    sc = Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=batch, steps=3, max_staleness=eta),
        weight_update=pipesim.PartialRollout(),
        seed=seed,
    )
    return run_compute(sc, cluster, work, seed=seed, record=True)


def _panel(fig: object, axis: str, name: str) -> np.ndarray:
    (trace,) = [t for t in fig.data if t.yaxis == axis and t.name == name]  # type: ignore[attr-defined]
    return np.asarray(trace.y, dtype=np.float64)


@pytest.mark.parametrize(("n_gpus", "eta", "seed", "batch"), [(8, 2, 0, 256), (6, 1, 3, 128)])
def test_compute_view_tokens_integrate_to_each_replicas_counter(
    n_gpus: int, eta: int, seed: int, batch: int
) -> None:
    crun = _compute_run(n_gpus, eta, seed, batch)
    T = crun.result.sim_time_s  # type: ignore[attr-defined]
    for n_bins in (400, 37):
        fig = compute_view(crun, n_bins=n_bins, per_replica=True)
        width = T / n_bins
        series = crun.replica_timeline  # type: ignore[attr-defined]
        for i, stats in enumerate(crun.engines):  # type: ignore[attr-defined]
            rate = _panel(fig, "y2", f"replica {i}")
            assert len(rate) == n_bins
            assert (rate * width).sum() == pytest.approx(stats["tokens_generated"], rel=1e-9)
            r = series[series["replica"] == i]
            kv_mean = float((r["kv_occupancy"] * (r["t_end_s"] - r["t_start_s"])).sum()) / T
            assert _panel(fig, "y", f"replica {i}").mean() == pytest.approx(kv_mean, rel=1e-9)
    # the cluster's tokens/s, as the panel reads it, is the summary's
    fig = compute_view(crun, per_replica=True)
    total = sum((_panel(fig, "y2", f"replica {i}") * T / 400).sum() for i in range(len(crun.engines)))  # type: ignore[attr-defined]
    assert total / T == pytest.approx(crun.summary()["decode_tokens_per_s"], rel=1e-9)  # type: ignore[attr-defined]


def test_compute_view_refuses_a_run_without_its_series() -> None:
    with pytest.raises(FieldError, match="compute_view"):
        compute_view(object())


# -- 2. a running episode's newest version ---------------------------------------------------------
def _check_newest(r: RunResult) -> None:
    et = r.episode_table
    if len(et) == 0:
        return
    newest = et.set_index("episode_id")["newest_version"]
    gen = r.events[r.events["kind"] == "gen"]
    top = gen.groupby("episode_id")["version"].max()
    assert (newest.reindex(top.index).to_numpy() >= top.to_numpy()).all()
    # the last segment's version, as Episode.segments reads it, and as the objects read it
    by_id = {e.id: e for e in r.episodes}
    for eid, v in newest.items():
        e = by_id[int(eid)]
        assert e.newest_version(r.updates) == v
        if e.status != "aborted" or e.end_s is not None:
            assert e.segments(r.updates, until_s=r.sim_time_s)[-1][0] == v
    # an episode that ended reads only the updates up to its end (its update_to)
    ended = r.columns.ended
    c = r.columns
    old = r.update_index.newest_version(r._rows(None), c.update_from, c.update_to, c.version)
    assert np.array_equal(r.newest_versions[ended], old[ended])


@settings(max_examples=60, deadline=None)
@given(policy_scenarios())
def test_newest_version_is_at_least_every_version_generated_under(sc: Scenario) -> None:
    _check_newest(pipesim.run(sc))


def test_the_chapters_async_run_reads_running_episodes_newest_version() -> None:
    r = pipesim.run(get_scenario("fig13.1-async"))
    _check_newest(r)
    et = r.episode_table
    running = et[et["status"] == "running"]
    assert len(running) > 0
    gen = r.events[(r.events["kind"] == "gen") & ~r.events["complete"]]
    spans = gen.groupby("episode_id")["version"].max()
    # some running episode ran through a sync: its newest is above the version that started it
    assert (
        running.set_index("episode_id")["newest_version"] > running.set_index("episode_id")["version"]
    ).any()
    assert (running.set_index("episode_id")["newest_version"].reindex(spans.index) >= spans).all()


# -- 3. a running episode's generated seconds ------------------------------------------------------
def test_episode_info_says_generated_so_far_of_the_planned_length() -> None:
    r = pipesim.run(get_scenario("fig13.1-async"))
    info = episode_info(r)
    T = r.sim_time_s
    running = info[info["status"] == "running"]
    assert len(running) > 0
    by_id = {e.id: e for e in r.episodes}
    for eid, row in running.iterrows():
        e = by_id[int(eid)]
        paused = r._paused_within(e, T)
        assert row["generated_s"] == pytest.approx(T - e.start_s - paused, abs=1e-9)
        assert row["generated_s"] < row["duration_s"]  # still running: not all of it generated
        assert (
            row["duration_text"]
            == f"generated {row['generated_s']:.1f} s of {row['duration_s']:.1f} s planned"
        )
    done = info[info["status"] != "running"]
    assert (done["generated_s"] == done["duration_s"]).all()
    assert all(t == f"duration {d:.1f} s" for t, d in zip(done["duration_text"], done["duration_s"]))
