"""Response lengths that drift while the cap cuts them (:mod:`pipesim.calibrate.trajfit`).

A synchronous log whose lengths grow 2% a version while more and more are cut at the 4,096-token
cap (clip ratio 0.04 to 0.35 over 40 steps) was calibrated to a median of 1313 [1208, 1411] (true
1200), sigma 0.648 [0.618, 0.678] (true 0.6) and drift 0.0165 [0.0142, 0.0189] (true 0.02), and
nothing said so: the pooled fit read the growth as spread, and the slope of the log of the capped
mean understates the drift. Now the drift, median and sigma are fitted together with the cap from
every step's mean and clip ratio.

* **Closed form**: per-step means and clip ratios computed from the formulas
  (:func:`~pipesim.calibrate.fit.capped_mean`, the normal tail) are inverted to 1e-6.
* **Recovery**: logs the project's own sampler writes from known values
  (:func:`~pipesim.calibrate.sample.sample_log`, seeds fixed: the walkthrough's), drifts 0, 2%, 3%
  (and a shrinking one) under caps from none to heavy, fitted as the CLI fits a whole log
  (:func:`~pipesim.calibrate.fitspec.fit_spec`). Each true value must lie in its 95% interval,
  and where a drift is capped each point must be closer to the truth than today's pooled fit's.
  Why that tolerance: over 60 seeds each (drift 0 and 2%, cap 4,096) the intervals held the
  truth in 87-95% of logs, so a fixed seed can miss one; the seeds here are the walkthrough's
  (run 3, noise 1), not chosen, and every case holds. "Closer" is not luck: over 20 seeds per
  case the pooled fit's bias here (median +80 to +430 tokens, drift -0.003 to -0.016) is 2 to 12
  times the joint estimates' spread (median 35 tokens, sigma 0.015, drift 0.0014). It would be
  luck for a small drift under a light cap (2% under 7,000: median +28), which is left out.
* **Unchanged**: without a clipped step (no cap reached, or no clip ratio) the values are today's
  exactly; a drift seen without a clip ratio where the responses reach the cap gets a note saying
  which way each value is biased.
* **Refusals**: the new functions' bad arguments, naming the argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import LogError, TrainingLog
from pipesim.calibrate.fit import Fitted, capped_mean, fit_drift, fit_lengths
from pipesim.calibrate.fitspec import fit_spec
from pipesim.calibrate.sample import sample_log
from pipesim.calibrate.trajfit import HOW, cap_seen, fit_trajectory, solve_trajectory
from pipesim.core.validate import FieldError
from pipesim.plan.runspec import RunSpec, from_dict, read
from tests.test_refusals_core import check_refusal

SPEC = Path(__file__).resolve().parent.parent / "examples" / "run_verl_8gpu.toml"
MEDIAN, SIGMA = 1200.0, 0.6
GUESS_SIGMA = 0.8  # the example spec's response sigma, which a calibration starts from
TRUE = {
    "fwd_bwd_efficiency": 0.5,
    "fwd_efficiency": 0.3,
    "micro_batch_s": 0.1,
    "optimizer_step_s": 2.0,
    "step_s": 5.0,
    "iteration_overhead_s": 0.008,
    "response_median_tokens": MEDIAN,
    "response_sigma": SIGMA,
}
LENGTHS = ("response_median_tokens", "response_sigma", "drift_per_version")


def _rows(median: float, sigma: float, drift: float, cap: float, steps: np.ndarray) -> tuple[np.ndarray, ...]:
    """The per-step mean and clip ratio the model gives, exactly (``sigma`` the whole spread)."""
    mu = math.log(median) + math.log1p(drift) * steps
    mean = np.array([capped_mean(float(m), sigma, cap) for m in mu])
    clip = np.array([1.0 - NormalDist().cdf((math.log(cap) - m) / sigma) for m in mu])
    return mean, clip


# median, whole sigma, drift, cap, steps: growing into the cap, shrinking out of it, clipping
# past half (the pooled closed form's limit), a log cut at the front (steps 6 on), a short one
NOISELESS = {
    "walkthrough": (1200.0, math.hypot(0.6, 0.3), 0.02, 4096.0, np.arange(40.0)),
    "shrinking": (3000.0, 0.5, -0.02, 4096.0, np.arange(30.0)),
    "past half": (2000.0, 0.8, 0.03, 2500.0, np.arange(40.0)),
    "cut at the front": (700.0, 1.1, 0.01, 4096.0, np.arange(6.0, 26.0)),
    "six steps": (1500.0, 0.4, 0.05, 2000.0, np.arange(6.0)),
}


@pytest.mark.parametrize("case", list(NOISELESS))
def test_the_joint_fit_inverts_noiseless_steps(case: str) -> None:
    median, s, drift, cap, steps = NOISELESS[case]
    mean, clip = _rows(median, s, drift, cap, steps)
    point = solve_trajectory(steps, mean, clip, cap)
    assert point is not None
    mu0, b, s_fit = point
    assert mu0 == pytest.approx(math.log(median), abs=1e-6)
    assert b == pytest.approx(math.log1p(drift), abs=1e-6)
    assert s_fit == pytest.approx(s, rel=1e-6)
    # the values with intervals: the whole spread less the groups' (difficulty_sigma 0.3 here)
    got = fit_trajectory(steps, mean, clip, cap, 0.3, np.random.default_rng(0))
    assert got is not None
    assert got["response_median_tokens"].value == pytest.approx(median, rel=1e-6)
    assert got["response_sigma"].value == pytest.approx(math.sqrt(s * s - 0.09), rel=1e-6)
    assert got["drift_per_version"].value == pytest.approx(drift, abs=1e-6)
    for v in got.values():  # every resample of noiseless steps finds the same values
        assert v.lo <= v.value <= v.hi and v.width < 1e-5 * max(abs(v.value), 1.0)


def test_without_a_clipped_step_the_joint_fit_does_not_apply() -> None:
    """Nothing ties the spread to the cap then: the pooled fit's case, as before."""
    steps = np.arange(20.0)
    mean, _ = _rows(1000.0, 0.7, 0.02, 4096.0, steps)
    assert solve_trajectory(steps, mean, np.zeros(20), 4096.0) is None
    assert fit_trajectory(steps, mean, np.zeros(20), 4096.0, 0.3, np.random.default_rng(0)) is None
    # too few steps for a trajectory, and every response at the cap (the median only a bound)
    _, clip = _rows(1000.0, 0.7, 0.02, 4096.0, steps)
    assert fit_trajectory(steps[:5], mean[:5], clip[:5], 4096.0, 0.3, np.random.default_rng(0)) is None
    at_cap = fit_trajectory(steps, np.full(20, 4096.0), np.ones(20), 4096.0, 0.3, np.random.default_rng(0))
    assert at_cap is None


