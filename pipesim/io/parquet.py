"""Every Parquet read of pipesim, in one function that keeps Arrow's thread pools out of the process.

pyarrow reads a table on its CPU thread pool by default (``use_threads=True``) and pre-buffers
column chunks on its I/O pool (``pre_buffer=True``). Those pools are C++ ``std::thread``s that
live until the interpreter exits, and tearing them down then races with Python's own shutdown:
now and then the process aborts *after* its work is done, with ``terminate called without an
active exception`` and exit status 134 (-6 under ``subprocess``). It is a known pyarrow bug
(apache/arrow issues 34314 and 38352), and it failed this project's CI once, in a docs example
that loads a saved run. Measured here (pyarrow 26.0.1, 2 cores): a fresh interpreter that reads a
saved run's ``events.parquet`` from bytes with ``pyarrow.parquet.read_table`` and exits aborted in
23 of 40 runs on the default path and in 0 of 40 with ``use_threads=False, pre_buffer=False``
(either alone also gave 0 of 40). That was not all: the conversion to pandas
(``Table.to_pandas``) runs on the CPU pool too unless told otherwise, and a read with only the two
flags above still aborted in CI once (5 fresh interpreters in a loaded 2-core run) and here in 2
of 40 runs with both cores busy. With ``to_pandas_kwargs={"use_threads": False}`` as well, none
of 200 aborted under the same load (pandas >= 3.0 passes that argument through; under pandas 2 the read
is pyarrow's ``read_table`` then ``to_pandas``, both on the calling thread: pandas 2's own
default read, without the pools). A saved run's
tables are small, so reading them on the calling thread costs nothing a user waits for, and a
user's script that loads a run exits 0.

Writes are left as they are: pyarrow's Parquet writer encodes on the calling thread unless told
otherwise, and a script that only wrote a table and exited aborted in 0 of 30 runs (and in 0 of
100 with both cores busy, writing a 50,000-row table, large enough for ``Table.from_pandas`` to
convert columns on the pool).
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

__all__ = ["parquet_rows", "read_parquet"]

_PANDAS_MAJOR = int(pd.__version__.split(".")[0])


def read_parquet(source: str | Path | bytes) -> pd.DataFrame:
    """The Parquet file (a path, or its bytes) as a DataFrame, read on the calling thread only."""
    src: str | Path | io.BytesIO = io.BytesIO(source) if isinstance(source, bytes) else source
    if _PANDAS_MAJOR >= 3:
        return pd.read_parquet(
            src,
            engine="pyarrow",
            use_threads=False,
            pre_buffer=False,
            to_pandas_kwargs={"use_threads": False},
        )
    # pandas 2 (Python 3.10 gets no pandas 3) has no to_pandas_kwargs; its default read is
    # read_table then to_pandas, which is what this does with both kept off the pools.
    import pyarrow.parquet as pq

    table = pq.read_table(src, use_threads=False, pre_buffer=False)
    return table.to_pandas(use_threads=False)


def parquet_rows(path: str | Path) -> int | None:
    """The rows of the Parquet file at ``path`` from its footer, without reading the table (a saved
    run's ``events.parquet`` of 11.6M rows: milliseconds, not 23 s and 2.7 GB; no thread pool);
    None where it is no readable Parquet file (the reader that follows says why)."""
    import pyarrow.parquet as pq

    try:
        return int(pq.read_metadata(path).num_rows)
    except (OSError, ValueError):
        return None
