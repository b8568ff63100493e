"""Bad calibration input is refused, naming the field or column, without a numpy RuntimeWarning:
a run spec's ``[calibration.intervals]`` (:mod:`pipesim.plan.runspec_calibration`: the values'
keys, types and ranges, two ends, ``lo <= hi``), a training log's cells that no run logs (a zero
response length, a time out of range, a step that is no step number: :mod:`pipesim.calibrate.log`),
a prompt longer than the spec's context (:func:`pipesim.calibrate.check_log`), and a phase fit
that overflows (:func:`pipesim.compute.phasefit.fit_profile`). Rows: what, the change, the field."""

from __future__ import annotations

import copy
import functools
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import tomli_w

from pipesim.calibrate import LogError, calibrate, read_log
from pipesim.calibrate.checks import in_range
from pipesim.calibrate.fit import Fitted
from pipesim.calibrate.predict import _draw
from pipesim.calibrate.trainer import config
from pipesim.compute.phasefit import PhaseObservation, fit_profile
from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.plan.checks import PlanError
from pipesim.plan.runspec import from_dict, load, read

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPEC = EXAMPLES / "run_verl_8gpu.toml"
LOG = EXAMPLES / "verl_sample_log.csv"
VALUES = {
    "response_median_tokens": 700.0,
    "response_sigma": 0.7,
    "fwd_bwd_efficiency": 0.36,
    "micro_batch_s": 0.2,
    "sync_time_s": 0.11,
    "iteration_overhead_s": 0.004,
}
INTERVALS = {
    "response_median_tokens": [650.0, 750.0],
    "response_sigma": [0.63, 0.76],
    "fwd_bwd_efficiency": [0.28, 0.5],
    "micro_batch_s": [0.0, 0.4],
    "sync_time_s": [0.10, 0.12],
    "iteration_overhead_s": [0.0036, 0.0044],
}


@functools.cache
def _spec_data() -> dict[str, Any]:
    return read(SPEC)


def _calibrated(
    values: dict[str, Any] | None = None, intervals: dict[str, Any] | None = None
) -> dict[str, Any]:
    data = copy.deepcopy(_spec_data())
    data["calibration"] = {
        "values": {**VALUES, **(values or {})},
        "intervals": {**copy.deepcopy(INTERVALS), **(intervals or {})},
    }
    return data


def test_a_sound_calibration_loads() -> None:
    """The table the refusals below change loads; an open upper end (``inf``, what calibrate writes
    for an efficiency its log cannot bound above) and an end on a value's open bound load too."""
    from_dict(_calibrated())
    from_dict(_calibrated(intervals={"fwd_bwd_efficiency": [0.0, math.inf], "sync_time_s": [0, 604800]}))
    from_dict(_calibrated(intervals={"drift_per_version": [-1.0, 0.5], "mfu": [0.1, 1]}))


