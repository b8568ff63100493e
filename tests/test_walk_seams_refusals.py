"""The seams (:mod:`pipesim.core.seams`) refuse a wrong object when the pipeline is built, and the
kernel refuses a source's re-costing that would break its own records.

Found by an extender's walkthrough: ``Pipeline(..., source=object())`` (or ``observer``,
``trainer``, an ``engine_factory`` answering None) failed with an AttributeError from inside the
kernel, some at the first training step; an ``EpisodeSource.publish`` that shrank an episode below
the seconds it had generated was accepted and the run failed ``check_invariants`` afterwards, and
one naming an episode not in flight was silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest

import pipesim
from pipesim import PartialRollout, PipelineConfig, Scenario
from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.workload import TokenWorkload
from pipesim.core.engine import Pipeline
from pipesim.core.episode import Episode
from pipesim.core.errors import FieldError, PipelineError
from pipesim.core.slots import Slots
from pipesim.results.run import RunResult
from pipesim.testing import check_invariants
from tests.test_refusals_core import check_refusal

SC = Scenario(
    pipeline=PipelineConfig(
        n_slots=8, batch_size=4, steps=4, max_staleness=1, train_time_s=3.0, sync_time_s=0.5
    ),
    weight_update=PartialRollout(),  # episodes in flight at every sync: publish is handed them
)


class Source:
    """Ten seconds of work an episode; ``recost(generated)`` re-costs each one handed at a sync."""

    def __init__(self, recost: Callable[[float], float] | None = None) -> None:
        self.recost = recost
        self.handed: list[tuple[int, float]] = []

    def work_s(self, episode_id: int, task: int, version: int, parent: int) -> float:
        return 10.0

    def publish(self, version: int, running: Sequence[tuple[Episode, float]]) -> Any:
        self.handed += [(ep.id, g) for ep, g in running]
        recost = self.recost
        return {} if recost is None else {ep.id: recost(g) for ep, g in running if g > 0}


class Observer:
    def on_batch(self, step: int, version: int, batch: list[Episode], now_s: float) -> None:
        pass


class Trainer:
    def train_time_s(self, step: int, batch: list[Episode]) -> float:
        return 3.0


def _build(**kw: Any) -> Pipeline:
    return Pipeline(SC, pipesim.draw_pool(SC).tolist(), **kw)


BUILD: list[tuple[str, Callable[[], Any], str]] = [
    ("source-object", lambda: _build(source=object()), "source"),
    ("source-class", lambda: _build(source=Source), "source"),
    ("source-trainer", lambda: _build(source=Trainer()), "source"),
    ("observer-object", lambda: _build(observer=object()), "observer"),
    ("observer-source", lambda: _build(observer=Source()), "observer"),
    ("trainer-object", lambda: _build(trainer=object()), "trainer"),
    ("trainer-number", lambda: _build(trainer=3.0), "trainer"),
    ("factory-none", lambda: _build(engine_factory=lambda p, n, i: None), "engine_factory"),
    ("factory-object", lambda: _build(engine_factory=lambda p, n, i: object()), "engine_factory"),
    ("factory-not-callable", lambda: _build(engine_factory=Slots(_build(), 4, 0)), "engine_factory"),
]


@pytest.mark.parametrize(("call", "field"), [pytest.param(c, f, id=i) for i, c, f in BUILD])
def test_a_wrong_seam_is_refused_when_the_pipeline_is_built(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)  # the constructor raises: nothing has run


def test_right_seams_still_build_and_run() -> None:
    p = _build(source=Source(), observer=Observer(), trainer=Trainer(), engine_factory=Slots)
    p.run()
    assert p.version == SC.pipeline.steps


def test_run_compute_refuses_an_observer_that_is_not_one() -> None:
    engine = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"])
    cluster = Cluster(engine=engine, n_gpus=2, trainer_gpus=1)
    wl = TokenWorkload(prompt=16, max_response_tokens=64)
    sc = Scenario(pipeline=PipelineConfig(batch_size=4, steps=2))
    bad: Any = object()
    check_refusal(lambda: run_compute(sc, cluster, wl, observer=bad), FieldError, "observer")


def _refused(source: Any) -> str:
    with pytest.raises(PipelineError) as info:
        _build(source=source).run()
    msg = str(info.value)
    assert type(source).__name__ in msg, msg
    return msg


@pytest.mark.parametrize("shrink", [lambda g: g / 2, lambda g: 0.0])
def test_publish_may_not_shrink_an_episode_below_what_it_generated(shrink: Callable[[float], float]) -> None:
    src = Source(shrink)
    msg = _refused(src)
    first = next(i for i, g in src.handed if g > 0)  # the first one re-costed is the one named
    assert re.search(rf"\b{first}\b", msg), (first, msg)


def test_publish_may_end_an_episode_at_what_it_generated() -> None:
    src = Source(lambda g: g)  # a total equal to the seconds generated ends the episode now
    p = _build(source=src)
    p.run()
    assert any(g > 0 for _, g in src.handed)
    check_invariants(RunResult(SC, p.env.now, p.episodes, p.updates, p.train_log, p.sync_log))


class Stranger(Source):
    def publish(self, version: int, running: Sequence[tuple[Episode, float]]) -> Any:
        return {987654: 5.0}


class Nothing(Source):
    def publish(self, version: int, running: Sequence[tuple[Episode, float]]) -> Any:
        return None


def test_publish_may_not_name_an_episode_not_in_flight() -> None:
    assert re.search(r"\b987654\b", _refused(Stranger()))


def test_publish_must_answer_a_dict_not_none() -> None:
    _refused(Nothing())  # the Protocol says a dict ({} for no change), not None
