"""scenarios.published: one row per published step time and phase, the JSON schema, the trend
check, the global efficiency constants (the transfer's fitted ones only where the fit puts them),
each claim's setup and its registry lengths, the transfer fit recovering the constants of a row the
model generated, the calibration row never scored under transfer, ranges, the worker processes,
the package's modules under 400 lines, and a smoke run of the smallest claim (APRIL's 8 GPUs).
The full table is slow-marked (minutes)."""

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

import numpy as np
import pytest

import pipesim
from pipesim.compute import (
    DEFAULT_EFFICIENCY,
    GPUS,
    LENGTHS,
    MODELS,
    Cluster,
    EngineConfig,
    TrainerConfig,
    length_spec,
)
from pipesim.compute.offload import Offload
from pipesim.compute.profiles import CALIBRATION_ROW, CALIBRATION_SECONDS, profiles
from pipesim.compute.sync import SyncModel
from pipesim.core.validate import FieldError
from scenarios import published
from scenarios.published.april import DIFFICULTIES, SCALES, SIGMAS, offpolicy_sensitivity

KEYS = {
    "claim", "system", "source", "unit", "published", "predicted", "protocol", "phase", "low", "high",
    "calibration",
}  # fmt: skip

# The claims of shared/reference/published_claims.md, each a row: verl's five step times, each
# with its gen and update_actor, and its 2.35x headline, AReaL's 2.77x (with its two hours) and its
# trend, APRIL's +22.5% (as the ratio 1.225), ROLL's 2.24x.
VERL_TABLE = {
    356.30: (177.85, 113.81),
    231.34: (128.47, 98.77),
    150.63: (33.14, 113.16),
    365.28: (150.72, 133.41),
    189.26: (28.46, 156.98),
}
PUBLISHED = {("verl", v) for row in VERL_TABLE.items() for v in (row[0], *row[1])} | {
    ("verl", 2.35),
    ("AReaL", 41.0),
    ("AReaL", 14.8),
    ("AReaL", 2.77),
    ("AReaL", 1.0),  # the trend: throughput grows with eta
    ("APRIL", 1.225),
    ("ROLL", 2.24),
}


# Setup values that differ from a registry entry or an engine default, each stated by its source:
# (scenario name prefix, field). Anything else differing fails the constant checks below.
MODEL_EXCEPTIONS = {
    # recipe/fully_async_policy scripts: override_config.max_position_embeddings=32768
    ("verl", "max_context_len"),
}
ENGINE_EXCEPTIONS = {
    # vllm_rollout_spmd.py's LLM(...) and vllm_async_server.py pass disable_custom_all_reduce=True:
    # NCCL's all-reduce latency (pipesim.compute.allreduce.NCCL_ALLREDUCE_LATENCY_S) in place of 8 us
    ("verl", "disable_custom_all_reduce"),
}


def _fake_measured(scenario: Any, trainer: Any = None) -> published.Measured:
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
        train_tokens=(2e6,) * steps,
        trainer=trainer,
    )


class _Calls(list):  # type: ignore[type-arg]
    """The recorded runs (scenario, cluster, workload, trainer), and each scenario's routing."""

    def __init__(self) -> None:
        super().__init__()
        self.routing: dict[str, Any] = {}


def quick_calibration(monkeypatch) -> None:
    """``pipesim calibrate`` of the transfer's calibration log replaced by fixed fitted values, so
    that :func:`scenarios.published.calpath.transfer_fit` still loads the spec and builds the
    transfer profile from them (:func:`pipesim.calibrate.trainer.fitted_profile`) without the
    calibration's simulations (10 s, the setup's whole cost): the tests using it check which runs
    the claims ask for, not the fit. The real fit is tested in ``tests/test_published_calpath.py``
    (``transfer_fit`` against the direct fit) and through the whole table in ``test_full_table``."""
    from types import SimpleNamespace

    from pipesim.plan.runspec import load
    from scenarios.published import calpath

    values = {"fwd_bwd_efficiency": 0.4321, "sample_s": 0.0123}  # no registry profile's
    monkeypatch.setattr(
        calpath, "_calibrated", lambda spec, log: (load(spec), SimpleNamespace(values=values))
    )


