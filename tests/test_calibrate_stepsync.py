"""Whether a log's ``timing_s/step`` holds the weight sync (pipesim.calibrate.steptime).

verl's colocated trainer times its weight sync inside its step (``ray_trainer.py``: the
``update_weights`` timer inside ``step``); its fully-async trainer times ``timing_s/param_sync``
after its ``step`` timer closes (``fully_async_trainer.py``, ``_trigger_parameter_sync_after_step``;
volcengine/verl ``b178a3c``). pipesim's simulated step holds the sync in every design. Before, the
calibration subtracted ``param_sync`` from every logged step, so a fully-async log's trainer came
out short by the sync: the remainder (``step_s``) floored at 0, the profile's scale refused as
"faster than peak", the decode overhead fitted to the step at 0. Each test below failed so.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import LogError, TrainingLog, calibrate, read_log
from pipesim.calibrate.sample import sample_log
from pipesim.calibrate.scale import EFFICIENCIES, FIXED_COSTS, scaled
from pipesim.calibrate.trainer import config, remainder, switch_s
from pipesim.compute.series import step_breakdown
from pipesim.io.cli import main
from pipesim.plan.build import trainer_config
from pipesim.plan.runspec import RunSpec, from_dict, read, run

SPEC = Path(__file__).resolve().parent.parent / "examples" / "run_verl_8gpu.toml"
SYNC_S = 3.0
"""The weight sync the logs are made with: longer than the remainder's 2 s, so that a remainder
short by it cannot pass for noise."""
LENGTHS = {"response_median_tokens": 700.0, "response_sigma": 0.7}
TRAINER = {"fwd_bwd_efficiency": 0.35, "fwd_efficiency": 0.25, "micro_batch_s": 0.3, "optimizer_step_s": 1.0}
TRUE = {**TRAINER, "step_s": 2.0, "iteration_overhead_s": 0.004, **LENGTHS, "sync_time_s": SYNC_S}


def _spec(values: dict[str, float] | None = None, placement: Any = 4, steps: int = 16) -> RunSpec:
    """The sample spec as a split (fully asynchronous) design: ``placement`` trainer GPUs of 8, eta
    1, partial rollout, run at seed 3 (the log's, so the fit deals its samples as the log's run)."""
    data = read(SPEC)
    if values is not None:
        data["calibration"] = {"values": dict(values)}
    data["run"] = {"steps": steps, "seed": 3}
    data["design"].update(placement=placement, eta=1, update="partial")
    return from_dict(data)


@functools.lru_cache(maxsize=4)
def _verl_log(placement: int = 4, noise: float = 0.03, trainer: bool = True) -> pd.DataFrame:
    """The log verl's fully-async trainer writes of the true run, one row per trainer step: its
    ``step`` timer holds ``gen`` (the wait for samples) and the batch's phases; the weight sync is
    timed after it closes, as ``timing_s/param_sync``. Written here from the run's breakdown, not
    by :func:`sample_log`; each timing with multiplicative noise, drawn in ``sample_log``'s order."""
    truth = TRUE if trainer else {k: v for k, v in TRUE.items() if k not in TRAINER and k != "step_s"}
    rs = _spec(truth, placement)
    rng = np.random.default_rng(103)
    crun = run(rs)
    br = step_breakdown(crun.result, crun.phase_log).set_index("step")
    tcfg = trainer_config(rs.plan, rs.design)
    clip = crun.result.trained.groupby("step")["truncated"].mean()
    timed = ["timing_s/gen", "timing_s/param_sync"] + ["timing_s/old_log_prob"] * tcfg.recompute_old_logp
    timed += ["timing_s/update_actor"]
    rows = []
    for step, tokens, _ in crun.phase_log:
        row: dict[str, float] = {"step": int(step)}
        for k in timed:
            row[k] = float(br.loc[step, k]) * float(np.exp(noise * rng.standard_normal()))
        rest = float(br.loc[step, "timing_s/remainder"] + br.loc[step, "timing_s/offload"])
        rest *= float(np.exp(noise * rng.standard_normal()))
        row["timing_s/step"] = sum(row[k] for k in timed if k != "timing_s/param_sync") + rest
        row["response_length/mean"] = tokens / rs.plan.batch_size - 512.0
        row["response_length/clip_ratio"] = float(clip.get(step, 0.0))
        row["prompt_length/mean"] = 512.0
        rows.append(row)
    df = pd.DataFrame(rows)
    assert (df["timing_s/param_sync"].iloc[1:] > 0.9 * SYNC_S).all()  # every step after the first syncs
    return df


def _calibrate(tmp_path: Path, df: pd.DataFrame, **kw: Any) -> Any:
    path = tmp_path / "log.csv"
    df.to_csv(path, index=False)
    return calibrate(read_log(path), _spec(placement=kw.pop("placement", 4), steps=20), **kw)


