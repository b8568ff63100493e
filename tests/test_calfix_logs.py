"""How ``pipesim calibrate`` reads a log file (``docs/calibrate.md``, "The log"), as a user's
walkthrough found it wanting:

1. a CSV whose last row a killed run cut mid-write was refused, while the same JSON-lines log was
   read with a note: the cut last row is now left out with a note; a short row anywhere else is
   refused naming its line (not in pandas' words);
2. ``--steps 199900:`` of a long log was refused as ``run.steps (199,975)``, a key the user never set:
   the log's step numbers are the run's, so a last step past what a calibration simulates (or past
   the spec's task pool) is refused naming ``steps``; far-numbered steps get a note on the time;
3. ``.ndjson`` was read but missing from the error and ``--help``: one list of suffixes;
4. a row given twice with the same values was merged without a word: a note names the step;
5. a log past 5,000 steps was told "200000 steps; a log holds 1 to 5,000 (a calibration at least 3)".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipesim.calibrate import LogError, calibrate, read_log
from pipesim.calibrate.frame import MAX_LOG_STEPS, check_calibrate_args, reach_error
from pipesim.calibrate.log import LOG_SUFFIXES, TrainingLog
from pipesim.io.cli import main
from pipesim.plan.runspec import load

ROOT = Path(__file__).resolve().parents[1]
SHA = "0" * 64
HEADER = "step,timing_s/gen,timing_s/step,response_length/mean"


def _rows(steps: range | list[int]) -> list[str]:
    return [f"{s},{4.0 + 0.01 * s:.2f},{20.0 + 0.01 * s:.2f},{700 + s % 50}" for s in steps]


def _frame(steps: range | list[int]) -> pd.DataFrame:
    s = np.asarray(list(steps), float)
    return pd.DataFrame({"step": s, "timing_s/gen": 4.0 + 0 * s, "timing_s/step": 20.0 + 0 * s})


def _refused(call: Callable[[], Any], field: str) -> str:
    with pytest.raises(LogError) as e:
        call()
    assert e.value.field == field, (e.value.field, str(e.value))
    return str(e.value)


# -- 1. a CSV's last row cut mid-write ----------------------------------------------------------

CUT = [
    # (id, file name, text): each ends in a short row with no newline after it
    ("csv", "log.csv", "\n".join([HEADER, *_rows(range(6)), "6,4.06,20"])),
    ("csv-crlf", "log.csv", "\r\n".join([HEADER, *_rows(range(6)), "6,4.06,20"])),
    ("csv-one-cell", "log.csv", "\n".join([HEADER, *_rows(range(6)), "6"])),
    ("csv-trailing-separator", "log.csv", "\n".join([HEADER, *_rows(range(6)), "6,4.06,"])),
    (
        "tsv",
        "log.tsv",
        "\n".join([HEADER.replace(",", "\t"), *(r.replace(",", "\t") for r in _rows(range(6))), "6\t4"]),
    ),
]


@pytest.mark.parametrize(("name", "text"), [c[1:] for c in CUT], ids=[c[0] for c in CUT])
def test_a_csv_last_row_cut_mid_write_is_left_out_with_a_note(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_bytes(text.encode())
    log = read_log(path)
    assert list(log.steps) == list(range(6))  # the complete rows, every cell of them
    assert log.frame.notna().all().all()
    assert any("last line (8) is cut mid-write" in n and "6 complete rows" in n for n in log.notes), log.notes


def test_the_csv_and_jsonl_logs_of_one_killed_run_read_alike(tmp_path: Path) -> None:
    """docs/calibrate.md: the JSON-lines log's complete lines are read "as a CSV's complete rows are"."""
    whole = [dict(zip(HEADER.split(","), map(float, r.split(",")), strict=True)) for r in _rows(range(7))]
    jsonl = "\n".join(json.dumps(r) for r in whole)
    (tmp_path / "log.jsonl").write_text(jsonl[:-20])
    (tmp_path / "log.csv").write_text("\n".join([HEADER, *_rows(range(7))])[:-8])
    a, b = read_log(tmp_path / "log.jsonl"), read_log(tmp_path / "log.csv")
    pd.testing.assert_frame_equal(a.frame, b.frame)
    assert len(a.notes) == len(b.notes) == 1