@pytest.fixture
def recorded(monkeypatch, fresh_runs):
    """Every run the claims ask for, recorded instead of simulated (a fixed fake result), with the
    transfer profile from fixed fitted values (:func:`quick_calibration`)."""
    quick_calibration(monkeypatch)
    calls: _Calls = _Calls()

    def fake(scenario, cluster, workload, trainer, warmup, seed=0, routing=None):
        calls.append((scenario, cluster, workload, trainer))
        calls.routing[scenario.name] = routing
        return _fake_measured(scenario, trainer)

    monkeypatch.setattr(published.common, "measure", fake)  # every system module calls common.measure
    rows = published.predict()
    return calls, rows


def test_one_row_per_claim(recorded):
    _, rows = recorded
    stated = [r for r in rows if r["protocol"] == "stated"]
    assert len(stated) == len(published.CLAIMS) == len(PUBLISHED)
    assert {(r["system"], r["published"]) for r in stated} == PUBLISHED
    assert len({r["claim"] for r in stated}) == len(stated)
    # each verl README row scores its step, its gen and its update_actor separately
    verl = {(r["phase"], r["published"]) for r in stated if r["system"] == "verl"}
    for step, (gen, update) in VERL_TABLE.items():
        assert {("step", step), ("gen", gen), ("update_actor", update)} <= verl
    april = next(r for r in stated if r["system"] == "APRIL")
    assert april["unit"] == "x" and april["phase"] == "gain"  # +22.5% scored as its ratio


def test_calibration_row_is_never_scored_under_transfer(recorded):
    _, rows = recorded
    calibration = {c.claim for c in published.CLAIMS if c.calibration}
    # one calibration row: the README row named in docs/published.md, its step and both phases
    assert {c.phase for c in published.CLAIMS if c.calibration} == {"step", "gen", "update_actor"}
    assert all(name.startswith(published.VERL_CALIBRATION) for name in calibration) and len(calibration) == 3
    assert published.VERL_CALIBRATION in (Path(__file__).parents[1] / "docs" / "published.md").read_text()
    transfer = [r for r in rows if r["protocol"] == "transfer"]
    assert transfer and not calibration & {r["claim"] for r in transfer}
    study = {c.claim for c in published.CLAIMS if c.study == published.VERL_STUDY}
    assert {r["claim"] for r in transfer} == study - calibration
    assert {r["system"] for r in transfer} == {"verl"}  # the one study with a phase breakdown
    assert calibration <= {r["claim"] for r in rows if r["protocol"] == "stated"}


def test_json_schema(recorded, tmp_path: Path):
    _, rows = recorded
    path = tmp_path / "rows.json"
    published.write_json(rows, str(path))
    data = json.loads(path.read_text())
    assert isinstance(data, list) and len(data) == len(rows) > len(published.CLAIMS)
    for row in data:
        assert set(row) == KEYS
        assert all(isinstance(row[k], str) and row[k] for k in ("claim", "system", "source", "unit"))
        assert isinstance(row["published"], float) and isinstance(row["predicted"], float)
        assert math.isfinite(row["predicted"])
        assert row["protocol"] in ("stated", "transfer")
        assert row["phase"] in ("step", "gen", "update_actor", "speedup", "gain", "trend")
        assert row["low"] <= row["predicted"] <= row["high"]


