"""scenarios.published: one row per published claim, the JSON schema, the trend check, the global
efficiency constants, each claim's setup, the package's modules under 400 lines, and a smoke run
of the smallest claim (APRIL's 8 GPUs). The full table is slow-marked (about two minutes)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import math
import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest

from pipesim.compute import DEFAULT_EFFICIENCY, GPUS, MODELS, EngineConfig, TrainerConfig
from scenarios import published

KEYS = {"claim", "system", "source", "unit", "published", "predicted"}

# The claims of shared/reference/published_claims.md, each a row: verl's five step times and its
# 2.35x headline, AReaL's 2.77x (with its two hours) and its trend, APRIL's +22.5%, ROLL's 2.24x.
PUBLISHED = {
    ("verl", 356.30),
    ("verl", 231.34),
    ("verl", 150.63),
    ("verl", 365.28),
    ("verl", 189.26),
    ("verl", 2.35),
    ("AReaL", 41.0),
    ("AReaL", 14.8),
    ("AReaL", 2.77),
    ("AReaL", 1.0),  # the trend: throughput does not fall as eta grows
    ("APRIL", 22.5),
    ("ROLL", 2.24),
}


@pytest.fixture
def fresh_runs():
    for f in published.RUNS:
        f.cache_clear()
    yield
    for f in published.RUNS:
        f.cache_clear()


def _fake_measured(scenario: Any) -> published.Measured:
    steps = scenario.pipeline.steps
    ends = tuple(100.0 * (i + 1) for i in range(steps))
    return published.Measured(
        steps=steps,
        warmup=1,
        ends=ends,
        train_s=(40.0,) * steps,
        sync_s=1.0,
        syncs=steps,
        tokens_trained=1e6,
        wall_s=0.0,
    )


@pytest.fixture
def recorded(monkeypatch, fresh_runs):
    """Every run the claims ask for, recorded instead of simulated (a fixed fake result)."""
    calls: list[tuple[Any, Any, Any, Any]] = []

    def fake(scenario, cluster, workload, trainer, warmup, seed=0):
        calls.append((scenario, cluster, workload, trainer))
        return _fake_measured(scenario)

    monkeypatch.setattr(published.common, "measure", fake)  # every system module calls common.measure
    rows = published.predict()
    return calls, rows


def test_one_row_per_claim(recorded):
    _, rows = recorded
    assert len(rows) == len(published.CLAIMS) == len(PUBLISHED)
    assert {(r["system"], r["published"]) for r in rows} == PUBLISHED
    assert len({r["claim"] for r in rows}) == len(rows)


def test_json_schema(recorded, tmp_path: Path):
    _, rows = recorded
    path = tmp_path / "rows.json"
    published.write_json(rows, str(path))
    data = json.loads(path.read_text())
    assert isinstance(data, list) and len(data) == len(published.CLAIMS)
    for row in data:
        assert set(row) == KEYS
        assert all(isinstance(row[k], str) and row[k] for k in ("claim", "system", "source", "unit"))
        assert isinstance(row["published"], float) and isinstance(row["predicted"], float)
        assert math.isfinite(row["predicted"])


def test_trend_row_and_rule():
    trend = [c for c in published.CLAIMS if c.unit.startswith("trend")]
    assert len(trend) == 1 and trend[0].published == 1.0 and trend[0].system == "AReaL"
    assert list(published.AREAL_TREND_ETAS) == sorted(published.AREAL_TREND_ETAS)
    assert published.AREAL_TREND_ETAS[0] == 0 and len(published.AREAL_TREND_ETAS) >= 3
    assert published.does_not_fall([1.0, 2.0, 2.0, 3.0])
    assert published.does_not_fall([1.0, 0.99, 1.5])  # a dip inside the 2% tolerance
    assert not published.does_not_fall([1.0, 2.0, 1.5])
    assert not published.does_not_fall([3.0, 2.0, 1.0], tolerance=0.0)


def test_trend_claim_checks_every_eta(recorded, monkeypatch):
    calls, _ = recorded
    etas = sorted({sc.pipeline.max_staleness for sc, *_ in calls if sc.name == "AReaL"})
    assert etas == sorted(published.AREAL_TREND_ETAS)
    # a throughput that falls with eta fails the trend row
    published.areal_run.cache_clear()
    falling = {eta: 100.0 * (1 + eta) for eta in published.AREAL_TREND_ETAS}
    monkeypatch.setattr(
        published.areal, "areal_run", lambda eta, steps=8: dataclasses.replace(_dummy(falling[eta]))
    )
    assert published._areal_trend() == 0.0
    rising = {eta: 100.0 / (1 + eta) for eta in published.AREAL_TREND_ETAS}
    monkeypatch.setattr(published.areal, "areal_run", lambda eta, steps=8: _dummy(rising[eta]))
    assert published._areal_trend() == 1.0


def _dummy(step_s: float) -> published.Measured:
    return published.Measured(
        steps=3, warmup=1, ends=(step_s, 2 * step_s, 3 * step_s), train_s=(1.0,) * 3, sync_s=0.0,
        syncs=0, tokens_trained=0.0, wall_s=0.0,
    )  # fmt: skip


def test_no_scenario_overrides_the_efficiency_constants(recorded):
    calls, _ = recorded
    defaults = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"])
    trainer_defaults = TrainerConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], n_gpus=1)
    assert calls
    for _, cluster, _, trainer in calls:
        eng = cluster.engine
        assert eng.efficiency == DEFAULT_EFFICIENCY
        assert eng.iteration_overhead_s == defaults.iteration_overhead_s
        assert eng.allreduce_latency_s == defaults.allreduce_latency_s
        assert trainer is not None
        assert trainer.mfu == trainer_defaults.mfu  # None: the profile's efficiencies (issue 41)
        assert trainer.step_overhead_s == trainer_defaults.step_overhead_s
        assert trainer.optimizer_bytes_per_param == trainer_defaults.optimizer_bytes_per_param
    # and the source never names one (a per-claim constant would have to be written there)
    modules = [
        importlib.import_module(f"scenarios.published.{m.name}")
        for m in pkgutil.iter_modules(published.__path__)
        if m.name != "__main__"  # importing it runs the command line
    ]
    src = "\n".join(inspect.getsource(m) for m in [published, *modules])
    assert {"common", "verl", "areal", "april", "roll", "claims", "table"} <= {
        m.__name__.split(".")[-1] for m in modules
    }
    for name in ("mfu=", "efficiency=", "Efficiency(", "iteration_overhead_s=", "allreduce_latency_s=",
                 "step_overhead_s=", "sync_time_s=", "flop_fraction", "bandwidth_fraction"):  # fmt: skip
        assert name not in src, name


def test_each_claims_setup(recorded):
    """The stated setups reach the runs: GPUs, placement, batch, group size, caps, knobs."""
    calls, _ = recorded
    by = {}
    for sc, cl, wl, tr in calls:
        by.setdefault(sc.name, []).append((sc, cl, wl, tr))
    verl = by["verl colocate 128"][0]
    assert verl[1].n_gpus == 128 and verl[1].colocated and verl[1].engine.gpu.name == GPUS["h20"].name
    assert verl[0].pipeline.batch_size == 512 * 16 and verl[2].max_response_tokens == 28 * 1024
    assert verl[3].recompute_old_logp
    fa = [c for c in by["verl fully async"] if c[1].n_gpus == 128]
    assert {c[1].trainer_gpus for c in fa} == {64} and {c[0].pipeline.batch_size for c in fa} == {4 * 32 * 16}
    assert all(not c[3].recompute_old_logp for c in fa)
    areal = by["AReaL"]
    assert {c[1].n_gpus for c in areal} == {128}
    # the synchronous run's 64:64 allocation, the asynchronous 96:32 (and the eta sweep on it)
    assert {(c[0].pipeline.max_staleness, c[1].trainer_gpus) for c in areal} == {(0, 64)} | {
        (eta, 32) for eta in published.AREAL_TREND_ETAS
    }
    assert {c[2].samples_per_prompt for c in areal} == {16}
    april = by["APRIL"][0]
    assert april[1].n_gpus == 8 and april[1].colocated and april[0].pipeline.batch_size == 256
    assert april[1].engine.tp == 2 and april[2].max_response_tokens == 16384
    assert april[0].batching.samples_per_group == 8  # 32 whole groups of 8 (--n-samples-per-prompt)
    # ROLL: the guide's RLVR example (64 x 8, 8K responses, ratio 1, 16 of 24 GPUs train) on 128 GPUs
    roll_async, roll_sync = by["ROLL"][0], by["ROLL sync"][0]
    assert roll_async[1].n_gpus == roll_sync[1].n_gpus == 128 and roll_sync[1].colocated
    assert roll_async[1].trainer_gpus == 85 and roll_async[0].pipeline.batch_size == 64 * 8
    assert roll_async[2].max_response_tokens == 8192 and roll_async[2].samples_per_prompt == 8
    assert roll_async[0].admission.ratio == 1
    # whole prompt groups where the system's trainer takes them (verl's RolloutSample, AReaL's
    # RLVRWorkflow, ROLL's GroupQueue, APRIL's generate_rollout_async)
    assert {c[0].batching.samples_per_group for c in fa} == {16}
    assert {c[0].batching.samples_per_group for c in areal} == {16}
    assert roll_async[0].batching.samples_per_group == 8
    # one length profile per kind of model, never per claim
    profiles = {wl.response.sigma for *_, wl, _ in calls}
    assert profiles <= {published.ZERO_RL.sigma, published.LONG_COT.sigma}


def test_extrapolation():
    m = _dummy(10.0)
    assert m.steady_step_s == pytest.approx(10.0)
    assert m.total_s(100) == pytest.approx(1000.0)
    m = dataclasses.replace(m, ends=(30.0, 40.0, 50.0))  # a slow first step, then 10 s steps
    assert m.steady_step_s == pytest.approx(10.0)
    assert m.total_s(100) == pytest.approx(30.0 + 99 * 10.0)


def test_smoke_april(fresh_runs):
    """The smallest claim, simulated: APRIL against slime's synchronous loop on 8 GPUs."""
    claim = next(c for c in published.CLAIMS if c.system == "APRIL")
    rows = published.predict((claim,))
    assert len(rows) == 1 and math.isfinite(rows[0]["predicted"])
    base, april = published.april_run(False), published.april_run(True)
    assert base.steps == april.steps == 8
    assert published.rollout_throughput(april) > published.rollout_throughput(base)
    assert re.search(r"APRIL", published.table(rows))


