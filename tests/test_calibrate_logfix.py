"""A user's walkthrough of ``pipesim calibrate``'s log reading and trainer fit (logfix):

1. a CSV cell over 128 KiB, in any column, aborted with the csv module's "field larger than field
   limit (131072)" and no file named (:func:`pipesim.calibrate.logscan.wide_fields`);
2. a log of millions of rows had every cell read before its step count was checked: 136 s and
   6 GB to say "1 step", 58 s to say "6,000,000 steps" (:func:`pipesim.calibrate.logscan.precount`;
   :func:`~pipesim.calibrate.logscan.short_row` scans a CSV's rows by numpy);
3. a trainer phase shorter than the model's fixed terms was told by the validator's "must be a
   finite number > 0.0, got -7.255", not as faster than peak (:mod:`pipesim.calibrate.trainer_notes`);
4. one phase faster than peak kept the whole profile, though the others identify their constants;
5. a negative step blamed ``--first-step``, which the user never passed;
6. a log that is not UTF-8 was refused with a position in pandas' buffer and no line.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim.calibrate import logscan
from pipesim.calibrate.cells import column_numbers
from pipesim.calibrate.log import LogError, TrainingLog, read_log
from pipesim.calibrate.trainer import fit_trainer_profile
from pipesim.calibrate.trainer_inputs import tokens
from pipesim.calibrate.trainer_notes import faster_than_peak, too_fast
from pipesim.plan.runspec import load

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "run_verl_8gpu.toml"
SAMPLE = ROOT / "examples" / "verl_sample_log.csv"
LONG = 131072 + 10  # past the csv module's default field limit


def _write(path: Path, df: pd.DataFrame) -> Path:
    if path.suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_csv(path, index=False, sep="\t" if path.suffix == ".tsv" else ",")
    return path


# 1. a cell longer than the csv module's default limit -------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        lambda df: df.assign(notes="x" * LONG),  # a wandb text column calibrate ignores
        lambda df: df.assign(notes=f'"a, {"y" * LONG}\nb"'),  # quoted: the csv module reads it
        lambda df: df.assign(**{"z" * LONG: 1.0}),  # a header name as long
    ],
    ids=["ignored-column", "quoted-with-newline", "long-header"],
)
def test_a_cell_past_the_csv_field_limit_is_read_as_the_log_without_it(tmp_path: Path, change) -> None:
    limit = csv.field_size_limit()
    df = pd.read_csv(SAMPLE)
    got = read_log(_write(tmp_path / "long.csv", change(df)))
    want = read_log(SAMPLE)
    pd.testing.assert_frame_equal(got.frame, want.frame)
    assert got.notes == want.notes
    assert csv.field_size_limit() == limit  # raised while reading only


def test_a_long_cell_in_a_column_read_names_the_column_and_the_step(tmp_path: Path) -> None:
    df = pd.read_csv(SAMPLE).astype({"timing_s/gen": object})
    df.loc[3, "timing_s/gen"] = "x" * LONG
    with pytest.raises(LogError) as e:
        read_log(_write(tmp_path / "long.csv", df))
    assert e.value.field == "timing_s/gen"
    assert "long.csv" in str(e.value) and "step 3" in str(e.value) and "not a finite number" in str(e.value)


# 2. a long log's steps counted before its cells are read -----------------------------------------


def _steps_log(steps: list[int]) -> pd.DataFrame:
    """A log of ``steps`` (repeats allowed), each step's values a function of the step alone (a
    row given again, read once)."""
    s = np.asarray(steps, dtype=float)
    return pd.DataFrame({"step": np.asarray(steps), "timing_s/gen": 10.0 + s, "timing_s/step": 20.0 + s})


@pytest.mark.parametrize(
    ("name", "steps", "cut", "said"),
    [
        ("many.csv", list(range(30)), None, "30 steps: a calibration takes 3 to 10"),
        ("many.tsv", list(range(30)), "5:", "25 steps: a calibration takes 3 to 10"),
        ("one.csv", [7] * 30, None, "1 step; at least 3 needed"),
        ("two.csv", [1, 2] * 15, None, "2 steps; at least 3 needed"),
        ("window.csv", list(range(30)), "40:", "0 steps in --steps 40:; at least 3 needed"),
        ("many.jsonl", list(range(30)), None, "30 steps: a calibration takes 3 to 10"),
        ("iteration.csv", list(range(30)), None, "30 steps: a calibration takes 3 to 10"),  # --columns
        ("iteration.jsonl", list(range(30)), None, "30 steps: a calibration takes 3 to 10"),
    ],
)
def test_a_long_log_is_refused_from_its_step_column_before_its_cells_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, steps: list[int], cut: str | None, said: str
) -> None:
    """frame.MAX_LOG_STEPS lowered to 10 stands for 5,000: more lines than it, and the step column
    alone decides; the cells' reading (complete_rows, json_records) is never reached."""
    from pipesim.calibrate import frame, logfile

    monkeypatch.setattr(frame, "MAX_LOG_STEPS", 10)

    def cells_read(*args: object) -> None:
        raise AssertionError("the cells were read")

    monkeypatch.setattr(logfile, "complete_rows", cells_read)
    monkeypatch.setattr(logfile, "json_records", cells_read)
    columns = {"step": "iteration"} if name.startswith("iteration") else None
    df = _steps_log(steps).rename(columns={"step": "iteration"} if columns else {})
    path = _write(tmp_path / name, df)
    with pytest.raises(LogError) as e:
        read_log(path, columns=columns, steps=cut)
    assert e.value.field == "steps" and str(e.value).startswith(f"{path}: {said}")


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_a_last_row_cut_mid_write_is_no_step_of_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    """Ten steps, each logged twice, and a last row cut after its step cell (a killed run): the
    reader leaves the cut row out, and so does the count; it is no eleventh step."""
    from pipesim.calibrate import frame

    monkeypatch.setattr(frame, "MAX_LOG_STEPS", 10)
    path = _write(tmp_path / f"cut{suffix}", _steps_log(list(range(10)) * 2))
    path.write_bytes(path.read_bytes() + b"30")  # a new step, were it counted
    log = read_log(path, first_step=0)
    assert list(log.steps) == list(range(10))
    assert any("is cut mid-write" in n for n in log.notes)