def test_trend_row_and_rule():
    trend = [c for c in published.CLAIMS if c.unit.startswith("trend")]
    assert len(trend) == 1 and trend[0].published == 1.0 and trend[0].system == "AReaL"
    assert list(published.AREAL_TREND_ETAS) == sorted(published.AREAL_TREND_ETAS)
    assert published.AREAL_TREND_ETAS[0] == 0 and len(published.AREAL_TREND_ETAS) >= 3
    assert len(set(published.AREAL_TREND_SEEDS)) >= 3  # a paired t interval needs seeds
    assert published.rises([1.0, 2.0, 2.5, 3.0])
    assert not published.rises([1.0, 2.0, 2.0, 3.0])  # flat is not growth
    assert not published.rises([21.9, 44.8, 66.6, 66.4, 77.2])  # a 0.3% dip (the model's eta 2 -> 4)
    assert not published.rises([3.0, 2.0, 1.0])


def test_trend_claim_checks_every_eta(recorded, monkeypatch):
    calls, _ = recorded
    etas = sorted({sc.pipeline.max_staleness for sc, *_ in calls if sc.name == "AReaL"})
    assert etas == sorted(published.AREAL_TREND_ETAS)
    # a throughput that falls with eta fails the trend row, one that rises on every seed passes
    published.areal_run.cache_clear()

    def fake(step: dict[int, float]):
        return lambda eta, steps=8, train_gpus=32, v=published.POINT, sync_runner=False, **kw: _dummy(
            step[eta] * (1 + 0.001 * v.seed)
        )

    falling = {eta: 100.0 * (1 + eta) for eta in published.AREAL_TREND_ETAS}
    monkeypatch.setattr(published.areal, "areal_run", fake(falling))
    assert published._areal_trend() == 0.0
    rising = {eta: 100.0 / (1 + eta) for eta in published.AREAL_TREND_ETAS}
    monkeypatch.setattr(published.areal, "areal_run", fake(rising))
    assert published._areal_trend() == 1.0


def _dummy(step_s: float) -> published.Measured:
    return published.Measured(
        steps=3, warmup=1, ends=(step_s, 2 * step_s, 3 * step_s), train_s=(1.0,) * 3, sync_s=0.0,
        syncs=0, tokens_trained=3e6, wall_s=0.0, train_tokens=(1e6,) * 3,
    )  # fmt: skip


