"""A closed-loop walkthrough's findings on `pipesim calibrate` and `--intervals` (calfix): each test
holds a relation the fix restores (draws inside their stated interval, a sync counted once, an
outlier named and guarded, notes that say what the intervals are conditional on)."""

from __future__ import annotations

import copy
import functools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import calibrate, calibrated_spec, read_log
from pipesim.calibrate.checks import implausible
from pipesim.calibrate.fit import Fitted, fit_lengths
from pipesim.calibrate.log import LogError, TrainingLog, read_columns_map
from pipesim.calibrate.predict import _draw
from pipesim.calibrate.sample import sample_log
from pipesim.plan.runspec import from_dict, load, read, run
from tests.test_calnoise_overhead_interval import _true_values

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "run_verl_8gpu.toml"
SAMPLE = ROOT / "examples" / "verl_sample_log.csv"
TRUE = _true_values()  # the constants the sample log was written with, read from its script


def _frame_log(df: pd.DataFrame, name: str = "walk.csv") -> TrainingLog:
    return TrainingLog(name, "0" * 64, df.reset_index(drop=True))


# 1. --intervals: each value's draws fall beyond each end of its interval 2.5% of the time


@pytest.mark.parametrize(
    ("key", "value", "interval"),
    [
        ("fwd_efficiency", 0.2586, (0.1537, 0.8153)),  # the walkthrough's: symmetric in 1 / value
        ("fwd_bwd_efficiency", 0.36124, (0.27856, 0.5137)),
        ("optimizer_step_s", 1.3019, (0.26367, 2.3401)),
        ("response_sigma", 0.69968, (0.6282, 0.76487)),  # a bootstrap interval, uneven
        ("response_median_tokens", 700.07, (650.39, 750.83)),
    ],
)
def test_a_draws_quantiles_are_its_intervals_ends(key: str, value: float, interval: tuple) -> None:
    """The share of draws below the lower end and above the upper end is 2.5% each, within four
    binomial standard errors of 20,000 draws. Before (one normal of sd (hi - lo) / 3.92 about the
    value), 26.8% of fwd_efficiency's draws fell below 0.1537 and 6% sat at the 0.001 floor."""
    n = 20_000
    rng = np.random.default_rng(7)
    x = np.array([_draw({key: value}, {key: list(interval)}, rng)[key] for _ in range(n)])
    tol = 4 * math.sqrt(0.025 * 0.975 / n)
    lo, hi = interval
    assert abs(float((x < lo).mean()) - 0.025) < tol
    assert abs(float((x > hi).mean()) - 0.025) < tol
    assert float(np.median(x)) == pytest.approx(value, rel=0.02)  # centred on the fitted value
    assert float((x <= 1.001e-3).mean()) == 0.0 or not key.endswith("efficiency")


def test_a_scaled_profiles_draws_move_together() -> None:
    """A profile scaled as a whole draws one scale: a slower draw has a lower efficiency and a
    longer fixed cost, every time."""
    from pipesim.calibrate.scale import SCALE_METHOD

    values = {"fwd_bwd_efficiency": 0.3, "optimizer_step_s": 1.0}
    intervals = {"fwd_bwd_efficiency": [0.25, 0.375], "optimizer_step_s": [0.8, 1.2]}
    methods = dict.fromkeys(values, SCALE_METHOD)
    rng = np.random.default_rng(3)
    draws = [_draw(values, intervals, rng, methods) for _ in range(200)]
    eff = np.array([d["fwd_bwd_efficiency"] for d in draws])
    fixed = np.array([d["optimizer_step_s"] for d in draws])
    assert np.corrcoef(1.0 / eff, fixed)[0, 1] > 0.99


# 2. a sync the step holds and the log does not time is taken out once


@functools.cache
def _known(sync_s: float | None, steps: int = 20) -> tuple[pd.DataFrame, dict]:
    """A sample log of the true run and that run's spec data (cached: callers copy before editing;
    the log is edited through ``drop`` and ``assign``, which copy)."""
    d = read(SPEC)
    d["calibration"] = {"values": dict(TRUE)}
    d["run"] = {"steps": steps, "seed": 0, **({"sync_time_s": sync_s} if sync_s is not None else {})}
    return sample_log(from_dict(d, SPEC.parent), np.random.default_rng(1)), d


