"""``pipesim fit --json``: the dropped rows as data, not as the printed phrases.

Each ``dropped`` entry is ``{"column", "reason", "count", "rows"}`` and each named row
``{"row", "line", "cell"}`` (``line`` None outside CSV/TSV; ``cell`` None where missing, the text
of a cell that is no number, ``"inf"`` where not finite, else the number): a program reads the line
and the cell without parsing ``"line 6: '12s'"``. The text output is unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipesim.io.cli import main
from pipesim.io.fit import fit_trace, format_result, to_json
from pipesim.io.fit_readers import SHOWN_ROWS


def _strict(text: str) -> Any:
    """JSON as a strict reader takes it: ``Infinity`` and ``NaN`` are not JSON."""

    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _csv(tmp_path: Path, cells: dict[int, tuple[str, str]], n: int = 30) -> Path:
    rows = [f"{10.0 + i},{1 + i % 5}" for i in range(n)]
    for i, (d, t) in cells.items():
        rows[i] = f"{d},{t}"
    p = tmp_path / "trace.csv"
    p.write_text("duration_s,turns\n" + "\n".join(rows) + "\n")
    return p


CELLS = {
    3: ("", "2"),
    4: ("12s", "1"),
    5: ("-2", "1"),
    6: ("0", "3"),
    7: ("-5", "1"),
    9: ("-7", "1"),
    8: ("inf", "1"),
    10: ("20", "0"),
    12: ("14", ""),
}


def test_dropped_rows_are_data_that_agree_with_the_printed_line(tmp_path: Path) -> None:
    result = fit_trace(_csv(tmp_path, CELLS), "duration_s", turns_column="turns")
    data = _strict(to_json(result))["dropped"]
    assert all(set(d) == {"column", "reason", "count", "rows"} for d in data)
    assert sum(d["count"] for d in data) == result.n_dropped == len(CELLS)
    text = format_result(result).splitlines()[0]
    for d in data:
        assert len(d["rows"]) == min(d["count"], SHOWN_ROWS)
        for r in d["rows"]:
            assert set(r) == {"row", "line", "cell"}
            i = r["row"] - 1  # the data row, 0-based: the header is line 1, no blank lines
            assert r["line"] == i + 2
            written = CELLS[i][0 if d["column"] == "duration_s" else 1]
            if d["reason"] == "missing":
                assert r["cell"] is None and written == ""
            elif d["reason"] == "not a number":
                assert r["cell"] == written  # the text as written, unquoted
            elif d["reason"] == "not finite":
                assert r["cell"] == written == "inf"
            else:
                assert r["cell"] == float(written)  # the number, not its printed form
            assert f"line {r['line']}" in text  # the same row the text names
    by = {(d["column"], d["reason"]): d for d in data}
    assert [r["row"] for r in by["duration_s", "not positive"]["rows"]] == [6, 7, 8]  # first 3 of 4
    assert by["duration_s", "not positive"]["count"] == 4


def test_a_row_of_a_typed_format_has_no_line_and_keeps_a_json_flag(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [{"d": 10.0 + i} for i in range(30)]
    rows[2], rows[4], rows[6] = {"d": True}, {"d": None}, {"d": -3}
    p = tmp_path / "trace.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = fit_trace(p, "d")
    data = {d["reason"]: d["rows"] for d in _strict(to_json(result))["dropped"]}
    assert data == {
        "missing": [{"row": 5, "line": None, "cell": None}],
        "not a number": [{"row": 3, "line": None, "cell": True}],
        "not positive": [{"row": 7, "line": None, "cell": -3.0}],
    }
    assert "row 3: True" in format_result(result) and "row 7: -3" in format_result(result)


def test_the_command_writes_the_rows_as_data_and_prints_the_same_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _csv(tmp_path, {4: ("12s", "1"), 8: ("-inf", "1")})
    assert main(["fit", str(path), "--column", "duration_s", "--json", "-"]) == 0
    out, err = capsys.readouterr()
    data = _strict(out)["dropped"]
    assert {d["reason"]: d["rows"][0]["cell"] for d in data} == {"not a number": "12s", "not finite": "-inf"}
    first = err.splitlines()[0]  # with --json -, the text goes to standard error, as before
    assert "1 not a number (line 6: '12s'), 1 not finite (line 10: -inf)" in first