def test_no_scenario_overrides_the_efficiency_constants(recorded):
    calls, rows = recorded
    defaults = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"])
    trainer_defaults = TrainerConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], n_gpus=1)
    fit = published.verl_fit()  # from the fixed fitted values of quick_calibration
    assert fit.profile.fwd_bwd_efficiency == 0.4321  # the transfer profile is the fixture's
    assert calls
    fitted = 0
    for sc, cluster, _, trainer in calls:
        eng = cluster.engine
        # the weight sync's and the offload's models are the defaults (no source states either)
        assert cluster.sync == SyncModel() and cluster.offload == Offload(), sc.name
        # the hardware by value: the registry's GPU, field by field (a replaced peak keeps the name)
        assert eng.gpu == GPUS[eng.gpu.name] and trainer is not None and trainer.gpu == eng.gpu, sc.name
        # the model by value, but for a source-stated field (MODEL_EXCEPTIONS)
        stated = {f for (system, f) in MODEL_EXCEPTIONS if sc.name.startswith(system)}
        reg_model = MODELS[eng.model.name]
        kept = {f: getattr(reg_model, f) for f in stated}
        assert dataclasses.replace(eng.model, **kept) == reg_model and trainer.model == eng.model, sc.name
        # NCCL's all-reduce latency only where the source disables vLLM's custom all-reduce
        if eng.disable_custom_all_reduce:
            assert any(
                sc.name.startswith(s) for s, f in ENGINE_EXCEPTIONS if f == "disable_custom_all_reduce"
            )
        assert eng.efficiency == DEFAULT_EFFICIENCY
        assert eng.iteration_overhead_s == defaults.iteration_overhead_s
        assert eng.allreduce_latency_s == defaults.allreduce_latency_s
        assert trainer is not None
        assert trainer.optimizer_bytes_per_param == trainer_defaults.optimizer_bytes_per_param
        assert trainer.mfu is None and trainer.step_overhead_s == trainer_defaults.step_overhead_s
        if trainer.profile == fit.profile:  # transfer: the profile fitted on the calibration row, verl only
            assert sc.name.startswith("verl")
            fitted += 1
        else:  # stated: a registry profile by name (the default unless the system states its backend),
            # its constants untouched; only the run's layout (tp, pp, ep) is the run's own
            prof = trainer.framework
            reg = profiles()[prof.name]
            assert dataclasses.replace(prof, tp=reg.tp, pp=reg.pp, ep=reg.ep) == reg
            if trainer.profile is None:
                assert prof == trainer_defaults.framework
    assert fitted and any(r["protocol"] == "transfer" for r in rows)
    # and the source never names one (a per-claim constant would have to be written there); the
    # fit module sets the trainer's profile from a TrainerFit and names no number for it
    modules = [
        importlib.import_module(f"scenarios.published.{m.name}")
        for m in pkgutil.iter_modules(published.__path__)
        if m.name != "__main__"  # importing it runs the command line
    ]
    assert {"common", "verl", "areal", "april", "roll", "claims", "table", "fit"} <= {
        m.__name__.split(".")[-1] for m in modules
    }
    src = "\n".join(inspect.getsource(m) for m in [published, *modules] if not m.__name__.endswith(".fit"))
    for name in ("mfu=", "efficiency=", "Efficiency(", "iteration_overhead_s=", "allreduce_latency_s=",
                 "step_overhead_s=", "sync_time_s=", "flop_fraction", "bandwidth_fraction",
                 "bf16_flops_per_s", "hbm_bandwidth_bytes_per_s", "nvlink_bandwidth_bytes_per_s",
                 "network_bandwidth_bytes_per_s", "hbm_bytes=", "fixed_s=", "SyncModel(", "Offload(",
                 "GPUSpec(", "replace(GPUS", "bucket_bytes=", "bucket_latency_s=", "load_efficiency=",
                 "host_link_efficiency=", "trainer_offload", "sleep_level="):  # fmt: skip
        assert name not in src, name
    assert not re.search(r"\b(sync|offload)\s*=", src)  # a Cluster's weight-sync or offload model
    fit_src = inspect.getsource(published.fit)
    assert not re.search(r"\w=\s*-?[\d.]", fit_src)  # no number as a keyword
    assert "mfu=" not in fit_src and "step_overhead_s=" not in fit_src
    assert re.findall(r"\bprofile=(.+?)[,)]?$", fit_src, re.M) == ["None if fit is None else fit.profile"]


