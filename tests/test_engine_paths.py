"""The engine's one shortcut, and its exact always-on economies, must be invisible.

* Quiet completions (``Slots.catch_up``) are accounted lazily instead of waking the slots process
  for each, and a pass skips the batch policy where its ``ready`` hint says no batch can form;
  ``EngineOptions(hints=False)`` (``EngineOptions.plain()``) acts on no hint. This is the one
  optional shortcut.
* Two economies are always on, exact by construction, and checked here by making them apply or
  not: a completion that is the last thing at its instant runs the controller pass in place (no
  end-of-instant event), and a slots wake-up that would be the next event of the whole run is taken
  in the slots process itself (no round trip through SimPy's queue). A *ticker*, a process that
  does nothing but wake at fixed times, puts other events into the queue and turns both off at
  many instants: the traces must not change. ``SERIAL`` turns the pass in place off everywhere
  (``Pipeline.pass_in_place``): on tie-heavy runs with several replicas it is the reference that
  sees a pass taken in place although another replica's completion or a sync's end shares the
  instant (the ticker cannot: it changes nothing when it goes second).

For every scenario, the other way gives the same episodes, with the same slots, times, versions
and fates, the same training steps and syncs, or the same error.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim import Drain, Episode, PartialRollout, PipelineConfig, PipelineError, Scenario, TraceDurations
from pipesim.core.engine import Pipeline
from pipesim.core.seams import EngineOptions, EngineReplica
from pipesim.io.api import draw_pool
from pipesim.policies.replicas import LeastLoaded, PerReplicaSync, Replicas, RoundRobin
from pipesim.policies.updates import SyncEveryK
from pipesim.testing.promises import pipeline_trace
from pipesim.testing.strategies import policy_scenarios
from tests.test_kernel_survivors import SCENARIOS as SURVIVOR_SCENARIOS
from tests.test_kernel_survivors import integer_pool


class CountingLaunches(Pipeline):
    """Counts the starts that go through ``launch`` (the one way an episode starts)."""

    launches = 0

    def launch(self, engine: EngineReplica, task: int | None = None, parent: int = -1) -> Episode:
        self.launches += 1
        return super().launch(engine, task, parent)


EAGER = EngineOptions.plain()  # a wake-up for every completion
TICK = "tick"  # a pseudo-option: the default engine with a ticker beside it (see ticker)
SERIAL = "serial"  # a pseudo-option: the default engine, every controller pass at the end of its instant


def ticker(env: simpy.Environment, period_s: float) -> Generator[simpy.Event, Any, None]:
    """Wake every ``period_s`` seconds and do nothing: other events in the queue, at many instants."""
    while True:
        yield env.timeout(period_s)


def trace(options: EngineOptions | str, sc: Scenario, tick_s: float = 0.5) -> tuple[Pipeline | None, Any]:
    pseudo = options in (TICK, SERIAL)
    p = CountingLaunches(sc, draw_pool(sc).tolist(), options=EngineOptions() if pseudo else options)
    if options == TICK:
        p.env.process(ticker(p.env, tick_s))
    if options == SERIAL:  # no pass in place: where another event shares the instant, it goes first
        p.pass_in_place = False
    try:
        p.run()
    except PipelineError as exc:
        return None, str(exc)
    assert p.launches == p.started  # every start went through launch
    return p, pipeline_trace(p)


def same_traces(sc: Scenario, *ways: EngineOptions | str, tick_s: float = 0.5) -> list[Pipeline | None]:
    """Run ``sc`` the default way and each of ``ways``; assert every trace (or error) equals the
    default's. Returns the pipelines, default first (None where the run raised)."""
    runs = [trace(opts, sc, tick_s) for opts in (EngineOptions(), *ways)]
    for opts, (_, other) in zip(ways, runs[1:], strict=True):
        assert runs[0][1] == other, f"{opts} differs from the default"
    return [p for p, _ in runs]


