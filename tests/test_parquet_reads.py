"""Parquet is read through :func:`pipesim.io.parquet.read_parquet` only, and that read gives the
table pandas' default read gives.

The reason is an abort at interpreter exit: pyarrow's thread pools, started by a threaded read,
race with Python's shutdown (``terminate called without an active exception``, exit -6). It failed
CI once in a docs example that loads a saved run, and it reproduces in about half of fresh
interpreters that read a table with ``pyarrow.parquet.read_table``'s defaults. A flaky abort is no
test, so this file holds what keeps it away: the one reader, every read going through it, and a
count of the process's threads around a read (none started: nothing left to race the exit).
"""

from __future__ import annotations

import ast
import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipesim.io.parquet import read_parquet

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipesim", "scenarios", "offpolicy", "mismatch", "benchmarks")
READERS = {"read_parquet", "read_table", "ParquetFile", "ParquetDataset", "dataset"}
"""Names that read Parquet with pyarrow's threads by default: pandas' reader, pyarrow.parquet's
and pyarrow.dataset's. Called as an attribute (``pd.read_parquet``, ``pq.read_table``)."""


def parquet_reads(tree: ast.AST) -> list[int]:
    """Lines of ``x.read_parquet(...)``-style calls whose object is a pandas or pyarrow module alias."""
    aliases = {"pd", "pandas", "pq", "pa", "ds", "pyarrow"}
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in READERS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in aliases
    ]


def test_every_parquet_read_goes_through_the_one_reader() -> None:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "pipesim" / "io" / "parquet.py":
                continue
            lines = parquet_reads(ast.parse(path.read_text(), str(path)))
            found += [f"{path.relative_to(ROOT)}:{line}" for line in lines]
    assert found == [], "read Parquet with pipesim.io.parquet.read_parquet (see its docstring)"


def test_the_check_finds_a_direct_read() -> None:
    """The scan above is not vacuous: it sees both spellings it forbids, and not the helper."""
    code = (
        "import pandas as pd\nimport pyarrow.parquet as pq\n"
        "pd.read_parquet('a')\npq.read_table(b)\nread_parquet(c)\n"
    )
    assert parquet_reads(ast.parse(code)) == [3, 4]


def frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "t": rng.random(5000),
            "kind": pd.Categorical(rng.choice(["launch", "finish", "train"], 5000)),
            "version": rng.integers(0, 20, 5000),
            "lane": [f"slot {i % 7}" for i in range(5000)],
        }
    )


def test_the_reader_gives_pandas_default_table_from_bytes_and_from_a_path(tmp_path: Path) -> None:
    df = frame()
    df.to_parquet(tmp_path / "t.parquet", index=False)
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    expected = pd.read_parquet(tmp_path / "t.parquet")
    pd.testing.assert_frame_equal(read_parquet(tmp_path / "t.parquet"), expected)
    pd.testing.assert_frame_equal(read_parquet(str(tmp_path / "t.parquet")), expected)
    pd.testing.assert_frame_equal(read_parquet(buf.getvalue()), expected)
    assert isinstance(read_parquet(buf.getvalue())["kind"].dtype, pd.CategoricalDtype)


@pytest.mark.full  # the deterministic check of its cause: test_a_read_starts_no_thread
def test_a_script_that_reads_through_the_reader_exits_0(tmp_path: Path) -> None:
    """Five fresh interpreters read a table through the reader and exit; each exits 0. (With
    ``pyarrow.parquet.read_table``'s defaults about half of them abort here; through pandas'
    default read the abort is rarer, so this passing alone proves little: the scan above is the
    guard, this the end-to-end check that the reader's own path exits cleanly.)"""
    frame().to_parquet(tmp_path / "t.parquet", index=False)
    code = (
        "import sys\nfrom pipesim.io.parquet import read_parquet\n"
        "read_parquet(open(sys.argv[1], 'rb').read())\n"
    )
    for _ in range(5):
        proc = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / "t.parquet")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_reader_keeps_the_frames_attrs_as_pandas_does(tmp_path: Path) -> None:
    df = frame()
    df.attrs = {"run": "mine", "seed": 3}
    df.to_parquet(tmp_path / "t.parquet", index=False)
    assert pd.read_parquet(tmp_path / "t.parquet").attrs == {"run": "mine", "seed": 3}
    assert read_parquet(tmp_path / "t.parquet").attrs == {"run": "mine", "seed": 3}


THREADS = """
import os, sys
from pipesim.io.parquet import read_parquet
def threads():
    return len(os.listdir("/proc/self/task"))
source = sys.argv[1] if sys.argv[2] == "path" else open(sys.argv[1], "rb").read()
before = threads()
read_parquet(source)
print(before, threads())
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc (Linux)")
@pytest.mark.parametrize("given", ["path", "bytes"])
def test_a_read_starts_no_thread(tmp_path: Path, given: str) -> None:
    """The deterministic check behind the abort: a read that starts none of Arrow's pool threads
    leaves none to race the interpreter's exit. (A threaded read, pandas' default, starts several;
    ``use_threads=False, pre_buffer=False`` still started one I/O-pool worker, from a path and from
    bytes wrapped in a Python file object; an in-memory Arrow buffer starts none.)"""
    frame().to_parquet(tmp_path / "t.parquet", index=False)
    proc = subprocess.run(
        [sys.executable, "-c", THREADS, str(tmp_path / "t.parquet"), given],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    before, after = map(int, proc.stdout.split())
    assert after == before, f"the read started {after - before} thread(s)"