@pytest.mark.parametrize("column", ["dropped", "zero"])
def test_a_sync_the_log_does_not_time_is_not_fitted_into_step_s(column: str) -> None:
    """A log of a run with a 10 s weight sync, its param_sync column dropped (or 0 at every step),
    calibrated against a spec that keeps the 10 s: step_s holds the true 2.0 s in its interval and
    the calibrated spec predicts the true run's step within 5% (its simulations' own noise), with a
    note saying the spec's sync was taken out. Before: step_s 11.5 [10.4, 12.5], a predicted step
    of 73.5 s for 63.9 (+15%)."""
    df, _ = _known(10.0)
    df = (
        df.drop(columns="timing_s/param_sync")
        if column == "dropped"
        else df.assign(**{"timing_s/param_sync": 0.0})
    )
    d = read(SPEC)
    d["run"] = {"steps": 20, "seed": 0, "sync_time_s": 10.0}
    rs = from_dict(d, SPEC.parent)
    cal = calibrate(_frame_log(df), rs)
    s = cal.values["step_s"]
    assert s.lo <= TRUE["step_s"] <= s.hi
    assert any("spec's simulated sync" in n for n in cal.not_identified)
    predicted = run(from_dict(calibrated_spec(rs, cal), SPEC.parent)).summary()["timing_s/step"]
    true = _true_step_s(10.0)
    assert predicted == pytest.approx(true, rel=0.05)  # the 10 s counted twice: 15% over


@functools.cache
def _true_step_s(sync_s: float) -> float:
    """The true run's mean step (both readings of its log compare with it)."""
    return float(run(from_dict(copy.deepcopy(_known(sync_s)[1]), SPEC.parent)).summary()["timing_s/step"])


def test_the_spec_sync_is_taken_out_only_where_the_step_holds_it() -> None:
    """Read as leaving the sync out (--step-includes-sync no), the step's span is unchanged by the
    spec's sync; read as holding it, it is shorter by the spec's sync at each step that syncs."""
    from pipesim.calibrate.steptime import spec_sync_s, trainer_span_s

    df, _ = _known(10.0, steps=8)
    log = _frame_log(df.drop(columns="timing_s/param_sync"))
    d = read(SPEC)
    d["run"] = {"steps": 8, "seed": 0, "sync_time_s": 10.0}
    sync = spec_sync_s(log, from_dict(d, SPEC.parent))
    assert sync[0] == 0.0 and np.allclose(sync[1:], 10.0)  # the first step has no sync before it
    held, left = trainer_span_s(log, True, 0.0, sync), trainer_span_s(log, False, 0.0, sync)
    assert held is not None and left is not None
    assert np.allclose(left - held, sync)


# 3. a log without trainer-phase columns: the intervals say what they are conditional on


@pytest.mark.parametrize("keep", [["timing_s/step"], ["timing_s/gen", "timing_s/step"]])
def test_a_log_without_phase_columns_says_its_intervals_hold_given_the_profile(
    tmp_path: Path, keep: list[str]
) -> None:
    df = pd.read_csv(SAMPLE)[["step", *keep, "response_length/mean", "prompt_length/mean"]]
    rs = load(SPEC)
    cal = calibrate(_frame_log(df), rs)
    assert any("given the profile" in n and "--intervals" in n for n in cal.not_identified)
    from pipesim.calibrate.predict import conditional_on

    lines = conditional_on(from_dict(calibrated_spec(rs, cal), SPEC.parent))
    assert any("no trainer-phase column" in line for line in lines)


def test_a_log_with_every_phase_has_no_profile_caveat() -> None:
    rs = load(SPEC)
    data = copy.deepcopy(rs.data)
    data["calibration"] = {
        "values": {k: v for k, v in TRUE.items()} | {"sync_time_s": 0.1},
        "intervals": {k: [v * 0.9, v * 1.1] for k, v in TRUE.items()} | {"sync_time_s": [0.09, 0.11]},
        "method": dict.fromkeys(TRUE, "least squares") | {"sync_time_s": "mean"},
    }
    from pipesim.calibrate.predict import conditional_on

    assert conditional_on(from_dict(data, SPEC.parent)) == []


# 4. outliers: named in a note, kept out of the guard's noise band, the trainer's phases guarded


@pytest.mark.parametrize(
    ("column", "step"), [("timing_s/step", 17), ("timing_s/update_actor", 7), ("timing_s/gen", 7)]
)
def test_an_outlying_step_is_named(column: str, step: int) -> None:
    from pipesim.calibrate.checks import outlier_notes

    df = pd.read_csv(SAMPLE)
    assert outlier_notes(_frame_log(df)) == []  # the clean sample: none
    df.loc[df["step"] == step, column] *= 10
    notes = outlier_notes(_frame_log(df))
    assert any(n.startswith(f"{column}: step {step} ") for n in notes)