@settings(max_examples=60)
@given(policy_scenarios(), st.sampled_from([0.25, 1.0, 7.0]))
def test_every_way_gives_the_default_trace(sc: Scenario, tick_s: float) -> None:
    same_traces(sc, EAGER, TICK, tick_s=tick_s)


@st.composite
def lazy_eligible(draw: st.DrawFn) -> Scenario:
    """Scenarios whose policies allow quiet completions (most drawn above do not: replicas,
    failures, timeouts and per-episode weight updates turn them off)."""
    inner = draw(st.sampled_from([PartialRollout(), Drain()]))
    update = draw(st.sampled_from([inner, SyncEveryK(2, inner), SyncEveryK(3, inner)]))
    sc = draw(
        policy_scenarios(
            weight_updates=[update], failures=st.none(), with_timeouts=False, with_replicas=False
        )
    )
    return sc.with_(pool_size=4 * sc.default_pool_size)


@settings(max_examples=60)
@given(lazy_eligible())
def test_lazy_completions_equal_eager_ones(sc: Scenario) -> None:
    fast, _, _ = same_traces(sc, EAGER, TICK)
    assert fast is None or fast.lazy_completions


@st.composite
def tie_heavy(draw: st.DrawFn) -> Scenario:
    """Any policy family, with small integer durations (a cycled trace), training and sync times:
    completions tie with each other, with training steps and with syncs at nearly every instant,
    which is where the ways' order of work could differ (the ticker ticks at integer times too)."""
    values = draw(st.lists(st.integers(0, 6).map(float), min_size=1, max_size=24))
    replay = [TraceDurations(tuple(values), cycle=True)]
    if draw(st.booleans()):  # any policy: replicas, timeouts and failures turn quiet completions off
        sc = draw(policy_scenarios(durations=replay))
    else:  # so half the draws keep them on
        sc = draw(
            policy_scenarios(durations=replay, failures=st.none(), with_timeouts=False, with_replicas=False)
        )
    whole = st.integers(0, 8).map(float)
    return sc.with_(train_time_s=draw(whole), sync_time_s=draw(whole))


@settings(max_examples=40)
@given(tie_heavy())
def test_every_way_gives_the_default_trace_when_everything_ties(sc: Scenario) -> None:
    same_traces(sc, EAGER, TICK, SERIAL, tick_s=1.0)


@pytest.mark.slow
@settings(max_examples=2000)
@given(st.one_of(tie_heavy(), lazy_eligible(), policy_scenarios()))
def test_every_way_gives_the_default_trace_stress(sc: Scenario) -> None:
    """The long run of the three checks above (``pytest -m slow tests/test_engine_paths.py``,
    about a minute): run it after changing the slots process, the pass or quiet completions."""
    same_traces(sc, EAGER, TICK, SERIAL, tick_s=1.0)


CFG = PipelineConfig(n_slots=12, batch_size=8, train_time_s=30.0, sync_time_s=5.0, max_staleness=2, steps=6)


@pytest.mark.parametrize(
    "sc",
    [
        Scenario(pipeline=CFG),
        Scenario(pipeline=CFG, weight_update=Drain()),
        # the trainer's version runs ahead of the engine's between real syncs
        Scenario(pipeline=CFG, weight_update=SyncEveryK(2, PartialRollout())),
        # long steps close the throttle: quiet completions pile up, then a skipped sync reopens it
        Scenario(pipeline=CFG, weight_update=SyncEveryK(2)).with_(
            n_slots=16, max_staleness=1, train_time_s=100.0
        ),
        # replicas on different versions, routed by load
        Scenario(pipeline=CFG, weight_update=PerReplicaSync(), replicas=Replicas(3, LeastLoaded())),
    ],
    ids=["partial", "drain", "sync-every-2", "quiet-then-skipped-sync", "per-replica-sync"],
)
def test_every_way_gives_the_default_trace_on_fixed_designs(sc: Scenario) -> None:
    fast, eager, ticked, serial = same_traces(sc, EAGER, TICK, SERIAL, tick_s=0.5)
    assert fast is not None and eager is not None and ticked is not None and serial is not None