def test_the_same_seed_gives_the_same_intervals() -> None:
    steps = np.arange(30.0)
    mean, clip = _rows(1200.0, 0.67, 0.02, 4096.0, steps)
    noisy = mean * np.exp(0.03 * np.random.default_rng(1).standard_normal(30))
    one, two = (fit_trajectory(steps, noisy, clip, 4096.0, 0.3, np.random.default_rng(7)) for _ in range(2))
    other = fit_trajectory(steps, noisy, clip, 4096.0, 0.3, np.random.default_rng(8))
    assert one == two and one is not None and other is not None
    assert one["response_median_tokens"].value == other["response_median_tokens"].value
    assert one["response_median_tokens"].lo != other["response_median_tokens"].lo


# --- recovery from the sampler's logs ------------------------------------------------------------

# drift, cap: the walkthrough's two, heavy and light clipping, none (a cap no response reaches),
# and a drift with no cap reached (the least-squares slope, unbiased there, kept as it was)
RECOVERY = {
    "2%, cap 4096 (walkthrough)": (0.02, 4096),
    "3%, cap 4096 (walkthrough)": (0.03, 4096),
    "2%, cap 2500 (heavy)": (0.02, 2500),
    "3%, cap 7000 (light)": (0.03, 7000),
    # the steps' mean clip ratio past half: the pooled fit cannot read sigma (the spec's kept)
    "3%, cap 1500 (past half)": (0.03, 1500),
    "shrinking 1%, cap 2500": (-0.01, 2500),
    "none, cap 2500 (heavy)": (0.0, 2500),
    "none, cap 4096": (0.0, 4096),
    "2%, cap 30000 (none reached)": (0.02, 30000),
}


