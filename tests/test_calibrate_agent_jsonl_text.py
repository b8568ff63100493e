"""A JSON-lines training log's cells have types: a number written as text is refused, naming the
column and the row (pipesim.calibrate.cells.column_numbers), as pipesim.io.fit_readers refuses it in
a trace. A CSV's cells are all text, and its numbers are still read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipesim.calibrate import LogError, read_log

ROWS = [
    {"step": 0, "timing_s/gen": 10.0, "timing_s/step": 20.0},
    {"step": 1, "timing_s/gen": 11.0, "timing_s/step": 21.0},
    {"step": 2, "timing_s/gen": 12.0, "timing_s/step": 22.0},
]


def _jsonl(tmp_path: Path, rows: list[dict[str, object]], name: str = "log.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


@pytest.mark.parametrize(
    ("row", "column", "text"),
    [
        (1, "timing_s/gen", "12.5"),
        (0, "timing_s/step", "20"),
        (2, "step", "2"),
        (2, "timing_s/gen", " 1e1 "),
    ],
)
def test_a_number_written_as_text_in_a_json_lines_log_is_refused(
    tmp_path: Path, row: int, column: str, text: str
) -> None:
    rows = [dict(r) for r in ROWS]
    rows[row][column] = text
    with pytest.raises(LogError) as e:
        read_log(_jsonl(tmp_path, rows))
    assert e.value.field == column
    # the cell is named by its step (rows were counted from 1 before, beside pandas' file lines)
    assert f"step {ROWS[row]['step']}:" in str(e.value) and "is text, not a number" in str(e.value)


def test_a_mapped_column_written_as_text_names_the_logs_column(tmp_path: Path) -> None:
    rows = [{"step": r["step"], "rollout": r["timing_s/gen"]} for r in ROWS]
    rows[1]["rollout"] = "11.0"
    with pytest.raises(LogError) as e:
        read_log(_jsonl(tmp_path, rows), {"timing_s/gen": "rollout"})
    assert e.value.field == "rollout" and "timing_s/gen" in str(e.value)


def test_json_numbers_and_a_csvs_text_still_read(tmp_path: Path) -> None:
    a = read_log(_jsonl(tmp_path, ROWS))
    csv = tmp_path / "log.csv"
    csv.write_text('step,timing_s/gen,timing_s/step\n0,10.0,20\n1,11,21.0\n2,"12.0",22\n')
    b = read_log(csv)
    assert a.col("timing_s/gen").tolist() == b.col("timing_s/gen").tolist() == [10.0, 11.0, 12.0]
    assert a.col("timing_s/step").tolist() == b.col("timing_s/step").tolist() == [20.0, 21.0, 22.0]


def test_text_that_is_no_number_is_still_no_finite_number(tmp_path: Path) -> None:
    rows = [dict(r) for r in ROWS]
    rows[1]["timing_s/gen"] = "fast"
    with pytest.raises(LogError) as e:
        read_log(_jsonl(tmp_path, rows))
    assert e.value.field == "timing_s/gen" and "not a finite number" in str(e.value)


def test_an_infinite_cell_is_shown_as_the_log_has_it(tmp_path: Path) -> None:
    """It read 'np.float64(inf) is not a finite number'."""
    from pipesim.calibrate import read_log

    log = tmp_path / "inf.jsonl"
    log.write_text('{"step": 1, "timing_s/step": Infinity}\n{"step": 2, "timing_s/step": 3.0}\n')
    with pytest.raises(ValueError) as err:
        read_log(log)
    assert "step 1: inf is not a finite number" in str(err.value) and "np.float64" not in str(err.value)