def _outcome(path: Path, cut: str | None) -> tuple[object, ...]:
    try:
        log = read_log(path, steps=cut)
    except LogError as e:
        return ("refused", e.field, str(e))
    return ("read", list(log.steps), log.notes)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.integers(0, 9), min_size=1, max_size=20),
    suffix=st.sampled_from([".csv", ".tsv", ".jsonl"]),
    end=st.sampled_from(["newline", "none", "cut"]),
    lo=st.one_of(st.none(), st.integers(0, 10)),
)
def test_counting_the_steps_first_refuses_what_reading_every_cell_refuses(
    steps: list[int], suffix: str, end: str, lo: int | None
) -> None:
    """The count from the step column alone (precount) gives the reader's own verdict, word for
    word, or none (the reader's then): on logs of repeated steps, a last line with no newline or
    cut mid-write, and a --steps window (MAX_LOG_STEPS lowered to 6)."""
    from pipesim.calibrate import frame

    cut = None if lo is None else f"{lo}:"
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setattr(frame, "MAX_LOG_STEPS", 6)
        path = _write(Path(tmp) / f"log{suffix}", _steps_log(steps))
        raw = path.read_bytes()
        if end != "newline":
            raw = raw.rstrip(b"\n")
        if end == "cut":
            raw = raw[: raw.rfind(b"\n") + 4]  # the last row's first cells: a run killed mid-write
        path.write_bytes(raw)
        counted = _outcome(path, cut)
        mp.setattr(logscan, "precount", lambda *args: None)
        assert counted == _outcome(path, cut)


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.sampled_from(
            ["a", "1", ",", "\t", " ", "\n", "\r\n", "é", "\ufeff", "\xa0", "a,b,c\n", "1\t2\t3\n"]
        ),
        min_size=1,
        max_size=40,
    ),
    sep=st.sampled_from([",", "\t"]),
    chunk=st.sampled_from([1, 3, 1 << 20]),
)
def test_the_numpy_scan_of_a_csv_finds_the_short_row_the_csv_module_finds(
    parts: list[str], sep: str, chunk: int
) -> None:
    """short_row (numpy, a chunk of lines at a time) against the csv module row by row: the same
    header width, first short row, rows before it and whether it is the last line."""
    raw = "".join(parts).encode()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(logscan, "_CHUNK", chunk)
        assert logscan.short_row(raw, sep) == logscan._short_row_csv(raw, sep)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"step,a,b\n0,1,2\n1,2\n2,3,4\n", "a short row at line 3, saw 2 of the header's 3 fields:"),
        (b"step,a,b\n0,1,2\n1,2,3\n2,3\n", "a short row at line 4, saw 2 of the header's 3 fields (it ends"),
        (b"step,a,b\r\n0,1,2\r\n\r\n1\r\n2,3,4\r\n", "a short row at line 4, saw 1 of the header's 3"),
    ],
    ids=["middle", "last-with-newline", "crlf-after-a-blank-line"],
)
def test_a_short_row_found_by_the_numpy_scan_is_named_by_its_line(
    tmp_path: Path, text: bytes, message: str
) -> None:
    path = tmp_path / "short.csv"
    path.write_bytes(text)
    with pytest.raises(LogError) as e:
        read_log(path)
    assert e.value.field == "log" and f"{path}: {message}" in str(e.value)