def test_a_fully_async_log_whose_step_leaves_out_the_sync_gives_back_the_remainder(tmp_path: Path) -> None:
    """Every verl column: the remainder (step less gen and the phases) is 2 s a step. Before, the
    3 s sync was taken out of it as well: step_s fitted below 0, set to 0, and a note that the step
    is shorter than its parts at 15 of 16 steps."""
    cal = _calibrate(tmp_path, _verl_log())
    for k in ("step_s", "fwd_bwd_efficiency", "fwd_efficiency", "optimizer_step_s", "sync_time_s"):
        v = cal.values[k]
        assert v.lo <= TRUE[k] <= v.hi, (k, v)
    assert cal.values["step_s"].value == pytest.approx(TRUE["step_s"], rel=0.05)
    assert not any("shorter than" in n for n in cal.not_identified)
    assert any("leaving out the weight sync" in n and "fully-async" in n for n in cal.not_identified)
    assert abs(cal.residuals["remainder"]["mean"]) < 0.05


def test_a_fully_async_log_of_step_and_gen_scales_the_profile_to_the_truth(tmp_path: Path) -> None:
    """No phase column: the trainer is the profile scaled to the step less gen (pipesim.calibrate.
    scale), here the profile itself (scale 1). Before, the sync taken out of the step made the
    trainer look 3.6 times faster than the profile, above peak: refused, the profile kept."""
    cols = ["step", "timing_s/step", "timing_s/gen", "timing_s/param_sync", "response_length/mean"]
    cal = _calibrate(tmp_path, _verl_log(6, trainer=False)[cols], placement=6)
    truth = scaled(config(_spec()).framework, 1.0)
    for name in (*EFFICIENCIES, *FIXED_COSTS):
        if getattr(truth, name) > 0:
            v = cal.values[name]
            assert v.lo <= getattr(truth, name) <= v.hi, (name, v)
    assert any("scaled as a whole to the logged step less gen (x" in n for n in cal.not_identified)


def test_a_fully_async_log_of_step_times_gives_back_the_decode_overhead(tmp_path: Path) -> None:
    """No gen column: the overhead is fitted to the step, simulated in the log's meaning (the step
    less its sync). Before, the simulated step held a 3 s sync the logged one did not: the
    overhead went to 0 ms (interval [0, 0.44]) for a true 4 ms."""
    cols = [
        "step",
        "timing_s/step",
        "timing_s/param_sync",
        "response_length/mean",
        "response_length/clip_ratio",
    ]
    cal = _calibrate(tmp_path, _verl_log(6, trainer=False)[cols], placement=6)
    v = cal.values["iteration_overhead_s"]
    assert v.lo <= TRUE["iteration_overhead_s"] <= v.hi, v
    assert "simulated step" in v.how


def test_sample_log_writes_a_split_designs_step_as_verls_fully_async_trainer_times_it() -> None:
    """A split design's step leaves out the sync (the log above, drawn alike); a colocated one's
    holds it; ``step_includes_sync`` writes either."""
    rs = _spec(TRUE)
    split = sample_log(rs, np.random.default_rng(103), noise=0.03)
    pd.testing.assert_frame_equal(split, _verl_log())
    held = sample_log(rs, np.random.default_rng(103), noise=0.03, step_includes_sync=True)
    assert np.allclose(held["timing_s/step"], split["timing_s/step"] + split["timing_s/param_sync"])
    colocated = read(SPEC)
    colocated["run"] = {"steps": 4, "seed": 0}
    df = sample_log(from_dict(colocated), np.random.default_rng(0), noise=0.0)
    parts = df[[c for c in df.columns if c.startswith("timing_s/") and c != "timing_s/step"]].sum(axis=1)
    assert (df["timing_s/step"] >= parts - 1e-9).all()  # the sync inside, and the rest
    with pytest.raises(ValueError, match="step_includes_sync"):
        sample_log(rs, np.random.default_rng(0), step_includes_sync="no")  # type: ignore[arg-type]


def test_a_split_run_whose_trainer_times_the_sync_inside_the_step_says_so(tmp_path: Path) -> None:
    """verl's one-step-off-policy trainer times its sync inside the step (``sync_rollout_weights``
    in ``step``): such a log, read as the design's default (fully async), misreads the remainder
    by the sync; ``step_includes_sync=True`` reads it right, and the note says it was given."""
    df = sample_log(_spec(TRUE), np.random.default_rng(103), noise=0.03, step_includes_sync=True)
    cal = _calibrate(tmp_path, df, step_includes_sync=True)
    v = cal.values["step_s"]
    assert v.lo <= TRUE["step_s"] <= v.hi, v
    assert any("holding the weight sync, as given" in n for n in cal.not_identified)
    wrong = _calibrate(tmp_path, df)
    assert not wrong.values["step_s"].lo <= TRUE["step_s"] <= wrong.values["step_s"].hi


