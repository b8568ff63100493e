"""``run_compute(options=...)``: a compute run with every shortcut off (``EngineOptions.plain()``)
is the same run as the default one, as a slot run's ``Pipeline(options=...)`` promises.

The designs cover what the shortcut acts on: a batch policy with ``min_items`` (whole groups with
a filter), a weight update that aborts (``Drain``) or keeps going (``PartialRollout``), colocated
and disaggregated placement, and a multi-turn workload whose tool calls leave the GPU."""

from __future__ import annotations

import math
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import pytest

import pipesim
from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.workload import AgentTurns, LogNormalLengths, TokenWorkload
from pipesim.core.seams import EngineOptions
from pipesim.core.validate import FieldError
from pipesim.policies.base import OldestFinishedFirst
from pipesim.policies.groups import WholeGroups
from pipesim.testing.promises import EPISODE_COLUMNS

ENGINE = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096)
WORK = TokenWorkload(
    response=LogNormalLengths(400.0, 0.8), prompt=256, samples_per_prompt=4, max_response_tokens=2048
)
AGENT = TokenWorkload(
    response=LogNormalLengths(200.0, 0.6),
    prompt=256,
    samples_per_prompt=4,
    max_response_tokens=1024,
    agent=AgentTurns(turns=3, tool_latency_s=2.0, observation_tokens=128),
)


def _scenario(staleness: int, **policies: Any) -> pipesim.Scenario:
    return pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=32, steps=3, max_staleness=staleness), **policies
    )


DESIGNS: dict[str, tuple[pipesim.Scenario, int, TokenWorkload, dict[str, Any]]] = {
    "colocated sync": (_scenario(0), 0, WORK, {}),
    "split partial": (_scenario(1, weight_update=pipesim.PartialRollout()), 2, WORK, {}),
    "split drain": (_scenario(1, weight_update=pipesim.Drain()), 2, WORK, {}),
    "groups filtered": (
        _scenario(1, weight_update=pipesim.PartialRollout()),
        2,
        WORK,
        {"groups": WholeGroups(4, filter_rate=0.25)},
    ),
    "agent turns": (_scenario(1, weight_update=pipesim.PartialRollout()), 2, AGENT, {}),
}


def _trace(run: Any) -> tuple[Any, ...]:
    """The run's event trace (as ``pipesim.testing.promises.run_trace`` reads a slot run's) and
    its summary, NaN read as equal to NaN."""
    r = run.result
    read = attrgetter(*EPISODE_COLUMNS)
    summary = {k: ("nan" if isinstance(v, float) and math.isnan(v) else v) for k, v in run.summary().items()}
    return (r.sim_time_s, [read(e) for e in r.episodes], r.train_log, r.sync_log, r.updates, summary)


@pytest.mark.parametrize("name", list(DESIGNS))
def test_a_compute_run_with_every_shortcut_off_is_the_same_run(name: str) -> None:
    scen, trainer_gpus, work, extra = DESIGNS[name]
    cluster = Cluster(engine=ENGINE, n_gpus=4, trainer_gpus=trainer_gpus)
    default = run_compute(scen, cluster, work, seed=3, **extra)
    plain = run_compute(scen, cluster, work, seed=3, options=EngineOptions.plain(), **extra)
    a, b = _trace(default), _trace(plain)
    assert len(a[1]) > 0 and a[0] > 0  # the run ran episodes
    assert a[:5] == b[:5], name
    assert a[5] == b[5], {k: (a[5][k], b[5].get(k)) for k in a[5] if a[5][k] != b[5].get(k)}


ASKED: list[int] = []
"""The batches :class:`CountingBatches` was asked for, one entry a call."""


@dataclass(frozen=True)
class CountingBatches(OldestFinishedFirst):
    """The default batch policy, counting its ``select`` calls (its ``min_items`` is a hint)."""

    def select(self, buffer: list[Any], p: Any) -> tuple[list[Any] | None, list[Any]]:
        ASKED.append(len(buffer))
        return super().select(buffer, p)


def test_the_plain_options_reach_the_kernel() -> None:
    """Not a vacuous equality: with the shortcut on the kernel skips ``select`` while the buffer is
    short of ``min_items``; with ``EngineOptions.plain()`` it asks at every pass, and the runs agree."""
    scen = _scenario(1, weight_update=pipesim.PartialRollout(), batching=CountingBatches())
    cluster = Cluster(engine=ENGINE, n_gpus=4, trainer_gpus=2)
    asked = []
    traces = []
    for options in (None, EngineOptions.plain()):
        ASKED.clear()
        traces.append(_trace(run_compute(scen, cluster, WORK, seed=3, options=options)))
        asked.append(list(ASKED))
    assert min(asked[0]) >= 32  # hinted: asked only with a full batch buffered
    assert len(asked[1]) > len(asked[0]) and min(asked[1]) < 32
    assert traces[0] == traces[1]


@pytest.mark.parametrize("bad", [True, "plain", {"hints": False}, EngineOptions])
def test_options_that_are_not_engine_options_are_refused_naming_the_field(bad: Any) -> None:
    cluster = Cluster(engine=ENGINE, n_gpus=4, trainer_gpus=0)
    with pytest.raises(FieldError) as e:
        run_compute(_scenario(0), cluster, WORK, options=bad)
    assert e.value.field == "options"
