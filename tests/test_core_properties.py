"""Property tests of the core engine: invariants on random configurations and durations,
agreement with the independent plain-Python oracle, and determinism."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesim import Drain, PartialRollout, PipelineConfig, Scenario, TraceDurations, run, simulate_pipeline
from pipesim.testing import check_invariants, duration_lists, pipeline_configs, scenarios
from tests.oracle import oracle_pipeline


def pool_size(cfg: PipelineConfig) -> int:
    return (cfg.steps + cfg.max_staleness + 1) * cfg.batch_size + cfg.n_slots


@st.composite
def configs_and_pools(
    draw: st.DrawFn, integer: bool | None = None
) -> tuple[PipelineConfig, list[float], bool]:
    cfg = draw(pipeline_configs())
    pool = draw(duration_lists(pool_size(cfg), integer=integer))
    return cfg, pool, draw(st.booleans())


def scenario_for(cfg: PipelineConfig, pool: list[float], interrupt: bool) -> Scenario:
    return Scenario(
        pipeline=cfg,
        durations=TraceDurations.from_values(pool),
        weight_update=PartialRollout() if interrupt else Drain(),
        pool_size=len(pool),
    )


@given(scenarios())
def test_every_run_keeps_the_invariants(sc: Scenario) -> None:
    check_invariants(run(sc))


@given(configs_and_pools())
def test_eta_zero_gives_zero_staleness(case: tuple[PipelineConfig, list[float], bool]) -> None:
    cfg, pool, interrupt = case
    r = run(scenario_for(cfg.__class__(**{**cfg.__dict__, "max_staleness": 0}), pool, interrupt))
    assert r.summary()["staleness_max"] == 0
    assert r.summary()["staleness_newest_max"] == 0


@given(configs_and_pools())
def test_drain_never_exceeds_eta(case: tuple[PipelineConfig, list[float], bool]) -> None:
    cfg, pool, _ = case
    r = run(scenario_for(cfg, pool, interrupt=False))
    assert r.summary()["staleness_max"] <= cfg.max_staleness
    # draining means no episode ever spans two versions
    assert (r.trained["versions_spanned"] == 1).all()


def _compare_with_oracle(cfg: PipelineConfig, pool: list[float], interrupt: bool, exact: bool = True) -> None:
    """Discrete outcomes must agree exactly; times exactly under exact arithmetic, else to 1e-9."""
    args = (
        cfg.n_slots,
        cfg.batch_size,
        cfg.train_time_s,
        cfg.sync_time_s,
        cfg.max_staleness,
        interrupt,
        cfg.steps,
    )
    want = oracle_pipeline(pool, *args)
    r = run(scenario_for(cfg, pool, interrupt))

    def same(a: float, b: float) -> bool:
        return a == b if exact else math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)

    assert same(r.sim_time_s, want.time)
    trained = sorted(
        (e.trained_version, e.version, e.duration_s) for e in r.episodes if e.status == "trained"
    )
    assert trained == sorted(want.trained)
    got_gen = sorted((e.slot, e.start_s, e.end_s, e.version) for e in r.episodes if e.end_s is not None)
    want_gen = sorted(want.gen)
    assert [(g[0], g[3]) for g in got_gen] == [(w[0], w[3]) for w in want_gen]
    assert all(same(g[1], w[1]) and same(g[2], w[2]) for g, w in zip(got_gen, want_gen))
    got_train = [(a, b, v) for _, a, b, v in r.train_log]
    assert [v for *_, v in got_train] == [v for *_, v in want.train]
    assert all(same(g[0], w[0]) and same(g[1], w[1]) for g, w in zip(got_train, want.train))
    s = r.summary()
    assert (s["episodes_launched"], s["episodes_buffered"], s["episodes_in_flight"]) == (
        want.started,
        want.buffered,
        want.running,
    )
    facade = simulate_pipeline(pool, *args)
    assert same(facade["time"], want.time)


DYADIC = st.integers(0, 1600).map(lambda k: k / 8)  # exact in binary: every sum is exact, ties are real


@st.composite
def exact_cases(draw: st.DrawFn) -> tuple[PipelineConfig, list[float], bool]:
    cfg = draw(pipeline_configs())
    cfg = PipelineConfig(
        cfg.n_slots, cfg.batch_size, draw(DYADIC) / 4, draw(DYADIC) / 4, cfg.max_staleness, cfg.steps
    )
    small = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])  # many coincident events
    pool = draw(st.lists(st.one_of(DYADIC, small), min_size=pool_size(cfg), max_size=pool_size(cfg)))
    return cfg, pool, draw(st.booleans())


@given(exact_cases())
def test_engine_agrees_with_oracle_exactly(case: tuple[PipelineConfig, list[float], bool]) -> None:
    """Exact arithmetic: ties (zero durations, events at the same instant) must resolve as in the loop."""
    _compare_with_oracle(*case)


@given(configs_and_pools(), st.integers(0, 2**32 - 1))
def test_engine_agrees_with_oracle_on_generic_floats(
    case: tuple[PipelineConfig, list[float], bool], seed: int
) -> None:
    """Generic real-valued times (no coincidences beyond those the semantics create)."""
    import random

    cfg, pool, interrupt = case
    rng = random.Random(seed)
    pool = [rng.uniform(0.0, 300.0) for _ in pool]
    cfg = PipelineConfig(
        cfg.n_slots, cfg.batch_size, rng.uniform(0, 60), rng.uniform(0, 20), cfg.max_staleness, cfg.steps
    )
    _compare_with_oracle(cfg, pool, interrupt, exact=False)


@given(st.integers(0, 2**31 - 1), st.sampled_from([0, 1, 2]), st.booleans())
def test_same_seed_same_trace(seed: int, eta: int, interrupt: bool) -> None:
    sc = Scenario(
        pipeline=PipelineConfig(n_slots=8, batch_size=8, max_staleness=eta, steps=4),
        weight_update=PartialRollout() if interrupt else Drain(),
        seed=seed,
    )
    a, b = run(sc), run(sc)
    assert a.events.equals(b.events)
    assert a.summary() == b.summary()
    other = run(sc.with_(seed=(seed + 1) % 2**31))
    assert not a.events.equals(other.events)


def test_partial_rollout_records_every_version_segment() -> None:
    """A straggler that crosses syncs generates under several versions, pausing at each sync."""
    pool = [12.0] + [1.0] * 60
    sc = Scenario(
        pipeline=PipelineConfig(
            n_slots=2, batch_size=2, train_time_s=3, sync_time_s=2, max_staleness=3, steps=6
        ),
        durations=TraceDurations.from_values(pool),
        pool_size=len(pool),
    )
    r = run(sc)
    ev = r.events
    straggler = ev[ev["episode_id"] == 0]
    gens = straggler[straggler["kind"] == "gen"]
    pauses = straggler[straggler["kind"] == "pause"]
    assert len(gens) >= 3 and len(pauses) == len(gens) - 1
    assert list(gens["version"]) == sorted(gens["version"]) and gens["version"].nunique() == len(gens)
    # it finished: its work (gen time) equals its duration; its pauses equal the syncs it lived through
    assert r.episodes[0].end_s is not None
    assert math.isclose((gens["end_s"] - gens["start_s"]).sum(), 12.0)
    assert r.trained.set_index("episode_id").loc[0, "versions_spanned"] == len(gens)
    syncs = ev[ev["kind"] == "sync"]
    for _, p in pauses.iterrows():
        assert ((syncs["start_s"] == p["start_s"]) & (syncs["end_s"] == p["end_s"])).any()


def test_summary_keys_and_ranges() -> None:
    r = run(Scenario(pipeline=PipelineConfig(n_slots=16, batch_size=8, max_staleness=2, steps=5)))
    s = r.summary()
    for key in [
        "throughput_per_hour",
        "gen_util",
        "gen_util_active",
        "staleness_mean",
        "staleness_max",
        "trained_duration_mean",
        "launched_duration_mean",
        "episodes_launched",
        "episodes_trained",
        "episodes_in_flight",
        "episodes_buffered",
        "sim_time_s",
        "trainer_idle_ratio",
        "rollout_idle_ratio",
    ]:
        assert key in s
    assert 0 <= s["gen_util_active"] <= s["gen_util"] <= s["gen_util_total"] <= 1
    assert 0 <= s["trainer_idle_ratio"] <= 1 and 0 <= s["rollout_idle_ratio"] <= 1
    assert s["episodes_trained"] == 8 * 5
    assert math.isclose(s["throughput_per_hour"], 40 / s["sim_time_s"] * 3600)
    kinds = set(r.events["kind"])
    assert {"gen", "train", "sync"} <= kinds
    assert set(r.trained.columns) >= {"staleness", "staleness_newest", "duration_s", "versions_spanned"}


@pytest.mark.parametrize("n_slots", [1, 3, 64])
def test_synchronous_step_is_max_plus_train_plus_sync(n_slots: int) -> None:
    """With eta=0 and B <= n_slots, each step lasts max(batch durations) + train + sync."""
    pool = [float(i % 7 + 1) for i in range(200)]
    b = min(n_slots, 5)
    r = simulate_pipeline(pool, n_slots, b, 4.0, 2.0, max_staleness=0, steps=3)
    expect = sum(max(pool[i * b : (i + 1) * b]) + 6.0 for i in range(3))
    assert r["time"] == expect


def test_dropping_a_result_frees_its_episodes_without_the_cycle_collector() -> None:
    """A finished pipeline is a reference cycle (processes, environment, engines); the episodes
    must not hang off it, or every run of a sweep leaves them for the cyclic collector."""
    import gc

    from pipesim.core.episode import Episode

    sc = Scenario(pipeline=PipelineConfig(n_slots=8, batch_size=8, max_staleness=2, steps=4))
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()  # no automatic collection may free the finished pipeline before the result goes
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds unreachable stays in gc.garbage
    try:
        result = run(sc)
        assert len(result.episodes) > 0
        del result
        gc.collect()
        stranded = [o for o in gc.garbage if isinstance(o, Episode)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
    assert stranded == []