SHORT = [
    # (id, file name, text, the line named): a short row that no killed write explains
    ("csv-middle", "log.csv", "\n".join([HEADER, *_rows(range(3)), "3,4.03", *_rows(range(4, 7))]) + "\n", 5),
    ("csv-last-with-newline", "log.csv", "\n".join([HEADER, *_rows(range(6)), "6,4.06,20"]) + "\n", 8),
    ("csv-last-with-crlf", "log.csv", "\r\n".join([HEADER, *_rows(range(6)), "6,4.06,20", ""]), 8),
    ("csv-middle-and-last-cut", "log.csv", "\n".join([HEADER, "0,4.0", *_rows(range(1, 6)), "6,4"]), 2),
    ("tsv-middle", "log.tsv", "step\ttiming_s/step\n1\t10.0\n2\n3\t12.0\n4\t12.0\n", 3),
]


@pytest.mark.parametrize(("name", "text", "line"), [c[1:] for c in SHORT], ids=[c[0] for c in SHORT])
def test_any_other_short_row_is_refused_naming_its_line(
    tmp_path: Path, name: str, text: str, line: int
) -> None:
    path = tmp_path / name
    path.write_bytes(text.encode())
    msg = _refused(lambda: read_log(path), "log")
    assert f"short row at line {line}," in msg and "Expected" not in msg, msg


def test_a_cr_only_log_reads_as_the_lf_one(tmp_path: Path) -> None:
    """Line ends of a bare CR (classic Mac tools): the rows are the LF log's, a cut last row is left
    out with the note, a short last row ended by its CR is refused, and a column given twice is
    named. Before, ``csv`` read the file as one line and raised its own ``_csv.Error`` ("new-line
    character seen in unquoted field"), no LogError."""
    lines = [HEADER, *_rows(range(6))]
    (tmp_path / "lf.csv").write_bytes(("\n".join(lines) + "\n").encode())
    (tmp_path / "cr.csv").write_bytes(("\r".join(lines) + "\r").encode())
    pd.testing.assert_frame_equal(read_log(tmp_path / "cr.csv").frame, read_log(tmp_path / "lf.csv").frame)
    path = tmp_path / "cut.csv"
    path.write_bytes("\r".join([*lines, "6,4.06"]).encode())
    log = read_log(path)
    assert list(log.steps) == list(range(6)) and log.frame.notna().all().all()
    assert any("last line (8) is cut mid-write" in n and "6 complete rows" in n for n in log.notes), log.notes
    path.write_bytes(("\r".join([*lines, "6,4.06"]) + "\r").encode())
    assert "short row at line 8," in _refused(lambda: read_log(path), "log")
    path.write_bytes(
        ("\r".join([HEADER + ",timing_s/gen", *(r + ",4.0" for r in _rows(range(6)))]) + "\r").encode()
    )
    _refused(lambda: read_log(path), "timing_s/gen")


def test_a_blank_line_mid_file_is_no_row(tmp_path: Path) -> None:
    rows = _rows(range(6))
    path = tmp_path / "log.csv"
    path.write_text("\n".join([HEADER, *rows[:3], "", *rows[3:]]) + "\n")
    log = read_log(path)
    assert list(log.steps) == list(range(6)) and not log.notes, log.notes


def test_a_long_last_row_is_refused_not_left_out_as_cut(tmp_path: Path) -> None:
    """A row with more cells than the header is no write cut short, even last with no newline."""
    path = tmp_path / "log.csv"
    path.write_text("\n".join([HEADER, *_rows(range(6)), "6,4.06,20.06,706,99"]))
    _refused(lambda: read_log(path), "log")


# -- 2. the log's step numbers are the run's ---------------------------------------------------


def _log_file(tmp_path: Path, steps: range | list[int]) -> Path:
    path = tmp_path / "log.csv"
    path.write_text("\n".join([HEADER, *_rows(steps)]) + "\n")
    return path


