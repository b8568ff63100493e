"""The training step in phases (issue 41 item 1): the closed form against a per-micro-batch loop,
its relations in tokens and GPUs, the named profiles, the calibration row, the fit, and the
phases reaching a run's breakdown. Before this change none of it existed (``pipesim.compute.phases``
did not import; the breakdown had no ``timing_s/old_log_prob``)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipesim
from pipesim.compute import GPUS, MODELS, EngineConfig, LogNormalLengths, TokenWorkload
from pipesim.compute.cluster import Cluster, run_compute
from pipesim.compute.phasefit import FITTED, PhaseObservation, fit_profile, predicted_s
from pipesim.compute.phases import (
    GPUS_PER_NODE,
    PHASES,
    FrameworkProfile,
    phase_times_s,
    reference_phase_times_s,
)
from pipesim.compute.profiles import (
    CALIBRATION_SAMPLES,
    CALIBRATION_SECONDS,
    CALIBRATION_TOKENS_PER_SAMPLE,
    _calibration_config,
    calibration_draws,
    profile,
    profiles,
)
from pipesim.compute.series import BREAKDOWN_COLUMNS, step_breakdown
from pipesim.compute.trainer import TrainerConfig
from pipesim.core.validate import FieldError
from tests.test_refusals_core import check_refusal

DENSE, MOE = MODELS["qwen2.5-math-7b"], MODELS["qwen3-30b-a3b"]
H20, H100 = GPUS["h20"], GPUS["h100-sxm"]


@st.composite
def configs(draw: st.DrawFn) -> TrainerConfig:
    """A trainer of any registered profile (Megatron ones with drawn tp/pp/ep) and batch knobs."""
    name = draw(st.sampled_from(sorted(profiles())))
    prof = profile(name)
    # expert parallelism needs a mixture of experts (Megatron's rule, TrainerConfig refuses it)
    model = MOE if prof.ep > 1 else draw(st.sampled_from([DENSE, MOE]))
    if prof.backend == "megatron":
        prof = dataclasses.replace(
            prof,
            tp=draw(st.sampled_from([1, 2, 4])),  # the drawn models have 4 KV heads: Megatron refuses tp 8
            pp=draw(st.sampled_from([1, 2, 4])),
            ep=draw(st.sampled_from([1, 4, 8])) if model is MOE else 1,
            comm_overlap=draw(st.floats(0.0, 1.0)),
        )
    sp = draw(st.sampled_from([1, 2, 4])) if prof.backend == "fsdp" else 1
    ranks = prof.tp * prof.pp * sp * prof.ep  # the expert groups tile the GPUs (Megatron's rule)
    by_samples = draw(st.booleans())
    return TrainerConfig(
        model=model,
        gpu=draw(st.sampled_from([H20, H100])),
        n_gpus=ranks * draw(st.sampled_from([1, 2, 3, 4, 8])) * max(1, 16 // ranks),  # the state fits
        profile=prof,
        recompute_old_logp=draw(st.booleans()),
        reference_model=draw(st.booleans()),
        step_overhead_s=draw(st.floats(0.0, 5.0)),
        ppo_mini_batch_samples=draw(st.none() | st.integers(1, 600)),
        micro_batch_samples=draw(st.integers(1, 16)) if by_samples else None,
        micro_batch_tokens=None if by_samples else draw(st.integers(2048, 65536)),
        log_prob_micro_batch_tokens=draw(st.none() | st.integers(2048, 98304)),
        ppo_epochs=draw(st.integers(1, 3)),
        sequence_parallel=sp,
    )


@settings(max_examples=100, deadline=None)
@given(configs(), st.integers(0, 3000), st.floats(0.0, 20000.0))
def test_closed_form_matches_the_micro_batch_loop(
    config: TrainerConfig, samples: int, per_sample: float
) -> None:
    tokens = samples * per_sample
    fast = phase_times_s(config, tokens, samples)
    slow = reference_phase_times_s(config, tokens, samples)
    assert set(fast) == set(slow) == set(PHASES)
    for phase in PHASES:
        assert fast[phase] == pytest.approx(slow[phase], rel=1e-9, abs=1e-9), phase
    if not config.recompute_old_logp:
        assert fast["old_log_prob"] == 0.0
    if not config.reference_model:
        assert fast["ref"] == 0.0


@settings(max_examples=100, deadline=None)
@given(configs(), st.integers(1, 3000), st.floats(1.0, 20000.0), st.floats(1.01, 3.0))
def test_each_phase_grows_with_the_tokens(
    config: TrainerConfig, samples: int, per: float, more: float
) -> None:
    low = config.phase_times_s(samples * per, samples)
    high = config.phase_times_s(samples * per * more, samples)
    for phase in PHASES:
        assert high[phase] >= low[phase] * (1 - 1e-12), phase
    assert config.step_time_s(samples * per * more, samples) > config.step_time_s(samples * per, samples)


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["fsdp2-dense", "megatron-dense", "megatron-moe"]),
    st.sampled_from([4, 8, 16, 32, 64]),
    st.integers(64, 8192),
    st.floats(200.0, 8000.0),
    st.integers(16, 1024),
)
def test_doubling_the_gpus_does_not_halve_the_fixed_costs(
    name: str, gpus: int, samples: int, per: float, mini: int
) -> None:
    """Compute halves when the GPUs double; optimizer steps do not, nor per-micro-batch gathers."""
    model = MOE if profile(name).ep > 1 else DENSE  # expert parallelism needs experts
    gpus = max(gpus, profile(name).ep)  # and a multiple of ep GPUs
    kw: dict[str, Any] = dict(model=model, gpu=H20, profile=name, ppo_mini_batch_samples=mini)
    one, two = TrainerConfig(n_gpus=gpus, **kw), TrainerConfig(n_gpus=2 * gpus, **kw)
    t1 = one.phase_times_s(samples * per, samples)["update_actor"]
    t2 = two.phase_times_s(samples * per, samples)["update_actor"]
    n_opt = math.ceil(samples / mini)
    assert t2 >= t1 / 2 + n_opt * one.framework.optimizer_step_s / 2 * (1 - 1e-9)
    # more GPUs help while the collectives stay on one kind of link; going from one node to two
    # moves them from NVLink to the network, where a small batch's gathers can cost more
    # (a dense model: a 30B MoE's per-step gradient sync over the network outweighs a small
    # batch's halved compute)
    if model is DENSE and (2 * gpus <= GPUS_PER_NODE or gpus > GPUS_PER_NODE):
        assert t2 < t1


@pytest.mark.parametrize("name", sorted(profiles()))
def test_each_profile_runs_by_name(name: str) -> None:
    moe = profile(name).ep > 1  # expert parallelism: a mixture of experts on a multiple of ep GPUs
    model, n = (MOE, profile(name).ep) if moe else (MODELS["qwen3-0.6b"], 4)
    trainer = TrainerConfig(model=model, gpu=H100, n_gpus=n, profile=name)
    assert trainer.framework is profile(name) and trainer.framework.name == name
    assert trainer.framework.source  # each says what its constants came from
    eng = EngineConfig(model=model, gpu=H100, max_model_len=2048)
    work = TokenWorkload(response=LogNormalLengths(200.0, 0.5), prompt=64, max_response_tokens=512)
    sc = pipesim.Scenario(pipeline=pipesim.PipelineConfig(batch_size=16, steps=3, max_staleness=1))
    run = run_compute(sc, Cluster(engine=eng, n_gpus=n + 4, trainer_gpus=n), work, seed=2, trainer=trainer)
    assert run.ledger.closes()
    s = run.summary()
    for _, tokens, parts in run.phase_log:
        exact = trainer.phase_times_s(tokens, 16)
        if trainer.framework.balance == "exact":
            assert parts == exact
        else:  # each mini-batch waits for its busiest rank (tests/test_compute_balance.py)
            assert all(parts[p] >= exact[p] * (1 - 1e-12) for p in exact)
    assert s["timing_s/update_actor"] == pytest.approx(
        np.mean([p["update_actor"] for _, _, p in run.phase_log])
    )
    assert s["timing_s/old_log_prob"] > 0 and s["timing_s/ref"] == 0.0  # recomputed; no reference


def test_unset_profile_and_mfu() -> None:
    base: dict[str, Any] = dict(model=DENSE, gpu=H20, n_gpus=8)
    assert TrainerConfig(**base).framework is profile("fsdp2-dense")
    legacy = TrainerConfig(**base, mfu=0.3, step_overhead_s=2.0, reference_model=True)
    assert legacy.framework.name == "ideal"
    n, t = DENSE.n_active_params, 3e6
    assert legacy.step_time_s(t, 512) == pytest.approx(10 * n * t / (8 * H20.bf16_flops_per_s * 0.3) + 2.0)
    mixed = TrainerConfig(**base, mfu=0.3, profile="megatron-dense")
    assert (mixed.framework.fwd_efficiency, mixed.framework.fwd_bwd_efficiency) == (0.3, 0.3)
    assert mixed.framework.optimizer_step_s == profile("megatron-dense").optimizer_step_s


def test_fsdp2_dense_reproduces_its_calibration_row() -> None:
    """On the mean over the row's seeded draws (each mini-batch at its busiest rank), the
    calibrated profile gives back the row's three phases; the exact form of the mean is faster."""
    config = _calibration_config(profile("fsdp2-dense"))
    tokens = CALIBRATION_SAMPLES * CALIBRATION_TOKENS_PER_SAMPLE
    runs = [config.phase_times_s(tokens, CALIBRATION_SAMPLES, per) for per in calibration_draws()]
    for phase, seconds in CALIBRATION_SECONDS.items():
        assert np.mean([r[phase] for r in runs]) == pytest.approx(seconds, rel=1e-12)
    assert all(r["ref"] == 0.0 for r in runs)
    exact = config.phase_times_s(tokens, CALIBRATION_SAMPLES)
    assert exact["update_actor"] < CALIBRATION_SECONDS["update_actor"]