BAD_INTERVALS: list[tuple[str, dict[str, Any], str]] = [
    ("negative lower end, huge upper", {"sync_time_s": [-1, 1e308]}, "sync_time_s"),
    ("upper end above a week", {"sync_time_s": [0, 1e308]}, "sync_time_s"),
    ("reversed", {"sync_time_s": [5, 1]}, "sync_time_s"),
    ("sigma that overflows a draw", {"response_sigma": [0, 1000]}, "response_sigma"),
    ("median that overflows a draw", {"response_median_tokens": [1.0, 1e308]}, "response_median_tokens"),
    ("unknown key", {"bogus": [0, 1]}, "bogus"),
    ("one string", {"sync_time_s": ["a"]}, "sync_time_s"),
    ("strings", {"sync_time_s": ["0", "1"]}, "sync_time_s"),
    ("one number", {"sync_time_s": [1.0]}, "sync_time_s"),
    ("three numbers", {"sync_time_s": [0.0, 0.1, 0.2]}, "sync_time_s"),
    ("a scalar", {"sync_time_s": 0.1}, "sync_time_s"),
    ("a table", {"sync_time_s": {"lo": 0, "hi": 1}}, "sync_time_s"),
    ("nan", {"sync_time_s": [math.nan, math.nan]}, "sync_time_s"),
    ("nan upper end", {"sync_time_s": [0.1, math.nan]}, "sync_time_s"),
    ("-inf lower end", {"sync_time_s": [-math.inf, 1.0]}, "sync_time_s"),
    ("inf lower end", {"sync_time_s": [math.inf, math.inf]}, "sync_time_s"),
    ("a bool", {"sync_time_s": [True, 1]}, "sync_time_s"),
    ("efficiency above 1", {"fwd_bwd_efficiency": [0.2, 1.5]}, "fwd_bwd_efficiency"),
    ("efficiency wholly negative", {"fwd_bwd_efficiency": [-0.5, -0.1]}, "fwd_bwd_efficiency"),
    ("fixed cost wholly negative", {"micro_batch_s": [-0.4, -0.01]}, "micro_batch_s"),
    ("drift wholly below -1", {"drift_per_version": [-3, -2]}, "drift_per_version"),
    ("lower end -inf", {"micro_batch_s": [-math.inf, 0.4]}, "micro_batch_s"),
    ("overhead above an hour", {"iteration_overhead_s": [0, 4000]}, "iteration_overhead_s"),
    ("a huge integer", {"step_s": [0, 10**400]}, "step_s"),
]


@pytest.mark.parametrize("why,change,key", BAD_INTERVALS, ids=[b[0] for b in BAD_INTERVALS])
def test_bad_intervals_name_the_key(why: str, change: dict[str, Any], key: str) -> None:
    with pytest.raises(PlanError) as e:
        from_dict(_calibrated(intervals=change))
    assert e.value.field == f"calibration.intervals.{key}", (why, e.value.field, str(e.value))
    assert f"calibration.intervals.{key}" in str(e.value)


@pytest.mark.parametrize(
    "change",
    [{"micro_batch_s": [-0.0019, 0.395]}, {"drift_per_version": [-1.5, 0.1]}, {"fwd_bwd_efficiency": [0, 1]}],
    ids=["fixed cost through 0 (an earlier calibrate's)", "drift through -1", "efficiency reaching 0"],
)
def test_an_interval_reaching_past_its_range_below_still_loads(change: dict[str, Any]) -> None:
    """Its draws are cut to the range; a spec an earlier ``pipesim calibrate`` wrote keeps loading."""
    from_dict(_calibrated(intervals=change))


BAD_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("overhead above an hour", {"iteration_overhead_s": 1e308}, "iteration_overhead_s"),
    ("mfu 0", {"mfu": 0}, "mfu"),
    ("median 0", {"response_median_tokens": 0}, "response_median_tokens"),
    ("a sync of 30 years", {"sync_time_s": 1e9}, "sync_time_s"),
    ("efficiency above 1", {"fwd_efficiency": 1.5}, "fwd_efficiency"),
]


