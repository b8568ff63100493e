"""Response lengths, length trajectories, the token source and the catalogs' lookups refuse a bad
field with a :class:`FieldError` naming it (issue 40 item 1: these sites raised a plain
``ValueError`` with no field). Rows: id, call, ``err.field``; never the sentence."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipesim.compute import GPUS, MODELS, EngineConfig
from pipesim.compute.catalog import model
from pipesim.compute.closedloop import ClosedLoop
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


def test_the_lookups_still_take_every_catalogued_name() -> None:
    """The refusals above are refusals of unknown names only: every catalogued name resolves."""
    assert all(gpu(name) is GPUS[name] for name in GPUS)
    assert all(model(name) is MODELS[name] for name in MODELS)
    assert isinstance(
        ClosedLoop(EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"]), TokenWorkload(), 4),
        ClosedLoop,
    )
