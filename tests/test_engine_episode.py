"""The kernel's plain Python pieces (issue 38 item 1): the episode is a slotted dataclass, and a
policy's per-run state is made fresh per run and goes with the run (no ``policy_state`` on the
pipeline: the pipeline is an ordinary object that takes a weak reference)."""

from __future__ import annotations

import dataclasses
import gc
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim import PartialRollout, PipelineConfig, Scenario
from pipesim.compute.closedloop import ClosedLoop
from pipesim.compute.cost import ReplicaCost
from pipesim.compute.engine import ComputeReplica
from pipesim.compute.workload import AgentTurns, LogNormalLengths, TokenWorkload
from pipesim.core.engine import Pipeline
from pipesim.core.episode import EPISODE_FIELDS, RARE_DEFAULTS, Episode
from pipesim.io.api import draw_pool
from pipesim.policies import groups
from pipesim.policies.groups import WholeGroups
from tests.test_compute_engine import config_with_budget


def test_an_episode_is_a_slotted_dataclass_of_its_fields() -> None:
    """Its dataclass fields are EPISODE_FIELDS (the records' columns), it has slots and no
    ``__dict__``, ``work_s`` starts at ``duration_s``, and two episodes are equal only if they are
    one (the kernel finds and removes episodes in lists by equality)."""
    assert dataclasses.is_dataclass(Episode)
    names = [f.name for f in dataclasses.fields(Episode)]
    assert sorted(names) == sorted(EPISODE_FIELDS) and len(names) == len(EPISODE_FIELDS)
    a, b = Episode(1, 2, 3.5, 0), Episode(1, 2, 3.5, 0)
    assert not hasattr(a, "__dict__") and a.work_s == a.duration_s == 3.5
    assert a != b and a == a and len({a, b}) == 2 and [a].count(b) == 0
    assert {name: getattr(a, name) for name in RARE_DEFAULTS} == RARE_DEFAULTS


def _grouped() -> Scenario:
    cfg = PipelineConfig(batch_size=8, steps=4, max_staleness=1, n_slots=8)
    return Scenario(pipeline=cfg, weight_update=PartialRollout(), batching=WholeGroups(4))


@pytest.mark.parametrize("runs", [1, 3])
def test_a_policys_run_state_is_fresh_per_run_and_goes_with_it(runs: int) -> None:
    """One frozen WholeGroups shared by several runs keeps one state per run, each counting that
    run's groups only; a run's state is freed with its pipeline."""
    gc.collect()
    before = len(groups._STATES)  # runs other tests keep alive (a cached result) hold theirs
    sc = _grouped()
    pipelines = [Pipeline(sc, draw_pool(sc).tolist()) for _ in range(runs)]
    for p in pipelines:
        p.run()
    stats = [sc.batching.stats(p) for p in pipelines]  # type: ignore[attr-defined]
    assert all(s.groups_trained == 4 * 2 for s in stats)  # 4 steps of 2 groups, per run
    assert len(groups._STATES) == before + runs
    del p, pipelines
    gc.collect()
    assert len(groups._STATES) == before


# -- a closed loop keeps no episodes, and loses nothing by it -------------------------------------
class EpisodeRefill:
    """The reference host: a closed loop that starts a kernel-style ``Episode`` per sample on a
    plain :class:`ComputeReplica` (what ``ClosedLoop`` did before ``LoopReplica``), and keeps them."""

    def __init__(self, loop: ClosedLoop, limit: int) -> None:
        self.env, self.source = loop.env, loop.source
        self.updates: list[Any] = []
        self.replica: ComputeReplica | None = None
        self.started, self.limit = 0, limit
        self.episodes: list[Episode] = []

    def start(self) -> None:
        assert self.replica is not None
        i = self.started
        self.source.work_s(i, i, 0, -1)
        ep = Episode(i, i, 0.0, 0)
        self.episodes.append(ep)
        self.replica.start(ep, self.env.now)
        self.started = i + 1

    def on_finished(self, episodes: list[Episode], now: float) -> None:
        for ep in episodes:
            assert ep.end_s == now
            if self.started < self.limit:
                self.start()


@settings(max_examples=12, deadline=None)
@given(
    concurrency=st.integers(1, 24),
    samples=st.integers(1, 120),
    seed=st.integers(0, 2**16),
    agent=st.booleans(),
    kv_policy=st.sampled_from(["preempt", "reserve"]),
)
def test_a_closed_loop_without_episodes_matches_one_with_them(
    concurrency: int, samples: int, seed: int, agent: bool, kv_policy: str
) -> None:
    """``LoopReplica`` (no episodes, its own refill) against a replica fed kernel episodes by a
    Python host: the closed loop builds no ``Episode``, and gives the same tokens per sample,
    simulated time and replica counters, bit for bit; the reference's episodes hold the seconds
    each sample generated."""
    turns = AgentTurns(turns=3, tool_latency_s=0.5, tool_latency_sigma=1.0, observation_tokens=16)
    work = TokenWorkload(
        response=LogNormalLengths(80.0, 0.7),
        prompt=32,
        max_response_tokens=256,
        agent=turns if agent else None,
    )
    cfg = config_with_budget(2500, max_num_seqs=16, kv_policy=kv_policy)
    fast = ClosedLoop(cfg, work, concurrency, seed=seed)
    made = [0]
    init = Episode.__init__

    def counted(self: Episode, *args: Any, **kw: Any) -> None:
        made[0] += 1
        init(self, *args, **kw)

    setattr(Episode, "__init__", counted)  # noqa: B010 (counts the episodes the loop builds)
    try:
        out = fast.run(samples)
    finally:
        setattr(Episode, "__init__", init)  # noqa: B010
    assert made[0] == 0
    slow = ClosedLoop(cfg, work, concurrency, seed=seed)
    host = EpisodeRefill(slow, samples)
    host.replica = ComputeReplica(cast(Any, host), concurrency, 0, ReplicaCost(cfg), slow.source)
    for _ in range(min(concurrency, samples)):
        host.start()
    slow.env.run()
    assert out["samples"] == len(host.episodes) == samples
    assert out["sim_time_s"] == slow.env.now
    assert fast.replica.stats(out["sim_time_s"]) == host.replica.stats(slow.env.now)
    assert fast.source.generated[:samples] == slow.source.generated[:samples]
    for ep in host.episodes:
        assert ep.end_s is not None and ep.duration_s == ep.work_s == ep.end_s - ep.start_s
