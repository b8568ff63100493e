"""Golden tests: the chapter's pipeline numbers, reproduced exactly by the SimPy engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pipesim import (
    Drain,
    PartialRollout,
    PipelineConfig,
    Scenario,
    agent_episode_durations,
    run,
    simulate_pipeline,
)
from pipesim.workload.durations import straggler_ratios

EXPECTED_PATH = Path(__file__).resolve().parents[2] / "shared" / "reference" / "chapter13_expected.json"
FALLBACK = Path(__file__).with_name("data") / "chapter13_expected.json"


@pytest.fixture(scope="module")
def expected() -> dict:
    path = EXPECTED_PATH if EXPECTED_PATH.exists() else FALLBACK
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def durations() -> torch.Tensor:
    return agent_episode_durations(65_536, torch.Generator().manual_seed(0))


def close(actual: float, target: float) -> bool:
    """Equal to the digits the JSON prints (half a unit in its last decimal place)."""
    text = repr(float(target))
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(actual - target) <= 0.5 * 10.0**-decimals + 1e-9


def test_duration_statistics(durations: torch.Tensor, expected: dict) -> None:
    e = expected["durations_seed0_n65536"]
    q = durations.quantile(torch.tensor([0.5, 0.9, 0.99]))
    assert close(durations.mean().item(), e["mean"])
    assert close(q[0].item(), e["median"])
    assert close(q[1].item(), e["p90"])
    assert close(q[2].item(), e["p99"])
    assert close(durations.max().item(), e["max"])
    for got, want in zip(durations[:5].tolist(), e["first5"]):
        assert close(got, want)


def test_straggler_ratios(durations: torch.Tensor, expected: dict) -> None:
    ratios = straggler_ratios(durations)
    for b, want in expected["straggler"].items():
        assert close(ratios[int(b)], want)


@pytest.mark.parametrize(
    "name",
    [
        "synchronous",
        "one step ahead, drain",
        "async eta=1, partial",
        "async eta=2, partial",
        "async eta=4, drain",
    ],
)
def test_designs(name: str, durations: torch.Tensor, expected: dict) -> None:
    design = expected["designs"][name]
    c = design["config"]
    r = simulate_pipeline(
        durations,
        c["n_slots"],
        c["batch_size"],
        c["train_time"],
        c["sync_time"],
        max_staleness=c["max_staleness"],
        interrupt=c.get("interrupt", True),
        steps=c["steps"],
    )
    for key, want in design["result"].items():
        got = r[key]
        if key == "staleness_max":
            assert got == want, key
        else:
            assert close(got, want), (key, got, want)


def test_sync_sweep(durations: torch.Tensor, expected: dict) -> None:
    for sync_time, row in expected["sync_sweep"].items():
        for name, eta in [("synchronous", 0), ("async eta=2, partial", 2)]:
            r = simulate_pipeline(durations, 64, 64, 60.0, float(sync_time), max_staleness=eta, steps=20)
            assert close(r["throughput"], row[name]), (sync_time, name, r["throughput"])


def test_timeout_at_p95(durations: torch.Tensor, expected: dict) -> None:
    e = expected["timeout_p95"]
    cap = durations.quantile(0.95).item()
    assert close(cap, e["cap"])
    r = simulate_pipeline(durations.clamp(max=cap), 64, 64, 60.0, 10.0, max_staleness=0, steps=20)
    for key, want in e["timeout"].items():
        assert close(r[key], want), (key, r[key], want)
    assert close((durations > cap).float().mean().item(), e["truncated_share"])


@pytest.mark.parametrize("eta, interrupt", [(0, True), (1, False), (2, True), (4, False)])
def test_simulate_pipeline_reports_exactly_the_summary_values(eta: int, interrupt: bool) -> None:
    """simulate_pipeline computes its four metrics without the full summary: the same floats."""
    from pipesim.io.api import _chapter_metrics

    cfg = PipelineConfig(
        n_slots=16, batch_size=16, train_time_s=60.0, sync_time_s=10.0, max_staleness=eta, steps=6
    )
    sc = Scenario(pipeline=cfg, weight_update=PartialRollout() if interrupt else Drain(), seed=eta)
    r = run(sc)
    full, four = r.summary(), _chapter_metrics(r)
    assert four == {k: full[k] for k in four}
