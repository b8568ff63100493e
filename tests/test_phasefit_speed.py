"""The trainer's fit splits each observation's batch once, to the bit of the per-call code.

``pipesim.compute.phasefit`` used to remake every observation's row (its config replaced with the
fit's profile, its batch dealt to the ranks) on each pass of a fit: ``fit_profile`` twice and the
weights' ``predicted_s`` once per observation, though the split reads none of the fitted
constants. It now keeps each observation's parts per profile shape (:func:`phasefit._parts`) and
replaces each config once per call. The old code is kept here (``_old_*``) as the slow reference:
the design matrix, the predictions and the weights must come out the same bit for bit, on
profiles that deal samples to the ranks (``"step"``, ``"sorted"``, ``"mini_batch"``), on an
exactly balanced one, on groups of steps, with ``mfu`` set and after the profile's shape changes
under the same observations. No timing is asserted.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from pipesim.calibrate.fitbounds import phase_weights
from pipesim.compute import GPUS, MODELS, phasefit
from pipesim.compute.phasefit import Observed, PhaseObservation, ProfileFit, fit_profile, members, predicted_s
from pipesim.compute.phases import FrameworkProfile, phase_parts, phase_times_s
from pipesim.compute.profiles import profiles
from pipesim.compute.trainer import TrainerConfig

DENSE, H100 = MODELS["qwen2.5-math-7b"], GPUS["h100-sxm"]
TRUTH = dict(
    fwd_bwd_efficiency=0.35, fwd_efficiency=0.25, micro_batch_s=0.3, optimizer_step_s=1.0, step_s=2.0
)


def _old_predicted_s(obs: Observed, profile: FrameworkProfile) -> float:
    """``predicted_s`` before: a config and a whole ``phase_times_s`` per member."""
    times = []
    for o in members(obs):
        cfg = dataclasses.replace(o.config, profile=profile)
        times.append(phase_times_s(cfg, o.tokens, o.samples, o.sample_tokens)[o.phase])
    return float(np.mean(times))


def _old_row(profile: FrameworkProfile, obs: PhaseObservation) -> tuple[list[float], float]:
    config = dataclasses.replace(obs.config, profile=profile, mfu=None)
    if obs.phase == "remainder":
        return [0.0, 0.0, 0.0, 0.0, 1.0, float(obs.samples)], obs.seconds - config.step_overhead_s
    p = phase_parts(config, obs.tokens, obs.samples, obs.sample_tokens)[obs.phase]
    if obs.phase == "update_actor":
        x = [p["compute_flop_s"], 0.0, p["micro"], p["opt"], 0.0, 0.0]
    else:
        x = [0.0, p["compute_flop_s"], p["micro"], 0.0, 0.0, 0.0]
    return x, obs.seconds - p["comm_s"]


def _old_design(profile: FrameworkProfile, observations: list[Observed]) -> tuple[np.ndarray, np.ndarray]:
    """``_solve``'s ``X`` and ``y`` before: every row made afresh."""
    out = []
    for obs in observations:
        rows = [_old_row(profile, o) for o in members(obs)]
        if len(rows) == 1:
            out.append((np.asarray(rows[0][0], float), rows[0][1]))
        else:
            out.append((np.mean([r[0] for r in rows], axis=0), float(np.mean([r[1] for r in rows]))))
    return np.array([r[0] for r in out]), np.array([r[1] for r in out])


def _old_weights(fit: ProfileFit, obs: list[tuple[PhaseObservation, ...]]) -> list[float] | None:
    """``fitbounds.phase_weights`` with ``_old_predicted_s``."""
    from pipesim.calibrate.fitbounds import phase_dof

    resid: dict[str, list[float]] = {}
    for g in obs:
        resid.setdefault(g[0].phase, []).append(g[0].seconds - _old_predicted_s(g, fit.profile))
    dof = phase_dof(fit.fitted, obs)
    if min(dof.values()) < 1:
        return None
    var = {phase: float(np.sum(np.square(r))) / dof[phase] for phase, r in resid.items()}
    return [1.0 / var[g[0].phase] for g in obs]


def _profile(base: str, **kw: Any) -> FrameworkProfile:
    return dataclasses.replace(profiles()[base], **{**TRUTH, **kw})


def _observations(
    profile: FrameworkProfile, steps: int = 12, per_row: int = 1, seed: int = 0, **config: Any
) -> list[tuple[PhaseObservation, ...]]:
    """A sample log's observations as ``trainer._observations`` makes them: per row and phase a
    group of ``per_row`` steps of 64 samples (lognormal tokens, so the split matters), each with the
    row's seconds (the truth's mean with 1% noise)."""
    rng = np.random.default_rng(seed)
    cfg = TrainerConfig(
        model=DENSE,
        gpu=H100,
        n_gpus=8,
        profile=profile,
        ppo_mini_batch_samples=16,
        step_overhead_s=0.37,
        **config,
    )
    out: list[tuple[PhaseObservation, ...]] = []
    steps_tokens = [
        [tuple(float(t) for t in rng.lognormal(np.log(900.0), 0.7, 64).round()) for _ in range(per_row)]
        for _ in range(steps)
    ]
    for phase in ("old_log_prob", "update_actor", "remainder"):
        for row in steps_tokens:
            true = [phase_times_s(cfg, sum(s), 64, s)[phase] for s in row]
            seconds = float(np.mean(true)) * (1.0 + 0.01 * rng.normal())
            dealt = [s if phase != "remainder" else None for s in row]
            out.append(
                tuple(PhaseObservation(cfg, phase, sum(s), 64, seconds, d) for s, d in zip(row, dealt))
            )
    return out