# the cells' checks, column by column (the per-cell checks only where they matter) -----------------


@pytest.mark.parametrize(
    ("typed", "cells", "said"),
    [
        (False, ["1.5", None, " ", "2"], None),  # an empty or blank cell: no value
        (False, ["1.5", "abc", "2"], "'abc' is not a finite number"),
        (False, ["1.5", "true", "2"], "'true' is not a finite number"),
        (False, ["1.5", "inf", "2"], "'inf' is not a finite number"),
        (True, [1.5, "12.5", 2.0], "'12.5' is text, not a number"),
        (True, ["12.5", "13", "1"], "'12.5' is text, not a number"),  # every cell a string: pandas' str dtype
        (True, [1.5, True, 2.0], "true is not a finite number"),
        (True, [False, True, False], "false is not a finite number"),  # a column of flags: dtype bool
        (True, [1.5, None, 2.0], None),
    ],
)
def test_a_column_of_cells_is_checked_as_the_log_format_says(
    typed: bool, cells: list[object], said: str | None
) -> None:
    df = pd.DataFrame({"step": range(len(cells)), "timing_s/gen": cells})
    df.attrs["typed"] = typed
    if said is None:
        got = column_numbers(Path("log.csv"), df, "timing_s/gen", "timing_s/gen")
        assert got.dtype == float and got.isna().sum() == sum(c is None or c == " " for c in cells)
        return
    with pytest.raises(LogError) as e:
        column_numbers(Path("log.csv"), df, "timing_s/gen", "timing_s/gen")
    assert e.value.field == "timing_s/gen" and said in str(e.value)


# 3, 4. a trainer faster than peak ------------------------------------------------------------------


def _fit(df: pd.DataFrame) -> tuple[dict[str, float], list[str]]:
    rs = load(SPEC)
    log = TrainingLog("fast.csv", "0" * 64, df)
    t = tokens(log, rs)
    assert t is not None
    values, notes = fit_trainer_profile(log, rs, t)
    return {k: v.value for k, v in values.items()}, notes


