"""``pipesim calibrate`` (:mod:`pipesim.calibrate`): the closed-form fits against their inverses and
a Monte Carlo reference, recovery of the constants a pipesim-written log was made with, intervals
that narrow from 10 to 20 steps, missing and renamed columns, and bad logs as one-line errors
naming the column or key."""

from __future__ import annotations

import copy
import dataclasses
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

from pipesim.calibrate import Calibration, LogError, TrainingLog, calibrate, read_columns_map, read_log
from pipesim.calibrate.fit import _lengths, capped_mean
from pipesim.calibrate.sample import sample_log
from pipesim.calibrate.trainer import config, fit_trainer_profile, spread, switch_s
from pipesim.compute.phases import phase_times_s
from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.plan import specfile
from pipesim.plan.build import trainer_config
from pipesim.plan.runspec import from_dict, load, read, run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPEC = EXAMPLES / "run_verl_8gpu.toml"
PROFILE_TRUE = {  # the sample log's trainer: fsdp2-dense with these in place (examples/)
    "fwd_bwd_efficiency": 0.35,
    "fwd_efficiency": 0.25,
    "micro_batch_s": 0.3,
    "optimizer_step_s": 1.0,
    "step_s": 2.0,
}
TRUE = {
    **PROFILE_TRUE,
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


def _spec(seed: int = 3) -> Any:
    """The sample spec with its run at ``seed``: the seed :func:`_log` made its log with, so the fit
    deals each step's samples to the ranks as the log's run did (pipesim.calibrate.trainer.dealt)."""
    return load(SPEC, [f"run.seed={seed}"])


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


def _phase_log(profile_values: dict[str, float], t: np.ndarray) -> TrainingLog:
    """A noiseless log of the sample spec's trainer at ``profile_values``, straight from the phase
    model (no simulation): ``t`` tokens per step, a fixed 512-token prompt, 1 s of gen."""
    rs = load(SPEC)
    cfg = config(rs, dataclasses.replace(config(rs).framework, **profile_values))
    batch = rs.plan.batch_size
    rows = []
    spreads = spread(rs, t)  # each step's tokens per sample as the fit assumes them
    for i, x in enumerate(t):
        ph = phase_times_s(cfg, float(x), batch, spreads[i])
        rows.append(
            {
                "step": i,
                "timing_s/gen": 1.0,
                "timing_s/old_log_prob": ph["old_log_prob"],
                "timing_s/update_actor": ph["update_actor"],
                "timing_s/step": 1.0 + switch_s(rs) + sum(ph.values()),
                "response_length/mean": x / batch - 512.0,
                "prompt_length/mean": 512.0,
            }
        )
    # the step holds no sync (none is added above): said, so none is taken out of it
    return TrainingLog("mem", "0" * 64, pd.DataFrame(rows), step_includes_sync=False)


@pytest.mark.usefixtures("dealt_once")  # one spec: its run deals every draw's batches alike
@settings(max_examples=25, deadline=None)
@given(
    fb=st.floats(0.1, 0.9),
    f=st.floats(0.1, 0.9),
    micro=st.floats(0.0, 1.0),
    opt=st.floats(0.0, 5.0),
    step=st.floats(0.0, 10.0),
    seed=st.integers(0, 2**31),
)
def test_the_profile_fit_is_exact_on_a_noiseless_log(
    fb: float, f: float, micro: float, opt: float, step: float, seed: int
) -> None:
    truth = dict(
        fwd_bwd_efficiency=fb, fwd_efficiency=f, micro_batch_s=micro, optimizer_step_s=opt, step_s=step
    )
    t = np.random.default_rng(seed).uniform(1e5, 2.5e5, 12)
    log = _phase_log(truth, t)
    got, _ = fit_trainer_profile(log, load(SPEC), t)
    assert {k: got[k].value for k in truth} == pytest.approx(truth, rel=1e-6, abs=1e-6)


@pytest.mark.usefixtures("dealt_once")  # the 60 logs share one spec and 20 steps: one run deals them
def test_the_profile_intervals_cover_their_constants() -> None:
    """60 logs of 20 steps from the phase model with 3% multiplicative noise on each phase (a
    seeded generator): each constant's 95% interval holds it in at least 52 (87%; a 95% interval
    falls below that with probability 0.003). Pooling the phases' noise (no weights) held
    update_actor's efficiency in 47."""
    rs = load(SPEC)
    truth = dict(PROFILE_TRUE)
    rng = np.random.default_rng(2024)
    held = dict.fromkeys(truth, 0)
    for _ in range(60):
        t = rng.uniform(1.6e5, 2.6e5, 20)
        df = _phase_log(truth, t).frame.copy()
        rest = df["timing_s/step"] - df[
            ["timing_s/gen", "timing_s/old_log_prob", "timing_s/update_actor"]
        ].sum(axis=1)
        for c in ("timing_s/old_log_prob", "timing_s/update_actor"):
            df[c] *= np.exp(0.03 * rng.standard_normal(len(df)))
        rest *= np.exp(0.03 * rng.standard_normal(len(df)))
        df["timing_s/step"] = rest + df[
            ["timing_s/gen", "timing_s/old_log_prob", "timing_s/update_actor"]
        ].sum(axis=1)
        log = TrainingLog("mem", "0" * 64, df, step_includes_sync=False)  # as _phase_log's
        got, _ = fit_trainer_profile(log, rs, t)
        for k, v in truth.items():
            held[k] += k in got and got[k].lo <= v <= got[k].hi
    assert min(held.values()) >= 52, held


def test_the_profile_fit_says_when_the_tokens_do_not_vary() -> None:
    """Constant tokens: the fixed costs are not told from the efficiencies, and stay the
    profile's; with the log made at the profile's own fixed costs, the efficiencies are exact."""
    rs = load(SPEC)
    prof = config(rs).framework
    truth = dict(fwd_bwd_efficiency=0.3, fwd_efficiency=0.2, step_s=1.5)
    t = np.full(8, 2e5)
    got, notes = fit_trainer_profile(_phase_log(truth, t), rs, t)
    assert set(got) == {"fwd_bwd_efficiency", "fwd_efficiency", "step_s"}
    assert any(n.startswith("micro_batch_s, optimizer_step_s: the steps' tokens barely vary") for n in notes)
    assert {k: got[k].value for k in truth} == pytest.approx(truth, rel=1e-9)
    assert prof.micro_batch_s > 0 and prof.optimizer_step_s > 0  # the kept values matter to the check


def test_without_old_log_prob_the_forward_efficiency_is_the_profiles(tmp_path: Path) -> None:
    df = _log(12, 0.03).drop(columns="timing_s/old_log_prob")
    rs = _spec()
    cal = calibrate(read_log(_write(tmp_path, df)), rs)
    assert "fwd_efficiency" not in cal.values and "fwd_bwd_efficiency" in cal.values
    assert any(n.startswith("fwd_efficiency: not identified") for n in cal.not_identified)
    assert "step_s" not in cal.values  # the remainder would absorb the missing phase
    assert "timing_s/old_log_prob" not in cal.residuals


# -- recovery from a log pipesim wrote ----------------------------------------------------------
def test_a_noiseless_log_gives_back_the_trainer_constants(tmp_path: Path) -> None:
    """With the spec's run at the log's seed, the fit deals the log's own prompts to the ranks
    (pipesim.calibrate.trainer.dealt), so the constants come back (to 2%: see below)."""
    log = read_log(_write(tmp_path, _log(12, 0.0)))
    cal = calibrate(log, _spec())
    got = {k: cal.values[k].value for k in PROFILE_TRUE}
    # not to the CSV's 6 decimals: the fit deals samples drawn at the lengths it fitted (a median
    # of 722 tokens for the log's 700), so each rank's share differs a little from the log's run
    assert got == pytest.approx(PROFILE_TRUE, rel=2e-2, abs=1e-4)
    for phase in ("timing_s/update_actor", "timing_s/old_log_prob", "remainder"):  # held out, per step
        assert abs(cal.residuals[phase]["mean"]) < 5e-3, (phase, cal.residuals[phase])


@pytest.fixture(scope="module")
def noisy20(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame, Calibration]:
    """The 20-step log with 3% noise, as a CSV and as made, and its calibration against the spec at
    the log's seed: one log and one fit that four tests read (none changes them)."""
    df = _log(20, 0.03)
    path = _write(tmp_path_factory.mktemp("noisy20"), df)
    return path, df, calibrate(read_log(path), _spec())


def test_a_noisy_log_gives_intervals_holding_the_constants(
    noisy20: tuple[Path, pd.DataFrame, Calibration],
) -> None:
    _, _, cal = noisy20
    for k, true in TRUE.items():
        v = cal.values[k]
        assert v.lo <= true <= v.hi, (k, v)
    assert set(cal.residuals) >= {
        "timing_s/gen",
        "timing_s/step",
        "response_length/mean",
        "timing_s/update_actor",
        "timing_s/old_log_prob",
    }
    assert cal.held_out == list(range(15, 20))


def test_twenty_steps_narrow_the_intervals_of_ten(noisy20: tuple[Path, pd.DataFrame, Calibration]) -> None:
    path, _, twenty = noisy20
    ten = calibrate(read_log(path, steps=":10"), _spec())
    assert len(ten.log) == 10 and len(twenty.log) == 20
    for k in (*PROFILE_TRUE, "iteration_overhead_s", "response_median_tokens"):
        assert twenty.values[k].width < ten.values[k].width, (k, ten.values[k], twenty.values[k])


def test_missing_columns_fit_what_they_identify(tmp_path: Path) -> None:
    df = _log(12, 0.03)[["step", "timing_s/gen", "response_length/mean"]]
    cal = calibrate(read_log(_write(tmp_path, df)), load(SPEC))
    assert set(cal.values) == {"response_median_tokens", "iteration_overhead_s"}
    said = " ".join(cal.not_identified)
    for what in ("trainer", "response_sigma", "sync_time_s", "prompt_length/mean"):
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
    prof = trainer_config(rs.plan, rs.design).framework
    assert prof.name == "fsdp2-dense" and rs.step_overhead_s == 0.0
    assert {k: getattr(prof, k) for k in PROFILE_TRUE} == {k: table["values"][k] for k in PROFILE_TRUE}
    assert rs.iteration_overhead_s == table["values"]["iteration_overhead_s"]
    assert specfile.load(out).framework == prof  # pipesim plan reads the same trainer
    assert json.loads(js.read_text())["values"] == table["values"]
    for k, (lo, hi) in table["intervals"].items():
        assert lo <= table["values"][k] <= hi
    assert main(["run", str(out), "--set", "design.placement=4", "--set", "run.steps=2"]) == 0


def test_the_shipped_sample_log_calibrates(tmp_path: Path) -> None:
    """Of the 8 constants the shipped sample was made with, at most one lies outside its 95%
    interval (one draw of the noise; the rate is test_the_profile_intervals_cover_their_constants')."""
    cal = calibrate(read_log(EXAMPLES / "verl_sample_log.csv"), load(SPEC))
    out = [k for k, true in TRUE.items() if not cal.values[k].lo <= true <= cal.values[k].hi]
    assert len(out) <= 1, [(k, cal.values[k]) for k in out]


def test_a_spec_calibrated_before_the_phases_keeps_loading() -> None:
    """``mfu`` and ``step_overhead_s`` in ``[calibration.values]`` (what calibrate wrote before the
    phased trainer) still apply: the one-MFU model without a framework, its efficiencies with one."""
    data = read(SPEC)
    data["model"].pop("framework")
    data["calibration"] = {"values": {"mfu": 0.3, "step_overhead_s": 2.5}}
    rs = from_dict(data)
    tcfg = trainer_config(rs.plan, rs.design)
    assert tcfg.framework.name == "ideal" and tcfg.framework.fwd_bwd_efficiency == 0.3
    assert tcfg.step_overhead_s == 2.5
    data["model"]["framework"] = "fsdp2-dense"
    prof = trainer_config(from_dict(data).plan, rs.design).framework
    assert prof.name == "fsdp2-dense" and prof.fwd_bwd_efficiency == prof.fwd_efficiency == 0.3


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
    (
        "a clip ratio above 1",
        lambda d: _bad(d, response_length__clip_ratio=(2, 1.5)),
        "response_length/clip_ratio",
    ),
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


OFF_SPEC_LOGS: list[tuple[str, Any, str]] = [
    (
        "a mean above the cap",
        lambda d, cap: _bad(d, response_length__mean=(4, cap + 1.0)),
        "response_length/mean",
    ),
    (
        "a max above the cap",
        lambda d, cap: _bad(
            d.assign(**{"response_length/max": float(cap)}), response_length__max=(0, 10.0 * cap)
        ),
        "response_length/max",
    ),
]


@pytest.mark.parametrize("why,mutate,field", OFF_SPEC_LOGS, ids=[b[0] for b in OFF_SPEC_LOGS])
def test_a_log_the_spec_cannot_have_written_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], why: str, mutate: Any, field: str
) -> None:
    """A response length above the spec's cap: the log reads, calibrate refuses it naming the column."""
    cap = load(SPEC).plan.workload.max_response_tokens
    path = _write(tmp_path, mutate(_log(12, 0.03), cap))
    log = read_log(path)
    with pytest.raises(LogError) as e:
        calibrate(log, load(SPEC))
    assert e.value.field == field and field in str(e.value) and "max_response_tokens" in str(e.value)
    assert main(["calibrate", str(path), "--spec", str(SPEC), "--out", str(tmp_path / "c.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0]
    assert not (tmp_path / "c.toml").exists()


def test_a_column_map_nested_too_deep_names_the_columns(tmp_path: Path) -> None:
    mapping = tmp_path / "map.toml"
    mapping.write_text("[columns]\nstep = " + "[" * 3000 + "]" * 3000 + "\n")  # a RecursionError before
    with pytest.raises(LogError) as e:
        read_columns_map(mapping)
    assert e.value.field == "columns"


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
        ({"model": {"framework": "fsdp3"}}, "model.framework"),
        ({"calibration": {"values": {"fwd_bwd_efficiency": 1.5}}}, "calibration.values.fwd_bwd_efficiency"),
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
            data.setdefault(table, {}).update(value)
    import tomli_w

    spec = tmp_path / "spec.toml"
    spec.write_text(tomli_w.dumps(data))
    log = _write(tmp_path, _log(12, 0.03))
    assert main(["calibrate", str(log), "--spec", str(spec), "--out", str(tmp_path / "c.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and key in err[0] and str(spec) in err[0], err


def test_held_out_means_are_predicted_within_their_noise(
    noisy20: tuple[Path, pd.DataFrame, Calibration],
) -> None:
    """The held-out steps' mean gen and step time lie within three standard errors of the
    prediction made from the other steps (the per-step spread over the held-out count, twice: the
    prediction is the mean of as many simulated steps)."""
    _, df, cal = noisy20
    k = len(cal.held_out)
    for col in ("timing_s/gen", "timing_s/step"):
        x = df[col].to_numpy()
        se = x.std(ddof=1) * math.sqrt(2 / k)
        held = x[-k:].mean()
        assert abs(cal.residuals[col]["mean"]) * held < 3 * se, (col, cal.residuals[col], se)


def test_a_calibrated_prediction_of_another_split_holds_the_true_run(
    noisy20: tuple[Path, pd.DataFrame, Calibration],
) -> None:
    """Calibrate on a 20-step colocated log, predict a 4:4 asynchronous split with intervals, and
    compare with that split run at the constants the log was made with. (On the shipped sample,
    whose update_actor efficiency lies just outside its interval, the throughput's range misses:
    docs/calibrate.md.)"""
    from pipesim.calibrate import calibrated_spec
    from pipesim.calibrate.predict import predict

    rs = _spec()
    _, _, cal = noisy20
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
    assert "bias-corrected" in cal.values["response_sigma"].how
    for k, v in truth.items():
        assert cal.values[k].lo <= v <= cal.values[k].hi, (k, cal.values[k])


def test_a_step_with_an_empty_cell_is_left_out_and_said(tmp_path: Path) -> None:
    """One blank ``update_actor`` (verl's first ``critic_warmup`` steps log none) used to leave the
    whole column out, and the spec calibrated without it missed the log's update by 54%. Now the
    step is left out and the column kept: the calibration is the one of the log without that step
    (its independent reference), and the note names the step."""
    df = _log(12, 0.03).copy()
    df.loc[4, "timing_s/update_actor"] = np.nan
    df.loc[7, "response_length/clip_ratio"] = np.nan
    log = read_log(_write(tmp_path, df))
    assert "timing_s/update_actor" in log.frame.columns and len(log) == 10
    assert list(log.steps) == [s for i, s in enumerate(df["step"]) if i not in (4, 7)]
    without = read_log(_write(tmp_path, df.drop(index=[4, 7]), "without.csv"))
    cal, ref = calibrate(log, _spec()), calibrate(without, _spec())
    assert cal.values == ref.values
    step = f"{df['step'][4]:g}"
    note = f"timing_s/update_actor: no value at step {step}; those steps are left out"
    assert note in log.notes


def test_a_column_empty_at_many_steps_is_left_out_and_said(tmp_path: Path) -> None:
    """A column logged now and then (over a quarter of its steps empty) is left out, not the steps."""
    df = _log(12, 0.03).copy()
    df.loc[::2, "response_length/clip_ratio"] = np.nan  # every other step
    log = read_log(_write(tmp_path, df))
    assert "response_length/clip_ratio" not in log.frame.columns and len(log) == 12
    cal = calibrate(log, load(SPEC))
    assert any(n.startswith("response_length/clip_ratio: 6 of 12 steps") for n in cal.not_identified)
    assert "response_sigma" not in cal.values and "fwd_bwd_efficiency" in cal.values


def test_gaps_that_leave_too_few_steps_name_the_steps(tmp_path: Path) -> None:
    df = _log(4, 0.03).copy()
    df.loc[1, "timing_s/gen"] = np.nan
    df.loc[2, "timing_s/update_actor"] = np.nan
    with pytest.raises(LogError) as info:
        read_log(_write(tmp_path, df))
    assert info.value.field == "steps"


def test_a_negative_fixed_cost_is_set_to_zero_and_said(tmp_path: Path) -> None:
    """update_actor 3 s shorter than the log was made with: its intercept goes below 0, so the
    optimizer step's fixed cost is set to 0 and the rest refitted."""
    df = _log(12, 0.03)
    log = _write(tmp_path, df.assign(**{"timing_s/update_actor": df["timing_s/update_actor"] - 3.0}))
    out = tmp_path / "cal.toml"
    assert main(["calibrate", str(log), "--spec", str(SPEC), "--out", str(out)]) == 0
    table = specfile.read(out)["calibration"]
    assert table["values"]["optimizer_step_s"] == 0.0 and 0 < table["values"]["fwd_bwd_efficiency"] <= 1
    assert any(n.startswith("optimizer_step_s: fitted below 0") for n in table["not_identified"])
    assert trainer_config(load(out).plan, load(out).design).framework.optimizer_step_s == 0.0


def test_a_trainer_faster_than_peak_keeps_the_profile_and_says_so(tmp_path: Path) -> None:
    """update_actor at 5% of what the log was made with: no efficiency up to 1 fits it; the spec
    still loads and runs, with the profile's values and a note."""
    df = _log(12, 0.03)
    log = _write(tmp_path, df.assign(**{"timing_s/update_actor": df["timing_s/update_actor"] * 0.05}))
    out = tmp_path / "cal.toml"
    assert main(["calibrate", str(log), "--spec", str(SPEC), "--out", str(out)]) == 0
    table = specfile.read(out)["calibration"]
    assert "fwd_bwd_efficiency" not in table["values"]
    assert any(
        n.startswith("trainer: the profile's constants could not be fitted") and "fwd_bwd_efficiency" in n
        for n in table["not_identified"]
    )
    assert main(["run", str(out), "--set", "run.steps=2"]) == 0


def test_an_open_interval_is_written_as_valid_json_and_toml(tmp_path: Path) -> None:
    """Four steps with 25% noise on update_actor: the efficiency's interval is open above (its
    reciprocal's reaches 0); the spec (TOML inf) and the JSON ("inf", JSON having no infinity)
    still read back."""
    df = pd.read_csv(EXAMPLES / "verl_sample_log.csv").head(4)
    z = np.exp(0.25 * np.random.default_rng(1).standard_normal(4))  # seed 0's draw closes it
    log = _write(tmp_path, df.assign(**{"timing_s/update_actor": df["timing_s/update_actor"] * z}))
    out, js = tmp_path / "cal.toml", tmp_path / "cal.json"
    assert main(["calibrate", str(log), "--spec", str(SPEC), "--out", str(out), "--json", str(js)]) == 0
    assert specfile.read(out)["calibration"]["intervals"]["fwd_bwd_efficiency"][1] == math.inf
    got = json.loads(js.read_text(), parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert got["intervals"]["fwd_bwd_efficiency"][1] == "inf"
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


def test_the_plans_mfu_sensitivity_slows_a_profiled_trainer() -> None:
    """pipesim plan's "trainer MFU -20%" variant on a spec naming model.framework scales the
    profile's efficiencies (scaling model.mfu alone left such a trainer as it was: +0.0%)."""
    from pipesim.plan.explain import _slower_trainer

    rs = load(SPEC)
    slow = _slower_trainer(rs.plan, 0.8)
    a = phase_times_s(trainer_config(rs.plan, rs.design), 2e5, 128)
    b = phase_times_s(trainer_config(slow, rs.design), 2e5, 128)
    for phase in ("update_actor", "old_log_prob"):
        assert b[phase] > a[phase] * 1.05, (phase, a[phase], b[phase])
    assert b["remainder"] == a["remainder"]


def test_the_plans_pasted_code_keeps_the_calibrated_profile(tmp_path: Path) -> None:
    """The recommendation's code builds the trainer with the spec's (calibrated) profile, not the
    one-MFU model at model.mfu."""
    from pipesim.plan.code import scenario_code

    data = read(SPEC)
    data["calibration"] = {"values": dict(PROFILE_TRUE)}
    rs = from_dict(data)
    code = scenario_code(rs.plan, rs.design)
    lines = [ln for ln in code.splitlines() if not ln.startswith("run = ")]
    scope: dict[str, Any] = {}
    exec("\n".join(lines), scope)  # noqa: S102 -- the code pipesim plan prints for pasting
    assert scope["trainer"].framework == trainer_config(rs.plan, rs.design).framework
    assert scope["trainer"].framework.fwd_bwd_efficiency == PROFILE_TRUE["fwd_bwd_efficiency"]


# -- a log written from published per-step numbers ----------------------------------------------
def _records(truth: dict[str, float], t: np.ndarray) -> list[dict[str, float]]:
    """Per-step records in the published tables' names, from the phase model at ``truth``."""
    frame = _phase_log(truth, t).frame
    return [
        {
            "step": float(r["step"]),
            "gen": r["timing_s/gen"],
            "old_log_prob": r["timing_s/old_log_prob"],
            "update_actor": r["timing_s/update_actor"],
            "step_s": r["timing_s/step"],
            "response_tokens": r["response_length/mean"],
            "prompt_tokens": r["prompt_length/mean"],
        }
        for r in frame.to_dict("records")
    ]


def test_a_log_written_from_published_steps_calibrates_to_its_constants(tmp_path: Path) -> None:
    """Per-step records (as a README table would give them) -> published_log -> CSV ->
    pipesim calibrate: the trainer constants they were made with come back."""
    from pipesim.calibrate.published import published_log

    t = np.random.default_rng(9).uniform(1.6e5, 2.6e5, 8)
    log = _write(tmp_path, published_log(_records(PROFILE_TRUE, t)))
    out = tmp_path / "cal.toml"
    argv = ["calibrate", str(log), "--spec", str(SPEC), "--out", str(out), "--step-includes-sync", "no"]
    assert main(argv) == 0  # the records' steps hold no sync (_phase_log)
    got = specfile.read(out)["calibration"]["values"]
    assert {k: got[k] for k in PROFILE_TRUE} == pytest.approx(PROFILE_TRUE, rel=1e-4, abs=1e-4)


def test_a_table_of_means_gives_the_efficiencies_at_the_profiles_fixed_costs(tmp_path: Path) -> None:
    """One row of means (the fully-async README's form) written 3 times: the fixed costs are not
    identified (said), the efficiencies come back where the row was made at the profile's."""
    from pipesim.calibrate.published import published_log

    truth = {"fwd_bwd_efficiency": 0.3, "fwd_efficiency": 0.2, "step_s": 1.5}
    df = published_log(_records(truth, np.array([2e5])), repeat=3)
    assert len(df) == 3 and list(df["step"]) == [0, 1, 2]
    cal = calibrate(read_log(_write(tmp_path, df)), load(SPEC), step_includes_sync=False)
    # each repeated row is dealt to the ranks as its own step (steps 0, 1, 2 of the spec's run)
    assert {k: cal.values[k].value for k in truth} == pytest.approx(truth, rel=1e-4)
    assert "micro_batch_s" not in cal.values and "optimizer_step_s" not in cal.values
    assert any("tokens barely vary" in n for n in cal.not_identified)


BAD_RECORDS: list[tuple[str, Any, dict[str, Any], str]] = [
    ("no time", [{"old_log_prob": 1.0, "response_tokens": 500, "prompt_tokens": 100}], {}, "rows[0].step_s"),
    ("missing a length", [{"step_s": 9.0, "gen": 1.0, "prompt_tokens": 100}], {}, "rows[0].response_tokens"),
    (
        "negative update_actor",
        [{"gen": 1.0, "update_actor": -1.0, "response_tokens": 500, "prompt_tokens": 100}],
        {},
        "rows[0].update_actor",
    ),
    (
        "an unknown key",
        [{"gen": 1.0, "update_actor": 1.0, "response_tokens": 500, "prompt_tokens": 100, "foo": 1}],
        {},
        "rows[0].foo",
    ),
    (
        "a word for a length",
        [{"gen": 1.0, "update_actor": 1.0, "response_tokens": "long", "prompt_tokens": 100}],
        {},
        "rows[0].response_tokens",
    ),
    ("not a record", [3.0], {}, "rows[0]"),
    ("no rows", [], {}, "rows"),
    (
        "repeat 0",
        [{"gen": 1.0, "update_actor": 1.0, "response_tokens": 500, "prompt_tokens": 100}],
        {"repeat": 0},
        "repeat",
    ),
    (
        "step_includes_sync a word",
        [{"gen": 1.0, "update_actor": 1.0, "response_tokens": 500, "prompt_tokens": 100}],
        {"step_includes_sync": "no"},
        "step_includes_sync",
    ),
]


@pytest.mark.parametrize("why,rows,kw,field", BAD_RECORDS, ids=[b[0] for b in BAD_RECORDS])
def test_bad_published_records_name_the_field(why: str, rows: Any, kw: dict[str, Any], field: str) -> None:
    from pipesim.calibrate.published import published_log
    from pipesim.core.validate import FieldError

    with pytest.raises(FieldError) as e:
        published_log(rows, **kw)
    assert e.value.field == field, (why, e.value.field, str(e.value))


def test_fit_profile_weights_equal_for_all_change_nothing_and_bad_ones_are_refused() -> None:
    """fit_profile's weights (added for the calibration's second pass): equal weights give the
    unweighted fit's values and intervals; a weight that is not positive and finite, or a count
    that is not one per observation, is refused naming weights."""
    from pipesim.compute.phasefit import PhaseObservation, fit_profile

    rs = load(SPEC)
    # efficiencies well inside (0, 1]: the noisy fit must not leave the range
    cfg = config(rs, dataclasses.replace(config(rs).framework, fwd_bwd_efficiency=0.5, fwd_efficiency=0.4))
    rng = np.random.default_rng(4)
    obs = [
        PhaseObservation(cfg, ph, float(x), 128, phase_times_s(cfg, float(x), 128)[ph] * math.exp(0.03 * z))
        for x, z in zip(rng.uniform(1.6e5, 2.6e5, 10), rng.standard_normal(10), strict=True)
        for ph in ("update_actor", "old_log_prob")
    ]
    fix = ("sample_s", "step_s")
    a = fit_profile(cfg.framework, obs, fix=fix)
    b = fit_profile(cfg.framework, obs, fix=fix, weights=[7.0] * len(obs))
    assert a.fitted == b.fitted
    for k in a.fitted:
        assert getattr(b.profile, k) == pytest.approx(getattr(a.profile, k), rel=1e-9)
        assert b.intervals[k] == pytest.approx(a.intervals[k], rel=1e-9)
    for bad in ([1.0] * (len(obs) - 1), [0.0] * len(obs), [math.nan] * len(obs)):
        with pytest.raises(FieldError) as err:
            fit_profile(cfg.framework, obs, fix=fix, weights=bad)
        assert err.value.field == "weights"


def test_an_agent_logs_response_is_its_turns_not_one_turn() -> None:
    """verl counts a multi-turn episode's responses and observations as one response: an agent
    spec's log may hold means above ``max_response_tokens`` (up to the turns' sum), not above it."""
    from pipesim.calibrate import check_log

    data = read(SPEC)
    data["workload"]["max_response_tokens"] = 1024
    data["workload"]["agent"] = {"turns": 3, "tool_latency_s": 1.0, "observation_tokens": 200}
    rs = from_dict(data)
    cap = 3 * 1024 + 2 * 200

    def log_of(mean: float) -> TrainingLog:
        frame = pd.DataFrame({"step": [0.0, 1.0, 2.0], "response_length/mean": [mean] * 3})
        return TrainingLog("agent.csv", "0" * 64, frame)

    check_log(log_of(2.5 * 1024), rs)  # above one turn's cap: accepted
    check_log(log_of(cap), rs)
    with pytest.raises(LogError) as e:
        check_log(log_of(cap + 1), rs)
    assert e.value.field == "response_length/mean" and f"{cap:,}" in str(e.value)


def test_the_notes_give_the_efficiencies_over_other_dealings(tmp_path: Path) -> None:
    """A log made at seed 3 and fitted as the spec's run at seed 0 deals it: the note gives each
    fitted efficiency's range over seed 0 (the one used, inside the range) and seeds 1-4, one of
    them the log's own; a one-MFU ``ideal`` profile (exactly balanced, nothing dealt) has no note."""
    import re

    log = read_log(_write(tmp_path, _log(12, 0.0)))
    cal = calibrate(log, _spec(0))
    [note] = [n for n in cal.not_identified if n.startswith("trainer: over the dealings")]
    assert "seed 0 (used) and seeds 1-4" in note
    for k in ("fwd_bwd_efficiency", "fwd_efficiency"):
        lo, hi = (float(x) for x in re.search(rf"{k} ([\d.]+)-([\d.]+)", note).groups())  # type: ignore[union-attr]
        assert lo <= cal.values[k].value * (1 + 1e-3) and cal.values[k].value <= hi * (1 + 1e-3)
        # seed 3 dealt as the log was made: its fit is near the truth, and inside the range
        assert lo <= PROFILE_TRUE[k] * 1.05 and PROFILE_TRUE[k] * 0.95 <= hi
    data = read(SPEC)
    data["model"].pop("framework", None)  # the one-MFU ideal profile
    ideal = from_dict(data)
    assert not any("over the dealings" in n for n in calibrate(log, ideal).not_identified)


def test_a_logged_ref_phase_the_spec_cannot_run_is_said(tmp_path: Path) -> None:
    """A log of a run with a reference model (sampled from the spec with model.reference_model)
    calibrated against the spec without one: the note names the key to set; with it, none."""
    data = read(SPEC)
    data["model"]["reference_model"] = True
    data["calibration"] = {"values": dict(TRUE)}
    data["run"] = {"steps": 8, "seed": 3}
    df = sample_log(from_dict(data), np.random.default_rng(103), noise=0.02)
    assert df["timing_s/ref"].gt(0).all()
    log = read_log(_write(tmp_path, df))
    without = calibrate(log, _spec())
    assert any("model.reference_model = true" in n for n in without.not_identified)
    with_ref = calibrate(log, load(SPEC, ["run.seed=3", "model.reference_model=true"]))
    assert not any("model.reference_model" in n for n in with_ref.not_identified)