TRUTH = FrameworkProfile(
    name="truth",
    backend="fsdp",
    fwd_bwd_efficiency=0.42,
    fwd_efficiency=0.27,
    micro_batch_s=0.3,
    optimizer_step_s=1.7,
    step_s=4.0,
    sample_s=0.002,
    comm_overlap=0.6,
)


def _observations(noise_s: float = 0.0, seed: int = 0) -> list[PhaseObservation]:
    rng = np.random.default_rng(seed)
    out = []
    for gpus in (8, 16, 32, 64):
        for samples, per in ((1024, 900.0), (4096, 1500.0), (8192, 2500.0)):
            config = TrainerConfig(
                model=DENSE,
                gpu=H20,
                n_gpus=gpus,
                profile=TRUTH,
                ppo_mini_batch_samples=512,
                micro_batch_tokens=8192,
            )
            for phase, s in config.phase_times_s(samples * per, samples).items():
                if phase != "ref":
                    out.append(
                        PhaseObservation(config, phase, samples * per, samples, s + noise_s * rng.normal())
                    )
    return out


def test_fit_recovers_the_constants_that_made_the_data() -> None:
    start = dataclasses.replace(TRUTH, fwd_bwd_efficiency=0.9, fwd_efficiency=0.9, micro_batch_s=0.0)
    fit = fit_profile(
        dataclasses.replace(start, optimizer_step_s=0.0, step_s=0.0, sample_s=0.0), _observations()
    )
    assert set(fit.fitted) == set(FITTED)
    for name in FITTED:
        assert getattr(fit.profile, name) == pytest.approx(getattr(TRUTH, name), rel=1e-6), name
    assert fit.residual_s < 1e-6
    noisy = fit_profile(start, _observations(noise_s=0.5, seed=1), confidence=0.999)
    for name in FITTED:
        lo, hi = noisy.intervals[name]
        assert lo <= getattr(TRUTH, name) <= hi, (name, lo, hi)
        assert lo < getattr(noisy.profile, name) < hi


