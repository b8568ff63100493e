"""The compute-grounded configs refuse a bad field with a :class:`FieldError` naming it, through
the shared checks (``check_int`` / ``check_number``). Rows: id, call, ``err.field``; never the
sentence. A real that is not a Python number is refused (its float is taken:
``tests/test_core_bad_input.py``); an integer field refuses a numpy integer, a float and a bool."""

from __future__ import annotations

import decimal
import fractions
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from pipesim import PipelineConfig, Scenario
from pipesim.compute import GPUS, MODELS
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.cost import EngineConfig
from pipesim.compute.overrides import check_overridden
from pipesim.compute.workload import AgentTurns, EmpiricalLengths, LogNormalLengths, TokenWorkload
from pipesim.core.validate import FieldError
from pipesim.policies.replicas import Replicas
from pipesim.workload.durations import ExponentialDurations
from tests.test_refusals_core import check_refusal

H100, QWEN = GPUS["h100-sxm"], MODELS["qwen3-0.6b"]


def _cluster(**kw: Any) -> Cluster:
    return Cluster(engine=EngineConfig(model=QWEN, gpu=H100), **{"n_gpus": 2, "trainer_gpus": 1, **kw})


INTS: list[tuple[str, Callable[[Any], Any]]] = [  # an integer field, and how to build with it
    ("prompt", lambda x: TokenWorkload(prompt=x)),
    ("max_response_tokens", lambda x: TokenWorkload(max_response_tokens=x)),
    ("turns", lambda x: AgentTurns(turns=x)),
    ("observation_tokens", lambda x: AgentTurns(observation_tokens=x)),
    ("tokens[1]", lambda x: EmpiricalLengths((5, x))),
    ("n_gpus", lambda x: _cluster(n_gpus=x)),
]

REALS: list[tuple[str, Callable[[Any], Any]]] = [  # a float field, and how to build with it
    ("median_tokens", lambda x: LogNormalLengths(x)),
    ("tool_latency_s", lambda x: AgentTurns(tool_latency_s=x)),
]

ROWS: list[tuple[str, Callable[[], Any], str]] = [
    (f"{field}-{type(v).__name__}", (lambda make=make, v=v: make(v)), field)
    for field, make in INTS
    for v in (np.int64(100), 100.0, True)
]
ROWS += [
    (f"{field}-{type(v).__name__}", (lambda make=make, v=v: make(v)), field)
    for field, make in REALS
    for v in (np.float32(2.0), fractions.Fraction(3, 2), decimal.Decimal("2.5"))
]
ROWS += [  # a scenario field the compute engine would ignore (run_compute's check)
    (
        f"ignored-{name}",
        (lambda sc=sc, colocated=colocated, seed=seed: check_overridden(sc, colocated, seed)),
        field,
    )
    for name, sc, colocated, seed, field in (
        ("n_slots", Scenario(pipeline=PipelineConfig(n_slots=8)), True, None, "pipeline.n_slots"),
        (
            "train_time_s",
            Scenario(pipeline=PipelineConfig(train_time_s=1.0)),
            True,
            None,
            "pipeline.train_time_s",
        ),
        (
            "sync_time_s",
            Scenario(pipeline=PipelineConfig(sync_time_s=1.0)),
            True,
            None,
            "pipeline.sync_time_s",
        ),
        ("colocated", Scenario(pipeline=PipelineConfig(colocated=True)), False, None, "pipeline.colocated"),
        ("replicas", Scenario(replicas=Replicas(2)), True, None, "replicas"),
        ("durations", Scenario(durations=ExponentialDurations()), True, None, "durations"),
        ("seed", Scenario(seed=3), True, 4, "seed"),
    )
]
ROWS += [
    ("lognormal-sigma", lambda: LogNormalLengths(100, sigma=-1), "sigma"),
    ("engine-max-num-seqs", lambda: EngineConfig(model=QWEN, gpu=H100, max_num_seqs=10**9), "max_num_seqs"),
    (
        "run-slots-per-replica",
        lambda: run_compute(
            Scenario(pipeline=PipelineConfig(batch_size=4, steps=2)),
            _cluster(),
            TokenWorkload(prompt=16, max_response_tokens=64),
            slots_per_replica=10**9,
        ),
        "slots_per_replica",
    ),
]


@pytest.mark.parametrize(("call", "field"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_a_compute_config_names_the_field_it_refuses(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)