@pytest.mark.parametrize("routing", [RoundRobin(), LeastLoaded()], ids=repr)
@pytest.mark.parametrize("name", sorted(SURVIVOR_SCENARIOS))
@pytest.mark.parametrize("seed", range(3))
def test_the_pass_in_place_is_invisible_on_tied_replicas(name: str, seed: int, routing: Any) -> None:
    """Several replicas, syncs that pause some of them, integer durations: completions of
    different replicas share instants with each other and with syncs' ends, and the pass must
    come after all of them."""
    sc = SURVIVOR_SCENARIOS[name].with_(seed=seed, durations=integer_pool(seed))
    if sc.replicas is not None:
        sc = sc.with_(replicas=Replicas(sc.replicas.n_replicas, routing))
    elif routing != RoundRobin():
        pytest.skip("one replica: no routing")
    fast, serial = same_traces(sc, SERIAL)
    assert fast is not None and serial is not None


@pytest.mark.parametrize("eta", [0, 1, 3])
@pytest.mark.parametrize("drain", [False, True])
def test_lazy_completions_equal_eager_ones_with_tied_integer_durations(eta: int, drain: bool) -> None:
    """Integer durations and times make completions tie with each other, with training steps and
    with syncs: the order of same-time events must not matter either way."""
    cfg = PipelineConfig(
        n_slots=6, batch_size=4, train_time_s=3.0, sync_time_s=1.0, max_staleness=eta, steps=5
    )
    pool = TraceDurations(tuple(float(1 + (7 * i) % 5) for i in range(60)))
    sc = Scenario(pipeline=cfg, durations=pool, weight_update=Drain() if drain else PartialRollout())
    fast, eager, ticked = same_traces(sc, EAGER, TICK, tick_s=1.0)
    assert fast is not None and fast.lazy_completions and eager is not None and not eager.lazy_completions
    assert ticked is not None


def count_events(p: Pipeline) -> int:
    n, step = 0, p.env.step

    def counted() -> None:
        nonlocal n
        n += 1
        step()

    p.env.step = counted  # type: ignore[method-assign]
    p.run()
    return n


class CountingReports(Pipeline):
    """Counts the reports of finished episodes: one per wake-up of the slots process that finished some."""

    reports = 0

    def on_finished(
        self, episodes: list[Episode], now: float, in_pass: bool = False, awake: EngineReplica | None = None
    ) -> None:
        self.reports += 1
        super().on_finished(episodes, now, in_pass, awake)


def test_lazy_completions_save_the_wake_ups_of_a_synchronous_step() -> None:
    """With eta = 0 nothing can happen until the last episode of a step finishes: one wake-up."""
    sc = Scenario(pipeline=PipelineConfig(n_slots=32, batch_size=32, max_staleness=0, steps=4))
    pool = draw_pool(sc).tolist()
    lazy, eager = CountingReports(sc, pool), CountingReports(sc, pool, options=EAGER)
    lazy.run()
    eager.run()
    assert eager.reports >= 4 * 31  # a report per completion (ties aside)
    assert lazy.reports <= 4 * 2  # two a step (the first completion and the last), not 32


class CountingPasses(Pipeline):
    passes = 0

    def _controller_pass(self, now: float, awake: EngineReplica | None = None) -> None:
        self.passes += 1
        super()._controller_pass(now, awake)


