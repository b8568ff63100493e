"""The controller pass starts new tasks inline; :meth:`Pipeline.launch` is the general way.

The inline start is an optimisation of the one admission loop (see ``Pipeline._controller_pass``),
so it must be invisible: for every scenario, forcing every start through ``launch`` gives the same
episodes, with the same slots, times, versions and fates, the same training steps and syncs, or
the same error.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings

from pipesim import Drain, Episode, PartialRollout, PipelineConfig, PipelineError, Scenario
from pipesim.api import draw_pool
from pipesim.engine import Pipeline
from pipesim.replicas import LeastLoaded, PerReplicaSync, Replicas
from pipesim.slots import Slots
from pipesim.strategies import policy_scenarios
from pipesim.updates import SyncEveryK


class ThroughLaunch(Pipeline):
    """A pipeline that starts every episode through ``launch`` (overriding it turns the inline path off)."""

    launches = 0

    def launch(self, engine: Slots, task: int | None = None, parent: int = -1) -> Episode:
        self.launches += 1
        return super().launch(engine, task, parent)


def trace(cls: type[Pipeline], sc: Scenario) -> tuple[Pipeline | None, Any]:
    p = cls(sc, draw_pool(sc).tolist())
    try:
        p.run()
    except PipelineError as exc:
        return None, str(exc)
    episodes = [
        (e.id, e.task_id, e.parent, e.slot, e.replica, e.start_s, e.end_s, e.version, e.status, e.work_s)
        + (e.update_from, e.update_to, e.trained_step, e.lost_s)
        for e in p.episodes
    ]
    return p, (p.env.now, episodes, p.train_log, p.sync_log, p.updates, p.n_dropped)


@settings(max_examples=60)
@given(policy_scenarios())
def test_inline_starts_equal_starts_through_launch(sc: Scenario) -> None:
    fast, a = trace(Pipeline, sc)
    slow, b = trace(ThroughLaunch, sc)
    assert a == b
    if fast is not None and slow is not None:
        assert isinstance(slow, ThroughLaunch) and not slow._inline_launch
        assert slow.launches == len(slow.episodes)  # really every start went through launch


CFG = PipelineConfig(n_slots=12, batch_size=8, train_time_s=30.0, sync_time_s=5.0, max_staleness=2, steps=6)


@pytest.mark.parametrize(
    "sc",
    [
        Scenario(pipeline=CFG),
        Scenario(pipeline=CFG, weight_update=Drain()),
        # the trainer's version runs ahead of the engine's between real syncs
        Scenario(pipeline=CFG, weight_update=SyncEveryK(2, PartialRollout())),
        # replicas on different versions, routed by load
        Scenario(pipeline=CFG, weight_update=PerReplicaSync(), replicas=Replicas(3, LeastLoaded())),
    ],
    ids=["partial", "drain", "sync-every-2", "per-replica-sync"],
)
def test_inline_starts_equal_starts_through_launch_on_fixed_designs(sc: Scenario) -> None:
    fast, a = trace(Pipeline, sc)
    slow, b = trace(ThroughLaunch, sc)
    assert fast is not None and fast._inline_launch
    assert a == b


def test_a_plain_scenario_starts_its_episodes_inline() -> None:
    """The equivalence above compares something: plain scenarios do take the inline path."""
    p = Pipeline(Scenario(), draw_pool(Scenario()).tolist())
    assert p._inline_launch
