"""``pipesim calibrate`` (:mod:`pipesim.calibrate`): the closed-form fits against their inverses and
a Monte Carlo reference, recovery of the constants a pipesim-written log was made with, intervals
that narrow from 10 to 20 steps, missing and renamed columns, and bad logs as one-line errors
naming the column or key."""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim.calibrate import LogError, calibrate, read_columns_map, read_log
from pipesim.calibrate.fit import _lengths, capped_mean, fit_trainer
from pipesim.calibrate.sample import sample_log
from pipesim.io.cli import main
from pipesim.plan import specfile
from pipesim.plan.runspec import from_dict, load, read, run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPEC = EXAMPLES / "run_verl_8gpu.toml"
TRUE = {
    "mfu": 0.3,
    "step_overhead_s": 2.5,
    "iteration_overhead_s": 0.004,
    "response_median_tokens": 700.0,
    "response_sigma": 0.7,
}


@functools.lru_cache(maxsize=4)
def _log(steps: int, noise: float, seed: int = 3) -> pd.DataFrame:
    data = read(SPEC)
    data["calibration"] = {"values": dict(TRUE)}
    data["run"] = {"steps": steps, "seed": seed}
    return sample_log(from_dict(data), np.random.default_rng(seed + 100), noise=noise)


def _write(tmp_path: Path, df: pd.DataFrame, name: str = "log.csv") -> Path:
    p = tmp_path / name
    if name.endswith(".jsonl"):
        df.to_json(p, orient="records", lines=True)
    else:
        df.to_csv(p, index=False)
    return p


# -- the closed forms ---------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(mu=st.floats(4.0, 8.0), s=st.floats(0.2, 1.5), cap_z=st.floats(-0.5, 3.0), seed=st.integers(0, 2**31))
def test_capped_mean_agrees_with_monte_carlo(mu: float, s: float, cap_z: float, seed: int) -> None:
    cap = math.exp(mu + cap_z * s)
    x = np.minimum(np.exp(mu + s * np.random.default_rng(seed).standard_normal(400_000)), cap)
    assert capped_mean(mu, s, cap) == pytest.approx(
        x.mean(), rel=4 * x.std() / x.mean() / math.sqrt(len(x)) + 1e-3
    )


@settings(max_examples=40, deadline=None)
@given(mu=st.floats(4.0, 8.0), s=st.floats(0.2, 1.5), cap_z=st.floats(0.3, 2.8))
def test_lengths_invert_the_population_clip_ratio_and_mean(mu: float, s: float, cap_z: float) -> None:
    """The exact clip ratio and capped mean of a log-normal give back its mu and s."""
    cap = math.exp(mu + cap_z * s)
    clip = 1 - NormalDist().cdf(cap_z)
    got_mu, got_s, how = _lengths(capped_mean(mu, s, cap), clip, None, cap, 64, 0.8)
    assert how == "clip ratio and mean"
    assert got_mu == pytest.approx(mu, abs=1e-6) and got_s == pytest.approx(s, abs=1e-6)


@settings(max_examples=40, deadline=None)
@given(
    mfu=st.floats(0.05, 0.9),
    over=st.floats(0.0, 30.0),
    switch=st.floats(0.0, 5.0),
    seed=st.integers(0, 2**31),
)
def test_trainer_fit_is_exact_on_a_noiseless_line(mfu: float, over: float, switch: float, seed: int) -> None:
    flops, peak = 6.4e10, 8e15
    tokens = np.random.default_rng(seed).uniform(1e5, 1e6, 12)
    seconds = flops * tokens / (peak * mfu) + over + switch
    got, notes = fit_trainer(tokens, seconds, flops, peak, switch)
    assert not notes
    assert got["mfu"].value == pytest.approx(mfu, rel=1e-9)
    assert got["step_overhead_s"].value == pytest.approx(over, abs=1e-6 * (1 + seconds.max()))
    assert got["mfu"].lo <= got["mfu"].value <= got["mfu"].hi


def test_trainer_fit_says_when_the_tokens_do_not_vary() -> None:
    got, notes = fit_trainer(np.full(8, 5e5), np.full(8, 10.0), 6.4e10, 8e15)
    assert set(got) == {"mfu"} and any("step_overhead_s" in n for n in notes)
    assert got["mfu"].value == pytest.approx(6.4e10 * 5e5 / 8e15 / 10.0)


