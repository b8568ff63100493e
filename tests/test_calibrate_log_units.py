"""What verl times inside a step that no simulated step has (a checkpoint save, a validation), and
a log whose times are not seconds: the first is taken out of ``timing_s/step``, the second is
said (a user's walkthrough: one save 10x a step fitted ``step_s`` at 33.6 s for 3.0, and a log in
milliseconds calibrated to a spec running 7 samples an hour, both without a word)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import Calibration, calibrate, read_log
from pipesim.calibrate.checks import PLAUSIBLE, implausible
from pipesim.calibrate.fit import Fitted
from pipesim.calibrate.log import LogError
from pipesim.plan.runspec import load

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
LOG, SPEC = EXAMPLES / "verl_sample_log.csv", EXAMPLES / "run_verl_8gpu.toml"


@pytest.mark.parametrize("column", ["timing_s/save_checkpoint", "timing_s/testing"])
def test_a_save_or_validation_inside_the_step_reads_as_the_step_without_it(
    tmp_path: Path, column: str
) -> None:
    df = pd.read_csv(LOG)
    extra = np.zeros(len(df))
    extra[[3, 9]] = [600.0, 45.5]  # a save every so often; the other steps' cells are empty
    with_it = df.assign(
        **{"timing_s/step": df["timing_s/step"] + extra, column: np.where(extra > 0, extra, np.nan)}
    )
    path = tmp_path / "log.csv"
    with_it.to_csv(path, index=False)
    got, plain = read_log(path), read_log(LOG)
    pd.testing.assert_frame_equal(got.frame, plain.frame, check_exact=False, rtol=1e-12)
    assert any(column in n and "subtracted" in n for n in got.notes)


def test_a_save_longer_than_its_step_is_refused_naming_the_column(tmp_path: Path) -> None:
    df = pd.read_csv(LOG)
    bad = df.assign(**{"timing_s/save_checkpoint": df["timing_s/step"] * 2})
    path = tmp_path / "log.csv"
    bad.to_csv(path, index=False)
    with pytest.raises(LogError) as info:
        read_log(path)
    assert info.value.field == "timing_s/save_checkpoint"


@pytest.mark.parametrize("name", sorted(PLAUSIBLE))
def test_a_constant_outside_what_real_runs_fit_is_said_and_one_inside_is_not(name: str) -> None:
    lo, hi = PLAUSIBLE[name]
    inside = (lo + hi) / 2
    assert implausible({name: Fitted(inside, inside, inside)}) == []
    outside = lo / 10 if lo > 0 else hi * 10
    notes = implausible({name: Fitted(outside, outside, outside)})
    assert len(notes) == 1 and name in notes[0]


@pytest.fixture(scope="module")
def plain() -> Calibration:
    """The shipped sample log calibrated against its spec, as it is (read only: two tests compare
    with it)."""
    return calibrate(read_log(LOG), load(SPEC))


def test_a_log_in_milliseconds_is_said_and_the_same_log_in_seconds_is_not(
    tmp_path: Path, plain: Calibration
) -> None:
    df = pd.read_csv(LOG)
    ms = df.assign(**{c: df[c] * 1000 for c in df.columns if c.startswith("timing_s/")})
    path = tmp_path / "ms.csv"
    ms.to_csv(path, index=False)
    slow = [n for n in calibrate(read_log(path), load(SPEC)).not_identified if "milliseconds" in n]
    assert slow  # the efficiencies (or the overhead) fall outside every real run's
    assert not [n for n in plain.not_identified if "milliseconds" in n]


def test_a_log_numbered_from_1_read_with_first_step_1_calibrates_as_the_log_numbered_from_0(
    tmp_path: Path, plain: Calibration
) -> None:
    """Each step's samples are dealt as the spec's run dealt that step, so verl's numbering from 1,
    read from 0, moved the trainer's constants (fwd_bwd_efficiency 0.545 for 0.450 on a noiseless
    log of known constants). ``first_step=1`` reads the verl-numbered log exactly as the same log
    numbered from 0; without it, a note says so."""
    df = pd.read_csv(LOG)
    assert int(df["step"].min()) == 0
    path = tmp_path / "from1.csv"
    df.assign(step=df["step"] + 1).to_csv(path, index=False)
    shifted = calibrate(read_log(path, first_step=1), load(SPEC))
    assert {k: v.value for k, v in shifted.values.items()} == {k: v.value for k, v in plain.values.items()}
    assert any("--first-step 1" in n for n in read_log(path).notes)
    assert not any("--first-step" in n for n in read_log(LOG).notes)


@pytest.mark.parametrize("bad", [-1, True, 1.5, "1", 5])
def test_a_first_step_that_is_no_step_number_of_the_log_is_refused(bad: object) -> None:
    with pytest.raises(LogError) as info:
        read_log(LOG, first_step=bad)  # type: ignore[arg-type]
    assert info.value.field == "first_step"


@pytest.mark.parametrize(("flag", "value"), [("--trainer-steps-per-row", "0"), ("--first-step", "3")])
def test_a_bad_calibrate_flag_is_named_as_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    """The refusal named the Python field (``trainer_steps_per_row must be ...``), not the flag."""
    from pipesim.io.cli import main

    argv = ["calibrate", str(LOG), "--spec", str(SPEC), "--out", str(tmp_path / "c.toml"), flag, value]
    assert main(argv) == 2
    assert f"error: {flag}" in capsys.readouterr().err
    assert not (tmp_path / "c.toml").exists()