def test_each_claims_setup(recorded):
    """The stated setups reach the runs: GPUs, placement, batch, group size, caps, knobs."""
    calls, _ = recorded
    by = {}
    for sc, cl, wl, tr in calls:
        by.setdefault(sc.name, []).append((sc, cl, wl, tr))
    verl = by["verl colocate 128"][0]
    assert verl[1].n_gpus == 128 and verl[1].colocated and verl[1].engine.gpu == GPUS["h20"]
    assert verl[0].pipeline.batch_size == 512 * 16 and verl[2].max_response_tokens == 28 * 1024
    assert verl[3].recompute_old_logp
    # the hybrid engine's chunks of the interleaved batch: whole prompt groups of rollout.n per replica
    home = calls.routing["verl colocate 128"]
    assert isinstance(home, pipesim.GroupAffinity) and home.group_size == 16
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
    # each system's GPU as its source states it (by value: a replaced peak keeps the name)
    gpu = {"verl": "h20", "AReaL": "h800", "APRIL": "h100-sxm", "slime": "h100-sxm",
           "ROLL": published.UNSTATED.gpu}  # fmt: skip
    for sc, cl, _, tr in calls:
        assert cl.engine.gpu == tr.gpu == GPUS[gpu[sc.name.split()[0]]], sc.name
    april = by["APRIL"][0]
    assert april[1].n_gpus == 8 and april[1].colocated and april[0].pipeline.batch_size == 256
    assert april[1].engine.tp == 2 and april[2].max_response_tokens == 16384
    assert april[0].batching.samples_per_group == 8  # 32 whole groups of 8 (--n-samples-per-prompt)
    # ROLL: the guide's RLVR example (64 x 8, 8K responses, ratio 1, 16 of 24 GPUs train) on 128 GPUs
    roll_async, roll_sync = by["ROLL RLVR"][0], by["ROLL sync"][0]
    assert roll_async[1].n_gpus == roll_sync[1].n_gpus == 128 and roll_sync[1].colocated
    assert roll_async[1].trainer_gpus == 85 and roll_async[0].pipeline.batch_size == 64 * 8
    assert roll_async[2].max_response_tokens == 8192 and roll_async[2].samples_per_prompt == 8
    assert roll_async[0].batching.ratio == 1 and roll_async[0].pipeline.max_staleness == 1
    # ROLL's sync example sends a prompt's group as one request (is_num_return_sequences_expand
    # false), its async one each sample (true): whole groups per replica only in the sync run
    assert calls.routing["ROLL sync"] == pipesim.GroupAffinity(8)
    assert calls.routing.get("ROLL RLVR") is None
    # whole prompt groups where the system's trainer takes them (verl's RolloutSample, AReaL's
    # RLVRWorkflow, ROLL's GroupQueue, APRIL's generate_rollout_async)
    assert {c[0].batching.samples_per_group for c in fa} == {16}
    assert {c[0].batching.samples_per_group for c in areal} == {16}
    assert roll_async[0].batching.samples_per_group == 8
    # lengths from the registry, one entry per model and dataset kind, never per claim: each
    # workload is its model's entry (times a band's end), under the setup's own cap
    entry = {
        "verl": published.LENGTHS_7B_BASE, "AReaL": published.LENGTHS_DISTILL,
        "APRIL": published.LENGTHS_QWEN3, "slime": published.LENGTHS_QWEN3,
        "ROLL": published.LENGTHS_QWEN3,
    }  # fmt: skip
    band = published.LENGTH_BAND
    for sc, _, wl, _ in calls:
        spec = length_spec(entry[sc.name.split()[0]])
        scale = wl.response.median_tokens / spec.median_tokens
        assert min(abs(scale - x) for x in (1.0, 1 / band, band)) < 1e-12
        assert wl.response.sigma == spec.sigma and wl.difficulty_sigma == spec.difficulty_sigma
    assert set(entry.values()) <= set(LENGTHS)


def test_extrapolation():
    m = _dummy(10.0)
    assert m.steady_step_s == pytest.approx(10.0)
    assert m.total_s(100) == pytest.approx(1000.0)
    m = dataclasses.replace(m, ends=(30.0, 40.0, 50.0))  # a slow first step, then 10 s steps
    assert m.steady_step_s == pytest.approx(10.0)
    assert m.total_s(100) == pytest.approx(30.0 + 99 * 10.0)


