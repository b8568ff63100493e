"""What verl times inside a step that no simulated step has (a checkpoint save, a validation), and
a log whose times are not seconds: the first is taken out of ``timing_s/step``, the second is
said (a user's walkthrough: one save 10x a step fitted ``step_s`` at 33.6 s for 3.0, and a log in
milliseconds calibrated to a spec running 7 samples an hour, both without a word)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import calibrate, read_log
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


def test_a_log_in_milliseconds_is_said_and_the_same_log_in_seconds_is_not(tmp_path: Path) -> None:
    df = pd.read_csv(LOG)
    ms = df.assign(**{c: df[c] * 1000 for c in df.columns if c.startswith("timing_s/")})
    path = tmp_path / "ms.csv"
    ms.to_csv(path, index=False)
    slow = [n for n in calibrate(read_log(path), load(SPEC)).not_identified if "milliseconds" in n]
    assert slow  # the efficiencies (or the overhead) fall outside every real run's
    assert not [n for n in calibrate(read_log(LOG), load(SPEC)).not_identified if "milliseconds" in n]
