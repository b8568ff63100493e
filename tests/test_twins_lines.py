"""The three CSV line counters share one scan (:func:`pipesim.io.trace_bounds.scan_lines`), which
splits lines where pandas' CSV reader does: at ``\\n``, ``\\r\\n`` and a lone ``\\r``. Each counted
``\\n`` alone before, so each disagreed with the reader it speaks for where a lone ``\\r`` ends lines:

- ``pipesim fit``'s reader (:func:`pipesim.io.fit_readers.read_table`) promises that a blank line
  among a CSV's rows is a row of missing cells, but a file with a lone ``\\r`` had as many rows past
  its header as ``\\n`` ends, so its blank line went uncounted;
- ``pipesim fit``'s note of a long trace (:func:`pipesim.io.fit_readers.trace_rows`) counted a
  classic Mac CSV (``\\r`` ends) of any length as one line;
- ``pipesim trace``'s bound (:func:`pipesim.io.trace_bounds.csv_rows_at_least`) counted such an
  events CSV as 0 rows, so a table too large to trace was parsed whole before it was refused.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from unittest import mock

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pipesim
import pipesim.io.trace_bounds as bounds_mod
from pipesim.io.cli import main
from pipesim.io.fit_readers import read_table, trace_rows
from pipesim.io.trace_bounds import csv_rows_at_least, scan_lines

ENDS = st.sampled_from(["\n", "\r\n", "\r"])


def test_a_blank_line_in_a_csv_with_a_lone_cr_is_a_missing_row(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(b"d\n1\r2\n\n3\n")  # pandas' lines: d, 1, 2, (blank), 3
    assert read_table(path)["d"].isna().tolist() == [False, False, True, False]


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
def test_every_line_end_counts_alike(tmp_path: Path, end: str) -> None:
    """The note's count and the bound's are those of the same file with ``\\n`` ends."""
    n = 50
    path = tmp_path / "t.csv"
    path.write_text("d" + end + end.join(str(i + 1) for i in range(n)) + end, newline="")
    assert len(pd.read_csv(path)) == n
    assert trace_rows(path) == n + 1  # the header counts too: the note says "about"
    assert csv_rows_at_least(path, 1000) == n
    with mock.patch.object(bounds_mod, "_CHUNK_BYTES", 3):  # a \r\n across a chunk's edge
        assert csv_rows_at_least(path, 1000) == n


def test_an_events_csv_with_cr_ends_is_refused_before_it_is_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    small = pipesim.run(pipesim.Scenario(pipeline=pipesim.PipelineConfig(n_slots=4, batch_size=4, steps=3)))
    csv = tmp_path / "events.csv"
    small.events.to_csv(csv, index=False, lineterminator="\r")
    monkeypatch.setattr(bounds_mod, "MAX_TRACE_EVENTS", 2)
    out = tmp_path / "t.json"
    assert main(["trace", str(csv), "--out", str(out)]) == 2
    assert "(its CSV lines past the header)" in capsys.readouterr().err and not out.exists()


def _lines(text: str) -> list[str]:
    return re.split(r"\r\n|\r|\n", text)


@given(
    lines=st.lists(st.tuples(st.text(alphabet="1, \t", max_size=4), ENDS), max_size=10),
    head=ENDS,
    last=st.text(alphabet="1 ", max_size=2),
    chunk=st.integers(1, 5),
)
def test_the_bound_is_exact_wherever_it_gives_a_count(
    tmp_path_factory: pytest.TempPathFactory, lines: list[tuple[str, str]], head: str, last: str, chunk: int
) -> None:
    """In any mix of line ends and chunk sizes: the rows pandas reads, less a last one without a
    line end (it may be blank, which pandas skips); or None."""
    text = "h,x" + head + "".join(a + b for a, b in lines) + last
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_bytes(text.encode())
    with mock.patch.object(bounds_mod, "_CHUNK_BYTES", chunk):
        got = csv_rows_at_least(path, 100)
    try:
        rows = len(pd.read_csv(io.StringIO(text, newline="")))
    except (ValueError, pd.errors.ParserError):
        return  # no table: the reader says why
    if got is not None:
        assert got == rows - (last.strip(" \t") != "")


@given(
    lead=st.lists(st.tuples(st.text(alphabet=" \t", max_size=2), ENDS), max_size=2),
    lines=st.lists(st.tuples(st.text(alphabet="1 \t", max_size=3), ENDS), max_size=8),
    head=ENDS,
    last=st.text(alphabet="1 ", max_size=2),
)
def test_the_fit_reads_a_row_per_line_between_its_header_and_its_last_row(
    tmp_path_factory: pytest.TempPathFactory,
    lead: list[tuple[str, str]],
    lines: list[tuple[str, str]],
    head: str,
    last: str,
) -> None:
    """A blank line among the rows is a row (missing), one before the header or after the last row
    is none, whatever ends the lines: read_table's fast path (no blank line) and its slow one agree."""
    text = "".join(a + b for a, b in lead) + "d" + head + "".join(a + b for a, b in lines) + last
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_bytes(text.encode())
    split = _lines(text)
    filled = [i for i, line in enumerate(split) if line.strip(" \t")]
    assert len(read_table(path)) == filled[-1] - filled[0]


@given(text=st.binary(max_size=24).map(lambda b: bytes(b'ab \t\r\n"'[x % 7] for x in b)), data=st.data())
def test_a_scan_counts_the_same_in_any_chunks(text: bytes, data: st.DataObject) -> None:
    """Blocks cut anywhere (a ``\\r\\n`` or a blank line across an edge) read as the bytes whole:
    the lines pandas splits at, and ``plain`` where no quote and no blank line is among them."""
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(len(text) - 1, 1)), max_size=6))))
    parts = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    split = re.split(rb"\r\n|\r|\n", text)
    whole = scan_lines((text,))
    assert whole.lines == (len(split) - (text[-1:] in (b"\r", b"\n")) if text else 0)
    assert scan_lines(parts) == whole
    plain = b'"' not in text and all(line.strip(b" \t") for line in split[:-1])
    assert scan_lines(parts, rows=True).plain == scan_lines((text,), rows=True).plain == plain