REACH: list[tuple[str, Callable[[Path], Any], str, str]] = [
    # (id, call, field, words the message holds)
    (
        "--steps near the end of a long log",
        lambda d: read_log(_log_file(d, [*range(10), *range(6000, 6010)]), steps="6000:"),
        "steps",
        "--steps 6000: keeps steps up to 6,009",
    ),
    (
        "a log numbered past 5,000",
        lambda d: read_log(_log_file(d, range(7000, 7010))),
        "steps",
        "steps 0 to 7,009",
    ),
    (
        "renumbered, still past 5,000",
        lambda d: read_log(_log_file(d, range(7000, 7010)), first_step=1000),
        "steps",
        "the run's step 6,009 (--first-step 1000)",
    ),
    (
        "a frame numbered past 5,000",
        lambda d: TrainingLog("mem", SHA, _frame(range(7000, 7010))),
        "steps",
        "7,009",
    ),
    (
        "rows of 5 trainer steps past 5,000",
        lambda d: TrainingLog("mem", SHA, _frame(range(1000, 1010)), trainer_steps_per_row=5),
        "trainer_steps_per_row",
        "trainer steps 0 to 5,049 (trainer_steps_per_row 5: rows of 5)",
    ),
    (
        "past the spec's task pool (2,038 steps)",
        lambda d: calibrate(
            TrainingLog("mem", SHA, _frame(range(2100, 2110))),
            load(ROOT / "examples/published/verl_async_128.toml"),
        ),
        "steps",
        "runs at most 2,038",
    ),
    (
        "rows of 5 trainer steps past the task pool, K given to calibrate",
        lambda d: calibrate(
            TrainingLog("mem", SHA, _frame(range(500, 510))),
            load(ROOT / "examples/published/verl_async_128.toml"),
            trainer_steps_per_row=5,
        ),
        "steps",
        "2,038",
    ),
]


@pytest.mark.parametrize(("call", "field", "words"), [r[1:] for r in REACH], ids=[r[0] for r in REACH])
def test_a_last_step_past_what_a_calibration_simulates_is_refused_naming_steps(
    tmp_path: Path, call: Callable[[Path], Any], field: str, words: str
) -> None:
    msg = _refused(lambda: call(tmp_path), field)
    assert words in msg and "step s is the run's step s" in msg and "run.steps" not in msg, msg