def test_a_group_is_fitted_as_the_mean_of_its_members() -> None:
    """An observation that is a group (a log row averaging several trainer steps) is the mean of its
    members' phases: groups whose seconds are that mean give back the constants that made them, a
    group of one is its member, and predicted_s is the mean the fit was made against."""
    single = _observations()
    # pair each observation with the next one of the same phase: each group spans two token counts
    by_phase: dict[str, list[PhaseObservation]] = {}
    for o in single:
        by_phase.setdefault(o.phase, []).append(o)
    groups = []
    for obs in by_phase.values():
        for a, b in zip(obs[:-1], obs[1:], strict=True):
            mean = (a.seconds + b.seconds) / 2
            groups.append(tuple(dataclasses.replace(o, seconds=mean) for o in (a, b)))
    start = dataclasses.replace(TRUTH, fwd_bwd_efficiency=0.9, fwd_efficiency=0.9, micro_batch_s=0.0)
    fit = fit_profile(start, groups)
    for name in FITTED:
        assert getattr(fit.profile, name) == pytest.approx(getattr(TRUTH, name), rel=1e-6), name
    assert all(predicted_s(g, TRUTH) == pytest.approx(g[0].seconds, rel=1e-9) for g in groups)
    alone = fit_profile(start, single)
    as_groups = fit_profile(start, [(o,) for o in single])
    assert as_groups.profile == alone.profile and as_groups.intervals == alone.intervals
    check_refusal(lambda: fit_profile(TRUTH, [()]), FieldError, "observations")
    check_refusal(lambda: fit_profile(TRUTH, [(single[0], "x")]), FieldError, "observations")


