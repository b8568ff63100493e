"""Every Parquet read of pipesim, in one function that starts none of Arrow's thread pools.

pyarrow reads a table on its CPU thread pool by default (``use_threads=True``) and pre-buffers
column chunks on its I/O pool (``pre_buffer=True``). Those pools are C++ ``std::thread``s that
live until the interpreter exits, and tearing them down then races with Python's own shutdown:
now and then the process aborts *after* its work is done, with ``terminate called without an
active exception`` and exit status 134 (-6 under ``subprocess``). It is a known pyarrow bug
(apache/arrow issues 34314 and 38352), and it failed this project's CI in a docs example that
loads a saved run, then in ``tests/test_parquet_reads.py``'s own check.

Turning the pools' work off was not enough. With ``use_threads=False, pre_buffer=False`` and
``to_pandas``'s conversion on the calling thread (pandas' ``read_parquet`` with
``to_pandas_kwargs={"use_threads": False}``, this module's reader until stop 70), fresh
interpreters that read a table and exited still aborted in 7 of 200 with both cores busy (pyarrow
26.0.1, 2 cores; interleaved with the reader below, which aborted in 0 of 200). A thread dump
(gdb) shows why: the read still starts one ``arrow::internal::ThreadPool`` worker, the I/O pool's,
for a path and for bytes in a Python file object alike, since the datasets layer pandas reads
through, and Arrow's own file reads, go through the asynchronous read of a random-access file.
An Arrow in-memory buffer (``pyarrow.BufferReader``) reads synchronously and starts no thread,
so the reader reads the file's bytes in Python and hands them to Parquet's own file reader
(``ParquetFile.read``). ``tests/test_parquet_reads.py`` counts the process's threads around a
read: the check is deterministic, where the abort is a few percent.

A saved run's tables are small, so reading them on the calling thread costs nothing a user waits
for; the bytes are in memory once, beside the table.

Writes are left as they are: pyarrow's Parquet writer encodes on the calling thread unless told
otherwise, and a script that only wrote a table and exited aborted in 0 of 30 runs (and in 0 of
100 with both cores busy, writing a 50,000-row table, large enough for ``Table.from_pandas`` to
convert columns on the pool).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

__all__ = ["parquet_rows", "read_parquet"]


def read_parquet(source: str | Path | bytes) -> pd.DataFrame:
    """The Parquet file (a path, or its bytes) as a DataFrame, read on the calling thread only.

    The file's bytes are read by Python and handed to Arrow as an in-memory buffer
    (``pyarrow.BufferReader``), which Parquet's own file reader (``ParquetFile.read``) reads
    without Arrow's I/O pool; ``use_threads=False`` keeps the decoding, and ``to_pandas``'s
    conversion, off the CPU pool. The table is pandas' own read's: with pyarrow >= 19 pandas
    converts with ``to_pandas`` and no type mapper, as here, and keeps ``DataFrame.attrs`` from
    the ``PANDAS_ATTRS`` key, as here."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False, use_pandas_metadata=True)
    frame = table.to_pandas(use_threads=False)
    meta = table.schema.metadata or {}
    if b"PANDAS_ATTRS" in meta:
        frame.attrs = json.loads(meta[b"PANDAS_ATTRS"])
    return frame


def parquet_rows(path: str | Path) -> int | None:
    """The rows of the Parquet file at ``path`` from its footer, without reading the table (a saved
    run's ``events.parquet`` of 11.6M rows: milliseconds, not 23 s and 2.7 GB; no thread pool);
    None where it is no readable Parquet file (the reader that follows says why)."""
    import pyarrow.parquet as pq

    try:
        return int(pq.read_metadata(path).num_rows)
    except (OSError, ValueError):
        return None
