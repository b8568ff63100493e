"""Bad input to the calibration's Python API is refused naming the argument or the column (a
:class:`~pipesim.calibrate.LogError`, a :class:`~pipesim.core.validate.FieldError`), promptly and
without a numpy warning: a :class:`TrainingLog` built from a DataFrame (its path, SHA-256, notes and
frame: wrong types, NaN, inf, negative, zero, odd dtypes, unknown, duplicate or missing columns,
duplicate or unsorted steps, too many steps), :meth:`TrainingLog.select`, :func:`calibrate` and
:func:`check_log`'s arguments, a :class:`Calibration` built in Python, the fits
(:mod:`pipesim.calibrate.fit`, :mod:`~pipesim.calibrate.trainer`) given arrays directly, and
:func:`read_log` / :func:`parse_steps` / :func:`read_columns_map` given arguments of the wrong
kind. Before, most of these were accepted and calibrated to silently wrong numbers, or failed deep
inside pandas or numpy. Rows: what, the call, the exception, the field."""

from __future__ import annotations

import functools
import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import (
    Calibration,
    Fitted,
    LogError,
    TrainingLog,
    calibrate,
    calibrated_spec,
    check_log,
    parse_steps,
    read_columns_map,
    read_log,
    with_lengths,
)
from pipesim.calibrate.checks import in_range
from pipesim.calibrate.fit import capped_mean, fit_drift, fit_lengths, t95
from pipesim.calibrate.frame import MAX_LOG_STEPS
from pipesim.calibrate.published import published_log
from pipesim.calibrate.residuals import trainer_residuals
from pipesim.calibrate.trainer import (
    config,
    dealing_spread,
    dealt,
    fit_trainer_profile,
    remainder,
    row_members,
    spread,
    switch_s,
    tokens,
)
from pipesim.core.validate import FieldError
from pipesim.plan.runspec import RunSpec, load
from tests.test_refusals_core import check_refusal

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SPEC = EXAMPLES / "run_verl_8gpu.toml"
LOG = EXAMPLES / "verl_sample_log.csv"
SHA = "0" * 64


@functools.cache
def _spec() -> RunSpec:
    return load(SPEC)


@functools.cache
def _calibrate_rows_of(k: Any) -> Callable[[], Any]:
    """A calibration of the sample log at ``trainer_steps_per_row=k`` (a row of the table)."""
    return lambda: calibrate(_log(), _spec(), trainer_steps_per_row=k)


def _log() -> TrainingLog:
    return read_log(LOG)


def _frame() -> pd.DataFrame:
    return _log().frame.copy()


def _set(column: str, value: Any, row: int | None = None) -> pd.DataFrame:
    df = _frame()
    if row is None:
        df[column] = value
    else:
        df.loc[row, column] = value
    return df


def _made(frame: Any = None, path: Any = "mem", sha: Any = SHA, notes: Any = ()) -> TrainingLog:
    return TrainingLog(path, sha, _frame() if frame is None else frame, notes)


def _cal(**fields: Any) -> Calibration:
    args: dict[str, Any] = {"values": {}, "not_identified": [], "residuals": {}, "log": _log()}
    return Calibration(**{**args, **fields})


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


_MEAN = np.array([900.0, 950.0, 1000.0, 1020.0, 980.0, 1010.0])
_TOKENS = np.linspace(1.8e5, 2.2e5, 20)