def _log(drift: float, cap: int) -> tuple[pd.DataFrame, RunSpec, RunSpec]:
    """A 40-step log of the example spec at the true values (the walkthrough's seeds: run 3, noise
    1), and the spec the calibration is given (the example's, at the cap)."""
    data = read(SPEC)
    data["calibration"] = {"values": dict(TRUE)}
    data["run"] = {"steps": 40, "seed": 3}
    data["workload"].update(drift_per_version=drift, max_response_tokens=cap)
    data["model"]["max_model_len"] = max(data["model"]["max_model_len"], cap + 1024)
    df = sample_log(from_dict(data), np.random.default_rng(1))
    given = read(SPEC)
    given["workload"]["max_response_tokens"] = cap
    given["model"]["max_model_len"] = data["model"]["max_model_len"]
    return df, from_dict(data), from_dict(given)


def _todays(df: pd.DataFrame, rs: RunSpec) -> dict[str, Fitted]:
    """What the calibration fitted before: the pooled fit, the least-squares slope, and (where the
    slope's interval excludes 0) the median scaled back to step 0 by ``(1 + d) ** mean step``."""
    wl = rs.plan.workload
    clip = df["response_length/clip_ratio"].to_numpy() if "response_length/clip_ratio" in df else None
    maxes = df["response_length/max"].to_numpy() if "response_length/max" in df else None
    mean, steps = df["response_length/mean"].to_numpy(), df["step"].to_numpy(float)
    got, _ = fit_lengths(
        mean,
        clip,
        maxes,
        wl.max_response_tokens,
        rs.plan.batch_size,
        wl.difficulty_sigma,
        GUESS_SIGMA,
        np.random.default_rng(0),
    )
    d = fit_drift(steps, mean)
    assert d is not None
    if not d.lo <= 0 <= d.hi:
        back = (1 + d.value) ** steps.mean()
        m = got["response_median_tokens"]
        got["response_median_tokens"] = Fitted(
            m.value / back, m.lo / back, m.hi / back, m.how + ", at the first step"
        )
        got["drift_per_version"] = d
    return got


def _fit(df: pd.DataFrame, rs: RunSpec) -> tuple[dict[str, Fitted], list[str]]:
    values, notes, _ = fit_spec(TrainingLog("sample.csv", "0" * 64, df), rs, 0, means=False)
    return values, notes