def test_an_asynchronous_run_takes_its_wake_ups_in_place() -> None:
    """The ticker check compares something: with spare staleness budget and nothing else in the
    queue between two completions, the slots process takes its wake-ups without SimPy, and each
    completion runs the pass in place; a ticker at every second sends most of them through the queue."""
    sc = Scenario(pipeline=PipelineConfig(n_slots=32, batch_size=32, max_staleness=2, steps=30))
    pool = draw_pool(sc).tolist()
    alone, ticked = CountingPasses(sc, pool), CountingPasses(sc, pool)
    ticked.env.process(ticker(ticked.env, 1.0))
    n_alone, n_ticked = count_events(alone), count_events(ticked)
    n = alone.started
    assert ticked.started == n and alone.passes > n / 2  # a pass for (nearly) every completion
    assert n_alone < n / 2  # without the warp: at least one event per completion
    assert n_ticked - ticked.env.now > n / 2  # besides the ticks, most completions went through SimPy


def test_a_drain_that_waits_for_the_last_completion_still_ends() -> None:
    """A completion that empties the engine while a drain waits for it must signal the drain."""
    cfg = PipelineConfig(n_slots=1, batch_size=9, train_time_s=0.0, sync_time_s=0.0, max_staleness=1, steps=5)
    pool = TraceDurations(tuple([0.0] * 9 + [1.0] + [0.0] * 60))
    sc = Scenario(pipeline=cfg, durations=pool, weight_update=Drain(), pool_size=64)
    fast, eager, ticked = same_traces(sc, EAGER, TICK)
    assert fast is not None and fast.version == 5
    assert eager is not None and eager.version == 5 and ticked is not None


def test_an_unreachable_due_time_ends_the_episode_at_its_due_time_either_way() -> None:
    """From now = 0.964..., no float delay makes now + delay equal 3.0328602909390034 (every sum
    is a tie and rounds to even), so a wake-up by delay would land an ulp off. The slots process
    wakes at absolute times: the episode ends at its own due time, on every path."""
    import math

    now, at = 0.9641832992453796, 3.0328602909390034
    near = [at - now]
    for _ in range(4):
        near += [math.nextafter(near[-1], math.inf), math.nextafter(near[0], 0.0)]
    assert all(now + x != at for x in near)  # the case exists
    vals = [at, 3.5452175430780524, 16.83223001458623, now, 9.16542078373175, 13.04016099311887] * 12
    cfg = PipelineConfig(n_slots=8, batch_size=4, train_time_s=5.0, sync_time_s=1.0, steps=4)
    sc = Scenario(pipeline=cfg, durations=TraceDurations.from_values(vals), pool_size=len(vals))
    fast, *_ = same_traces(sc, EAGER, TICK)
    assert fast is not None and fast.episodes[0].end_s == at


def test_a_pool_array_is_read_in_place_with_the_same_trace() -> None:
    """The engine reads an array pool through a view (no list of a float object per task): the
    same trace as the pool as a list, from a strided array too, and a pool that runs out says so."""
    from pipesim import AbortRestart, AsyncRatio

    cfg = PipelineConfig(n_slots=8, batch_size=4, train_time_s=2.0, sync_time_s=1.0, steps=20)
    sc = Scenario(pipeline=cfg, admission=AsyncRatio(2.0), weight_update=AbortRestart(restart=False))
    sc = sc.with_(pool_size=50 * sc.default_pool_size)
    pool = draw_pool(sc)
    strided = np.repeat(pool, 2)[::2]  # not contiguous: the engine takes a contiguous copy
    listed, viewed, from_strided = Pipeline(sc, pool.tolist()), Pipeline(sc, pool), Pipeline(sc, strided)
    for p in (listed, viewed, from_strided):
        p.run()
    assert not isinstance(viewed._durations, list)
    key = [(e.id, e.task_id, e.start_s, e.end_s, e.status) for e in listed.episodes]
    assert key == [(e.id, e.task_id, e.start_s, e.end_s, e.status) for e in viewed.episodes]
    assert key == [(e.id, e.task_id, e.start_s, e.end_s, e.status) for e in from_strided.episodes]
    assert all(type(e.duration_s) is float for e in viewed.episodes)  # Python floats, as from a list
    with pytest.raises(PipelineError, match="pool"):  # a pool that runs out still says so
        Pipeline(sc, pool[:100]).run()