def test_the_remainder_takes_the_sync_out_only_where_the_step_holds_it() -> None:
    """The log's side of the one conversion: the same log's remainder differs by its param_sync."""
    frame = _verl_log()
    rs = _spec()
    default = remainder(TrainingLog("mem", "0" * 64, frame), rs)
    held = remainder(TrainingLog("mem", "0" * 64, frame, step_includes_sync=True), rs)
    assert default is not None and held is not None
    assert np.allclose(default - held, frame["timing_s/param_sync"])
    colocated = from_dict(read(SPEC))  # the design says the step holds it (less its offload/reload)
    got = remainder(TrainingLog("mem", "0" * 64, frame), colocated)
    assert got is not None and np.allclose(got, held - switch_s(colocated) + switch_s(rs))


def test_a_colocated_log_is_read_as_verls_hybrid_engine_trainer_times_it(tmp_path: Path) -> None:
    data = read(SPEC)
    data["run"]["steps"] = 8  # the reading is the point, not the fit
    df = sample_log(from_dict(data), np.random.default_rng(0))
    path = tmp_path / "log.csv"
    df.to_csv(path, index=False)
    cal = calibrate(read_log(path), from_dict(read(SPEC)))
    assert any("holding the weight sync, as verl's colocated trainer" in n for n in cal.not_identified)


def test_the_command_takes_the_reading_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.csv"
    _verl_log().head(8).to_csv(log, index=False)  # the reading is the point, not the fit: 8 steps
    spec = tmp_path / "spec.toml"
    text = (
        SPEC.read_text().replace('placement = "colocated"', "placement = 4").replace("eta = 0 ", "eta = 1 ")
    )
    spec.write_text(text.replace('update = "drain"', 'update = "partial"'))
    out = tmp_path / "c.toml"
    args = ["calibrate", str(log), "--spec", str(spec), "--out", str(out), "--quiet"]
    assert main([*args, "--step-includes-sync", "no"]) == 0
    assert "read as leaving out the weight sync (timing_s/param_sync), as given" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([*args, "--step-includes-sync", "maybe"])


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"progress": "stderr"}, "progress"),
        ({"progress": 3}, "progress"),
        ({"step_includes_sync": "no"}, "step_includes_sync"),
        ({"step_includes_sync": 1}, "step_includes_sync"),
    ],
    ids=["progress a string", "progress an int", "step_includes_sync a string", "step_includes_sync 1"],
)
def test_bad_arguments_are_log_errors_naming_them(kw: dict[str, Any], field: str) -> None:
    frame = _verl_log()
    with pytest.raises(LogError, match=field) as e:
        calibrate(TrainingLog("mem", "0" * 64, frame), _spec(), **kw)
    assert e.value.field == field
    with pytest.raises(LogError, match="step_includes_sync"):
        TrainingLog("mem", "0" * 64, frame, step_includes_sync="yes")  # type: ignore[arg-type]


def test_a_published_row_without_a_step_sums_its_sync_only_where_the_step_holds_it() -> None:
    """published_log's ``step_s`` left out is the sum of the phases given: with ``param_sync`` for a
    colocated run (the default, as before), without it for a fully-async one, so that the
    calibration's reading (the step less gen and the phases, and param_sync where it holds it)
    leaves no remainder either way."""
    from pipesim.calibrate.published import published_log

    row = {"gen": 10.0, "update_actor": 20.0, "param_sync": 3.0, "response_tokens": 500, "prompt_tokens": 100}
    assert published_log([row], repeat=3)["timing_s/step"].tolist() == [33.0] * 3
    assert published_log([row], repeat=3, step_includes_sync=False)["timing_s/step"].tolist() == [30.0] * 3
    given = published_log([{**row, "step_s": 40.0}], repeat=3, step_includes_sync=False)
    assert given["timing_s/step"].tolist() == [40.0] * 3  # a published step is taken as it is


def test_the_held_out_sync_is_compared_over_the_steps_that_synced(tmp_path: Path) -> None:
    """A design that syncs every 2 steps logs 0 s of param_sync at the others; the simulated mean
    and sync_time_s are over the syncing steps, and so is now the held-out logged mean (before,
    over every step: half the sync, a residual of -1.0)."""
    data = read(SPEC)
    data["calibration"] = {"values": dict(TRUE)}
    data["run"] = {"steps": 16, "seed": 3}
    data["design"].update(placement=4, eta=1, update="partial", sync_every=2)
    df = sample_log(from_dict(data), np.random.default_rng(103), noise=0.03)
    assert (df["timing_s/param_sync"].iloc[-4:] == 0).sum() == 2
    path = tmp_path / "log.csv"
    df.to_csv(path, index=False)
    data.pop("calibration")
    data["run"] = {"steps": 20, "seed": 3}
    cal = calibrate(read_log(path), from_dict(data))
    assert abs(cal.residuals["timing_s/param_sync"]["mean"]) < 0.1, cal.residuals
    v = cal.values["step_s"]
    assert v.lo <= TRUE["step_s"] <= v.hi, v
