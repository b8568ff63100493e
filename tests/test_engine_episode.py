"""The kernel's plain Python pieces (issue 38 item 1): the episode is a slotted dataclass, and a
policy's per-run state is made fresh per run and goes with the run (no ``policy_state`` on the
pipeline: the pipeline is an ordinary object that takes a weak reference)."""

from __future__ import annotations

import dataclasses
import gc

import pytest

from pipesim import PartialRollout, PipelineConfig, Scenario
from pipesim.core.engine import Pipeline
from pipesim.core.episode import EPISODE_FIELDS, RARE_DEFAULTS, Episode
from pipesim.io.api import draw_pool
from pipesim.policies import groups
from pipesim.policies.groups import WholeGroups


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
    sc = _grouped()
    pipelines = [Pipeline(sc, draw_pool(sc).tolist()) for _ in range(runs)]
    for p in pipelines:
        p.run()
    stats = [sc.batching.stats(p) for p in pipelines]  # type: ignore[attr-defined]
    assert all(s.groups_trained == 4 * 2 for s in stats)  # 4 steps of 2 groups, per run
    assert len(groups._STATES) == runs
    del p, pipelines
    gc.collect()
    assert len(groups._STATES) == 0
