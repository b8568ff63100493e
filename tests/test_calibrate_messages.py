"""A calibrate walkthrough: bad-log errors name a cell by its step (its file line where the step
is unknown), an empty file and a JSON array are said as such, and the held-out guard names the
steps the notes flag as outliers as the likely cause of a miss."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import LogError, calibrate, read_log
from pipesim.calibrate.sample import sample_log
from pipesim.plan.runspec import from_dict, load, read

SPEC = Path(__file__).resolve().parents[1] / "examples" / "run_verl_8gpu.toml"
TRUE = {
    "fwd_bwd_efficiency": 0.42,
    "fwd_efficiency": 0.30,
    "micro_batch_s": 0.15,
    "optimizer_step_s": 0.8,
    "step_s": 3.5,
    "iteration_overhead_s": 0.006,
    "response_median_tokens": 850.0,
    "response_sigma": 0.6,
    "sync_time_s": 0.25,
}


@functools.cache
def _log(seed: int, steps: int = 20) -> pd.DataFrame:
    """The true run's noiseless log (cached: callers edit a copy)."""
    data = read(SPEC)
    data["calibration"] = {"values": dict(TRUE)}
    data["run"] = {"steps": steps, "seed": seed}
    return sample_log(from_dict(data), np.random.default_rng(123), noise=0.0).round(9)


def _good(tmp_path: Path) -> pd.DataFrame:
    return _log(1, 8)


@pytest.mark.parametrize(
    ("name", "edit", "field", "said"),
    [
        (
            "nonnum.csv",
            lambda df: df.astype({"timing_s/gen": object}).assign(
                **{"timing_s/gen": ["abc" if i == 5 else v for i, v in enumerate(df["timing_s/gen"])]}
            ),
            "timing_s/gen",
            "step 5:",
        ),
        (
            "huge.csv",
            lambda df: df.assign(
                **{"timing_s/step": [1e7 if i == 2 else v for i, v in enumerate(df["timing_s/step"])]}
            ),
            "timing_s/step",
            "step 2:",
        ),
        (
            "nostep.csv",
            lambda df: df.assign(step=[None if i == 3 else v for i, v in enumerate(df["step"])]),
            "step",
            "line 5:",
        ),
        ("one.csv", lambda df: df.iloc[:1], "steps", ": 1 step;"),
    ],
)
def test_bad_cells_are_named_by_their_step(tmp_path: Path, name: str, edit, field: str, said: str) -> None:
    p = tmp_path / name
    edit(_good(tmp_path)).to_csv(p, index=False)
    with pytest.raises(LogError) as e:
        calibrate(read_log(p), load(SPEC))
    assert e.value.field == field
    assert said in str(e.value) and "row " not in str(e.value)


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [("empty.csv", "", "the file is empty"), ("arr.jsonl", '[{"step": 0}, {"step": 1}]\n', "JSON array")],
)
def test_an_empty_file_and_a_json_array_are_said(tmp_path: Path, name: str, text: str, said: str) -> None:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(LogError) as e:
        read_log(p)
    assert e.value.field == "log" and said in str(e.value) and name in str(e.value)


def read_log_frame(df: pd.DataFrame):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "log.csv"
        df.to_csv(p, index=False)
        return read_log(p)


def test_the_held_out_warning_names_the_flagged_outlier_steps() -> None:
    """Four 4x outlier steps drove a 31% held-out miss, and the warning asked "is the log from a
    run of this spec?"; it names the steps the notes flag as the likely cause."""
    df = _log(5, 40).copy()
    bad = [7, 12, 19, 26]
    df.loc[df["step"].isin(bad), "timing_s/step"] *= 4.0
    cal = calibrate(read_log_frame(df), load(SPEC))
    assert cal.misses, "the outliers no longer drive a held-out miss: pick larger ones"
    for w in cal.misses:
        assert "outlier steps 7, 12, 19, 26" in w and "is the log from a run of this spec" not in w
    clean = calibrate(read_log_frame(_log(5, 40)), load(SPEC))
    assert not clean.misses