# -- recovery from a log pipesim wrote ----------------------------------------------------------
def test_a_noiseless_log_gives_back_the_trainer_constants(tmp_path: Path) -> None:
    log = read_log(_write(tmp_path, _log(12, 0.0)))
    cal = calibrate(log, load(SPEC))
    assert cal.values["mfu"].value == pytest.approx(TRUE["mfu"], rel=1e-6)
    assert cal.values["step_overhead_s"].value == pytest.approx(TRUE["step_overhead_s"], abs=1e-4)
    for phase in ("timing_s/update_actor", "timing_s/old_log_prob"):  # each phase by the FLOPs' split
        assert abs(cal.residuals[phase]["abs_mean"]) < 1e-6, (phase, cal.residuals[phase])


def test_a_noisy_log_gives_intervals_holding_the_constants(tmp_path: Path) -> None:
    log = read_log(_write(tmp_path, _log(20, 0.03)))
    cal = calibrate(log, load(SPEC))
    for k in ("mfu", "step_overhead_s", "iteration_overhead_s", "response_sigma", "response_median_tokens"):
        v = cal.values[k]
        assert v.lo <= TRUE[k] <= v.hi, (k, v)
    assert set(cal.residuals) >= {"timing_s/gen", "timing_s/step", "response_length/mean"}
    assert cal.held_out == list(range(15, 20))


def test_twenty_steps_narrow_the_intervals_of_ten(tmp_path: Path) -> None:
    path = _write(tmp_path, _log(20, 0.03))
    rs = load(SPEC)
    ten, twenty = calibrate(read_log(path, steps=":10"), rs), calibrate(read_log(path), rs)
    assert len(ten.log) == 10 and len(twenty.log) == 20
    for k in ("mfu", "step_overhead_s", "iteration_overhead_s", "response_median_tokens"):
        assert twenty.values[k].width < ten.values[k].width, (k, ten.values[k], twenty.values[k])


def test_missing_columns_fit_what_they_identify(tmp_path: Path) -> None:
    df = _log(12, 0.03)[["step", "timing_s/gen", "response_length/mean"]]
    cal = calibrate(read_log(_write(tmp_path, df)), load(SPEC))
    assert set(cal.values) == {"response_median_tokens", "iteration_overhead_s"}
    said = " ".join(cal.not_identified)
    for what in ("mfu", "response_sigma", "sync_time_s", "prompt_length/mean"):
        assert what in said


def test_renamed_jsonl_columns_give_the_same_fit(tmp_path: Path) -> None:
    df = _log(12, 0.03)
    names = {"step": "global_step", "timing_s/gen": "timing/rollout", "timing_s/update_actor": "timing/train"}
    mapping = tmp_path / "map.toml"
    mapping.write_text("[columns]\n" + "".join(f'"{k}" = "{v}"\n' for k, v in names.items()))
    a = calibrate(read_log(_write(tmp_path, df)), load(SPEC))
    b = calibrate(
        read_log(_write(tmp_path, df.rename(columns=names), "log.jsonl"), read_columns_map(mapping)),
        load(SPEC),
    )
    assert {k: v.value for k, v in a.values.items()} == pytest.approx(
        {k: v.value for k, v in b.values.items()}
    )


def test_the_command_writes_a_spec_that_run_and_plan_read(tmp_path: Path) -> None:
    log = _write(tmp_path, _log(12, 0.03))
    out, js = tmp_path / "cal.toml", tmp_path / "cal.json"
    assert main(["calibrate", str(log), "--spec", str(SPEC), "--out", str(out), "--json", str(js)]) == 0
    rs = load(out)
    table = specfile.read(out)["calibration"]
    assert table["log_sha256"] == hashlib.sha256(log.read_bytes()).hexdigest()
    assert rs.plan.mfu == table["values"]["mfu"] and rs.step_overhead_s == table["values"]["step_overhead_s"]
    assert rs.iteration_overhead_s == table["values"]["iteration_overhead_s"]
    assert specfile.load(out).mfu == table["values"]["mfu"]
    assert json.loads(js.read_text())["values"] == table["values"]
    for k, (lo, hi) in table["intervals"].items():
        assert lo <= table["values"][k] <= hi
    assert main(["run", str(out), "--set", "design.placement=4", "--set", "run.steps=2"]) == 0


def test_the_shipped_sample_log_calibrates(tmp_path: Path) -> None:
    cal = calibrate(read_log(EXAMPLES / "verl_sample_log.csv"), load(SPEC))
    assert cal.values["mfu"].lo <= 0.3 <= cal.values["mfu"].hi


# -- bad input ----------------------------------------------------------------------------------
def _bad(df: pd.DataFrame, **change: Any) -> pd.DataFrame:
    df = df.copy().astype(object)
    for col, (row, value) in change.items():
        df.loc[row, col.replace("__", "/")] = value
    return df


