"""The published table's transfer protocol through the user's path (issue 42): the run spec of verl's
calibration row (``examples/published/``), the log written from its published means, ``pipesim
calibrate``, and the transfer rows' trainer taken from the calibrated spec
(``scenarios/published/calpath.py``)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tomllib

from pipesim.calibrate import TrainingLog
from pipesim.calibrate.published import published_log
from pipesim.calibrate.trainer import config, fit_trainer_profile, spread
from pipesim.compute.phases import phase_times_s
from pipesim.io.cli import main
from pipesim.plan.build import engine_config, trainer_config
from pipesim.plan.checks import PlanError
from pipesim.plan.runspec import load, read, run
from scenarios.published import calpath
from scenarios.published.claims import verl_direct_fit, verl_fit
from scenarios.published.fit import trainer_config as published_trainer
from scenarios.published.verl import (
    VERL_BATCH,
    VERL_MINI,
    VERL_MODEL,
    VERL_N,
    VERL_REQUIRE_BATCHES,
    verl_engine,
)

FOLDER = calpath.SPEC.parent


def _numbers(profile: object) -> dict[str, float]:
    return {
        f.name: float(getattr(profile, f.name))
        for f in dataclasses.fields(profile)  # type: ignore[arg-type]
        if isinstance(getattr(profile, f.name), int | float)
    }


def test_the_run_spec_is_the_presets_setup() -> None:
    """The spec's engine model, GPU, batch and trainer are those ``verl_async(128, 0.5, True)``
    runs: the 32K-context model, one trainer step of 128 prompts x 16, 64 trainer GPUs that take
    the rollout's log-probs (no old_log_prob phase), trained with verl's batch knobs."""
    rs = load(calpath.SPEC)
    eng = engine_config(rs.plan, rs.design.tp)
    assert dataclasses.replace(eng.model, name=VERL_MODEL.name) == VERL_MODEL
    assert eng.gpu == verl_engine().gpu and eng.tp == verl_engine().tp
    assert rs.plan.batch_size == VERL_REQUIRE_BATCHES * VERL_MINI * VERL_N
    ours = trainer_config(rs.plan, rs.design)
    theirs = published_trainer(verl_engine(), 64, old_logp=False, batch=VERL_BATCH)
    assert ours.framework == theirs.framework  # fsdp2-dense, by name there and by default here
    assert dataclasses.replace(ours, model=theirs.model, mfu=None, profile=theirs.framework) == (
        dataclasses.replace(theirs, mfu=None, profile=theirs.framework)
    )
    assert not ours.recompute_old_logp


def test_the_run_spec_runs_and_has_no_old_log_prob_phase() -> None:
    rs = load(calpath.SPEC, ["run.steps=2"])
    summary = run(rs).summary()
    assert summary["timing_s/update_actor"] > 0
    assert summary["timing_s/old_log_prob"] == 0


@pytest.mark.parametrize(("value", "ok"), [(False, True), (True, True), ("no", False), (0, False)])
def test_recompute_old_logp_is_a_checked_model_key(tmp_path: Path, value: object, ok: bool) -> None:
    data = read(calpath.SPEC)
    data["model"]["recompute_old_logp"] = value
    data["model"]["name"] = str(FOLDER / data["model"]["name"])
    path = tmp_path / "s.yaml"  # JSON is YAML
    path.write_text(json.dumps(data))
    if ok:
        rs = load(path)
        assert trainer_config(rs.plan, rs.design).recompute_old_logp is value
    else:
        with pytest.raises(PlanError) as e:
            load(path)
        assert e.value.field == "model.recompute_old_logp"


def test_the_shipped_log_is_the_published_row() -> None:
    """``examples/published/verl_async_128_log.csv`` is what :func:`calpath.write_log` writes now
    (the README's means over 4 trainer steps, the stated run's tokens)."""
    shipped = pd.read_csv(calpath.LOG)
    fresh = published_log(calpath.rows(), repeat=calpath.REPEAT, first_step=calpath.FIRST_STEP)
    pd.testing.assert_frame_equal(shipped, fresh, check_dtype=False, rtol=1e-12)
    assert shipped["timing_s/step"].iloc[0] * 4 == pytest.approx(150.63)
    assert shipped["timing_s/update_actor"].iloc[0] * 4 == pytest.approx(113.16)


def test_the_calibrated_profile_is_the_direct_fit() -> None:
    """``pipesim calibrate`` on the log and spec gives the profile the direct fit gives on the
    calibration run: same observations, same two constants (``fwd_bwd_efficiency``,
    ``sample_s``), and the same dealing of samples to ranks, since calibrate refits the trainer
    at the lengths it ends with (median 945 tokens, bias-corrected), those the direct fit deals
    at. (Before that refit it dealt at 891 tokens and the efficiency differed by 1.6%.)"""
    got, want = _numbers(calpath.transfer_fit().profile), _numbers(verl_direct_fit().profile)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_the_table_transfers_with_the_calibrated_profile() -> None:
    fit = verl_fit()
    assert fit.profile == calpath.transfer_fit().profile
    assert "pipesim calibrate" in fit.profile.source
    tr = published_trainer(verl_engine(), 32, old_logp=False, fit=fit)
    assert tr.framework == fit.profile


def test_the_three_commands_on_the_shipped_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """calibrate the 64:64 spec on the log, then run the calibrated spec on the 32:32 split."""
    folder = tmp_path / "published"
    shutil.copytree(FOLDER, folder)
    spec, log, out = folder / calpath.SPEC.name, folder / calpath.LOG.name, folder / "calibrated.toml"
    assert main(["calibrate", str(log), "--spec", str(spec), "--out", str(out)]) == 0
    values = tomllib.loads(out.read_text())["calibration"]["values"]
    want = calpath.transfer_fit().profile
    assert values["fwd_bwd_efficiency"] == pytest.approx(want.fwd_bwd_efficiency, rel=1e-5)
    assert values["sample_s"] == pytest.approx(want.sample_s, rel=1e-5)
    capsys.readouterr()
    sets = ["--set", "cluster.n_gpus=64", "--set", "design.placement=32", "--set", "run.steps=2"]
    js = tmp_path / "run.json"
    assert main(["run", str(out), *sets, "--json", str(js)]) == 0
    assert "timing_s/update_actor" in capsys.readouterr().out
    rs = load(out, sets[1::2])
    assert rs.plan.n_gpus == 64 and rs.design.trainer_gpus == 32
    assert trainer_config(rs.plan, rs.design).framework.fwd_bwd_efficiency == pytest.approx(
        want.fwd_bwd_efficiency, rel=1e-5
    )
    assert json.loads(js.read_text())["summary"]["timing_s/update_actor"] > 0


def test_a_remainder_shorter_than_the_per_sample_part_is_fitted_per_sample() -> None:
    """A log made by the phase model with ``step_s`` 0 and ``sample_s`` below the profile's: the
    remainder is put per sample (the fit gives that ``sample_s`` back) rather than ``step_s``
    floored at 0 (which left the remainder at the profile's per-sample part)."""
    rs = load(calpath.SPEC)
    base = config(rs).framework
    for share in (0.1, 0.4, 0.9):
        true = dataclasses.replace(base, step_s=0.0, sample_s=share * base.sample_s, fwd_bwd_efficiency=0.6)
        cfg = config(rs, true)
        tokens = np.full(3, 3.5e6)
        rows = []
        spreads = spread(rs, tokens)  # the tokens per sample the fit assumes for each step
        for i, t in enumerate(tokens):
            ph = phase_times_s(cfg, float(t), rs.plan.batch_size, spreads[i])
            gen = 10.0
            rows.append(
                {
                    "step": i,
                    "timing_s/gen": gen,
                    "timing_s/update_actor": ph["update_actor"],
                    "timing_s/step": gen + ph["update_actor"] + ph["remainder"],
                    "response_length/mean": t / rs.plan.batch_size - 256.0,
                    "prompt_length/mean": 256.0,
                }
            )
        log = TrainingLog("made.csv", "0" * 64, pd.DataFrame(rows).astype(float))
        got, notes = fit_trainer_profile(log, rs, tokens)
        assert got["sample_s"].value == pytest.approx(true.sample_s, rel=1e-9)
        assert got["fwd_bwd_efficiency"].value == pytest.approx(0.6, rel=1e-9)
        assert got["step_s"].value == 0.0
        assert any("fitted per sample" in n for n in notes)


def test_the_run_spec_exports_to_the_same_tables(tmp_path: Path) -> None:
    folder = tmp_path / "published"
    shutil.copytree(FOLDER, folder)
    out = folder / "exported.toml"
    assert main(["export", str(folder / calpath.SPEC.name), "--out", str(out)]) == 0
    assert read(out) == read(calpath.SPEC)
    assert load(out) == load(calpath.SPEC)