def test_fit_refuses_what_the_data_cannot_separate() -> None:
    config = TrainerConfig(model=DENSE, gpu=H20, n_gpus=8, profile=TRUTH)
    one = [PhaseObservation(config, "remainder", 1e6, 512, 5.0)]
    check_refusal(lambda: fit_profile(TRUTH, one), FieldError, "observations")
    assert fit_profile(TRUTH, one, fix=("step_s",)).profile.sample_s == pytest.approx(1.0 / 512)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: TrainerConfig(model=DENSE, gpu=H20, n_gpus=8, profile="fsdp3"), "profile"),
        (lambda: TrainerConfig(model=DENSE, gpu=H20, n_gpus=8, profile=3), "profile"),  # type: ignore[arg-type]
        (lambda: TrainerConfig(model=DENSE, gpu=H20, n_gpus=8, micro_batch_tokens=0), "micro_batch_tokens"),
        (
            lambda: TrainerConfig(
                model=DENSE, gpu=H20, n_gpus=8, micro_batch_tokens=8, micro_batch_samples=2
            ),
            "micro_batch_samples",
        ),
        (
            lambda: TrainerConfig(model=DENSE, gpu=H20, n_gpus=8, ppo_mini_batch_samples=0),
            "ppo_mini_batch_samples",
        ),
        (
            lambda: TrainerConfig(model=DENSE, gpu=H20, n_gpus=8, log_prob_micro_batch_tokens=-1),
            "log_prob_micro_batch_tokens",
        ),
        (lambda: TrainerConfig(model=DENSE, gpu=H20, n_gpus=8, ppo_epochs=0), "ppo_epochs"),
        (lambda: TrainerConfig(model=DENSE, gpu=H20, n_gpus=8, sequence_parallel=3), "n_gpus"),
        (lambda: TrainerConfig(model=DENSE, gpu=H20, n_gpus=8, mfu=0.0), "mfu"),
        (lambda: dataclasses.replace(TRUTH, backend="deepspeed"), "backend"),
        (lambda: dataclasses.replace(TRUTH, fwd_efficiency=1.5), "fwd_efficiency"),
        (lambda: dataclasses.replace(TRUTH, fwd_bwd_efficiency=0.0), "fwd_bwd_efficiency"),
        (lambda: dataclasses.replace(TRUTH, comm_overlap=2.0), "comm_overlap"),
        (lambda: dataclasses.replace(TRUTH, micro_batch_s=-1.0), "micro_batch_s"),
        (lambda: dataclasses.replace(TRUTH, tp=2), "tp"),
        (
            lambda: PhaseObservation(TrainerConfig(model=DENSE, gpu=H20, n_gpus=8), "gen", 1.0, 1, 1.0),
            "phase",
        ),
        (lambda: fit_profile(TRUTH, _observations()[:8], fix=("mfu",)), "fix"),
    ],
)
def test_bad_input_names_the_field(build: Any, field: str) -> None:
    check_refusal(build, FieldError, field)


def test_a_runs_breakdown_carries_the_phases() -> None:
    """Colocated: the training span is the phases plus the offload; the parts sum to the step;
    perf/throughput is verl's tokens / (step x GPUs)."""
    eng = EngineConfig(model=MODELS["qwen3-0.6b"], gpu=H100, max_model_len=2048)
    work = TokenWorkload(response=LogNormalLengths(300.0, 0.5), prompt=64, max_response_tokens=1024)
    sc = pipesim.Scenario(
        pipeline=pipesim.PipelineConfig(batch_size=32, steps=4, max_staleness=0),
        admission=pipesim.CountThrottle(),
        weight_update=pipesim.Drain(),
    )
    cluster = Cluster(engine=eng, n_gpus=4)
    run = run_compute(sc, cluster, work, seed=4)
    steps = step_breakdown(run.result, run.phase_log, cluster.n_gpus)
    parts = steps[list(BREAKDOWN_COLUMNS[:-1])].sum(axis=1)
    assert np.allclose(parts, steps["timing_s/step"], rtol=1e-12)
    assert np.allclose(steps["timing_s/offload"], run.switch_time_s) and run.switch_time_s > 0
    tokens = [t for _, t, _ in run.phase_log]
    assert np.allclose(steps["perf/total_num_tokens"], tokens)
    assert np.allclose(steps["perf/throughput"], np.array(tokens) / (steps["timing_s/step"] * 4))
    assert (steps["timing_s/old_log_prob"] > 0).all() and (steps["timing_s/ref"] == 0).all()
    s = run.summary()
    assert s["perf/throughput"] == pytest.approx(steps["perf/throughput"].mean())
    assert s["timing_s/remainder"] == pytest.approx(steps["timing_s/remainder"].mean())
