"""Closed-form limits of the core engine, as property tests.

Each test pins the pipeline where the answer is known without simulating it: eta = 0 is a
synchronous pipeline, one slot runs everything in series, zero train and sync time with no
admission bound is list scheduling on the slots, exponential durations give the synchronous step
time m * H_B, and the units of time do not matter. A user relies on each of these when reading a
run as "the pipeline I described", not as a black box.
"""

from __future__ import annotations

import heapq
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim import (
    Drain,
    ExponentialDurations,
    PartialRollout,
    PipelineConfig,
    Scenario,
    TraceDurations,
    run,
)
from pipesim.testing import check_invariants, duration_lists, run_trace

TIMES = st.one_of(st.just(0.0), st.integers(0, 40).map(float), st.floats(0.0, 40.0))


@st.composite
def sync_cases(draw: st.DrawFn, wide: bool = True) -> tuple[PipelineConfig, list[float]]:
    """An eta = 0 pipeline (with ``n_slots >= batch_size`` where ``wide``) and a pool long enough."""
    b = draw(st.integers(1, 8))
    n = draw(st.integers(b, 14)) if wide else draw(st.integers(1, 14))
    cfg = PipelineConfig(
        n_slots=n,
        batch_size=b,
        train_time_s=draw(TIMES),
        sync_time_s=draw(TIMES),
        max_staleness=0,
        steps=draw(st.integers(1, 5)),
    )
    return cfg, draw(duration_lists((cfg.steps + 1) * b + n))


def scenario(cfg: PipelineConfig, pool: list[float], update: object = None) -> Scenario:
    return Scenario(
        pipeline=cfg,
        durations=TraceDurations.from_values(pool),
        weight_update=update if update is not None else PartialRollout(),  # type: ignore[arg-type]
        pool_size=len(pool),
    )


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=30)
@given(sync_cases(), st.booleans())
def test_eta_zero_with_enough_slots_is_synchronous_step_by_step(
    case: tuple[PipelineConfig, list[float]], drain: bool
) -> None:
    """eta = 0 and n_slots >= B: step k waits for the slowest of tasks kB..(k+1)B-1, then trains
    and syncs; nothing else runs. Every step's start and the run's end are that sum."""
    cfg, pool = case
    r = run(scenario(cfg, pool, Drain() if drain else PartialRollout()))
    b, t = cfg.batch_size, 0.0
    for step, start, end, _ in r.train_log:
        t += max(pool[step * b : (step + 1) * b])
        assert close(start, t), (step, start, t)
        assert close(end - start, cfg.train_time_s)
        t = end + cfg.sync_time_s
    assert close(r.sim_time_s, t)
    assert len(r.episodes) == cfg.steps * b  # nothing is launched beyond the batches trained
    assert sorted(r.trained["episode_id"]) == list(range(cfg.steps * b))


@settings(max_examples=30)
@given(sync_cases(wide=False))
def test_eta_zero_drain_and_partial_rollout_are_the_same_run(
    case: tuple[PipelineConfig, list[float]],
) -> None:
    """With eta = 0 no episode is in flight at a sync (any slot count), so draining first changes
    nothing: the two weight updates give the same event trace."""
    cfg, pool = case
    assert run_trace(scenario(cfg, pool, Drain())) == run_trace(scenario(cfg, pool, PartialRollout()))


@settings(max_examples=30)
@given(sync_cases(wide=False))
def test_eta_zero_trains_every_episode_fresh_and_batches_in_task_order(
    case: tuple[PipelineConfig, list[float]],
) -> None:
    """eta = 0 (any slot count): staleness 0, every launched episode trained, and step k trains
    exactly tasks kB..(k+1)B-1 -- the synchronous pipeline's batches."""
    cfg, pool = case
    r = run(scenario(cfg, pool))
    tr = r.trained
    assert (tr["staleness"] == 0).all() and (tr["versions_spanned"] == 1).all()
    assert len(r.episodes) == cfg.steps * cfg.batch_size
    for row in tr.itertuples():
        assert row.step == row.episode_id // cfg.batch_size
        assert row.duration_s == pool[row.episode_id]


