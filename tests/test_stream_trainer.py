"""The streaming trainer (``PipelineConfig.stream_batches``, PipelineRL's gradient accumulation over
a stream): each step's end agrees with a slow one-episode-at-a-time SimPy trainer fed the same
arrivals; it never ends later than the batch trainer on the same episodes, never before the
handover plus the last episode's share, and equals it when training takes no time; the run keeps
the kit's invariants; the colocated combination is refused naming the field; the same seed gives
the same trace."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import simpy
from hypothesis import given
from hypothesis import strategies as st

from pipesim import Drain, PartialRollout, PipelineConfig, Scenario, TraceDurations, run
from pipesim.core.engine import Pipeline
from pipesim.core.roles import WeightUpdate
from pipesim.core.training import stream_end_s
from pipesim.core.validate import FieldError
from pipesim.io.api import draw_pool
from pipesim.testing import (
    check_invariants,
    check_promises,
    duration_lists,
    pipeline_configs,
    policy_scenarios,
    run_trace,
    scenarios,
)

TOL = 1e-9
pytestmark = pytest.mark.filterwarnings("ignore:the run ended at")  # drawn durations down to 1e-300 s


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOL, abs_tol=TOL)


class Handovers:
    """A batch observer: when the trainer took each step's batch, and the batch's finish times."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, list[float]]] = []

    def on_batch(self, step: int, version: int, batch: list[Any], now_s: float) -> None:
        self.rows.append((now_s, [float(e.end_s) for e in batch]))


def observed(sc: Scenario) -> tuple[Pipeline, Handovers]:
    obs = Handovers()
    p = Pipeline(sc, draw_pool(sc).tolist(), observer=obs)
    p.run()
    return p, obs


def reference_ends(
    arrivals: list[list[float]], frees: list[float], train_s: float, batch: int
) -> list[float]:
    """The slow reference: a SimPy trainer that takes one episode at a time as it arrives (a feeder
    puts each at its finish time into its step's store), trains ``train_s / batch`` on it, and ends
    the step with its last episode; step ``k`` starts no earlier than ``frees[k]``."""
    env = simpy.Environment()
    stores = [simpy.Store(env) for _ in arrivals]
    ends: list[float] = []

    def feeder(store: simpy.Store, at: float) -> Any:
        yield env.timeout(at)
        yield store.put(at)

    def trainer() -> Any:
        for k, store in enumerate(stores):
            if env.now < frees[k]:
                yield env.timeout(frees[k] - env.now)
            for _ in range(batch):
                yield store.get()
                yield env.timeout(train_s / batch)
            ends.append(env.now)

    for store, times in zip(stores, arrivals):
        for at in times:
            env.process(feeder(store, at))
    env.process(trainer())
    env.run()
    return ends


def streamed(sc: Scenario) -> Scenario:
    return sc.with_(stream_batches=True)


# -- (1) agreement with a slow reference ------------------------------------------------------


@given(
    arrivals=st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=12),
    train_s=st.floats(0, 50, allow_nan=False),
    free_s=st.floats(0, 100, allow_nan=False),
)
def test_the_closed_form_is_the_one_at_a_time_recurrence(
    arrivals: list[float], train_s: float, free_s: float
) -> None:
    """``stream_end_s`` against ``f_i = max(f_(i-1), a_i) + c`` run episode by episode, the last
    arrival being the handover (``now``, at or after every arrival and the trainer's free time)."""
    now = max([free_s, *arrivals])
    f = free_s
    for a in sorted(arrivals)[:-1] + [now]:
        f = max(f, a) + train_s / len(arrivals)
    got = stream_end_s(arrivals, train_s, free_s, now)
    assert math.isclose(got, f, rel_tol=1e-12, abs_tol=1e-9)
    assert now + train_s / len(arrivals) <= got <= now + train_s


@given(scenarios(weight_updates=[PartialRollout()], max_slots=8, max_batch=6))
def test_step_ends_agree_with_a_slow_one_at_a_time_trainer(sc: Scenario) -> None:
    sc = streamed(sc)
    p, obs = observed(sc)
    cfg = sc.pipeline
    assert len(p.train_log) == cfg.steps and len(p.sync_log) == cfg.steps
    # the trainer is free when the previous step's sync ends (PartialRollout: its log's end)
    frees = [0.0] + [end for _, end, _ in p.sync_log[:-1]]
    for k, (_, start, end, _) in enumerate(p.train_log):
        assert close(p.sync_log[k][0], end)  # the sync starts as the step ends
        assert start >= frees[k] - TOL  # the log's interval [end - train, end) after the last sync
        assert close(end - start, cfg.train_time_s)
    ref = reference_ends([times for _, times in obs.rows], frees, cfg.train_time_s, cfg.batch_size)
    got = [end for _, _, end, _ in p.train_log]
    assert all(close(a, b) for a, b in zip(got, ref)), (got, ref)


# -- (2) bounds and relations -------------------------------------------------------------------


@st.composite
def synchronous(draw: st.DrawFn) -> Scenario:
    """eta = 0 designs: each step trains the episodes launched at its version, whenever it runs."""
    cfg = dataclasses.replace(draw(pipeline_configs(max_slots=8, max_batch=6)), max_staleness=0)
    pool = (cfg.steps + 1) * cfg.batch_size + cfg.n_slots
    values = draw(duration_lists(pool))
    updates: list[WeightUpdate] = [PartialRollout(), Drain()]
    update = draw(st.sampled_from(updates))
    return Scenario(
        pipeline=cfg, durations=TraceDurations.from_values(values), weight_update=update, pool_size=pool
    )