@pytest.mark.parametrize("why,change,key", BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_bad_values_name_their_own_key(why: str, change: dict[str, Any], key: str) -> None:
    """A value out of its range names ``calibration.values.KEY``, not the table it overrides."""
    with pytest.raises(PlanError) as e:
        from_dict(_calibrated(values=change))
    assert e.value.field == f"calibration.values.{key}", (why, e.value.field, str(e.value))


@pytest.mark.parametrize(
    "pair,key",
    [
        ("calibration.intervals.sync_time_s=[-1,1e308]", "calibration.intervals.sync_time_s"),
        ('calibration.intervals.sync_time_s=["a"]', "calibration.intervals.sync_time_s"),
        ("calibration.intervals.sync_time_s=[nan,nan]", "calibration.intervals.sync_time_s"),
        ("calibration.intervals.bogus=[0,1]", "calibration.intervals.bogus"),
    ],
)
def test_run_intervals_refuses_before_it_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pair: str, key: str
) -> None:
    """``pipesim run CAL --intervals N --set BAD``: exit 2, one line naming the key, nothing run
    (the error used to come after the main run, or name calibration.values)."""
    path = tmp_path / "cal.toml"
    path.write_text(tomli_w.dumps(_calibrated()))
    assert main(["run", str(path), "--intervals", "2", "--set", "run.steps=2", "--set", pair]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pipesim: error:") and key in lines[0], lines
    assert "throughput" not in out


def test_calibrate_writes_intervals_inside_the_values_ranges() -> None:
    """A fitted interval is cut to its value's range (bounds included) before it is written: a
    fixed cost's lower end below 0, an efficiency's upper end above 1, an undetermined (NaN) end;
    an open upper end stays open."""
    assert in_range("micro_batch_s", Fitted(0.2, -0.01, 0.4)) == Fitted(0.2, 0.0, 0.4)
    assert in_range("fwd_efficiency", Fitted(0.5, 0.3, 1.4)) == Fitted(0.5, 0.3, 1.0)
    assert in_range("fwd_efficiency", Fitted(0.5, 0.3, math.inf)).hi == math.inf
    assert in_range("step_s", Fitted(2.0, math.nan, math.nan)) == Fitted(2.0, 0.0, 604800.0)
    assert in_range("drift_per_version", Fitted(-0.01, -0.02, 0.0)) == Fitted(-0.01, -0.02, 0.0)


def test_a_negative_drift_is_drawn_negative() -> None:
    """``--intervals`` cuts a draw to its value's range: a drift's goes below 0 (it was cut at 0)."""
    rng = np.random.default_rng(0)
    draws = [
        _draw({"drift_per_version": -0.02}, {"drift_per_version": [-0.03, -0.01]}, rng) for _ in range(50)
    ]
    assert all(-1 < d["drift_per_version"] < 0 for d in draws)


# -- logs ---------------------------------------------------------------------------------------
def _set(df: pd.DataFrame, column: str, value: Any, row: int | None = None) -> pd.DataFrame:
    df = df.copy()
    df[column] = df[column].astype(float)
    if row is None:
        df[column] = value
    else:
        df.loc[row, column] = value
    return df


BAD_LOGS: list[tuple[str, Callable[[pd.DataFrame], pd.DataFrame], str]] = [
    ("response mean all 0", lambda d: _set(d, "response_length/mean", 0.0), "response_length/mean"),
    ("response mean 0 at a step", lambda d: _set(d, "response_length/mean", 0.0, 3), "response_length/mean"),
    (
        "response max 0",
        lambda d: _set(d.assign(**{"response_length/max": 2000.0}), "response_length/max", 0.0, 1),
        "response_length/max",
    ),
    ("update_actor 1e300", lambda d: _set(d, "timing_s/update_actor", 1e300, 4), "timing_s/update_actor"),
    ("param_sync above a week", lambda d: _set(d, "timing_s/param_sync", 1e6, 2), "timing_s/param_sync"),
    ("gen below a nanosecond", lambda d: _set(d, "timing_s/gen", 1e-320, 2), "timing_s/gen"),
    ("update_actor 0 at a step", lambda d: _set(d, "timing_s/update_actor", 0.0, 5), "timing_s/update_actor"),
    ("old_log_prob 0 at a step", lambda d: _set(d, "timing_s/old_log_prob", 0.0, 0), "timing_s/old_log_prob"),
    ("steps near 1e20", lambda d: d.assign(step=(d["step"] + 1) * 1e20), "step"),
    ("steps at 2**53", lambda d: d.assign(step=d["step"] + 2.0**53), "step"),
    ("a fractional step", lambda d: d.assign(step=d["step"] * 0.5), "step"),
]
OFF_SPEC: list[tuple[str, Callable[[pd.DataFrame], pd.DataFrame], str]] = [
    ("prompt 1e9", lambda d: _set(d, "prompt_length/mean", 1e9), "prompt_length/mean"),
    (
        "prompt above the context at a step",
        lambda d: _set(d, "prompt_length/mean", 9000.0, 7),
        "prompt_length/mean",
    ),
    (
        "prompt and response above the context",
        lambda d: _set(d, "prompt_length/mean", 7800.0),
        "prompt_length/mean",
    ),
]


@functools.cache
def _sample() -> pd.DataFrame:
    return pd.read_csv(LOG)


def _write(tmp_path: Path, df: pd.DataFrame) -> Path:
    path = tmp_path / "log.csv"
    df.to_csv(path, index=False, float_format="%.17g")
    return path


@pytest.mark.parametrize("why,mutate,column", BAD_LOGS, ids=[b[0] for b in BAD_LOGS])
def test_a_cell_no_run_logs_is_refused_naming_its_column(
    tmp_path: Path, why: str, mutate: Callable[[pd.DataFrame], pd.DataFrame], column: str
) -> None:
    path = _write(tmp_path, mutate(_sample()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(LogError) as e:
            read_log(path)
    assert e.value.field == column and column in str(e.value) and str(path) in str(e.value), why


@pytest.mark.parametrize("why,mutate,column", OFF_SPEC, ids=[b[0] for b in OFF_SPEC])
def test_a_prompt_the_spec_cannot_hold_is_refused(
    tmp_path: Path, why: str, mutate: Callable[[pd.DataFrame], pd.DataFrame], column: str
) -> None:
    """As a response above the spec's cap is: the log reads, calibrate refuses it naming the column."""
    log = read_log(_write(tmp_path, mutate(_sample())))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(LogError) as e:
            calibrate(log, load(SPEC))
    assert e.value.field == column and "max_model_len" in str(e.value), (why, str(e.value))


@pytest.mark.parametrize(
    "why,mutate,column",
    [BAD_LOGS[0], BAD_LOGS[3], BAD_LOGS[8], OFF_SPEC[0]],
    ids=["response 0", "update_actor 1e300", "steps 1e20", "prompt 1e9"],
)
def test_the_command_refuses_in_one_line_without_a_warning(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], why: str, mutate: Any, column: str
) -> None:
    path = _write(tmp_path, mutate(_sample()))
    out = tmp_path / "c.toml"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["calibrate", str(path), "--spec", str(SPEC), "--out", str(out)]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pipesim: error:") and column in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("column", ["timing_s/update_actor", "timing_s/old_log_prob"])
def test_a_phase_logged_as_0_at_every_step_is_not_used(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], column: str
) -> None:
    """A phase column of zeros is a phase not timed (as an all-zero param_sync is no sync): left
    out with a note, no warning, no infinite residual, and the calibrated spec loads."""
    # 8 steps: 2 held out, where an unused zero column's residual would be infinite
    path = _write(tmp_path, _set(_sample().head(8), column, 0.0))
    out = tmp_path / "c.toml"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["calibrate", str(path), "--spec", str(SPEC), "--out", str(out)]) == 0
    text = capfd.readouterr()
    assert "RuntimeWarning" not in text.err and "inf," not in text.out and "nan" not in text.out, text
    assert f"note: {column}: 0 s at every step" in text.out
    load(out)


def test_a_phase_fit_that_overflows_is_an_error_not_a_warning() -> None:
    """fit_profile on seconds whose squares overflow: FieldError naming observations."""
    rs = load(SPEC)
    cfg = config(rs)
    obs = [
        PhaseObservation(cfg, "update_actor", 2e5 + 1e4 * i, 128, 1e300 if i == 2 else 5.0) for i in range(6)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(FieldError) as e:
            fit_profile(cfg.framework, obs, fix=("sample_s", "step_s", "micro_batch_s"))
    assert e.value.field == "observations"
