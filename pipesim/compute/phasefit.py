"""Fitting a framework profile to observed phase seconds: closed-form least squares.

Each phase of :mod:`pipesim.compute.phases` is linear in six of a profile's constants once the
batch split and the collectives are fixed (they depend on the backend, parallelism,
``comm_overlap`` and ``grad_reduce_bytes``, which are not fitted)::

    update_actor  = C_fb / fwd_bwd_efficiency + n_micro micro_batch_s + n_opt optimizer_step_s + comm
    old_log_prob  = C_f / fwd_efficiency + n_micro micro_batch_s + comm          (ref likewise)
    remainder     = step_s + S sample_s + step_overhead_s

so with ``theta = (1 / fwd_bwd_efficiency, 1 / fwd_efficiency, micro_batch_s, optimizer_step_s,
step_s, sample_s)`` every observation is one row of ``X theta = y`` (``y``: the observed seconds
less the known terms). :func:`fit_profile` solves it by least squares (columns scaled to unit
norm), keeps the constants named in ``fix`` (and those no observation touches) at the profile's
values, and gives each fitted constant a normal-approximation interval from the residual variance
``RSS / (n - p)`` and ``(X'X)^-1``; with no residual degrees of freedom (``n == p``) the intervals
are NaN: an exact solve carries no estimate of its error. An efficiency's interval is the inverse
of its reciprocal's.

An observation may also be a **group** of :class:`PhaseObservation` (a sequence of them, each
with the group's seconds): the mean of several trainer steps, as a log that aggregates steps
writes it (verl's fully-async trainer logs a row per parameter version). Its row of ``X`` is the
mean of its members' rows, each with its own tokens and dealing (hence its own whole micro-batch
counts: one step at the mean tokens stands for none of them), and its known terms the mean of
theirs. A group of one is that observation.

A row reads the profile only through the fields that are not fitted (the batch split and the
collectives), so each observation's parts are made once per profile shape and kept on it
(:func:`_parts`): a trainer's fit passes over the same observations several times
(:func:`fit_profile` twice, the weights' :func:`predictions_s`, a refit with a constant floored),
and dealing a step's samples to the ranks was two thirds of its cost. The values are those of
the per-pass code to the bit (``tests/test_phasefit_speed.py`` keeps it).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from pipesim.compute.phases import PHASES, FrameworkProfile, phase_parts, phase_time_s
from pipesim.compute.trainer import TrainerConfig
from pipesim.core.errors import FieldError, check_int, check_number, shown
from pipesim.core.validate import refuse

FITTED = ("fwd_bwd_efficiency", "fwd_efficiency", "micro_batch_s", "optimizer_step_s", "step_s", "sample_s")
"""The constants :func:`fit_profile` can fit, in the order of ``theta``."""


@dataclass(frozen=True)
class PhaseObservation:
    """One observed phase: ``seconds`` of ``phase`` for a step of ``tokens`` in ``samples`` samples,
    trained as ``config`` says (its GPUs, model and batch knobs; its profile is ignored)."""

    config: TrainerConfig
    phase: str
    tokens: float
    samples: int
    seconds: float
    sample_tokens: tuple[float, ...] | None = None
    """Each sample's tokens in batch order, for a profile whose ranks wait for the busiest
    (:mod:`pipesim.compute.balance`); None: every rank holds the mean."""

    def __post_init__(self) -> None:
        if not isinstance(self.config, TrainerConfig):
            raise refuse("config", f"must be a TrainerConfig, got {shown(self.config)}")
        if self.phase not in PHASES:
            raise refuse("phase", f"must be one of {', '.join(PHASES)}, got {shown(self.phase)}")
        check_number("tokens", self.tokens, 0.0)
        check_int("samples", self.samples, 0)
        check_number("seconds", self.seconds, 0.0)
        if self.sample_tokens is not None and len(self.sample_tokens) != self.samples:
            got = len(self.sample_tokens)
            raise refuse("sample_tokens", f"must hold one count per sample ({self.samples}), got {got}")


@dataclass(frozen=True)
class ProfileFit:
    """What :func:`fit_profile` returns: the fitted profile, an interval per fitted constant, the
    root-mean-square residual in seconds, and the names fitted."""

    profile: FrameworkProfile
    intervals: Mapping[str, tuple[float, float]]
    residual_s: float
    fitted: tuple[str, ...]


Observed = PhaseObservation | Sequence[PhaseObservation]
"""What :func:`fit_profile` takes per observation: one phase, or a group whose mean was observed
(the module docstring)."""


def members(obs: Observed) -> list[PhaseObservation]:
    """The phases an observation stands for: itself, or its group's members."""
    return [obs] if isinstance(obs, PhaseObservation) else list(obs)