@pytest.mark.parametrize(
    "grid",
    [
        # the entry's own scale and difficulty (the scored point), the grid's largest scale and
        # both ends of its difficulties (its lowest and highest off-policy ratios), one spread
        pytest.param(((1.0, 3.0), (0.0, 0.5, 2.0), (0.9,)), id="corners"),
        # the whole grid (64 runs, 4 s); "corners" runs the same command, report and checks
        pytest.param((SCALES, DIFFICULTIES, SIGMAS), id="whole grid", marks=pytest.mark.full),
    ],
)
def test_april_offpolicy_sensitivity_runs_the_scored_point_and_prints(
    capsys, fresh_runs, tmp_path, monkeypatch, grid
):
    """``--april-offpolicy``: APRIL's off-policy ratio over length scales and spreads (a held-out
    diagnosis), printed and, with ``--json``, written; its row at the entry's own lengths is the
    scored run, gain for gain. The rows are the ones the command computed (caught on their way out
    of ``offpolicy_sensitivity``; computing them a second time took half the test)."""
    from scenarios.published import april

    for name, values in zip(("SCALES", "DIFFICULTIES", "SIGMAS"), grid, strict=True):
        monkeypatch.setattr(april, name, values)
    computed: list[list[dict[str, float]]] = []

    def sensitivity() -> list[dict[str, float]]:
        computed.append(offpolicy_sensitivity())
        return computed[-1]

    monkeypatch.setattr(april, "offpolicy_sensitivity", sensitivity)
    path = tmp_path / "april.json"
    assert published.main(["--april-offpolicy", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "off-policy ratio about 40% (held out)" in out
    scales, difficulties, sigmas = grid
    assert len(out.strip().splitlines()) == 3 + len(scales) + len(sigmas)  # headers, the grid, spreads
    (rows,) = computed
    assert len(rows) == len(scales) * len(difficulties) + len(sigmas)
    assert json.loads(path.read_text()) == rows
    entry = length_spec(published.LENGTHS_QWEN3)
    own = (entry.sigma, entry.difficulty_sigma)
    point = next(r for r in rows if r["scale"] == 1.0 and (r["sigma"], r["difficulty_sigma"]) == own)
    a, b = published.april_run(True), published.april_run(False)
    assert point["gain"] == published.rollout_throughput(a) / published.rollout_throughput(b)
    assert point["off_policy_ratio"] == a.summary["partial_rollout/off_policy_ratio"]
    assert all(0.0 < r["off_policy_ratio"] <= 0.5 and 0.0 < r["offpolicy_token_share"] < 1.0 for r in rows)


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 200 s of CPU over two worker processes; more on a loaded machine
def test_full_table(tmp_path: Path, fresh_runs):
    path = tmp_path / "published.json"
    assert published.main(["--json", str(path), "--workers", "2"]) == 0
    data = json.loads(path.read_text())
    assert {(r["system"], r["published"]) for r in data} == PUBLISHED
    # the trend row is the rule applied to the runs it names (whether it holds is the README's to say)
    trend = next(r for r in data if r["unit"].startswith("trend"))
    steps = published.areal_trend()
    assert len(steps) == len(published.AREAL_TREND_ETAS) - 1
    assert trend["predicted"] == (1.0 if published.areal.areal_trend_verdict().holds else 0.0)
    assert all(math.isfinite(r["predicted"]) for r in data)
    assert all(r["predicted"] > 0 for r in data if r is not trend)
    assert all(set(r) == KEYS and r["low"] <= r["predicted"] <= r["high"] for r in data)
    assert {r["protocol"] for r in data} == {"stated", "transfer"}
    calibration = {c.claim for c in published.CLAIMS if c.calibration}
    assert not calibration & {r["claim"] for r in data if r["protocol"] == "transfer"}


def test_package_modules_are_short_and_the_module_runs() -> None:
    """The package replaced a 707-line module: each file stays under 400 lines, and
    ``python -m scenarios.published`` still resolves to its command line."""
    root = Path(published.__file__).parent
    sizes = {f.name: len(f.read_text().splitlines()) for f in root.glob("*.py")}
    assert "__main__.py" in sizes and all(n < 400 for n in sizes.values()), sizes
    assert "scenarios.published.table" in (root / "__main__.py").read_text()
    assert published.main is published.table.__globals__["main"]


def test_transfer_fit_recovers_the_profile_of_a_row_the_model_generated():
    """A disaggregated run on a known framework profile gives a 'published' row (its own step,
    gen and update_actor); the phase fit, starting from the stated default profile, returns the
    two constants it fits (fwd_bwd_efficiency, sample_s) and keeps the rest."""
    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"], tp=1, max_model_len=2048)
    cl = Cluster(engine=eng, n_gpus=4, trainer_gpus=2)
    wl = length_spec("math-reasoning-7b").workload(1024, 4, 64, scale=0.2)
    cfg = pipesim.PipelineConfig(batch_size=64, steps=6, max_staleness=1)
    sc = pipesim.Scenario(
        pipeline=cfg, admission=pipesim.CountThrottle(), weight_update=pipesim.PartialRollout()
    )
    stated = published.trainer_config(eng, 2, old_logp=False)
    assert stated.profile is None and stated.mfu is None  # the default profile's
    # ranks exactly balanced: a row tells the fit its mean tokens, not the run's own batches
    stated = dataclasses.replace(stated, profile=dataclasses.replace(stated.framework, balance="exact"))
    base = stated.framework
    truth = dataclasses.replace(base, fwd_bwd_efficiency=0.23, sample_s=0.04)
    true = dataclasses.replace(stated, profile=truth)
    m = published.measure(sc, cl, wl, true, warmup=2)
    k = 2  # a published step of two trainer steps
    step, gen, update = k * m.steady_step_s, m.gen_s(k), m.update_actor_s(k)
    fit = published.fit_trainer(stated, m.steady_tokens, 64, k, step, gen, update, "generated row")
    assert fit.profile.fwd_bwd_efficiency == pytest.approx(0.23, rel=1e-6)
    assert fit.profile.sample_s == pytest.approx(0.04, rel=1e-6)
    for name in published.fit.FIXED:  # not fitted: the stated profile's
        assert getattr(fit.profile, name) == getattr(base, name)
    refit = published.trainer_config(eng, 2, old_logp=False, fit=fit)
    assert refit.framework == fit.profile


@pytest.mark.parametrize(
    "args,field",
    [
        ((-1.0, 64, 2, 100.0, 10.0, 50.0), "tokens"),
        ((1e6, -1, 2, 100.0, 10.0, 50.0), "samples"),
        ((1e6, 64, 2, math.nan, 10.0, 50.0), "seconds"),
        ((1e15, 64, 2, 100.0, 10.0, 1e-3), "observations"),  # an update_actor no GPU could reach
    ],
)
def test_fit_refuses_a_row_it_cannot_fit(args, field):
    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=GPUS["h100-sxm"])
    tokens, samples, k, step, gen, update = args
    with pytest.raises(FieldError) as e:
        published.fit_trainer(
            published.trainer_config(eng, 2, old_logp=False), tokens, samples, k, step, gen, update, "row r"
        )
    assert e.value.field == field, str(e.value)


def test_profile_calibration_row_is_shown_and_never_scored(recorded):
    """The row fsdp2-dense was set from (verl colocate 64) is flagged under both protocols, shown
    in the table as a calibration row, and left out of the scores however far off it is; but its
    ``gen``, which the engine predicts and no fit reads (the profile sets trainer phases), is
    scored."""
    _, rows = recorded
    flagged = {c.claim for c in published.CLAIMS if c.profile_calibration}
    assert flagged == {f"{published.VERL_PROFILE_ROW}, {p}" for p in ("s/step", "update_actor")}
    gen = f"{published.VERL_PROFILE_ROW}, gen"
    assert {r["protocol"] for r in rows if r["claim"] == gen and not r["calibration"]} == {
        "stated",
        "transfer",
    }
    # the same row as the profile's: 64 GPUs colocate, its published update_actor
    assert "64 GPUs" in CALIBRATION_ROW and "colocate" in published.VERL_PROFILE_ROW
    update = {c.published for c in published.CLAIMS if c.profile_calibration and c.phase == "update_actor"}
    assert update == {CALIBRATION_SECONDS["update_actor"]}
    assert {r["claim"] for r in rows if r["calibration"] and r["protocol"] == "stated"} == flagged
    # under transfer also the ratio over the transfer's calibration row (verl's 2.35x)
    reads = {c.claim for c in published.CLAIMS if c.reads_calibration}
    assert {r["claim"] for r in rows if r["calibration"] and r["protocol"] == "transfer"} == flagged | reads
    assert {r["protocol"] for r in rows if r["calibration"]} == {"stated", "transfer"}
    for protocol in ("stated", "transfer"):
        rs = [dict(r, predicted=r["published"]) for r in rows if r["protocol"] == protocol]
        off = [dict(r, predicted=100 * r["published"]) if r["calibration"] else r for r in rs]
        scored = [r for r in rs if not r["calibration"]]
        want = f"{protocol}: {len(scored)} of {len(scored)} rows within 25% (100%)"
        assert published.scores(off).startswith(want)
        assert "calibration row(s) shown, not scored" in published.scores(off)
    assert published.table(rows).count("calibration") >= 4


def test_verl_workload_is_the_profile_calibration_workload():
    """One definition: the stated verl runs draw the workload the default profile's calibration
    reads its tokens per sample from, and that length is its closed-form mean (checked against a
    seeded draw of the same distribution)."""
    from pipesim.compute import profiles

    wl = published.verl_workload()
    assert wl == profiles.calibration_workload()
    assert published.verl_workload(published.Variant(scale=0.5)) == profiles.calibration_workload(0.5)
    rng = np.random.default_rng(7)
    n = 400_000
    r = wl.response
    difficulty = np.repeat(rng.lognormal(0.0, wl.difficulty_sigma, n // 16), 16)
    x = np.minimum(r.median_tokens * rng.lognormal(0.0, r.sigma, n) * difficulty, wl.max_response_tokens)
    drawn = wl.prompt + x.mean()
    assert pytest.approx(drawn, rel=0.01) == profiles.CALIBRATION_TOKENS_PER_SAMPLE
    assert profiles.mean_sample_tokens(wl) == profiles.CALIBRATION_TOKENS_PER_SAMPLE


def test_smoke_april_ranges_and_worker_processes_agree(fresh_runs):
    """The smallest claim, simulated: APRIL against slime's synchronous loop on 8 GPUs; its row as
    a range over the length band and seeds (low < high), and the same numbers whether its runs go
    to two worker processes or run here. (One test: the smoke run was the in-process run here.)"""
    claim = next(c for c in published.CLAIMS if c.system == "APRIL")
    seen: list[str] = []
    two = published.predict((claim,), workers=2, progress=seen.append)
    assert len(seen) == 6 and seen[-1].startswith("[6/6]")  # 2 runs x (point, 2 band ends), progress
    for f in published.RUNS:
        f.cache_clear()
    one = published.predict((claim,))  # workers=1, the default
    assert [(r["predicted"], r["low"], r["high"]) for r in two] == [
        (r["predicted"], r["low"], r["high"]) for r in one
    ]
    (row,) = one
    assert row["low"] < row["high"] and row["low"] <= row["predicted"] <= row["high"]
    assert row["protocol"] == "stated"
    # the smoke run: the row is finite, APRIL's rollouts faster than slime's synchronous loop's
    assert math.isfinite(row["predicted"])
    base, april = published.april_run(False), published.april_run(True)
    assert base.steps == april.steps == 8
    assert published.rollout_throughput(april) > published.rollout_throughput(base)
    assert re.search(r"APRIL", published.table(one))
    # the held-out off-policy ratio (README: about 40%) is shown beside the run's, never scored:
    # slime's loop trains on-policy; APRIL's carried-over samples are generated partly (or wholly,
    # a finished sample whose group was still running) by an older policy
    assert base.summary["offpolicy_token_share"] == base.summary["partial_rollout/off_policy_ratio"] == 0.0
    assert (
        0.0 < april.summary["partial_rollout/off_policy_ratio"] < april.summary["offpolicy_token_share"] < 1.0
    )
    assert april.summary["mixed_version_share"] > 0.0
    assert re.search(r"off-policy ratio \d+% \(README: about 40%\)", row["_diagnosis"])