ROWS: list[tuple[str, Callable[[], Any], str]] = [
    # -- the arguments of a TrainingLog
    ("path None", lambda: _made(path=None), "path"),
    ("path an int", lambda: _made(path=3), "path"),
    ("sha256 None", lambda: _made(sha=None), "sha256"),
    ("sha256 not 64 hex digits", lambda: _made(sha="abc"), "sha256"),
    ("notes a string", lambda: _made(notes="left out"), "notes"),
    ("notes None", lambda: _made(notes=None), "notes"),
    ("notes of ints", lambda: _made(notes=(1, 2)), "notes"),
    ("frame None", lambda: TrainingLog("mem", SHA, None), "frame"),
    ("frame a dict", lambda: _made(frame={"step": [0, 1, 2]}), "frame"),
    ("frame a list", lambda: _made(frame=[[0, 1.0]]), "frame"),
    ("frame a str", lambda: _made(frame="log.csv"), "frame"),
    ("frame a Series", lambda: _made(frame=_frame()["step"]), "frame"),
    ("frame a 2-D array", lambda: _made(frame=_frame().to_numpy()), "frame"),
    # -- its frame's columns
    ("no step column", lambda: _made(frame=_frame().drop(columns="step")), "step"),
    ("an unknown column", lambda: _made(frame=_frame().assign(bogus=1.0)), "bogus"),
    (
        "a misspelt column",
        lambda: _made(frame=_frame().rename(columns={"timing_s/update_actor": "timing_s/update"})),
        "timing_s/update",
    ),
    (
        "a column given twice",
        lambda: _made(frame=pd.concat([_frame(), _frame()[["timing_s/gen"]]], axis=1)),
        "timing_s/gen",
    ),
    ("no rows", lambda: _made(frame=_frame().iloc[:0]), "steps"),
    (
        "too many steps",
        lambda: _made(frame=pd.DataFrame({"step": np.arange(MAX_LOG_STEPS + 1.0)})),
        "steps",
    ),
    ("a column of strings", lambda: _made(frame=_set("timing_s/gen", "1.0")), "timing_s/gen"),
    ("a column of objects", lambda: _made(frame=_frame().astype({"timing_s/gen": object})), "timing_s/gen"),
    ("a column of bools", lambda: _made(frame=_set("timing_s/gen", True)), "timing_s/gen"),
    ("a complex column", lambda: _made(frame=_set("timing_s/gen", 1 + 0j)), "timing_s/gen"),
    # -- its cells
    ("NaN gen", lambda: _made(frame=_set("timing_s/gen", math.nan, 3)), "timing_s/gen"),
    ("NaN step", lambda: _made(frame=_set("step", math.nan, 2)), "step"),
    ("inf gen", lambda: _made(frame=_set("timing_s/gen", math.inf, 3)), "timing_s/gen"),
    (
        "-inf response",
        lambda: _made(frame=_set("response_length/mean", -math.inf, 3)),
        "response_length/mean",
    ),
    ("negative gen", lambda: _made(frame=_set("timing_s/gen", -5.0, 3)), "timing_s/gen"),
    (
        "negative update_actor",
        lambda: _made(frame=_set("timing_s/update_actor", -5.0, 3)),
        "timing_s/update_actor",
    ),
    ("negative response", lambda: _made(frame=_set("response_length/mean", -5.0, 3)), "response_length/mean"),
    ("negative prompt", lambda: _made(frame=_set("prompt_length/mean", -1.0)), "prompt_length/mean"),
    ("response 0", lambda: _made(frame=_set("response_length/mean", 0.0, 3)), "response_length/mean"),
    (
        "response half a token",
        lambda: _made(frame=_set("response_length/mean", 0.5, 3)),
        "response_length/mean",
    ),
    ("prompt 0", lambda: _made(frame=_set("prompt_length/mean", 0.0)), "prompt_length/mean"),
    (
        "response max below the mean",
        lambda: _made(frame=_frame().assign(**{"response_length/max": _frame()["response_length/mean"] - 1})),
        "response_length/max",
    ),
    (
        "update_actor 0 at a step",
        lambda: _made(frame=_set("timing_s/update_actor", 0.0, 3)),
        "timing_s/update_actor",
    ),
    (
        "old_log_prob 0 everywhere",
        lambda: _made(frame=_set("timing_s/old_log_prob", 0.0)),
        "timing_s/old_log_prob",
    ),
    (
        "clip ratio 5",
        lambda: _made(frame=_set("response_length/clip_ratio", 5.0)),
        "response_length/clip_ratio",
    ),
    ("gen 1e300", lambda: _made(frame=_set("timing_s/gen", 1e300, 3)), "timing_s/gen"),
    ("gen below a nanosecond", lambda: _made(frame=_set("timing_s/gen", 1e-12, 3)), "timing_s/gen"),
    ("a step given twice", lambda: _made(frame=_frame().assign(step=[0, 0, *range(2, 20)])), "step"),
    ("steps descending", lambda: _made(frame=_frame().iloc[::-1].reset_index(drop=True)), "step"),
    ("steps shuffled", lambda: _made(frame=_frame().sample(frac=1, random_state=0)), "step"),
    ("a fractional step", lambda: _made(frame=_frame().assign(step=_frame()["step"] * 0.5)), "step"),
    ("a step of 1e15", lambda: _made(frame=_frame().assign(step=_frame()["step"] + 1e15)), "step"),
    # -- select
    ("select by index, not by mask", lambda: _log().select(np.arange(20)), "mask"),
    ("select with a short mask", lambda: _log().select(np.ones(3, bool)), "mask"),
    ("select with a 2-D mask", lambda: _log().select(np.ones((4, 5), bool)), "mask"),
    ("select nothing", lambda: _log().select(np.zeros(20, bool)), "steps"),
    # -- calibrate, check_log
    ("calibrate a DataFrame", lambda: calibrate(_frame(), _spec()), "log"),
    ("calibrate a path as the spec", lambda: calibrate(_log(), str(SPEC)), "rs"),
    ("calibrate at seed -1", lambda: calibrate(_log(), _spec(), -1), "seed"),
    ("calibrate at seed 1.5", lambda: calibrate(_log(), _spec(), 1.5), "seed"),
    ("calibrate at seed True", lambda: calibrate(_log(), _spec(), True), "seed"),
    ("calibrate at seed 2**32", lambda: calibrate(_log(), _spec(), 2**32), "seed"),
    ("calibrate 2 steps", lambda: calibrate(_log().select(np.arange(20) < 2), _spec()), "steps"),
    ("calibrate with a non-callable progress", lambda: calibrate(_log(), _spec(), progress="x"), "progress"),
    (
        "calibrate with step_includes_sync 'no'",
        lambda: calibrate(_log(), _spec(), step_includes_sync="no"),
        "step_includes_sync",
    ),
    *[
        (
            f"calibrate with trainer_steps_per_row {name}",
            _calibrate_rows_of(k),
            "trainer_steps_per_row",
        )
        for name, k in (
            ("0", 0),
            ("-1", -1),
            ("1.5", 1.5),
            ("True", True),
            ("'2'", "2"),
            ("past MAX_LOG_STEPS", MAX_LOG_STEPS + 1),
            ("300 (20 rows of 300 steps to simulate)", 300),
        )
    ],
    (
        "TrainingLog with trainer_steps_per_row 0",
        lambda: TrainingLog("mem", SHA, _frame(), trainer_steps_per_row=0),
        "trainer_steps_per_row",
    ),
    ("dealt at per_row 0", lambda: dealt(_spec(), 5, 0), "per_row"),
    ("row_members at per_row '2'", lambda: row_members(_spec(), _TOKENS, per_row="2"), "per_row"),  # type: ignore[arg-type]
    ("check_log None", lambda: check_log(None, _spec()), "log"),  # type: ignore[arg-type]
    (
        "check_log, all clipped at a mean below the cap",
        lambda: check_log(_made(frame=_set("response_length/clip_ratio", 1.0)), _spec()),
        "response_length/clip_ratio",
    ),
    ("calibrated_spec of None", lambda: calibrated_spec(_spec(), None), "cal"),  # type: ignore[arg-type]
    ("calibrated_spec for no spec", lambda: calibrated_spec(None, _cal()), "rs"),  # type: ignore[arg-type]
    # -- a Calibration built in Python (what calibrated_spec writes)
    ("Calibration values of floats", lambda: _cal(values={"step_s": 1.0}), "values['step_s']"),
    ("Calibration values a list", lambda: _cal(values=[Fitted(1, 0, 2)]), "values"),
    ("Calibration an unknown key", lambda: _cal(values={"bogus": Fitted(1, 0, 2)}), "values['bogus']"),
    ("Calibration a negative time", lambda: _cal(values={"step_s": Fitted(-1, -2, 0)}), "values['step_s']"),
    (
        "Calibration an efficiency above 1",
        lambda: _cal(values={"fwd_efficiency": Fitted(1.5, 1, 2)}),
        "values['fwd_efficiency']",
    ),
    ("Calibration notes a string", lambda: _cal(not_identified="none"), "not_identified"),
    ("Calibration residuals a list", lambda: _cal(residuals=[0.1]), "residuals"),
    ("Calibration a NaN residual", lambda: _cal(residuals={"timing_s/gen": {"mean": math.nan}}), "residuals"),
    ("Calibration no log", lambda: _cal(log=None), "log"),
    ("Calibration held_out floats", lambda: _cal(held_out=[1.5]), "held_out"),
    ("Calibration seed a string", lambda: _cal(seed="0"), "seed"),
    (
        "with_lengths of floats",
        lambda: with_lengths(_spec(), {"response_sigma": 0.5}),
        "values['response_sigma']",
    ),
    # -- read_log and its helpers given the wrong kind of argument
    ("read_log None", lambda: read_log(None), "log"),  # type: ignore[arg-type]
    ("read_log a column map list", lambda: read_log(LOG, ["step"]), "columns"),  # type: ignore[arg-type]
    ("read_log a column map key", lambda: read_log(LOG, {"bogus": "step"}), "bogus"),
    ("read_log a column map value", lambda: read_log(LOG, {"step": 3}), "step"),  # type: ignore[dict-item]
    ("read_log steps an int", lambda: read_log(LOG, steps=5), "steps"),  # type: ignore[arg-type]
    ("parse_steps bytes", lambda: parse_steps(b"1:2"), "steps"),  # type: ignore[arg-type]
    ("read_columns_map an int", lambda: read_columns_map(3), "columns"),  # type: ignore[arg-type]
    # -- the fits given arrays directly
    ("Fitted a string", lambda: Fitted("1", 0, 2), "value"),  # type: ignore[arg-type]
    ("Fitted None", lambda: Fitted(None, 0, 2), "value"),  # type: ignore[arg-type]
    ("Fitted a bool", lambda: Fitted(0.5, True, 2), "lo"),
    ("Fitted NaN", lambda: Fitted(math.nan, 0, 2), "value"),
    ("in_range an unknown key", lambda: in_range("bogus", Fitted(1, 0, 2)), "key"),
    ("in_range a tuple", lambda: in_range("step_s", (1, 0, 2)), "v"),  # type: ignore[arg-type]
    ("capped_mean cap 0", lambda: capped_mean(6.0, 0.5, 0), "cap"),
    ("capped_mean mu NaN", lambda: capped_mean(math.nan, 0.5, 100), "mu"),
    ("capped_mean mu 1000", lambda: capped_mean(1000.0, 0.5, 100), "mu"),
    ("capped_mean s negative", lambda: capped_mean(6.0, -0.5, 100), "s"),
    ("t95 a float", lambda: t95(2.5), "df"),  # type: ignore[arg-type]
    ("t95 a string", lambda: t95("3"), "df"),  # type: ignore[arg-type]
    (
        "fit_lengths no steps",
        lambda: fit_lengths(np.array([]), None, None, 4096, 128, 0.3, 0.8, _rng()),
        "mean",
    ),
    (
        "fit_lengths a 2-D mean",
        lambda: fit_lengths(np.ones((2, 3)), None, None, 4096, 128, 0.3, 0.8, _rng()),
        "mean",
    ),
    (
        "fit_lengths NaN mean",
        lambda: fit_lengths(_MEAN * math.nan, None, None, 4096, 128, 0.3, 0.8, _rng()),
        "mean",
    ),
    (
        "fit_lengths negative mean",
        lambda: fit_lengths(-_MEAN, None, None, 4096, 128, 0.3, 0.8, _rng()),
        "mean",
    ),
    (
        "fit_lengths a short clip",
        lambda: fit_lengths(_MEAN, _MEAN[:2] * 0, None, 4096, 128, 0.3, 0.8, _rng()),
        "clip",
    ),
    (
        "fit_lengths clip above 1",
        lambda: fit_lengths(_MEAN, _MEAN / 100, None, 4096, 128, 0.3, 0.8, _rng()),
        "clip",
    ),
    (
        "fit_lengths maxes 0",
        lambda: fit_lengths(_MEAN, None, _MEAN * 0, 4096, 128, 0.3, 0.8, _rng()),
        "maxes",
    ),
    ("fit_lengths cap 0", lambda: fit_lengths(_MEAN, None, None, 0, 128, 0.3, 0.8, _rng()), "cap"),
    ("fit_lengths cap 1e300", lambda: fit_lengths(_MEAN, None, None, 1e300, 128, 0.3, 0.8, _rng()), "cap"),
    ("fit_lengths batch 0", lambda: fit_lengths(_MEAN, None, _MEAN * 2, 4096, 0, 0.3, 0.8, _rng()), "batch"),
    (
        "fit_lengths sigma NaN",
        lambda: fit_lengths(_MEAN, None, None, 4096, 128, 0.3, math.nan, _rng()),
        "sigma_prior",
    ),
    ("fit_lengths no generator", lambda: fit_lengths(_MEAN, None, None, 4096, 128, 0.3, 0.8, None), "rng"),  # type: ignore[arg-type]
    ("fit_drift mismatched", lambda: fit_drift(np.arange(20.0), _MEAN), "steps"),
    ("fit_drift one step", lambda: fit_drift(np.zeros(6), _MEAN), "steps"),
    ("fit_drift a string", lambda: fit_drift("abc", _MEAN), "steps"),  # type: ignore[arg-type]
    ("fit_drift negative mean", lambda: fit_drift(np.arange(6.0), -_MEAN), "mean"),
    ("tokens of a DataFrame", lambda: tokens(_frame(), _spec()), "log"),  # type: ignore[arg-type]
    ("trainer fit, tokens short", lambda: fit_trainer_profile(_log(), _spec(), _TOKENS[:5]), "t"),
    ("trainer fit, tokens NaN", lambda: fit_trainer_profile(_log(), _spec(), _TOKENS * math.nan), "t"),
    ("trainer fit, tokens 0", lambda: fit_trainer_profile(_log(), _spec(), _TOKENS * 0), "t"),
    ("trainer fit, tokens None", lambda: fit_trainer_profile(_log(), _spec(), None), "t"),  # type: ignore[arg-type]
    ("spread of NaN tokens", lambda: spread(_spec(), _TOKENS * math.nan), "t"),
    ("spread, steps short", lambda: spread(_spec(), _TOKENS, steps=np.arange(3)), "steps"),
    ("spread, fractional steps", lambda: spread(_spec(), _TOKENS, steps=np.arange(20) + 0.5), "steps"),
    ("dealt a string", lambda: dealt(_spec(), "5"), "steps"),  # type: ignore[arg-type]
    ("spread of batches a string", lambda: spread(_spec(), _TOKENS, "junk"), "batches"),  # type: ignore[arg-type]
    ("spread of batches an int", lambda: spread(_spec(), _TOKENS, 5), "batches"),  # type: ignore[arg-type]
    ("spread of batches with an empty step", lambda: spread(_spec(), _TOKENS, [(10, 20), ()]), "batches"),
    ("spread of batches of strings", lambda: spread(_spec(), _TOKENS, [(1, "a")]), "batches"),  # type: ignore[list-item]
    ("spread of batches below a token", lambda: spread(_spec(), _TOKENS, [(-1, 2)]), "batches"),
    ("spread of fractional batches", lambda: spread(_spec(), _TOKENS, [(1.5, 2)]), "batches"),  # type: ignore[list-item]
    ("spread of NaN batches", lambda: spread(_spec(), _TOKENS, [(math.nan,)]), "batches"),  # type: ignore[list-item]
    ("config of None", lambda: config(None), "rs"),  # type: ignore[arg-type]
    ("switch_s of a path", lambda: switch_s(str(SPEC)), "rs"),  # type: ignore[arg-type]
    ("remainder of a DataFrame", lambda: remainder(_frame(), _spec()), "log"),  # type: ignore[arg-type]
    (
        "trainer_residuals of floats",
        lambda: trainer_residuals(_log(), _spec(), {"fwd_efficiency": 0.3}),
        "values['fwd_efficiency']",
    ),  # type: ignore[dict-item]
    ("dealing_spread of a list", lambda: dealing_spread(_log(), _spec(), _TOKENS, [1]), "values"),  # type: ignore[arg-type]
    (
        "fit_lengths a million steps",
        lambda: fit_lengths(np.full(10**6, 900.0), None, None, 4096, 128, 0.3, 0.8, _rng()),
        "mean",
    ),
    (
        "published prompt of 0 tokens",
        lambda: published_log(
            [{"gen": 1.0, "update_actor": 1.0, "response_tokens": 9.0, "prompt_tokens": 0.0}], repeat=3
        ),
        "rows[0].prompt_tokens",
    ),
    (
        "published rows repeated past a log",
        lambda: published_log(
            [{"gen": 1.0, "update_actor": 1.0, "response_tokens": 9.0, "prompt_tokens": 9.0}], repeat=10**9
        ),
        "repeat",
    ),
]