def predicted_s(obs: Observed, profile: FrameworkProfile) -> float:
    """The seconds ``profile`` predicts for an observation: its phase's, or its group's mean."""
    return predictions_s([obs], profile)[0]


def predictions_s(observations: Sequence[Observed], profile: FrameworkProfile) -> list[float]:
    """:func:`predicted_s` of each observation: ``phase_times_s`` of each member under its config
    with ``profile`` (its ``mfu`` kept), in the same float operations, from the member's
    :func:`_parts` (the batch split once per observation and profile shape, not once per call)."""
    config, shape = _configs(profile), _shape(profile)
    out = []
    for obs in observations:
        times = [_time_s(o, config(o.config), shape) for o in members(obs)]
        out.append(float(np.mean(times)))
    return out


def _time_s(obs: PhaseObservation, config: TrainerConfig, shape: tuple[object, ...]) -> float:
    """``phase_times_s(config, obs.tokens, obs.samples, obs.sample_tokens)[obs.phase]``, by the same
    :func:`~pipesim.compute.phases.phase_time_s` from the kept parts (built for every phase, as it
    builds them, so a split that fails fails here too)."""
    return phase_time_s(config, obs.phase, _parts(obs, config, shape), obs.samples)


_SHAPE = tuple(f.name for f in dataclasses.fields(FrameworkProfile) if f.name not in FITTED)
"""The profile's fields other than :data:`FITTED`: all that ``phase_parts`` may read of it (the
backend, parallelism, ``comm_overlap``, ``grad_reduce_bytes``, ``balance``; the name and source
besides, to be safe)."""

_PARTS = "_phasefit_parts"
"""Where :func:`_parts` keeps an observation's parts, in its instance ``__dict__`` (as
``functools.cached_property`` keeps a value on a frozen dataclass: not a field, so no part of its
equality, hash or repr)."""


def _shape(profile: FrameworkProfile) -> tuple[object, ...]:
    """The key of an observation's parts under ``profile``: its :data:`_SHAPE` values (typed, so
    ``4`` and ``4.0`` bytes are not taken for one another)."""
    return tuple((type(v), v) for v in (getattr(profile, name) for name in _SHAPE))


def _configs(profile: FrameworkProfile, **more: Any) -> Callable[[TrainerConfig], TrainerConfig]:
    """``dataclasses.replace(config, profile=profile, **more)``, made (and so checked) once per
    config of a call's observations rather than once per observation."""
    made: dict[int, tuple[TrainerConfig, TrainerConfig]] = {}

    def get(config: TrainerConfig) -> TrainerConfig:
        hit = made.get(id(config))
        if hit is None or hit[0] is not config:
            hit = made[id(config)] = (config, dataclasses.replace(config, profile=profile, **more))
        return hit[1]

    return get


def _parts(obs: PhaseObservation, config: TrainerConfig, shape: tuple[object, ...]) -> Mapping[str, float]:
    """``phase_parts(config, ...)[obs.phase]`` for ``config`` (``obs.config`` with a profile of
    ``shape``), kept on ``obs`` per shape: the parts (the rank split above all) read none of the
    fitted constants, nor ``mfu``, so a fit's passes (:func:`fit_profile` twice, the weights'
    :func:`predictions_s`, a refit) split each observation once. Only parts whose arithmetic
    raised no floating-point flag are kept: one that did is made again in the caller's
    ``np.errstate`` (an error under :func:`_solve_raising`, a warning elsewhere), as before."""
    kept: dict[tuple[object, ...], Mapping[str, float]] = obs.__dict__.setdefault(_PARTS, {})
    parts = kept.get(shape)
    if parts is None:
        try:
            with np.errstate(over="raise", invalid="raise", divide="raise"):
                parts = kept[shape] = _made_parts(obs, config)
        except FloatingPointError:
            return _made_parts(obs, config)
    return parts