def test_outlying_is_robust_and_ignores_short_steps() -> None:
    from pipesim.calibrate.result import outlying

    rng = np.random.default_rng(0)
    x = 50 * (1 + 0.03 * rng.standard_normal(40))
    assert not outlying(x).any()
    x[5], x[9] = 500.0, 20.0  # a stall, and a short step (no response near the cap)
    assert list(np.flatnonzero(outlying(x))) == [5]


@pytest.mark.parametrize(("column", "step"), [("timing_s/step", 17), ("timing_s/update_actor", 7)])
def test_a_spike_that_moves_the_held_out_prediction_is_a_warning(column: str, step: int) -> None:
    """One step ten times as long, held out (the step) or fitted (update_actor, which it pulls):
    the guard warns on the column (its band is the spread of the steps less their outliers, and it
    reads the trainer's phases). Before, the spike widened the step's band to 180% and the guard
    read no phase: a 64% and a 59% miss drew no warning."""
    df = pd.read_csv(SAMPLE)
    df.loc[df["step"] == step, column] *= 10
    if column != "timing_s/step":
        df.loc[df["step"] == step, "timing_s/step"] += 9 * pd.read_csv(SAMPLE).loc[step, column]
    cal = calibrate(_frame_log(df), load(SPEC))
    assert any(w.startswith(f"held-out {column}:") for w in cal.misses)


# 5. an implausible time is slow, not fast


def test_an_overhead_too_long_asks_whether_the_log_is_in_seconds() -> None:
    [note] = implausible({"iteration_overhead_s": Fitted(11.0, 10.0, 12.0)})
    assert "in seconds" in note and "faster" not in note
    [note] = implausible({"fwd_bwd_efficiency": Fitted(0.0004, 0.0003, 0.0005)})
    assert "in seconds" in note
    [note] = implausible({"sync_time_s": Fitted(5000.0, 4000.0, 6000.0)})
    assert "in seconds" in note


# 6. each unfitted constant has its own reason; faster than peak said so


def test_each_unfitted_constant_says_why() -> None:
    df = pd.read_csv(SAMPLE).drop(columns="timing_s/old_log_prob")
    cal = calibrate(_frame_log(df), load(SPEC))
    notes = {n.split(":")[0]: n for n in cal.not_identified if "not identified" in n}
    assert "no timing_s/old_log_prob or timing_s/ref column" in notes["fwd_efficiency"]
    assert "timing_s/old_log_prob" in notes["step_s"] and "absorb" in notes["step_s"]
    assert len({n.split("(", 1)[1] for n in notes.values()}) == len(notes)  # no reason reused
    assert any(
        n.startswith("timing_s/old_log_prob: the spec's trainer recomputes") for n in cal.not_identified
    )


def test_a_trainer_faster_than_peak_is_said_so() -> None:
    df = pd.read_csv(SAMPLE)
    df["timing_s/update_actor"] *= 0.3
    cal = calibrate(_frame_log(df), load(SPEC))
    text = " ".join(cal.not_identified)
    assert "faster than peak" in text and "GPU count" in text
    assert "must be in (0, 1]" not in text


# 10. the slime map reads a run without KL


def test_the_slime_map_reads_a_log_without_a_reference_phase(tmp_path: Path) -> None:
    cols = read_columns_map(ROOT / "examples" / "columns_slime.toml")
    df = pd.read_csv(SAMPLE)
    renamed = df.rename(columns={c: cols.get(c, c) for c in df.columns})  # verl's names -> slime's
    path = tmp_path / "slime.csv"
    renamed.to_csv(path, index=False)
    log = read_log(path, cols)
    assert log.has("timing_s/update_actor") and not log.has("timing_s/ref")
    bad = dict(cols, **{"timing_s/ref": "perf/ref_log_probs_time"})
    with pytest.raises(LogError, match="drop or comment out that line") as e:
        read_log(path, bad)
    assert e.value.field == "perf/ref_log_probs_time"


# 11. a sigma kept from the spec: the median's interval is conditional on it


def test_a_sigma_from_the_spec_says_the_median_holds_only_given_it() -> None:
    mean = np.full(8, 900.0) + np.arange(8)
    _, notes = fit_lengths(mean, None, None, 4096, 128, 0.3, 0.8, np.random.default_rng(0))
    assert any("response_sigma" in n and "only given that sigma" in n for n in notes)