def list_schedule_ends(pool: list[float], n_slots: int) -> list[float]:
    """Finishing times of the tasks in ``pool`` started in order, each on the first free slot."""
    free = [0.0] * n_slots
    ends = []
    for d in pool:
        t = heapq.heappop(free)
        ends.append(t + d)
        heapq.heappush(free, t + d)
    return ends


@settings(max_examples=30)
@given(sync_cases(wide=False))
def test_eta_zero_step_time_is_the_list_schedule_of_its_batch(
    case: tuple[PipelineConfig, list[float]],
) -> None:
    """eta = 0 with fewer slots than B: each step is the makespan of its B tasks list-scheduled
    on the slots (an independent heap reference), plus train and sync."""
    cfg, pool = case
    r = run(scenario(cfg, pool))
    b, t = cfg.batch_size, 0.0
    for step, start, end, _ in r.train_log:
        t += max(list_schedule_ends(pool[step * b : (step + 1) * b], cfg.n_slots))
        assert close(start, t)
        t = end + cfg.sync_time_s
    assert close(r.sim_time_s, t)


@settings(max_examples=30)
@given(sync_cases(wide=False), st.integers(1, 6))
def test_more_slots_never_slow_a_synchronous_pipeline(
    case: tuple[PipelineConfig, list[float]], more: int
) -> None:
    """eta = 0: adding slots never lengthens the run (list scheduling of independent tasks in a
    fixed order is monotone in the number of machines), and never changes what is trained."""
    cfg, pool = case
    pool = pool + [0.0] * more  # the wider pipeline's pool is long enough too
    few = run(scenario(cfg, pool))
    many = run(scenario(PipelineConfig(**{**cfg.__dict__, "n_slots": cfg.n_slots + more}), pool))
    assert many.sim_time_s <= few.sim_time_s * (1 + 1e-12) + 1e-12
    assert list(many.trained["episode_id"].sort_values()) == list(few.trained["episode_id"].sort_values())


@st.composite
def one_slot_cases(draw: st.DrawFn) -> tuple[PipelineConfig, list[float]]:
    b, steps, eta = draw(st.integers(1, 6)), draw(st.integers(1, 5)), draw(st.integers(0, 4))
    cfg = PipelineConfig(
        n_slots=1,
        batch_size=b,
        train_time_s=draw(TIMES),
        sync_time_s=draw(TIMES),
        max_staleness=eta,
        steps=steps,
    )
    return cfg, draw(duration_lists((steps + eta + 1) * b + 1))