@given(synchronous())
def test_streaming_never_ends_a_step_later_and_never_before_the_last_share(sc: Scenario) -> None:
    batch_run, stream_run = run(sc), run(streamed(sc))
    stream_p, obs = observed(streamed(sc))
    assert stream_p.train_log == stream_run.train_log  # (the observer changes nothing)
    trained = sorted((e.trained_step, e.id) for e in batch_run.episodes if e.trained_step is not None)
    assert trained == sorted(
        (e.trained_step, e.id) for e in stream_run.episodes if e.trained_step is not None
    )
    share = sc.pipeline.train_time_s / sc.pipeline.batch_size
    for (_, _, b_end, _), (_, _, s_end, _), (handover, _) in zip(
        batch_run.train_log, stream_run.train_log, obs.rows
    ):
        assert s_end <= b_end + TOL * max(1.0, b_end)
        assert s_end >= handover + share - TOL * max(1.0, s_end)
    assert stream_run.sim_time_s <= batch_run.sim_time_s + TOL * max(1.0, batch_run.sim_time_s)


@given(scenarios(max_slots=8, max_batch=6))
def test_with_no_training_time_streaming_is_the_batch_trainer(sc: Scenario) -> None:
    sc = sc.with_(train_time_s=0.0)
    a, b = run(sc), run(streamed(sc))
    assert a.train_log == b.train_log and a.sync_log == b.sync_log
    assert a.sim_time_s == b.sim_time_s
    assert [e.trained_step for e in a.episodes] == [e.trained_step for e in b.episodes]


def test_with_tiny_training_time_the_two_agree_to_it() -> None:
    sc = Scenario(
        pipeline=PipelineConfig(n_slots=8, batch_size=8, steps=4, max_staleness=1, train_time_s=1e-6)
    )
    a, b = run(sc), run(streamed(sc))
    for (_, _, ea, _), (_, _, eb, _) in zip(a.train_log, b.train_log):
        assert eb <= ea + 1e-9 and ea - eb <= 1e-6 * 4 + 1e-9


@given(scenarios(max_slots=8, max_batch=6))
def test_a_streamed_run_keeps_the_invariants_and_the_trainer_share(sc: Scenario) -> None:
    result = run(streamed(sc))
    check_invariants(result)
    s = result.summary()
    busy = sum(b - a for _, a, b, _ in result.train_log)
    assert close(busy, sc.pipeline.train_time_s * sc.pipeline.steps)  # the log's spans are compute
    assert 0.0 <= s["trainer/idle_ratio"] <= 1.0 or result.sim_time_s == 0


@given(policy_scenarios())
def test_every_policy_family_streamed_keeps_the_invariants_and_the_promises(sc: Scenario) -> None:
    """Filters, drops, failures, timeouts and replicas: the batch is decided at the handover, so
    no step ends before it plus a share; every invariant and promised bound still holds."""
    sc = streamed(sc)
    p, obs = observed(sc)
    result = run(sc)
    check_invariants(result)
    check_promises(sc)
    share = sc.pipeline.train_time_s / sc.pipeline.batch_size
    for (_, _, end, _), (handover, _) in zip(p.train_log, obs.rows):
        assert end >= handover + share - TOL * max(1.0, end)
        assert end <= handover + sc.pipeline.train_time_s + TOL * max(1.0, end)


def test_streaming_overlaps_a_step_with_its_last_episodes() -> None:
    """On the chapter's default (B = 64 on 64 slots, eta = 0), each step starts training before
    its batch is complete and ends exactly one share after the handover: the batch's last
    episode is the one that completes it."""
    sc = Scenario(pipeline=PipelineConfig(steps=3, stream_batches=True))
    p, obs = observed(sc)
    share = sc.pipeline.train_time_s / sc.pipeline.batch_size
    for (_, start, end, _), (handover, _) in zip(p.train_log, obs.rows):
        assert start < handover
        assert close(end, handover + share)


# -- (3) refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: PipelineConfig(colocated=True, stream_batches=True), "stream_batches"),
        (
            lambda: Scenario(pipeline=PipelineConfig(colocated=True)).with_(stream_batches=True),
            "pipeline.stream_batches",
        ),
        (
            lambda: Scenario(pipeline=PipelineConfig(stream_batches=True)).with_(colocated=True),
            "pipeline.stream_batches",
        ),
        (lambda: PipelineConfig(stream_batches=1), "stream_batches"),  # type: ignore[arg-type]
        (lambda: PipelineConfig(stream_batches="yes"), "stream_batches"),  # type: ignore[arg-type]
    ],
)
def test_bad_stream_batches_is_refused_naming_the_field(build: Any, field: str) -> None:
    with pytest.raises(FieldError) as info:
        build()
    assert info.value.field == field


# -- (4) determinism ----------------------------------------------------------------------------


@given(scenarios(max_slots=8, max_batch=6))
def test_the_same_seed_gives_the_same_streamed_trace(sc: Scenario) -> None:
    sc = streamed(sc)
    assert run_trace(sc) == run_trace(sc)
