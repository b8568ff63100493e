"""Response lengths, length trajectories, the token source, the closed loop, run_compute's context
check and the catalogs' lookups refuse a bad field with a :class:`FieldError` naming it (issue 40
item 1: these sites raised a plain ``ValueError`` with no field; item 2 moved
tests/test_compute_engine.py's message-matching refusals here). Rows: id, call, ``err.field``;
never the sentence."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipesim import PipelineConfig, Scenario
from pipesim.compute import GPUS, MODELS, EngineConfig
from pipesim.compute.catalog import model
from pipesim.compute.closedloop import ClosedLoop
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.gpus import gpu
from pipesim.compute.lengths import LengthSpec
from pipesim.compute.source import TokenSource
from pipesim.compute.trajectory import LengthPoint, LengthTrajectory
from pipesim.compute.workload import AgentTurns, EmpiricalLengths, LogNormalLengths, TokenWorkload
from pipesim.core.validate import FieldError
from tests.test_refusals_core import check_refusal

RNG = np.random.default_rng(0)
POINTS = (LengthPoint(step=0, mean_tokens=500.0), LengthPoint(step=10, mean_tokens=800.0))


class _Broken:
    """A length model whose draws are negative."""

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return -np.ones(n)


class _Constant:
    """A length model that draws ``value`` tokens every time."""

    def __init__(self, value: float) -> None:
        self.value = value

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.value)


SMALL = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], max_model_len=4096, max_num_seqs=16)


def _run_compute(workload: TokenWorkload) -> Any:
    sc = Scenario(pipeline=PipelineConfig(batch_size=8, steps=1))
    return run_compute(sc, Cluster(engine=SMALL, n_gpus=1), workload)


def _closed_loop_run(samples: object) -> Any:
    return ClosedLoop(SMALL, TokenWorkload(max_response_tokens=512), 4).run(samples)  # type: ignore[arg-type]


def _spec(**kw: Any) -> LengthSpec:
    base: dict[str, Any] = dict(name="x", median_tokens=100.0, sigma=0.5, difficulty_sigma=0.1, source="s")
    return LengthSpec(**{**base, **kw})


ROWS: list[tuple[str, Callable[[], Any], str]] = [
    ("empirical-empty", lambda: EmpiricalLengths(()), "tokens"),
    ("workload-response-not-a-model", lambda: TokenWorkload(response=3), "response"),  # type: ignore[arg-type]
    ("workload-response-negative-draws", lambda: TokenWorkload(response=_Broken()), "response"),  # type: ignore[arg-type]
    ("workload-prompt-over-cap", lambda: TokenWorkload(prompt=5000, max_prompt_tokens=4096), "prompt"),
    ("workload-agent-not-turns", lambda: TokenWorkload(agent=3), "agent"),  # type: ignore[arg-type]
    ("workload-trajectory-not-one", lambda: TokenWorkload(trajectory=3), "trajectory"),  # type: ignore[arg-type]
    (
        "workload-trajectory-and-drift",
        lambda: TokenWorkload(trajectory=LengthTrajectory(POINTS), drift_per_version=0.1),
        "trajectory",
    ),
    (
        "workload-trajectory-shape-without-spread",
        lambda: TokenWorkload(
            response=LogNormalLengths(500.0, 0.0),
            trajectory=LengthTrajectory((LengthPoint(step=0, mean_tokens=500.0, clip_share=0.1),)),
        ),
        "trajectory",
    ),
    (
        "workload-outgrows-context",
        lambda: TokenWorkload(max_response_tokens=8192, agent=AgentTurns(turns=4)).check_context(4096),
        "max_response_tokens",
    ),
    ("lengthspec-name", lambda: _spec(name=""), "name"),
    ("lengthspec-source", lambda: _spec(source=""), "source"),
    ("point-p99-below-mean", lambda: LengthPoint(step=0, mean_tokens=500.0, p99_tokens=400.0), "p99_tokens"),
    ("point-clip-share-half", lambda: LengthPoint(step=0, mean_tokens=500.0, clip_share=0.5), "clip_share"),
    (
        "point-p99-and-clip-share",
        lambda: LengthPoint(step=0, mean_tokens=500.0, p99_tokens=900.0, clip_share=0.1),
        "clip_share",
    ),
    ("trajectory-empty", lambda: LengthTrajectory(()), "points"),
    ("trajectory-not-points", lambda: LengthTrajectory((3,)), "points[0]"),  # type: ignore[arg-type]
    ("trajectory-steps-not-increasing", lambda: LengthTrajectory((POINTS[1], POINTS[0])), "points"),
    ("source-workload", lambda: TokenSource(3, RNG), "workload"),  # type: ignore[arg-type]
    ("source-rng", lambda: TokenSource(TokenWorkload(), 3), "rng"),  # type: ignore[arg-type]
    ("closedloop-config", lambda: ClosedLoop(3, TokenWorkload(), 4), "config"),  # type: ignore[arg-type]
    (
        "source-response-past-context",
        lambda: TokenSource(TokenWorkload(max_response_tokens=4000), RNG, 4096),
        "max_response_tokens",
    ),
    ("lognormal-sigma-overflows", lambda: LogNormalLengths(200.0, 100.0), "sigma"),
    # the median or the spread: either overflows the draw, and the spread is the field named
    ("agent-tool_latency_s-overflows", lambda: AgentTurns(tool_latency_s=1e308), "tool_latency_sigma"),
    (
        "agent-tool_latency_sigma-overflows",
        lambda: AgentTurns(tool_latency_sigma=500.0),
        "tool_latency_sigma",
    ),
    ("workload-response-class", lambda: TokenWorkload(response=LogNormalLengths), "response"),  # type: ignore[arg-type]
    *[
        (f"workload-response-draws-{v}", (lambda v=v: TokenWorkload(response=_Constant(v))), "response")  # type: ignore[arg-type]
        for v in (math.inf, math.nan, -5.0)
    ],
    (
        "run-compute-response-past-context",
        lambda: _run_compute(TokenWorkload(max_response_tokens=4000, prompt=512)),
        "max_response_tokens",
    ),
    (  # the turns are why, and the message says so; the cap is the field a user lowers
        "run-compute-agent-turns-past-context",
        lambda: _run_compute(TokenWorkload(max_response_tokens=256, agent=AgentTurns(turns=10**6))),
        "max_response_tokens",
    ),
    ("closedloop-config-none", lambda: ClosedLoop(None, TokenWorkload(), 4), "config"),  # type: ignore[arg-type]
    (
        "closedloop-concurrency-huge",
        lambda: ClosedLoop(SMALL, TokenWorkload(max_response_tokens=512), 10**9),
        "concurrency",
    ),
    (
        "closedloop-seed-negative",
        lambda: ClosedLoop(SMALL, TokenWorkload(max_response_tokens=512), 4, seed=-1),
        "seed",
    ),
    *[
        (f"closedloop-samples-{v}", (lambda v=v: _closed_loop_run(v)), "samples")
        for v in (0, -1, 1.5, 10**30)
    ],
    ("gpu-unknown", lambda: gpu("h1000"), "gpu"),
    ("model-unknown", lambda: model("qwen9-8b"), "model"),
]


@pytest.mark.parametrize(("call", "field"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_length_and_lookup_input_is_refused_naming_the_field(call: Callable[[], Any], field: str) -> None:
    check_refusal(call, FieldError, field)


@pytest.mark.parametrize("kind", ["empirical", "trajectory"])
def test_a_csv_without_the_column_names_the_column_and_the_file(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "lengths.csv"
    path.write_text("something\n1\n")
    load = (
        (lambda: EmpiricalLengths.from_csv(path))
        if kind == "empirical"
        else (lambda: LengthTrajectory.from_csv(path))
    )
    err = check_refusal(load, FieldError, "column")
    assert err.file == str(path)


@pytest.mark.parametrize(
    "text",
    [f"num_decode_tokens,x\n120,a\n{cell},b\n" for cell in ("abc", "nan", "inf", "1e400", "0", "", "12.5")]
    + ["x,num_decode_tokens\n1,5\n2\n"],  # a short line: no cell at all
    ids=["abc", "nan", "inf", "1e400", "0", "empty", "fraction", "short-line"],
)
def test_a_bad_token_count_names_the_column_and_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "lengths.csv"
    path.write_text(text)
    err = check_refusal(lambda: EmpiricalLengths.from_csv(path), FieldError, "column")
    assert err.file == str(path)


def test_a_directory_is_no_lengths_csv(tmp_path: Path) -> None:
    err = check_refusal(lambda: EmpiricalLengths.from_csv(tmp_path), FieldError, "path")
    assert err.file == str(tmp_path)


def test_the_lookups_still_take_every_catalogued_name() -> None:
    """The refusals above are refusals of unknown names only: every catalogued name resolves."""
    assert all(gpu(name) is GPUS[name] for name in GPUS)
    assert all(model(name) is MODELS[name] for name in MODELS)
    assert isinstance(
        ClosedLoop(EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"]), TokenWorkload(), 4),
        ClosedLoop,
    )