@settings(max_examples=30)
@given(one_slot_cases(), st.booleans())
def test_one_slot_runs_everything_in_series(case: tuple[PipelineConfig, list[float]], drain: bool) -> None:
    """One slot: episodes run one after another in task order, so step k trains tasks
    kB..(k+1)B-1 whatever eta, each generating exactly its own duration (in its gen intervals;
    at most one is left in flight), and with eta = 0 the run is that sum plus train and sync."""
    cfg, pool = case
    r = run(scenario(cfg, pool, Drain() if drain else PartialRollout()))
    check_invariants(r)
    b = cfg.batch_size
    tr = r.trained
    assert list(tr["episode_id"]) == list(range(cfg.steps * b))
    assert list(tr["step"]) == [i // b for i in range(cfg.steps * b)]
    assert list(tr["duration_s"]) == pool[: cfg.steps * b]
    starts = [e.start_s for e in r.episodes]
    assert starts == sorted(starts)  # in series: in task order
    gen = r.events[r.events["kind"] == "gen"]
    per_episode = (gen["end_s"] - gen["start_s"]).groupby(gen["episode_id"]).sum()
    for e in r.episodes:  # the slot's time is each episode's own duration, the last one's in part
        got = float(per_episode.get(e.id, 0.0))
        if e.end_s is not None:
            assert math.isclose(got, pool[e.task_id], rel_tol=1e-9, abs_tol=1e-9), e
        else:
            assert got <= pool[e.task_id] * (1 + 1e-9) + 1e-9
    assert sum(e.end_s is None for e in r.episodes) <= 1
    if cfg.max_staleness == 0:
        work = math.fsum(pool[: cfg.steps * b])
        assert close(r.sim_time_s, work + cfg.steps * (cfg.train_time_s + cfg.sync_time_s))


@st.composite
def free_cases(draw: st.DrawFn) -> tuple[PipelineConfig, list[float]]:
    """Zero train and sync time and a staleness bound that never binds before the run ends
    (PartialRollout starts fewer than steps * B + 2 * n_slots episodes by then), with a pool that
    covers the count throttle's cap (Drain, which waits at every step, may start more)."""
    b, n, steps = draw(st.integers(1, 6)), draw(st.integers(1, 10)), draw(st.integers(1, 5))
    eta = steps * b + 2 * n
    cfg = PipelineConfig(
        n_slots=n, batch_size=b, train_time_s=0.0, sync_time_s=0.0, max_staleness=eta, steps=steps
    )
    # positive durations: zero-length episodes started at the last instant would finish at it too,
    # and an unbounded admission would start them until the pool runs out
    positive = st.one_of(st.integers(1, 200).map(float), st.floats(0.01, 500.0))
    base = draw(st.lists(positive, min_size=eta, max_size=eta))
    need = (steps + eta + 1) * b
    return cfg, (base * (need // eta + 1))[:need]


@settings(max_examples=30)
@given(free_cases(), st.booleans())
def test_free_training_and_sync_without_a_bound_is_list_scheduling(
    case: tuple[PipelineConfig, list[float]], drain: bool
) -> None:
    """Zero train and sync time and a staleness bound that never binds: the slots never stop,
    so the run ends when the (steps * B)-th episode finishes in the list schedule of the pool
    (tasks started in order, each on the first free slot), and the batches are the episodes in
    finishing order."""
    cfg, pool = case
    r = run(scenario(cfg, pool, Drain() if drain else PartialRollout()))
    ends = sorted(list_schedule_ends(pool, cfg.n_slots))
    need = cfg.steps * cfg.batch_size
    if drain:  # draining waits for the episodes in flight at each (instant) sync: never earlier
        assert r.sim_time_s >= ends[need - 1] - 1e-9 * max(1.0, ends[need - 1])
    else:
        assert close(r.sim_time_s, ends[need - 1])
        trained_ends = sorted(e.end_s for e in r.episodes if e.status == "trained")
        assert all(close(a, b) for a, b in zip(trained_ends, ends[:need], strict=True))


@settings(max_examples=30)
@given(sync_cases(wide=False), st.integers(0, 3))
def test_zero_sync_time_costs_no_generation_time(case: tuple[PipelineConfig, list[float]], eta: int) -> None:
    """sync_time_s = 0: a sync pauses no generation for any time (no paused seconds, utilisation
    while active equals utilisation) and every sync ends where it starts."""
    cfg, pool = case
    cfg = PipelineConfig(**{**cfg.__dict__, "sync_time_s": 0.0, "max_staleness": eta})
    pool = pool + pool[: eta * cfg.batch_size]  # long enough for eta batches ahead
    r = run(scenario(cfg, pool))
    s = r.summary()
    if r.sim_time_s > 0:
        assert s["gen_util_active"] == s["gen_util"]
    assert all(b == a for a, b, _ in r.sync_log)
    pauses = r.events[r.events["kind"] == "pause"]
    assert float((pauses["end_s"] - pauses["start_s"]).sum()) == 0.0


def harmonic(n: int) -> float:
    return math.fsum(1 / k for k in range(1, n + 1))


@settings(max_examples=8)
@given(st.integers(1, 8), st.floats(1.0, 100.0), st.integers(0, 2**16))
def test_exponential_durations_give_m_times_harmonic_number_per_step(b: int, mean: float, seed: int) -> None:
    """eta = 0, n_slots >= B, zero train and sync time, exponential durations of mean m: each step
    waits for the max of B independent exponentials, whose mean is m * H_B and variance
    m^2 * sum 1/k^2. The mean step time must be within 5 standard errors (seeded runs: a false
    alarm is below one in a million per example)."""
    steps = 300
    cfg = PipelineConfig(
        n_slots=b, batch_size=b, train_time_s=0.0, sync_time_s=0.0, max_staleness=0, steps=steps
    )
    r = run(Scenario(pipeline=cfg, durations=ExponentialDurations(mean), seed=seed))
    sd = mean * math.sqrt(math.fsum(1 / k**2 for k in range(1, b + 1)))
    assert abs(r.sim_time_s / steps - mean * harmonic(b)) <= 5 * sd / math.sqrt(steps)


@settings(max_examples=25)
@given(
    st.integers(1, 10),
    st.integers(1, 6),
    st.integers(0, 3),
    st.integers(1, 4),
    st.sampled_from([0.5, 2.0, 4.0, 0.25]),
    st.data(),
)
def test_time_units_do_not_matter(
    n: int, b: int, eta: int, steps: int, c: float, data: st.DataObject
) -> None:
    """Multiplying every duration, the train time and the sync time by a power of two (exact in
    floating point) multiplies every time in the run by it and changes no decision: the same
    episodes are trained at the same steps with the same staleness."""
    pool = data.draw(duration_lists((steps + eta + 1) * b + n))
    times = [data.draw(TIMES) for _ in range(2)]
    cfg = PipelineConfig(
        n_slots=n, batch_size=b, train_time_s=times[0], sync_time_s=times[1], max_staleness=eta, steps=steps
    )
    wu = data.draw(st.sampled_from([PartialRollout(), Drain()]))
    a = run(scenario(cfg, pool, wu))
    scaled = PipelineConfig(**{**cfg.__dict__, "train_time_s": c * times[0], "sync_time_s": c * times[1]})
    z = run(scenario(scaled, [c * d for d in pool], wu))
    assert z.sim_time_s == c * a.sim_time_s
    assert [(s, c * t0, c * t1, v) for s, t0, t1, v in a.train_log] == z.train_log
    cols = ["episode_id", "step", "staleness"]
    assert a.trained[cols].equals(z.trained[cols])


@settings(max_examples=25)
@given(sync_cases(wide=False), st.floats(0.0, 30.0))
def test_a_longer_train_step_adds_exactly_its_time_per_step_when_synchronous(
    case: tuple[PipelineConfig, list[float]], extra: float
) -> None:
    """eta = 0: the run is a sum over steps that each include train_time_s once, so adding
    ``extra`` seconds per step adds exactly steps * extra."""
    cfg, pool = case
    slow = PipelineConfig(**{**cfg.__dict__, "train_time_s": cfg.train_time_s + extra})
    a, z = run(scenario(cfg, pool)), run(scenario(slow, pool))
    assert math.isclose(z.sim_time_s, a.sim_time_s + cfg.steps * extra, rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=30)
@given(sync_cases(), st.booleans())
def test_a_colocated_engine_costs_nothing_in_a_synchronous_pipeline(
    case: tuple[PipelineConfig, list[float]], drain: bool
) -> None:
    """eta = 0 with n_slots >= B: nothing generates while the trainer trains, so pausing the
    engine for training (colocated) changes no decision and no time."""
    cfg, pool = case
    wu = Drain() if drain else PartialRollout()
    a = run(scenario(cfg, pool, wu))
    z = run(scenario(PipelineConfig(**{**cfg.__dict__, "colocated": True}), pool, wu))
    assert z.sim_time_s == a.sim_time_s and z.train_log == a.train_log and z.sync_log == a.sync_log
    assert [(e.slot, e.start_s, e.end_s, e.status) for e in z.episodes] == [
        (e.slot, e.start_s, e.end_s, e.status) for e in a.episodes
    ]