@pytest.mark.parametrize(("call", "field"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_training_log_input_is_refused_naming_the_field(call: Callable[[], Any], field: str) -> None:
    """Promptly (well under a second: no simulation runs), as a FieldError, no numpy warning."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_refusal(call, FieldError, field)
    assert time.perf_counter() - start < 5.0


@pytest.mark.parametrize(
    "call",
    [
        lambda: _made(frame=_set("timing_s/gen", -5.0, 3)),
        lambda: calibrate(_frame(), _spec()),
        lambda: _log().select(np.arange(20)),
    ],
    ids=["a cell", "an argument", "select"],
)
def test_a_training_log_refusal_is_a_log_error(call: Callable[[], Any]) -> None:
    """``except LogError`` (what the command catches) keeps catching every refusal of a log."""
    with pytest.raises(LogError):
        call()


def test_a_training_log_built_in_python_is_kept_as_floats() -> None:
    """Int columns (steps, a fixed prompt) and a Path are accepted; the frame is a float copy with
    a fresh index (the user's DataFrame changed afterwards does not change the log)."""
    df = _frame().astype({"step": int, "prompt_length/mean": int})
    df.index = df.index * 3
    log = TrainingLog(Path("mem.csv"), SHA, df, ["a note"])
    assert log.path == "mem.csv" and log.notes == ("a note",)
    assert all(d.kind == "f" for d in log.frame.dtypes) and list(log.frame.index) == list(range(20))
    df.loc[0, "timing_s/gen"] = -1.0
    assert log.col("timing_s/gen")[0] > 0
    assert len(log.select([True] * 10 + [False] * 10)) == 10


def test_a_log_built_in_python_calibrates_as_the_file_does() -> None:
    """The same steps built from a DataFrame give the same values as read from the file."""
    rs = _spec()
    from_file = calibrate(_log(), rs)
    built = calibrate(TrainingLog(str(LOG), _log().sha256, _frame()), rs)
    assert {k: v.value for k, v in built.values.items()} == {k: v.value for k, v in from_file.values.items()}


def test_select_by_a_boolean_series_goes_by_position() -> None:
    """A boolean Series of another index (a reversed one) selects by position, as an array does,
    not by its labels (pandas would align it, warning, and take the other steps)."""
    mask = pd.Series([True] * 5 + [False] * 15, index=range(19, -1, -1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kept = _log().select(mask)
    assert list(kept.steps) == list(_log().steps[:5])


def test_a_file_holding_half_a_token_is_refused(tmp_path: Path) -> None:
    """read_log applies the same cell rule: a response mean below one token names the column."""
    df = _frame()
    df.loc[4, "response_length/mean"] = 0.25
    df.to_csv(tmp_path / "log.csv", index=False)
    err = check_refusal(lambda: read_log(tmp_path / "log.csv"), LogError, "response_length/mean")
    step = int(df.loc[4, "step"])  # the cell is named by its step (it was "row 5", counted from 1)
    assert f"step {step}:" in str(err) and "below 1" in str(err)


def test_a_step_shorter_than_its_parts_is_noted() -> None:
    """``timing_s/step`` below ``gen`` (overlapping timers, or another framework's step): the
    trainer's remainder is taken as 0 s, and the calibration says so rather than fit it silently."""
    df = _frame()
    df["timing_s/step"] = df["timing_s/gen"] * 0.5
    cal = calibrate(_made(frame=df), _spec())
    note = [n for n in cal.not_identified if n.startswith("timing_s/step: shorter")]
    assert note and "20 of 20 steps" in note[0]
    assert not any(n.startswith("timing_s/step: shorter") for n in calibrate(_log(), _spec()).not_identified)


def test_spread_of_given_batches_scales_each_to_its_steps_tokens() -> None:
    """The accepting side of the ``batches`` rows: numpy or Python ints, lists or tuples, are each
    step's samples in proportion, summing to the step's tokens, taken in turn past their end."""
    rows = spread(_spec(), _TOKENS, [(1, 3), [np.int64(2), np.int64(2)]])
    for step, (row, total) in enumerate(zip(rows, _TOKENS, strict=True)):
        assert row is not None and math.isclose(sum(row), total, rel_tol=1e-12)
        assert math.isclose(row[1] / row[0], 3.0 if step % 2 == 0 else 1.0, rel_tol=1e-12)


def test_a_log_of_step_numbers_alone_is_refused(tmp_path: Path) -> None:
    """Twenty step numbers and nothing else 'calibrated' (the spec written back unchanged, with a
    note that 20 steps were fewer than 6): refused, naming the file and what calibrate reads."""
    pd.DataFrame({"step": range(20)}).to_csv(tmp_path / "log.csv", index=False)
    err = check_refusal(lambda: read_log(tmp_path / "log.csv"), LogError, "log")
    assert str(err).startswith(str(tmp_path / "log.csv")) and "timing_s/step" in str(err)