def _made_parts(obs: PhaseObservation, config: TrainerConfig) -> Mapping[str, float]:
    return phase_parts(config, obs.tokens, obs.samples, obs.sample_tokens)[obs.phase]


def _design(profile: FrameworkProfile, observations: Sequence[Observed]) -> tuple[np.ndarray, np.ndarray]:
    """``X`` and ``y`` of the module docstring: a row per observation (:func:`_group_row`)."""
    config, shape = _configs(profile, mfu=None), _shape(profile)
    rows = [_group_row(obs, config, shape) for obs in observations]
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])


def _group_row(
    obs: Observed, config: Callable[[TrainerConfig], TrainerConfig], shape: tuple[object, ...]
) -> tuple[np.ndarray, float]:
    """A group's row of ``X`` and its ``y``: the means of its members' (a single phase's own)."""
    rows = [_row(o, config(o.config), shape) for o in members(obs)]
    if len(rows) == 1:
        return np.asarray(rows[0][0], float), rows[0][1]
    return np.mean([r[0] for r in rows], axis=0), float(np.mean([r[1] for r in rows]))


def _row(
    obs: PhaseObservation, config: TrainerConfig, shape: tuple[object, ...]
) -> tuple[list[float], float]:
    if obs.phase == "remainder":
        return [0.0, 0.0, 0.0, 0.0, 1.0, float(obs.samples)], obs.seconds - config.step_overhead_s
    p = _parts(obs, config, shape)
    if obs.phase == "update_actor":
        x = [p["compute_flop_s"], 0.0, p["micro"], p["opt"], 0.0, 0.0]
    else:
        x = [0.0, p["compute_flop_s"], p["micro"], 0.0, 0.0, 0.0]
    return x, obs.seconds - p["comm_s"]


def _theta(profile: FrameworkProfile) -> np.ndarray:
    values = [getattr(profile, name) for name in FITTED]
    return np.array([1.0 / values[0], 1.0 / values[1], *values[2:]])


def fit_profile(
    profile: FrameworkProfile,
    observations: Sequence[Observed],
    fix: Collection[str] = (),
    confidence: float = 0.95,
    weights: Sequence[float] | None = None,
) -> ProfileFit:
    """Fit ``profile``'s constants (:data:`FITTED`, less ``fix``) to ``observations`` (see the
    module docstring); ``weights`` (one per observation, default 1) weigh the squared residuals,
    e.g. ``1 / variance`` of each phase's noise. ``ValueError`` naming ``observations`` when they
    cannot separate the constants asked for (rank-deficient), when the fit leaves a constant out
    of its range, or when its arithmetic overflows (seconds or tokens far outside a float's range:
    an error, not numpy's RuntimeWarning)."""
    if not isinstance(profile, FrameworkProfile):
        raise refuse("profile", f"must be a FrameworkProfile, got {shown(profile)}")
    unknown = [name for name in fix if name not in FITTED]
    if unknown:
        raise FieldError(
            f"fix: unknown constant(s) {', '.join(map(shown, unknown))}; valid: {', '.join(FITTED)}", "fix"
        )
    check_number("confidence", confidence, 0.0, strict=True)
    if confidence >= 1:
        raise refuse("confidence", f"must be in (0, 1), got {shown(confidence)}")
    if not observations or not all(_is_observed(o) for o in observations):
        raise FieldError(
            "observations must be a non-empty sequence of PhaseObservation (or of non-empty groups of them)",
            "observations",
        )
    w = None
    if weights is not None:  # weighted least squares: each row scaled by sqrt(weight)
        w = np.asarray(weights, float)
        if w.shape != (len(observations),) or not np.all(np.isfinite(w)) or not np.all(w > 0):
            raise refuse("weights", f"one positive finite number per observation, got {shown(weights)}")
    solved, intervals, rms, free = _solve_raising(profile, observations, fix, confidence, w)
    try:
        values: dict[str, Any] = dict(solved)
        fitted = dataclasses.replace(profile, **values)
    except ValueError as e:
        raise FieldError(
            f"observations: the least-squares fit leaves a constant out of range: {e}", "observations"
        ) from None
    return ProfileFit(fitted, intervals, rms, tuple(FITTED[i] for i in free))