@pytest.mark.slow
def test_full_table(tmp_path: Path, fresh_runs):
    path = tmp_path / "published.json"
    assert published.main(["--json", str(path)]) == 0
    data = json.loads(path.read_text())
    assert {(r["system"], r["published"]) for r in data} == PUBLISHED
    # the trend row is the rule applied to the runs it names (whether it holds is the README's to say)
    trend = next(r for r in data if r["unit"].startswith("trend"))
    runs = [published.areal_throughput(published.areal_run(eta)) for eta in published.AREAL_TREND_ETAS]
    assert trend["predicted"] == (1.0 if published.does_not_fall(runs) else 0.0)
    assert all(math.isfinite(r["predicted"]) for r in data)
    assert all(r["predicted"] > 0 for r in data if r is not trend)


def test_package_modules_are_short_and_the_module_runs() -> None:
    """The package replaced a 707-line module: each file stays under 400 lines, and
    ``python -m scenarios.published`` still resolves to its command line."""
    root = Path(published.__file__).parent
    sizes = {f.name: len(f.read_text().splitlines()) for f in root.glob("*.py")}
    assert "__main__.py" in sizes and all(n < 400 for n in sizes.values()), sizes
    assert "scenarios.published.table" in (root / "__main__.py").read_text()
    assert published.main is published.table.__globals__["main"]