def test_the_cli_names_steps_not_run_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _log_file(tmp_path, [*range(10), *range(199_900, 199_910)])
    spec = ROOT / "examples/run_verl_8gpu.toml"
    argv = [
        "calibrate",
        str(log),
        "--spec",
        str(spec),
        "--out",
        str(tmp_path / "x.toml"),
        "--steps",
        "199900:",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--steps 199900:" in err and "199,909" in err and "run.steps" not in err, err
    assert not (tmp_path / "x.toml").exists()


@pytest.mark.parametrize(
    ("steps", "cut", "noted"),
    [
        (range(300, 310), None, True),  # 310 steps simulated for 10
        ([*range(5), *range(300, 310)], "300:", True),
        (range(24), None, False),
        (range(1, 25), None, False),
        (range(150, 160), None, False),  # fewer than REACH_NOTE_STEPS before it
        (range(250, 600), None, False),  # more kept than run before them
    ],
)
def test_steps_far_into_the_run_are_noted(
    tmp_path: Path, steps: range | list[int], cut: str | None, noted: bool
) -> None:
    log = read_log(_log_file(tmp_path, steps), steps=cut)
    said = [n for n in log.notes if "each simulation runs the run's steps 0 to" in n]
    assert bool(said) is noted, log.notes
    if noted:
        assert "steps 0 to 309, 31x the 10 kept (from step 300)" in said[0], said


def test_the_first_step_of_the_note_is_included(tmp_path: Path) -> None:
    """REACH_NOTE_STEPS (200) steps before the log's first are noted, as more are."""
    log = read_log(_log_file(tmp_path, range(200, 210)))
    assert any("steps 0 to 209, 21x the 10 kept (from step 200)" in n for n in log.notes), log.notes


def test_the_last_steps_a_calibration_takes_are_accepted(tmp_path: Path) -> None:
    """The edges: 5,000 rows (steps 0 to 4,999) are read, a last step of 5,000 is refused; a log
    to step 2,037 on a spec whose task pool runs 2,038 steps is accepted."""
    assert len(read_log(_log_file(tmp_path, range(MAX_LOG_STEPS)))) == MAX_LOG_STEPS
    assert len(TrainingLog("mem", SHA, _frame(range(MAX_LOG_STEPS)))) == MAX_LOG_STEPS
    last = [*range(MAX_LOG_STEPS - 1), MAX_LOG_STEPS]
    assert "steps run to 5,000" in _refused(lambda: TrainingLog("mem", SHA, _frame(last)), "steps")
    assert "steps run to 5,000" in _refused(lambda: read_log(_log_file(tmp_path, last)), "steps")
    spec = load(ROOT / "examples/published/verl_async_128.toml")
    check_calibrate_args(TrainingLog("mem", SHA, _frame(range(2028, 2038))), spec)
    _refused(lambda: check_calibrate_args(TrainingLog("mem", SHA, _frame(range(2029, 2039))), spec), "steps")


def test_the_range_to_fit_is_in_the_logs_numbers() -> None:
    """With --first-step 100 the log's steps below 5,100 are the run's below 5,000."""
    assert "Fit steps below 5,100 (--steps A:B)" in str(reach_error("log.csv", 5000, first_step=100))


# -- 3. one list of suffixes ------------------------------------------------------------------


@pytest.mark.parametrize("suffix", LOG_SUFFIXES)
def test_every_listed_suffix_reads(tmp_path: Path, suffix: str) -> None:
    frame = pd.read_csv(_log_file(tmp_path, range(6)))
    path = tmp_path / f"log{suffix}"
    if suffix in (".jsonl", ".ndjson"):
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_csv(path, sep="\t" if suffix == ".tsv" else ",", index=False)
    assert list(read_log(path).steps) == list(range(6))


@pytest.mark.parametrize("suffix", [".json", ".txt", ".CSVX", ""])
def test_another_suffix_is_refused_listing_every_suffix(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"log{suffix}"
    path.write_text("\n".join([HEADER, *_rows(range(6))]))
    msg = _refused(lambda: read_log(path), "log")
    assert all(s in msg for s in LOG_SUFFIXES), msg


def test_help_lists_every_suffix(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert all(s in out for s in LOG_SUFFIXES), out


# -- 4. a row given twice ----------------------------------------------------------------------


def test_a_row_given_again_with_the_same_values_is_read_once_with_a_note(tmp_path: Path) -> None:
    rows = _rows(range(8))
    path = tmp_path / "log.csv"
    path.write_text("\n".join([HEADER, *rows[:5], rows[4], *rows[5:], rows[2]]) + "\n")
    log = read_log(path)
    assert list(log.steps) == list(range(8))
    assert any("steps 2, 4 given again with the same values" in n for n in log.notes), log.notes


def test_records_that_add_columns_at_one_step_get_no_such_note(tmp_path: Path) -> None:
    """verl's fully-async trainer logs a version's metrics, then its param_sync, at one step."""
    lines = []
    for s in range(6):
        lines.append(json.dumps({"step": s, "timing_s/step": 20.0 + s, "timing_s/gen": 4.0}))
        lines.append(json.dumps({"step": s, "timing_s/param_sync": 1.0}))
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n")
    log = read_log(path)
    assert len(log) == 6 and log.has("timing_s/param_sync")
    assert not any("given again" in n for n in log.notes), log.notes


def test_a_step_given_two_values_is_still_refused(tmp_path: Path) -> None:
    rows = _rows(range(8))
    path = tmp_path / "log.csv"
    path.write_text("\n".join([HEADER, *rows, rows[4].replace("4.04", "9.04")]) + "\n")
    assert "step 4 is given twice" in _refused(lambda: read_log(path), "step")


# -- 5. too many steps ----------------------------------------------------------------------------


TOO_MANY: list[tuple[str, Callable[[Path], Any]]] = [
    ("a frame", lambda d: TrainingLog("mem", SHA, _frame(range(MAX_LOG_STEPS + 1)))),
    ("a file", lambda d: read_log(_log_file(d, range(MAX_LOG_STEPS + 1)))),
]


@pytest.mark.parametrize("call", [r[1] for r in TOO_MANY], ids=[r[0] for r in TOO_MANY])
def test_a_log_past_5000_steps_is_told_the_range_a_calibration_takes(
    tmp_path: Path, call: Callable[[Path], Any]
) -> None:
    msg = _refused(lambda: call(tmp_path), "steps")
    assert "5,001 steps: a calibration takes 3 to 5,000" in msg and "--steps A:B" in msg, msg
    assert "1 to 5,000" not in msg, msg
