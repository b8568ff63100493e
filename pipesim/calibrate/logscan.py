"""A log file's bytes checked before pandas reads its cells
(:func:`pipesim.calibrate.logfile.read_frame`): that they are UTF-8 text (:func:`check_utf8`), and
that a file of more lines than a calibration takes steps holds no more steps than it takes
(:func:`precount`). :func:`short_row` finds a CSV's first row short of its header's fields a
chunk of lines at a time; :func:`wide_fields` lets the ``csv`` module read a cell as long as the
file.

Reading a log's cells costs a Python string per cell, and the checks of them ran per cell: a
250 MB CSV of 42 million rows of one step took 136 s and 6 GB to end with "1 step; at least 3
needed", a 6-million-step log 58 s and 1.4 GB to say it was too long (its JSON lines, 143 s and
4.1 GB). :func:`precount` reads the step column alone first, as numbers, and refuses them in 6.5 s
and 0.65 GB, 5.8 s and 0.58 GB, 8.8 s and 0.70 GB (``/usr/bin/time -v pipesim calibrate``, 2 s of
each Python's start and imports).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from pipesim.calibrate.cells import LogError, first_bad

__all__ = ["check_utf8", "precount", "short_row", "wide_fields"]

_BOM = b"\xef\xbb\xbf"
_CHUNK = 8 << 20
"""The bytes of a JSON-lines log :func:`precount` matches at a time (its memory, not its time)."""
_ROWS = 1 << 20
"""The rows of a CSV whose steps :func:`precount` reads at a time."""


def check_utf8(p: Path, raw: bytes) -> None:
    """LogError naming the line (and byte) where ``raw`` (a UTF-8 byte-order mark allowed) is not
    UTF-8 text (:func:`pipesim.core.readfile.not_utf8`). Before, pandas' decoder said "'utf-8'
    codec can't decode byte 0xe9 in position 3: unexpected end of data", a position in its own
    buffer, and no line."""
    from pipesim.core.readfile import not_utf8

    if (where := not_utf8(raw)) is not None:
        raise LogError(
            f"{p}: {where}; a log is UTF-8 (save it as UTF-8: a spreadsheet's 'CSV UTF-8', iconv -f "
            "latin1 -t utf-8)",
            "log",
        )


@contextlib.contextmanager
def wide_fields(raw: bytes) -> Iterator[None]:
    """The ``csv`` module's field limit raised to ``raw``'s length while the block reads it: its
    default, 128 KiB, refused a log with a longer cell in any column ("field larger than field
    limit (131072)", no file named), where pandas reads it, and wandb's exports hold long text
    columns. The file is already capped in size (:data:`pipesim.core.readfile.LOG_MAX_BYTES`)."""
    old = csv.field_size_limit()
    csv.field_size_limit(max(old, min(len(raw) + 1, 2**31 - 1)))
    try:
        yield
    finally:
        csv.field_size_limit(old)


def precount(p: Path, raw: bytes, step: str, steps: str | None) -> None:
    """LogError where a log of more lines than :data:`~pipesim.calibrate.frame.MAX_LOG_STEPS` keeps
    more steps than a calibration takes (in ``steps``, ``A:B``; ``step``: the log's step column),
    or a CSV's keep fewer than :data:`~pipesim.calibrate.log.MIN_STEPS`: the errors
    :func:`~pipesim.calibrate.log.read_log` gives after reading every cell, given from the step
    column alone. A log whose step column holds a cell that is no step number is left to the
    reader, which names the cell; so is a JSON-lines log too short (its steps found by a match
    for the step key, which a nested key could hide, never by parsing each line)."""
    from pipesim.calibrate.frame import MAX_LOG_STEPS, too_many
    from pipesim.calibrate.log import CSV_SUFFIXES, MIN_STEPS, _check_enough, parse_steps

    if (raw.count(b"\n") or raw.count(b"\r")) <= MAX_LOG_STEPS + 1:  # the header and the steps
        return
    suffix = p.suffix.lower()
    lo, hi = parse_steps(steps)
    if suffix in CSV_SUFFIXES:
        values = _csv_steps(raw, CSV_SUFFIXES[suffix], step)
        if values is None:
            return
        n = int(((values >= lo) & (values < hi)).sum())
        if n > MAX_LOG_STEPS:
            raise LogError(too_many(p, n), "steps")
        if n < MIN_STEPS:
            _check_enough(p, n, steps, "steps")
        return
    n = _jsonl_step_count(raw, step, lo, hi)
    if n > MAX_LOG_STEPS:
        raise LogError(too_many(p, n), "steps")


def _csv_steps(raw: bytes, sep: str, step: str) -> np.ndarray | None:
    """The CSV's distinct step numbers, read by pandas alone (None: no such column, or a cell that
    is no step number: the reader names it). A last line cut mid-write is left out, as
    :func:`~pipesim.calibrate.logfile.complete_rows` leaves it out."""
    body = raw
    if not raw.endswith((b"\n", b"\r")):
        end = max(raw.rfind(b"\n"), raw.rfind(b"\r")) + 1
        header = re.match(rb"[^\r\n]*", raw)
        if end and header and _fields(header.group(), sep) > _fields(raw[end:], sep):
            body = raw[:end]
    seen = []
    try:  # a chunk of rows at a time: the memory of a chunk's column, not the file's
        for chunk in pd.read_csv(io.BytesIO(body), sep=sep, usecols=[step], chunksize=_ROWS):
            col = chunk[step]
            if col.dtype.kind not in "iuf":  # a cell that is no number
                return None
            seen.append(pd.unique(col.to_numpy()).astype(float))  # a step's rows are one step
    except (ValueError, pd.errors.ParserError):  # no such column; the reader says what is wrong
        return None
    x = pd.unique(np.concatenate(seen)) if seen else np.zeros(0)
    if not np.isfinite(x).all() or first_bad("step", x) is not None:
        return None
    return x


def _fields(line: bytes, sep: str) -> int:
    """The fields of one CSV line."""
    with wide_fields(line):
        row = next(csv.reader(io.StringIO(line.decode("utf-8-sig", errors="replace")), delimiter=sep), [])
    return len(row) if "".join(row).strip() else 0


def _jsonl_step_count(raw: bytes, step: str, lo: float, hi: float) -> int:
    """The distinct step numbers in ``[lo, hi)`` of a JSON-lines log: each line's first ``"step":
    N`` (``step``: the key; N an integer of up to 18 digits), matched a chunk of lines at a time."""
    key = re.escape(json.dumps(step, ensure_ascii=False).encode())
    pattern = re.compile(rb"^[^\n]*?" + key + rb"\s*:\s*(-?\d{1,18})(?:\.0*)?\s*[,}]", re.MULTILINE)
    seen: list[np.ndarray] = []
    start = 0
    while start < len(raw):
        end = raw.find(b"\n", min(start + _CHUNK, len(raw) - 1)) + 1 or len(raw)
        x = np.fromiter(map(int, pattern.findall(raw, start, end)), dtype=np.int64)
        seen.append(pd.unique(x[(x >= lo) & (x < hi)]))
        start = end
    return len(pd.unique(np.concatenate(seen))) if seen else 0


def short_row(raw: bytes, sep: str) -> tuple[int, tuple[int, int] | None, int, bool]:
    """A CSV's header fields, its first non-blank row with fewer (its line and fields; None: none),
    the non-blank rows before it (0 where none) and whether it is the file's last line
    (:func:`~pipesim.calibrate.logfile.complete_rows` judges them). A file without quotes, NULs or
    bare CRs (every line a row, every separator a cell's end) is scanned by numpy, a chunk of lines
    at a time, and told row by row by the ``csv`` module only where a short row is found; any other
    file row by row. Before, every file was read row by row: 13.5 s of reading a 6-million-row
    log cut with ``--steps 0:1000`` (59 s in all before; 21-34 s now, most of it pandas' reading
    of the cells)."""
    header = raw[: raw.find(b"\n")] if b"\n" in raw else raw
    plain = b'"' not in raw and b"\x00" not in raw and raw.count(b"\r") == raw.count(b"\r\n")
    if not plain or header in (b"", b"\r", _BOM, _BOM + b"\r"):  # a blank header: no fields (csv)
        return _short_row_csv(raw, sep)
    n, code = header.count(sep.encode()) + 1, ord(sep)
    pos = len(header) + 1
    while pos < len(raw):
        nxt = raw.find(b"\n", min(pos + _CHUNK, len(raw) - 1))
        end = nxt + 1 if nxt >= 0 else len(raw)
        a = np.frombuffer(raw, np.uint8, count=end - pos, offset=pos)
        ends = np.flatnonzero(a == 10)
        if a[-1] != 10:  # the last line, with no newline after it
            ends = np.append(ends, len(a))
        fields = np.diff(np.searchsorted(np.flatnonzero(a == code), ends), prepend=0) + 1
        for i in np.flatnonzero(fields < n):
            start = pos + (int(ends[i - 1]) + 1 if i else 0)
            if not raw[start : pos + int(ends[i])].decode("utf-8", errors="replace").replace(sep, "").strip():
                continue  # a blank line (pandas skips it) is no row
            return _short_row_csv(raw, sep)  # one there is: an error or a note, told row by row
        pos = end
    return n, None, 0, False


def _short_row_csv(raw: bytes, sep: str) -> tuple[int, tuple[int, int] | None, int, bool]:
    """:func:`short_row` by the ``csv`` module, row by row: a file with quoted cells (a cell may
    hold the separator, or a newline), NULs or bare CRs."""
    # newline="": the csv module's own line splitting, which takes a bare CR as a line end (without
    # it, a CR-only log, as classic Mac tools write, raised csv.Error, not a LogError)
    rows = csv.reader(io.StringIO(raw.decode("utf-8-sig", errors="replace"), newline=""), delimiter=sep)
    short: tuple[int, int] | None = None  # (line, fields) of the first short row
    whole = 0
    with wide_fields(raw):  # a cell over 128 KiB, in any column (wandb's text columns)
        n = len(next(rows, []))
        for row in rows:
            if not "".join(row).strip():  # a blank line (pandas skips it) is no row
                continue
            if short is not None:  # a row after the short one: it was not the last
                break
            if len(row) < n:
                short = (rows.line_num, len(row))
            else:
                whole += 1
    if short is None:
        return n, None, 0, False
    return n, short, whole, short[0] == rows.line_num
