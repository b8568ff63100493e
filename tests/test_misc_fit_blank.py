"""``pipesim fit`` of a CSV or TSV with blank lines: a blank line between the header and the last
row is a row whose cells are missing, counted and named by its line, in a one-column file as in a
two-column one (pandas skipped it by default, so a one-column file's gap was dropped without a
word: ``n_dropped`` 0 where the same gap written ``,`` in a two-column file read "2 missing (line
5, line 11)"). Blank lines before the header or after the last row are no rows: a file's final line
end drops nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipesim.io.fit_readers import FitError, read_fit_columns

VALUES = [round(10.0 + 3.5 * i, 2) for i in range(16)]


def _write(path: Path, lines: list[str], end: str = "\n", final: bool = True) -> Path:
    path.write_bytes((end.join(lines) + (end if final else "")).encode())
    return path


def _tables(tmp: Path, blanks: set[int], sep: str, end: str, blank: str) -> tuple[Path, Path]:
    """A one-column and a two-column table of VALUES, the data rows in ``blanks`` left blank (the
    one-column file's line is ``blank``; the two-column file's holds only the separator)."""
    suffix = ".tsv" if sep == "\t" else ".csv"
    one = ["d", *(blank if i in blanks else str(v) for i, v in enumerate(VALUES))]
    two = ["d" + sep + "k", *(sep if i in blanks else f"{v}{sep}1" for i, v in enumerate(VALUES))]
    return _write(tmp / f"one{suffix}", one, end), _write(tmp / f"two{suffix}", two, end)


def _dropped(path: Path) -> tuple[int, tuple[tuple[str, str, int, tuple[tuple[int, int | None], ...]], ...]]:
    values, _, n_dropped, dropped = read_fit_columns(path, "d", None, 1.0, 30)
    assert len(values) + n_dropped == len(VALUES)  # every data row is used or dropped
    return n_dropped, tuple(
        (d.column, d.reason, d.count, tuple((r.row, r.line) for r in d.rows)) for d in dropped
    )


@pytest.mark.parametrize("end", ["\n", "\r\n"])
@pytest.mark.parametrize(  # a TSV's tab is a cell's edge, no white space
    ("sep", "blank"), [(",", ""), (",", "  "), (",", "\t "), ("\t", ""), ("\t", "  ")]
)
def test_a_blank_line_is_a_missing_cell_as_in_a_two_column_file(
    tmp_path: Path, sep: str, end: str, blank: str
) -> None:
    one, two = _tables(tmp_path, {3, 9}, sep, end, blank)
    n, dropped = _dropped(one)
    assert (n, dropped) == _dropped(two)
    assert n == 2 and dropped == (("d", "missing", 2, ((4, 5), (10, 11))),)  # rows 4, 10: lines 5, 11


@given(blanks=st.sets(st.integers(0, len(VALUES) - 2), max_size=len(VALUES) - 10))
def test_each_blank_line_is_counted_and_named_where_it_is(
    tmp_path_factory: pytest.TempPathFactory, blanks: set[int]
) -> None:
    """Any blank rows before the last (at least 10 values left; a blank line after the last row is
    no row): one-column and two-column files drop the same rows, each named line is blank in the
    file, and the count is the blank lines'."""
    tmp = tmp_path_factory.mktemp("blank")
    one, two = _tables(tmp, blanks, ",", "\n", "")
    n, dropped = _dropped(one)
    assert (n, dropped) == _dropped(two) and n == len(blanks)
    file_lines = one.read_text().split("\n")
    for _, reason, _, rows in dropped:
        assert reason == "missing"
        assert [row - 1 for row, _ in rows] == sorted(blanks)[: len(rows)]
        assert all(line is not None and file_lines[line - 1] == "" for _, line in rows)


@pytest.mark.parametrize(
    ("lines", "final"),
    [
        (["d", *map(str, VALUES)], True),  # one final line end
        (["d", *map(str, VALUES)], False),  # none
        (["d", *map(str, VALUES), "", ""], True),  # an editor's extra ones
        (["d", *map(str, VALUES), "  "], False),  # spaces after the last line end
        (["", " ", "d", *map(str, VALUES)], True),  # before the header
    ],
)
def test_blank_lines_outside_the_rows_drop_nothing(tmp_path: Path, lines: list[str], final: bool) -> None:
    for end in ("\n", "\r\n"):
        path = _write(tmp_path / "t.csv", lines, end, final)
        values, _, n, dropped = read_fit_columns(path, "d", None, 1.0, 30)
        assert n == 0 and dropped == () and np.allclose(values, VALUES)


def test_a_turn_count_after_a_blank_line_is_refused_by_its_own_line(tmp_path: Path) -> None:
    """The lines that name a refusal count a blank line as the row it is."""
    rows = [f"{v},{3}" for v in VALUES]
    rows[2], rows[7] = "", f"{VALUES[7]},2.5"  # line 4 blank, line 9 a fractional turn count
    path = _write(tmp_path / "t.csv", ["d,turns", *rows])
    with pytest.raises(FitError) as info:
        read_fit_columns(path, "d", "turns", 1.0, 30)
    assert info.value.field == "turns" and "line 9" in str(info.value)
