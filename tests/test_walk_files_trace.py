"""``pipesim trace`` and ``pipesim check-roofline`` read their input as every other command reads a
user's file (:mod:`pipesim.core.readfile`): a FIFO was waited on until the process was killed, a
link to ``/dev/zero`` read until memory ran out (``trace``), and check-roofline printed a raw
``[Errno 22] ...: 'fifo.csv'``. Each is refused at once, exit 2, in one line naming the path and
what it is. Rows: the input's suffix (what trace reads it as) and the kind of path.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from tests.special_paths import KINDS as SPECIAL
from tests.special_paths import make_special

KINDS = {k: word for k, word in SPECIAL.items() if k != "directory"}  # a directory is a saved run

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX's"),
]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet"])  # events table, run file, events table
def test_trace_refuses_a_path_that_is_no_file_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str, kind: str
) -> None:
    src = make_special(tmp_path / f"in{suffix}", kind)
    out = tmp_path / "t.json"
    t0 = time.perf_counter()
    assert main(["trace", str(src), "--out", str(out)]) == 2
    assert time.perf_counter() - t0 < 10
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert str(src) in err and KINDS[kind] in err, err
    assert not out.exists()


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_trace_calls_an_empty_events_table_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    src = tmp_path / f"ev{suffix}"
    src.write_bytes(b"")
    assert main(["trace", str(src), "--out", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert str(src) in err and "empty" in err.replace(str(src), ""), err


def test_a_run_file_past_its_cap_is_refused_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run file's cap is :data:`~pipesim.core.readfile.RUN_FILE_MAX_BYTES` (a sparse file one
    byte past it: never read, so no memory or disk)."""
    from pipesim.core.readfile import RUN_FILE_MAX_BYTES

    src = tmp_path / "big.json"
    with open(src, "wb") as f:
        f.truncate(RUN_FILE_MAX_BYTES + 1)
    assert main(["trace", str(src), "--out", str(tmp_path / "t.json")]) == 2
    err = capsys.readouterr().err
    assert str(src) in err and "at most 256 MiB" in err, err


def test_the_csv_row_bound_does_not_wait_on_a_fifo(tmp_path: Path) -> None:
    from pipesim.io.trace_bounds import csv_rows_at_least

    for kind in KINDS:
        assert csv_rows_at_least(make_special(tmp_path / f"{kind}.csv", kind), 10) is None


@pytest.mark.parametrize("kind", list(KINDS))
def test_check_roofline_names_the_path_not_an_errno(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    from pipesim.compute.measured import read_measurements

    src = make_special(tmp_path / "m.csv", kind)
    with pytest.raises(FieldError) as info:
        read_measurements(src)
    assert info.value.field == "csv" and info.value.file == str(src)
    assert main(["check-roofline", str(src), "--gpu", "h100-sxm"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "[Errno" not in err, err
    assert str(src) in err and KINDS[kind] in err, err
