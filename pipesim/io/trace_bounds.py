"""How large a run :mod:`pipesim.io.trace` takes, asked as early as the count is known.

Why a bound: a trace event is about 300 bytes of JSON, and a browser's trace viewer does not open
much past 300 MB, so a trace stops at :data:`MAX_TRACE_EVENTS` events (a verl-scale run has
millions; ``pipesim run --html``'s aggregate view draws any run). A refusal is a
:class:`TooManyEvents`, a :class:`~pipesim.core.validate.FieldError` whose field is ``events``.

When it is asked, earliest first:

- before a run: :func:`check_run_events` of a scenario's or a run spec's fewest events
  (:func:`min_events`), a lower bound, so it names no step count that fits;
- before a file is parsed: a CSV events table's rows counted from below by its line ends in one
  streaming pass (:func:`csv_rows_at_least`), a saved run's by its Parquet footer;
- after a run or a load: :func:`check_event_count` of the real count, which knows the run's
  events per step and names a step count that fits (:data:`FIT_MARGIN`).

The line ends are counted where pandas ends lines by :func:`scan_lines`, the project's one count
of a CSV's lines: ``pipesim fit``'s reader and its note of a long trace
(:mod:`pipesim.io.fit_readers`) ask it too, each for what it needs.

Every check reads :data:`MAX_TRACE_EVENTS` from this module at call time (as does
:func:`pipesim.io.trace.events_to_trace`), so a test lowers the bound by patching it here;
:mod:`pipesim.io.trace` re-exports every public name of this module.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pipesim.core.validate import FieldError

__all__ = [
    "FIT_MARGIN",
    "MAX_TRACE_EVENTS",
    "LineScan",
    "TooManyEvents",
    "check_event_count",
    "check_run_events",
    "csv_rows_at_least",
    "min_events",
    "scan_lines",
]

MAX_TRACE_EVENTS = 1_000_000
"""The most events a trace takes: about 300 bytes of JSON each, so 300 MB, past what a browser's
trace viewer opens (a verl-scale run has millions; the aggregate view of ``pipesim run --html``
draws any run)."""
FIT_MARGIN = 0.9
"""The share of :data:`MAX_TRACE_EVENTS` a suggested step count aims at: a run's events grow about
linearly in its steps, plus a few (the episodes in flight at its end) that a shorter run keeps."""


class TooManyEvents(FieldError):
    """A run too large to trace (field ``events``). ``events``: its count of events, or the lower
    bound of it asked before the run; ``steps_that_fit``: a step count whose run fits, from the
    run's own events per step (None where that is not known: a bound before the run, a table with
    no train rows)."""

    events: int = 0
    steps_that_fit: int | None = None


def check_event_count(n: int, how: str = "", steps: int | None = None, steps_key: str = "steps") -> None:
    """:class:`TooManyEvents` (a FieldError, field ``events``) where a run of ``n`` events is too large
    to trace (:data:`MAX_TRACE_EVENTS`). Callers that know the count before loading or running the
    run ask first: a saved run's events by their Parquet footer, a CSV's from below by its line ends
    (:func:`csv_rows_at_least`), a rerun by its scenario's or run spec's lower bound
    (:func:`check_run_events`; ``how`` says where that bound comes from, and makes ``n`` "at least").
    A saved run of 11.6M events was loaded (23 s, 2.7 GB), and a run file's run rerun (34 s,
    1.8 GB), before this refused it. ``steps``: the steps the ``n`` events are of (a run's train
    rows), where known: the refusal then names the ``steps_key`` count that fits, at the run's own
    events per step with a margin (:data:`FIT_MARGIN`)."""
    if n <= MAX_TRACE_EVENTS:
        return
    count = f"at least {n:,} events {how}" if how else f"{n:,} events"
    fit = None
    if steps:
        fit = math.floor(MAX_TRACE_EVENTS * FIT_MARGIN * steps / n)
        per = f"{n / steps:,.0f} events a step over its {steps:,} steps"
        remedy = f"trace --set {steps_key}={fit:,} or fewer ({per})" if fit else f"not one step fits ({per})"
    else:
        remedy = "trace fewer steps"
    err = TooManyEvents(
        f"events: the run has {count}, more than the {MAX_TRACE_EVENTS:,} a trace takes "
        f"(about {n * 300 / 1e9:.1f} GB of JSON, past what a viewer opens): {remedy}, "
        "or draw the run with `pipesim run --html` (its aggregate view takes any size)",
        "events",
    )
    err.events, err.steps_that_fit = n, fit or None
    raise err


def min_events(steps: int, batch_size: int) -> int:
    """The fewest events a slot run of ``steps`` steps of ``batch_size`` episodes can have: every
    step trains ``batch_size`` episodes (the buffer refuses a batch of another size), each trained
    episode has at least one gen row (an episode's only segment is kept even when empty:
    :func:`pipesim.results.events.event_table`), and each step one train row. Its syncs, pauses,
    partial segments and the episodes not trained only add to it."""
    return steps * (batch_size + 1)


def check_run_events(steps: int, batch_size: int, steps_key: str = "steps") -> None:
    """:func:`check_event_count` of the fewest events a run of ``steps`` steps of ``batch_size``
    episodes can have (:func:`min_events`), asked before the run: a slot scenario's and a run
    spec's (``kind = "compute"``; ``steps_key`` ``run.steps``: its engine trains the same buffer's
    batches, one train row a step) alike, for ``pipesim trace`` and ``pipesim run --trace``. A
    lower bound names no step count that fits: only the steps past which no run fits (the hint
    "at most steps=1,949 could fit" was followed, and the run of 2,984,048 events, 30 s and 900 MB,
    was refused after it ran). A run refused after it ran names a count (:func:`check_event_count`)."""
    most = MAX_TRACE_EVENTS // (batch_size + 1)
    bound = (
        f"more than {most:,} steps can never fit, and far fewer may not: syncs, pauses and unfinished "
        "episodes add events, and a traced run still too large names a count that fits"
        if most
        else "not one step fits"
    )
    how = (
        f"({steps:,} steps x (batch_size {batch_size:,} + 1): a gen row per trained episode and "
        f"a train row per step; a lower bound, so {bound})"
    )
    check_event_count(min_events(steps, batch_size), how)


_CHUNK_BYTES = 1 << 20
_LONE_CR = re.compile(rb"\r[^\n]")
r"""A ``\r`` that ends a line alone, within a block (pandas splits lines there too); one at the
block's end may be a ``\r\n`` across its edge. Faster than ``\r(?!\n)``: 150 ms, not 250, for
77 MB of short ``\r\n`` lines."""
_BLANK_LINE = re.compile(rb"\n[ \t\r\f\v]*\n")
r"""A line of white space alone where every line end holds a ``\n``: pandas skips it, so it is no
row. It errs only towards a blank line (``\f`` and ``\v`` lines are rows to pandas)."""
_BLANK_LINE_CR = re.compile(rb"(?:\n|\r(?!\n))[ \t\f\v]*[\r\n]")
r"""The same where a lone ``\r`` ends lines too: nine times slower, so asked only there."""


@dataclass(frozen=True)
class LineScan:
    r"""What :func:`scan_lines` read: ``ends``, the line ends as pandas' CSV reader splits lines
    (``\n``, ``\r\n`` and a lone ``\r``); ``open_last``, text after the last of them (a last line
    without a line end); ``plain``, where asked, that every line end past the first ends a row
    pandas reads (no quote, no blank line, no NUL byte). Where the scan stopped early (past its
    ``stop_past``, or at what is not plain) ``ends`` is a count from below and ``open_last`` False."""

    ends: int
    open_last: bool = False
    plain: bool = True

    @property
    def lines(self) -> int:
        """The lines, a last one without a line end included (blank ones too)."""
        return self.ends + self.open_last


def scan_lines(chunks: Iterable[bytes], stop_past: int | None = None, rows: bool = False) -> LineScan:
    r"""The one line count of a CSV's bytes, given in ``chunks`` (a file in blocks, or its bytes
    whole), without parsing them: pandas ends lines at ``\n``, ``\r\n`` and a lone ``\r``, and so
    does this (each counter of ``\n`` alone disagreed with pandas where a lone ``\r`` ends lines:
    a blank line, a whole classic Mac file, went uncounted). Its users, and what each asks:

    - :func:`csv_rows_at_least` (``pipesim trace``'s bound before it parses an events CSV): a count
      from below that stops once past ``stop_past`` line ends, and ``rows``: where not every line
      end ends a row pandas reads (a quote, a blank line, a NUL byte) it stops with ``plain`` False;
    - :func:`pipesim.io.fit_readers.trace_rows` (``pipesim fit``'s note of a long trace): every
      line of a file, the header and blank ones included (about the rows);
    - :func:`pipesim.io.fit_readers.read_table`'s CSV reader: every line of its bytes, to learn
      whether pandas read one row per line past the header (no blank line, no quoted line end).

    A block costs a ``bytes.count`` of ``\n`` (where it holds a ``\r``, a search for a lone one
    too, and only where one is found the counts of ``\r`` and ``\r\n``: 0.1 s for 77 MB of
    ``\n`` lines, 0.25 s for ``\r\n`` ones); ``rows`` adds a search for blank lines, most of the
    time of a streaming pass."""
    ends, carry, last = 0, b"\n", b"\n"  # carry: the start of a line so far blank (the text's start)
    for chunk in chunks:
        text = carry + chunk if rows else chunk  # no copy where no blank line is asked for
        lone = b"\r" in text and _LONE_CR.search(text) is not None
        if rows:
            blank = _BLANK_LINE_CR if lone or text.endswith(b"\r") else _BLANK_LINE
            if b'"' in chunk or b"\x00" in chunk or blank.search(text):
                return LineScan(ends, plain=False)
            k = max(text.rfind(b"\n"), text.rfind(b"\r"))  # the last line end, and a space if one follows
            carry = b"" if k < 0 or text[k + 1 :].strip() else text[k : k + 1] + b" " * (k + 1 < len(text))
        ends += chunk.count(b"\n") + (
            chunk.count(b"\r") - chunk.count(b"\r\n") if lone else chunk.endswith(b"\r")
        )
        ends -= last == b"\r" and chunk[:1] == b"\n"  # a \r\n across the edge: its \r was counted
        last = chunk[-1:] or last
        if stop_past is not None and ends > stop_past:
            return LineScan(ends)
    return LineScan(ends, last not in (b"\n", b"\r"))


def csv_rows_at_least(path: str | Path, cap: int) -> int | None:
    """The data rows of the CSV at ``path`` from below, by its line ends (:func:`scan_lines`), read
    in one streaming pass of 1 MiB chunks that stops once past ``cap`` rows (nothing is parsed: a
    3M-row events CSV was parsed whole, 2 s and 680 MB, before the trace refused it). None where the
    line ends are no bound on the rows pandas reads: a quote in what was read (a quoted field may
    hold a line end), a blank line (pandas skips it), a NUL byte (no text table), or a file that
    is unreadable or no regular file, a FIFO or a device (the reader that follows says why). The
    header is one line; a last row without a line end is not counted (it may be blank, which pandas
    skips). The bound only: an exact count of a whole file, blank lines and all, is
    :func:`pipesim.io.fit_readers.trace_rows`."""
    from pipesim.core.readfile import open_regular

    try:  # a regular file only, opened as the readers open it: a FIFO's open waits for a writer
        with open_regular(path, "events tables", sys.maxsize) as f:  # the reader after caps the size
            scan = scan_lines(iter(lambda: f.read(_CHUNK_BYTES), b""), cap + 1, rows=True)
    except OSError:  # a FIFO, a device: read_bytes refuses it by name
        return None
    return max(scan.ends - 1, 0) if scan.plain else None