@pytest.mark.parametrize("case", list(RECOVERY))
def test_known_lengths_are_recovered_within_their_intervals(case: str) -> None:
    drift, cap = RECOVERY[case]
    df, _, given = _log(drift, cap)
    values, notes = _fit(df, given)
    before = _todays(df, given)
    clipped = bool((df["response_length/clip_ratio"] > 0).any())
    assert clipped == (cap < 30000), "the case's clipping is what its name says"
    truth = {"response_median_tokens": MEDIAN, "response_sigma": SIGMA, "drift_per_version": drift}
    # without a clipped step (and no max) sigma is the spec's guess (GUESS_SIGMA), the median holds
    # only given it (a documented limit, docs/calibrate.md): there only the drift is checked
    given_sigma = values["response_median_tokens"].how.startswith("mean (sigma from the spec)")
    assert given_sigma == (not clipped) and ("response_sigma" in values) == clipped
    for k in [k for k in LENGTHS if k in values and not (given_sigma and k == LENGTHS[0])]:
        assert values[k].lo <= truth[k] <= values[k].hi, (k, values[k])
    assert ("drift_per_version" in values) == (drift != 0)
    if drift and clipped:  # the joint fit's, each value closer than the pooled fit's
        for k in LENGTHS:
            assert values[k].how.startswith(HOW), (k, values[k])
            # a sigma the pooled fit could not read (clip ratio past half) runs at the spec's
            old = before[k].value if k in before else GUESS_SIGMA
            assert abs(values[k].value - truth[k]) < abs(old - truth[k]), (k, values[k], old)
        assert not any(n.startswith("response_sigma:") for n in notes)
    else:  # no drift seen, or no step clipped: the values are today's, exactly
        assert {k: values[k] for k in LENGTHS if k in values} == {
            k: before[k] for k in LENGTHS if k in before
        }
    if not drift:
        assert any(n.startswith("drift_per_version: none seen") for n in notes)


def test_the_walkthroughs_held_out_response_mean_is_predicted() -> None:
    """The 3% log's last quarter, predicted from the first three: 7.5% short before, now within 2%."""
    from pipesim.calibrate import calibrate

    df, _, given = _log(0.03, 4096)
    cal = calibrate(TrainingLog("sample.csv", "0" * 64, df), given)
    assert abs(cal.residuals["response_length/mean"]["mean"]) < 0.02, cal.residuals["response_length/mean"]


# --- a drift that cannot be fitted with the cap: a note, and which way ------------------------


def _without(df: pd.DataFrame, *cols: str, **extra: float) -> pd.DataFrame:
    return df.drop(columns=list(cols)).assign(**extra)


NOTED: dict[str, tuple[float, Callable[[pd.DataFrame], pd.DataFrame], str]] = {
    # no clip ratio: the fitted lengths put a share above the cap
    "growing, no clip ratio": (0.02, lambda d: _without(d, "response_length/clip_ratio"), "biased high"),
    # no clip ratio, a max at the cap every step
    "growing, max at the cap": (
        0.03,
        lambda d: _without(d, "response_length/clip_ratio", **{"response_length/max": 4096.0}),
        "biased high",
    ),
    "shrinking, no clip ratio": (-0.015, lambda d: _without(d, "response_length/clip_ratio"), "biased low"),
}


@pytest.mark.parametrize("case", list(NOTED))
def test_a_capped_drift_without_a_clip_ratio_is_said_to_be_biased(case: str) -> None:
    drift, strip, direction = NOTED[case]
    df, _, given = _log(drift, 4096)
    values, notes = _fit(strip(df), given)
    assert "drift_per_version" in values and values["drift_per_version"].how.startswith("least squares")
    said = [n for n in notes if n.startswith("drift_per_version:") and "reach the cap" in n]
    assert len(said) == 1 and direction in said[0], notes
    assert ("predicted short" in said[0]) == (drift > 0)
    before = _todays(strip(df), given)  # the values themselves are today's: only the note is new
    assert {k: values[k] for k in LENGTHS if k in values} == {k: before[k] for k in LENGTHS if k in before}


def test_no_note_where_no_response_reaches_the_cap() -> None:
    df, _, given = _log(0.02, 30000)
    for log in (df, _without(df, "response_length/clip_ratio")):
        values, notes = _fit(log, given)
        assert "drift_per_version" in values
        assert not any("reach the cap" in n for n in notes), notes