@pytest.mark.parametrize(
    ("update", "forward", "fitted", "left_out"),
    [
        (0.05, 1.0, {"fwd_efficiency", "micro_batch_s", "step_s"}, ["timing_s/update_actor"]),
        (1.0, 0.1, {"fwd_bwd_efficiency", "optimizer_step_s", "step_s"}, ["timing_s/old_log_prob"]),
        (0.1, 0.1, {"step_s"}, ["timing_s/update_actor", "timing_s/old_log_prob"]),
    ],
    ids=["update-only", "old-log-prob-only", "both"],
)
def test_a_phase_faster_than_peak_is_left_out_and_the_rest_fitted(
    update: float, forward: float, fitted: set[str], left_out: list[str]
) -> None:
    df = pd.read_csv(SAMPLE)
    df["timing_s/update_actor"] *= update
    df["timing_s/old_log_prob"] *= forward
    values, notes = _fit(df)
    assert set(values) == fitted
    said = [n for n in notes if n.startswith("trainer: the profile's constants could not be fitted to ")]
    assert [n.split(" (")[0].rsplit(" ", 1)[1] for n in said] == left_out
    assert all("faster than peak" in n and "GPU count" in n and "must be" not in n for n in said)
    # the constants only the left-out phases held are said in their note, not again one by one
    assert not any(n.startswith(("fwd_bwd_efficiency:", "fwd_efficiency:")) for n in notes)


def test_update_actor_shorter_than_its_fixed_terms_is_said_so() -> None:
    """Before: "fwd_bwd_efficiency must be a finite number > 0.0, got -2.406"."""
    df = pd.read_csv(SAMPLE)
    df["timing_s/update_actor"] *= 0.05
    [note] = [n for n in _fit(df)[1] if n.startswith("trainer: the profile's constants")]
    assert "timing_s/update_actor is shorter than the model's fixed terms alone" in note
    assert "so no fwd_bwd_efficiency fits it (the fit gives -" in note


def test_leaving_a_phase_out_fits_the_others_as_a_log_without_it() -> None:
    """The forward constants fitted beside an update_actor faster than peak are those of the log
    without an update_actor column (the remainder holds none of them)."""
    df = pd.read_csv(SAMPLE)
    fast, _ = _fit(df.assign(**{"timing_s/update_actor": df["timing_s/update_actor"] * 0.05}))
    without, _ = _fit(df.drop(columns="timing_s/update_actor"))
    for k in ("fwd_efficiency", "micro_batch_s"):
        assert fast[k] == pytest.approx(without[k], rel=1e-9), k