def solve_unbounded(
    profile: FrameworkProfile,
    observations: Sequence[Observed],
    fix: Collection[str] = (),
    confidence: float = 0.95,
    weights: Sequence[float] | None = None,
) -> tuple[dict[str, float], dict[str, tuple[float, float]], int]:
    """The least squares of :func:`fit_profile` without its ranges: the values (a fixed cost may
    come out below 0), their normal intervals and the count of constants fitted. For a caller that
    floors a constant at 0 and refits: the refit's intervals hold only given the floor, and this
    fit's say how far the data leave the others. ValueError naming ``observations`` where the
    least squares cannot be solved."""
    w = None if weights is None else np.asarray(weights, float)
    values, intervals, _, free = _solve_raising(profile, observations, fix, confidence, w)
    return values, intervals, len(free)


def _solve_raising(
    profile: FrameworkProfile,
    observations: Sequence[Observed],
    fix: Collection[str],
    confidence: float,
    weights: np.ndarray | None,
) -> tuple[dict[str, float], dict[str, tuple[float, float]], float, list[int]]:
    """:func:`_solve` with numpy's overflow or 0/0 as a FieldError naming ``observations``, not a
    RuntimeWarning and an inf in the fit."""
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            return _solve(profile, observations, fix, confidence, weights)
    except FloatingPointError as e:
        raise FieldError(
            f"observations: the least squares of {len(observations)} observation(s) fail ({e}): "
            "seconds or tokens far outside a float's range",
            "observations",
        ) from None


def _is_observed(obs: object) -> bool:
    if isinstance(obs, PhaseObservation):
        return True
    return isinstance(obs, Sequence) and len(obs) > 0 and all(isinstance(o, PhaseObservation) for o in obs)


def _solve(
    profile: FrameworkProfile,
    observations: Sequence[Observed],
    fix: Collection[str],
    confidence: float,
    weights: np.ndarray | None,
) -> tuple[dict[str, float], dict[str, tuple[float, float]], float, list[int]]:
    """The least squares of :func:`fit_profile`: the fitted values, their intervals, the RMS
    residual and the indices of :data:`FITTED` fitted (run under ``np.errstate(... "raise")``)."""
    x, y = _design(profile, observations)
    theta = _theta(profile)
    free = [i for i, name in enumerate(FITTED) if name not in fix and np.any(x[:, i] != 0.0)]
    kept = [i for i in range(len(FITTED)) if i not in free]
    y = y - x[:, kept] @ theta[kept]
    if weights is not None:  # checked: one positive finite number per observation
        w = np.sqrt(weights)
        x, y = x * w[:, None], y * w
    a = x[:, free]
    scale = np.linalg.norm(a, axis=0)
    if np.linalg.matrix_rank(a / scale) < len(free):
        names = ", ".join(FITTED[i] for i in free)
        raise FieldError(
            f"observations: {len(observations)} observation(s) cannot separate {names}; "
            "add observations at other token counts, GPU counts or batch splits, or fix some",
            "observations",
        )
    solved, *_ = np.linalg.lstsq(a / scale, y, rcond=None)
    solved = solved / scale
    theta[free] = solved
    resid = y - a @ solved
    n, k = len(y), len(free)
    cov = np.linalg.inv(a.T @ a) * (float(resid @ resid) / (n - k)) if n > k else None
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    intervals: dict[str, tuple[float, float]] = {}
    values = {}
    for j, i in enumerate(free):
        name = FITTED[i]
        half = z * math.sqrt(max(cov[j, j], 0.0)) if cov is not None else math.nan
        lo, hi = theta[i] - half, theta[i] + half
        if i < 2:  # an efficiency: theta is its reciprocal
            values[name] = 1.0 / float(theta[i]) if theta[i] != 0 else math.inf  # out of range below
            intervals[name] = (1.0 / hi if hi > 0 else math.nan, 1.0 / lo if lo > 0 else math.inf)
            if math.isnan(half):
                intervals[name] = (math.nan, math.nan)
        else:
            values[name] = float(theta[i])
            intervals[name] = (lo, hi)
    rms = math.sqrt(float(resid @ resid) / n)
    return values, intervals, rms, free