# (steps, clip, maxes, cap, (median, s, drift)) -> whether the cap is said to be reached
SEEN: dict[str, tuple[Any, ...]] = {
    "a clip ratio above 0": (
        np.arange(6.0),
        np.array([0, 0, 0, 0, 0, 0.01]),
        None,
        4096,
        (1e3, 0.5, 0.0),
        True,
    ),
    "a clip ratio of 0": (np.arange(6.0), np.zeros(6), np.full(6, 4096.0), 4096, (1e3, 0.5, 0.0), False),
    "a max at the cap": (
        np.arange(6.0),
        None,
        np.array([3000.0] * 5 + [4096.0]),
        4096,
        (1e3, 0.5, 0.0),
        True,
    ),
    "every max under it": (np.arange(6.0), None, np.full(6, 4095.0), 4096, (1e3, 3.0, 0.5), False),
    # neither logged: 1 - Phi((ln 4096 - ln 1000 - 5 ln 1.2) / 0.5) is 15.9% at the last step; at
    # s 0.2 it is 0.64%, and at drift 0.05 (s 0.5) 0.98%: under MIN_CAPPED_SHARE
    "implied 15.9% at the last step": (np.arange(6.0), None, None, 4096, (1e3, 0.5, 0.2), True),
    "implied 0.64%": (np.arange(6.0), None, None, 4096, (1e3, 0.2, 0.2), False),
    "implied 0.98%, just under 1%": (np.arange(6.0), None, None, 4096, (1e3, 0.5, 0.05), False),
    "shrinking: the first step's, 26.7%": (np.arange(6.0), None, None, 4096, (3e3, 0.5, -0.2), True),
}


@pytest.mark.parametrize("case", list(SEEN))
def test_cap_seen_reads_the_evidence_in_order(case: str) -> None:
    steps, clip, maxes, cap, lengths, seen = SEEN[case]
    assert (cap_seen(steps, clip, maxes, cap, lengths) is not None) == seen


# --- refusals ----------------------------------------------------------------------------------

_S = np.arange(8.0)
_M, _C = _rows(1000.0, 0.7, 0.02, 4096.0, _S)
_G = np.random.default_rng(0)

BAD: list[tuple[str, Callable[[], Any], type[FieldError], str]] = [
    ("steps a string", lambda: fit_trajectory("abc", _M, _C, 4096, 0.3, _G), FieldError, "steps"),
    ("steps short", lambda: fit_trajectory(_S[:5], _M, _C, 4096, 0.3, _G), FieldError, "steps"),
    ("steps repeated", lambda: fit_trajectory(np.zeros(8), _M, _C, 4096, 0.3, _G), FieldError, "steps"),
    ("steps NaN", lambda: solve_trajectory(_S * math.nan, _M, _C, 4096), FieldError, "steps"),
    ("mean negative", lambda: fit_trajectory(_S, -_M, _C, 4096, 0.3, _G), LogError, "mean"),
    ("mean 2-D", lambda: solve_trajectory(_S, _M[None, :], _C, 4096), LogError, "mean"),
    ("clip above 1", lambda: fit_trajectory(_S, _M, _C + 1, 4096, 0.3, _G), FieldError, "clip"),
    ("clip short", lambda: fit_trajectory(_S, _M, _C[:3], 4096, 0.3, _G), LogError, "clip"),
    ("clip None", lambda: solve_trajectory(_S, _M, None, 4096), LogError, "clip"),
    ("cap 0", lambda: fit_trajectory(_S, _M, _C, 0, 0.3, _G), FieldError, "cap"),
    ("cap past a spec's bound", lambda: solve_trajectory(_S, _M, _C, 1e300), FieldError, "cap"),
    ("cap a bool", lambda: solve_trajectory(_S, _M, _C, True), FieldError, "cap"),
    (
        "difficulty_sigma negative",
        lambda: fit_trajectory(_S, _M, _C, 4096, -0.1, _G),
        FieldError,
        "difficulty_sigma",
    ),
    ("rng a seed", lambda: fit_trajectory(_S, _M, _C, 4096, 0.3, 0), FieldError, "rng"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("call", "kind", "field"), [r[1:] for r in BAD], ids=[r[0] for r in BAD])
def test_bad_arguments_are_refused_naming_them(
    call: Callable[[], Any], kind: type[FieldError], field: str
) -> None:
    check_refusal(call, kind, field)