def test_a_fit_that_fails_without_the_phase_too_keeps_the_profile_and_says_why_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the fit without the phase faster than peak fails as well, the whole profile is kept,
    told by the first failure, with no note saying the other constants were fitted."""
    from pipesim.calibrate import trainer

    real, whys = trainer._solve, iter(["fwd_bwd_efficiency must be in (0, 1], got 1.5", "cannot separate x"])

    def failing(*args: object) -> object:
        solved = real(*args)  # type: ignore[arg-type]
        return dataclasses.replace(solved, fit=None, why=next(whys))

    monkeypatch.setattr(trainer, "_solve", failing)
    values, notes = _fit(pd.read_csv(SAMPLE))
    assert values == {}
    assert not any("left out of the fit" in n for n in notes)
    assert notes[-1].startswith(
        "trainer: the profile's constants could not be fitted (the logged trainer is faster than peak: "
        "fwd_bwd_efficiency would be 1.5, above 1;"
    )
    assert notes[-1].endswith("; the profile kept")


@pytest.mark.parametrize(
    ("why", "fast"),
    [
        (
            "the least-squares fit ...: fwd_bwd_efficiency must be in (0, 1], got 1.48",
            ("fwd_bwd_efficiency", 1.48),
        ),
        ("...: fwd_efficiency must be a finite number > 0.0, got -7.25", ("fwd_efficiency", -7.25)),
        ("...: fwd_bwd_efficiency must be a finite number > 0.0, got 0.0", ("fwd_bwd_efficiency", 0.0)),
        ("...: fwd_bwd_efficiency must be in (0, 1], got 0.5", None),
        ("...: micro_batch_s must be >= 0, got -1.0", None),
        ("...: fwd_bwd_efficiency must be in (0, 1], got 'x'", None),
        ("12 observation(s) cannot separate fwd_efficiency, micro_batch_s", None),
    ],
)
def test_an_efficiency_out_of_range_is_told_as_faster_than_peak(
    why: str, fast: tuple[str, float] | None
) -> None:
    assert too_fast(why) == fast
    told = faster_than_peak(why)
    assert (told is None) == (fast is None)
    if told is not None:
        assert "faster than peak" in told and "must be" not in told


# 5. a negative step --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "steps", "columns", "where"),
    [
        ("first.csv", [-1, 1, 2, 3], None, "column 'step', line 2: -1"),
        ("middle.csv", [0, 1, -3, 3], None, "column 'step', line 4: -3"),
        ("first.jsonl", [-1, 1, 2, 3], None, "column 'step', line 1: -1"),
        ("mapped.csv", [-1, 1, 2, 3], {"step": "iteration"}, "column 'iteration', line 2: -1"),
    ],
)
def test_a_negative_step_names_its_column_and_row_not_first_step(
    tmp_path: Path, name: str, steps: list[int], columns: dict[str, str] | None, where: str
) -> None:
    df = pd.read_csv(SAMPLE).head(len(steps)).assign(step=steps)
    if columns:
        df = df.rename(columns={"step": columns["step"]})
    path = _write(tmp_path / name, df)
    with pytest.raises(LogError) as e:
        read_log(path, columns=columns)
    assert e.value.field == (columns or {}).get("step", "step")
    assert f"{path}: {where} is not a step number (an integer from 0 to" in str(e.value)
    assert "first-step" not in str(e.value) and "first_step" not in str(e.value)


def test_a_frame_with_a_negative_step_is_refused_as_a_file_is() -> None:
    from pipesim.calibrate.frame import check_steps

    df = pd.read_csv(SAMPLE).head(4).assign(step=[-1, 0, 1, 2])
    with pytest.raises(LogError) as e:
        TrainingLog("x.csv", "0" * 64, df)
    assert e.value.field == "step" and "row 0: -1 is not a step number" in str(e.value)
    with pytest.raises(LogError) as e:
        check_steps([0, -1], 2)  # a dealing's row counted from its end, before
    assert e.value.field == "steps"


# 6. a log that is not UTF-8 -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("latin1.csv", b"step,timing_s/gen\n0,1.0\xe9\n1,2.0\n", 2),
        ("latin1.tsv", b"step\ttiming_s/gen\n0\t1.0\n1\t2.0\xe9\n", 3),
        ("crlf.csv", b"step,timing_s/gen\r\n0,1.0\r\n1,2.0\r\n2,\xff3\r\n", 4),
        ("cr.csv", b"step,timing_s/gen\r0,1.0\r1,2\xe9\r", 3),
        ("bom.csv", b"\xef\xbb\xbfstep,timing_s/g\xe9n\n0,1.0\n", 1),
        ("latin1.jsonl", b'{"step": 0}\n{"step": 1, "note": "caf\xe9"}\n', 2),
    ],
)
def test_a_log_that_is_not_utf8_names_its_line(tmp_path: Path, name: str, text: bytes, line: int) -> None:
    path = tmp_path / name
    path.write_bytes(text)
    with pytest.raises(LogError) as e:
        read_log(path)
    assert e.value.field == "log"
    assert str(e.value).startswith(f"{path}: line {line} is not UTF-8 text: byte ")
    assert "codec" not in str(e.value) and "position" not in str(e.value)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 30), at=st.integers(0, 40), bad=st.sampled_from([b"\xe9", b"\xff", b"\xc3("]))
def test_the_line_a_bad_byte_is_on_is_the_line_named(rows: int, at: int, bad: bytes) -> None:
    lines = [b"step,timing_s/gen"] + [f"{i},{i + 1}.5".encode() for i in range(rows)]
    k = at % len(lines)
    lines[k] += bad
    with pytest.raises(LogError) as e:
        logscan.check_utf8(Path("log.csv"), b"\n".join(lines) + b"\n")
    assert f"line {k + 1} is not UTF-8" in str(e.value)


def test_a_utf8_log_with_text_is_read() -> None:
    """A non-ASCII cell of valid UTF-8 (a BOM too) passes the check: only bytes that are not UTF-8
    are refused."""
    logscan.check_utf8(Path("log.csv"), "\ufeffstep,note\n0,café ✓\n".encode())
    buf = io.BytesIO()
    buf.write(json.dumps({"step": 0, "note": "naïve"}, ensure_ascii=False).encode())
    logscan.check_utf8(Path("log.jsonl"), buf.getvalue())