def _bits(value: object) -> object:
    """``value`` with every float as its hex (NaN and -0.0 compared as bits, not as numbers)."""
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, dict):
        return {k: _bits(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_bits(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _bits(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


CASES = {
    "step": (_profile("fsdp2-dense"), {}),
    "sorted": (_profile("fsdp2-dense", balance="sorted"), {}),
    "mini_batch": (_profile("fsdp2-dense", balance="mini_batch"), {"micro_batch_samples": 2}),
    "exact": (_profile("fsdp2-dense", balance="exact"), {}),
    "megatron tp 4": (_profile("megatron-dense", comm_overlap=0.2), {"log_prob_micro_batch_tokens": 4096}),
}


@pytest.mark.parametrize("per_row", [1, 3])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_fit_and_its_weights_are_the_per_call_codes_to_the_bit(case: str, per_row: int) -> None:
    profile, config = CASES[case]
    obs = _observations(profile, per_row=per_row, **config)
    start = dataclasses.replace(profile, fwd_bwd_efficiency=0.5, fwd_efficiency=0.5, micro_batch_s=0.1)
    for _ in range(2):  # cold, then with every observation's parts kept
        assert _bits(phasefit._design(start, obs)) == _bits(_old_design(start, obs))
    fit = fit_profile(start, obs, fix=["sample_s"])
    assert _bits(phasefit._design(fit.profile, obs)) == _bits(_old_design(fit.profile, obs))
    weights = phase_weights(fit, obs)
    assert weights is not None and _bits(weights) == _bits(_old_weights(fit, obs))
    weighted = fit_profile(start, obs, fix=["sample_s"], weights=weights)
    assert _bits(phasefit._design(weighted.profile, obs)) == _bits(_old_design(weighted.profile, obs))
    assert _bits([predicted_s(g, fit.profile) for g in obs]) == _bits(
        [_old_predicted_s(g, fit.profile) for g in obs]
    )
    # a fit on fresh observations (nothing kept) is the same fit
    again = fit_profile(start, _observations(profile, per_row=per_row, **config), fix=["sample_s"])
    assert _bits(again) == _bits(fit)


def test_parts_kept_for_one_profile_shape_are_not_read_for_another() -> None:
    """The same observations under a profile that deals and hides communication differently: the
    kept parts are keyed by the fields the split and the collectives read."""
    obs = _observations(CASES["step"][0])
    for other in (
        _profile("fsdp2-dense", balance="sorted"),
        _profile("fsdp2-dense", comm_overlap=0.0),
        _profile("fsdp2-dense", grad_reduce_bytes=2.0),
        _profile("fsdp2-dense", balance="exact"),
        CASES["step"][0],
    ):
        assert _bits(phasefit._design(other, obs)) == _bits(_old_design(other, obs))
        assert _bits(phasefit.predictions_s(obs, other)) == _bits([_old_predicted_s(g, other) for g in obs])


def test_a_config_with_mfu_predicts_at_its_mfu_and_fits_at_the_profiles() -> None:
    """``predicted_s`` keeps a config's ``mfu`` (it replaces the profile's efficiencies) and the
    fit's rows drop it, as the per-call code did."""
    profile = CASES["step"][0]
    obs = _observations(profile, mfu=0.2)
    assert _bits(phasefit.predictions_s(obs, profile)) == _bits([_old_predicted_s(g, profile) for g in obs])
    assert _bits(phasefit._design(profile, obs)) == _bits(_old_design(profile, obs))
    assert phasefit.predictions_s(obs, profile) != phasefit.predictions_s(_observations(profile), profile)


def test_the_kept_parts_are_no_part_of_an_observations_value() -> None:
    (o, *_), *_ = _observations(CASES["step"][0], steps=3)
    fresh = dataclasses.replace(o)
    predicted_s(o, CASES["sorted"][0])
    assert o == fresh and hash(o) == hash(fresh) and repr(o) == repr(fresh)
    assert dataclasses.astuple(o) == dataclasses.astuple(fresh)


def test_a_split_that_fails_is_refused_on_every_pass() -> None:
    """A sample's tokens that cannot be dealt (NaN) refuse each call, nothing kept in between."""
    profile = CASES["sorted"][0]
    good = _observations(profile, steps=3)
    (o, *_), *_ = good
    bad = dataclasses.replace(o, sample_tokens=(float("nan"), *o.sample_tokens[1:]))
    for _ in range(2):
        with pytest.raises(ValueError, match="weights"):
            predicted_s(bad, profile)
        with pytest.raises(ValueError, match="weights"):
            _old_predicted_s(bad, profile)