BAD_LOGS: list[tuple[str, Any, str]] = [
    ("no step column", lambda d: d.drop(columns="step"), "step"),
    ("a word in gen", lambda d: _bad(d, timing_s__gen=(3, "fast")), "timing_s/gen"),
    ("inf in update_actor", lambda d: _bad(d, timing_s__update_actor=(2, math.inf)), "timing_s/update_actor"),
    ("a negative length", lambda d: _bad(d, response_length__mean=(1, -5.0)), "response_length/mean"),
    ("a step twice", lambda d: _bad(d, step=(1, 0)), "step"),
    ("two steps", lambda d: d.head(2), "steps"),
]


@pytest.mark.parametrize("why,mutate,field", BAD_LOGS, ids=[b[0] for b in BAD_LOGS])
def test_bad_logs_are_one_line_errors_naming_the_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], why: str, mutate: Any, field: str
) -> None:
    path = _write(tmp_path, mutate(_log(12, 0.03)))
    with pytest.raises(LogError) as e:
        read_log(path)
    assert e.value.field == field and field in str(e.value) and str(path) in str(e.value)
    assert main(["calibrate", str(path), "--spec", str(SPEC), "--out", str(tmp_path / "c.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pipesim: error:") and field in err[0]
    assert not (tmp_path / "c.toml").exists()


@pytest.mark.parametrize(
    "args,field",
    [
        (dict(steps="5"), "steps"),
        (dict(steps="9:3"), "steps"),
        (dict(steps="100:"), "steps"),
        (dict(columns={"timing_s/gen": "nope"}), "nope"),
        (dict(columns={"timing_s/genn": "timing_s/gen"}), "timing_s/genn"),
        (dict(suffix=".xlsx"), "log"),
    ],
)
def test_bad_options_name_the_key(tmp_path: Path, args: dict[str, Any], field: str) -> None:
    path = _write(tmp_path, _log(12, 0.03))
    if "suffix" in args:
        path = path.rename(path.with_suffix(args["suffix"]))
    mapping = None
    if "columns" in args:
        mapping = tmp_path / "map.toml"
        mapping.write_text("[columns]\n" + "".join(f'"{k}" = "{v}"\n' for k, v in args["columns"].items()))
    with pytest.raises(LogError) as e:
        read_log(path, read_columns_map(mapping), args.get("steps"))
    assert e.value.field == field and field in str(e.value)


@pytest.mark.parametrize(
    "sets,key",
    [
        ({"design": {"tp": 3}}, "design.tp"),
        ({"cluster": {"n_gpus": 1}, "model": {"name": "qwen3-32b"}}, "cluster.n_gpus"),
        ({"kind": None}, "kind"),
    ],
)
def test_a_spec_that_does_not_fit_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sets: dict[str, Any], key: str
) -> None:
    data = copy.deepcopy(read(SPEC))
    for table, value in sets.items():
        if value is None:
            data.pop(table)
        else:
            data[table].update(value)
    import tomli_w

    spec = tmp_path / "spec.toml"
    spec.write_text(tomli_w.dumps(data))
    log = _write(tmp_path, _log(12, 0.03))
    assert main(["calibrate", str(log), "--spec", str(spec), "--out", str(tmp_path / "c.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0] and str(spec) in err[0], err


def test_held_out_means_are_predicted_within_their_noise(tmp_path: Path) -> None:
    """The held-out steps' mean gen and step time lie within three standard errors of the
    prediction made from the other steps (the per-step spread over the held-out count, twice: the
    prediction is the mean of as many simulated steps)."""
    df = _log(20, 0.03)
    cal = calibrate(read_log(_write(tmp_path, df)), load(SPEC))
    k = len(cal.held_out)
    for col in ("timing_s/gen", "timing_s/step"):
        x = df[col].to_numpy()
        se = x.std(ddof=1) * math.sqrt(2 / k)
        held = x[-k:].mean()
        assert abs(cal.residuals[col]["mean"]) * held < 3 * se, (col, cal.residuals[col], se)


def test_a_calibrated_prediction_of_another_split_holds_the_true_run() -> None:
    """Calibrate on the shipped colocated log, predict a 4:4 asynchronous split with intervals, and
    compare with that split run at the constants the log was made with (examples/)."""
    from pipesim.calibrate import calibrated_spec
    from pipesim.calibrate.predict import predict

    rs = load(SPEC)
    cal = calibrate(read_log(EXAMPLES / "verl_sample_log.csv"), rs)
    data = calibrated_spec(rs, cal)
    data["design"].update(placement=4, eta=1, update="partial")
    got = predict(from_dict(data), 12, np.random.default_rng(0))
    truth = read(SPEC)
    truth["calibration"] = {"values": dict(TRUE)}
    truth["design"].update(placement=4, eta=1, update="partial")
    true_run = run(from_dict(truth)).summary()
    for m in ("throughput_per_hour", "timing_s/step"):
        assert got[m]["lo"] <= true_run[m] <= got[m]["hi"], (m, got[m], true_run[m])
    assert (
        got["throughput_per_hour"]["lo"]
        < got["throughput_per_hour"]["value"]
        < got["throughput_per_hour"]["hi"]
    )


def test_an_asynchronous_design_recovers_its_constants(tmp_path: Path) -> None:
    """The 64-GPU example (16 trainer GPUs, eta 1, partial rollout): gen is the trainer's wait and
    the trained batch favours short samples; the intervals still hold what the log was made with."""
    spec = EXAMPLES / "run_qwen3_8b.toml"
    truth = {**TRUE, "response_median_tokens": 1200.0, "response_sigma": 0.8}
    data = read(spec)
    data["calibration"] = {"values": truth}
    data["run"] = {"steps": 12, "seed": 7}
    log = _write(tmp_path, sample_log(from_dict(data), np.random.default_rng(1)))
    cal = calibrate(read_log(log), load(spec))
    assert "bias-corrected" in cal.values["response_median_tokens"].how
    for k, v in truth.items():
        assert cal.values[k].lo <= v <= cal.values[k].hi, (k, cal.values[k])


def test_a_column_with_gaps_is_left_out_and_said(tmp_path: Path) -> None:
    df = _log(12, 0.03).copy()
    df.loc[4, "response_length/clip_ratio"] = np.nan
    log = read_log(_write(tmp_path, df))
    assert "response_length/clip_ratio" not in log.frame.columns
    cal = calibrate(log, load(SPEC))
    assert any(n.startswith("response_length/clip_ratio: 1 of 12 steps") for n in cal.not_identified)
    assert "response_sigma" not in cal.values and "mfu" in cal.values


@pytest.mark.parametrize(
    "change,key",
    [
        (
            lambda d: d.assign(**{"timing_s/update_actor": d["timing_s/update_actor"] - 4.0}),
            "step_overhead_s",
        ),
        (
            lambda d: d.assign(
                **{"timing_s/update_actor": d["timing_s/update_actor"] * 0.1, "timing_s/old_log_prob": 0.01}
            ),
            "mfu",
        ),
    ],
)
def test_a_value_the_model_cannot_run_is_brought_into_range_and_said(
    tmp_path: Path, change: Any, key: str
) -> None:
    """A log whose trainer is faster than the model allows (a negative fixed cost, an MFU above 1)
    still gives a spec that loads and runs, with the value at its bound and a note."""
    log = _write(tmp_path, change(_log(12, 0.03)))
    out = tmp_path / "cal.toml"
    assert main(["calibrate", str(log), "--spec", str(SPEC), "--out", str(out)]) == 0
    table = specfile.read(out)["calibration"]
    assert table["values"][key] == (0.0 if key == "step_overhead_s" else 1.0)
    assert any(n.startswith(f"{key}: fitted") for n in table["not_identified"])
    load(out)


def test_an_open_interval_is_written_as_valid_json_and_toml(tmp_path: Path) -> None:
    """Three steps (one degree of freedom): the MFU's interval is open above; the spec (TOML inf)
    and the JSON ("inf", JSON having no infinity) still read back."""
    out, js = tmp_path / "cal.toml", tmp_path / "cal.json"
    args = ["calibrate", str(EXAMPLES / "verl_sample_log.csv"), "--spec", str(SPEC), "--steps", ":3"]
    assert main([*args, "--out", str(out), "--json", str(js)]) == 0
    assert specfile.read(out)["calibration"]["intervals"]["mfu"][1] == math.inf
    assert (
        json.loads(js.read_text(), parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))["intervals"][
            "mfu"
        ][1]
        == "inf"
    )
    load(out)


def test_a_length_trajectory_is_fitted_and_applied(tmp_path: Path) -> None:
    """A log made with lengths growing 3% a version: the drift's interval holds 0.03, the median
    (taken back to the first step) holds 700, and the calibrated spec's workload carries the drift."""
    data = read(SPEC)
    data["calibration"] = {"values": dict(TRUE)}
    data["workload"]["drift_per_version"] = 0.03
    data["run"] = {"steps": 20, "seed": 3}
    log = _write(tmp_path, sample_log(from_dict(data), np.random.default_rng(5)))
    out = tmp_path / "cal.toml"
    assert main(["calibrate", str(log), "--spec", str(SPEC), "--out", str(out)]) == 0
    table = specfile.read(out)["calibration"]
    for k, v in (("drift_per_version", 0.03), ("response_median_tokens", 700.0)):
        lo, hi = table["intervals"][k]
        assert lo <= v <= hi, (k, table["values"][k], lo, hi)
    assert load(out).plan.workload.drift_per_version == table["values"]["drift_per_version"]
