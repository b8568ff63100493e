"""A number written as text (``"12.5"``) in a typed trace is refused naming the column.

Before, ``pipesim fit`` read a JSON, JSON-lines or Parquet trace's ``"12.5"`` as the number 12.5
without a word (``pd.to_numeric`` coerces text). A CSV's cells are all text, so a quoted number
there is still a number; and text that is no number (``"n/a"``) is still dropped and counted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pipesim.io.cli import main
from pipesim.io.fit_readers import FitError, read_column

N = 12


def _rows(bad: Any, column: str = "d", at: int = 3) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{column: 10.0 + i, "other": "x"} for i in range(N)]
    rows[at][column] = bad
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    if path.suffix == ".json":
        path.write_text(json.dumps(rows))
    elif path.suffix in (".jsonl", ".ndjson"):
        path.write_text("\n".join(json.dumps(r) for r in rows))
    elif path.suffix == ".parquet":
        pd.DataFrame(rows).astype({k: object for k in rows[0]}).to_parquet(path)
    else:
        path.write_text("d,other\n" + "\n".join(f'"{r["d"]}",{r["other"]}' for r in rows))
    return path


@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".ndjson"])
@pytest.mark.parametrize(
    ("bad", "column", "at"), [("12.5", "d", 3), ("7", "dur_s", 0), (" 1e3 ", "d", N - 1)]
)
def test_a_number_as_text_in_a_json_trace_is_refused_naming_the_column(
    tmp_path: Path, suffix: str, bad: str, column: str, at: int
) -> None:
    path = _write(tmp_path / f"t{suffix}", _rows(bad, column, at))
    with pytest.raises(FitError) as info:
        read_column(path, column)
    assert info.value.field == column
    msg = str(info.value)
    assert f"column {column!r}" in msg and f"row {at + 1}" in msg and repr(bad) in msg, msg


def test_a_parquet_column_of_text_numbers_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pd.DataFrame({"d": [str(10.0 + i) for i in range(N)]}).to_parquet(path)
    with pytest.raises(FitError) as info:
        read_column(path, "d")
    assert info.value.field == "d" and "row 1" in str(info.value)


def test_pipesim_fit_says_it_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "t.jsonl", _rows("12.5"))
    assert main(["fit", str(path), "--column", "d"]) == 2
    err = capsys.readouterr().err
    assert "column 'd', row 4: '12.5' is text" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("name", "bad", "kept"),
    [
        ("t.csv", "12.5", N),  # a CSV's cells are text: its numbers are read from it
        ("t.json", "n/a", N - 1),  # text that is no number: dropped and counted, as before
        ("t.jsonl", None, N - 1),  # a missing value: dropped and counted
        ("t.json", 12.5, N),  # the number itself
    ],
)
def test_what_is_not_a_quoted_number_in_a_typed_trace_reads_as_before(
    tmp_path: Path, name: str, bad: Any, kept: int
) -> None:
    values, dropped = read_column(_write(tmp_path / name, _rows(bad)), "d")
    assert len(values) == kept and dropped == N - kept
