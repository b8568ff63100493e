"""Follow-ups of the walkthrough's file fixes: paths that are no regular file, where a command
still read them as if they were.

- ``--policies fifo.py`` (a FIFO, a directory, a link to ``/dev/zero``) was "no such file"; it is
  named as what it is (:func:`pipesim.io.user_code.user_file_problem`), and a missing file is
  still "no such file".
- A saved run's files were read with a plain ``Path.read_bytes``: ``pipesim trace DIR`` hung where
  ``DIR/events.parquet`` was a FIFO, and ``pipesim report DIR`` read a link to ``/dev/zero`` until
  memory ran out (``compare DIR`` too). Each file is read bounded
  (:func:`pipesim.io.saved_files.read_bytes`, at most :data:`~pipesim.io.saved_files.
  SAVED_FILE_MAX_BYTES`), and a refusal is a :class:`SavedRunError` naming the file, as a corrupt
  file's is. A file whose size is not the manifest's is refused without being read.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from pipesim.io import saved_files
from pipesim.io.cli import main
from pipesim.io.saved import SavedRunError, UnverifiedRunWarning, load
from tests.special_paths import KINDS, make_special

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX's"),
]

V1_FIXTURE = Path(__file__).parent / "data" / "saved-run-v1"
"""A run saved by pipesim's format-1 writer (no manifest: its files are read on demand)."""


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


# -- --policies ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
def test_policies_names_a_path_that_is_no_file_as_what_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    monkeypatch.chdir(tmp_path)
    make_special(tmp_path / "mine.py", kind)
    t0 = time.perf_counter()
    assert main(["run", "fig13.1-async", "--policies", "mine.py"]) == 2
    assert time.perf_counter() - t0 < 10  # a FIFO is not opened (an import would wait for a writer)
    err = _one_line(capsys)
    assert "--policies" in err and "mine.py" in err, err
    assert KINDS[kind] in err and "no such file" not in err, err


def test_policies_still_calls_a_missing_file_no_such_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "fig13.1-async", "--policies", "absent.py"]) == 2
    err = _one_line(capsys)
    assert "--policies" in err and "absent.py" in err and "no such file" in err, err


# -- a saved run's files -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("saved") / "run"
    assert main(["run", "fig13.1-async", "--save", str(d)]) == 0
    return d


def _copy(src: Path, dst: Path) -> Path:
    return Path(shutil.copytree(src, dst, symlinks=True))


def _load(d: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnverifiedRunWarning)  # the format-1 fixture says it has no hashes
        return load(d)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "symlink-loop"])
@pytest.mark.parametrize(
    ("fmt", "name"),
    [
        (2, "events.parquet"),
        (2, "manifest.json"),
        (2, "summary.json"),
        (1, "events.parquet"),
        (1, "meta.json"),
    ],
)
def test_a_saved_runs_file_that_is_no_file_is_refused_naming_it(
    saved_once: Path, tmp_path: Path, fmt: int, name: str, kind: str
) -> None:
    d = _copy(saved_once if fmt == 2 else V1_FIXTURE, tmp_path / "run")
    path = make_special(d / name, kind, loop_dir=d.parent)
    t0 = time.perf_counter()
    with pytest.raises(SavedRunError) as info:
        _load(d)
    assert time.perf_counter() - t0 < 10
    said = str(info.value)
    assert (info.value.file, info.value.field) == (str(path), ""), said
    assert said.startswith(f"{path}:") and KINDS[kind] in said, said


@pytest.mark.parametrize("command", ["trace", "report", "compare"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_trace_report_and_compare_refuse_a_saved_run_whose_table_is_no_file(
    saved_once: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, kind: str
) -> None:
    d = _copy(saved_once, tmp_path / "run")
    table = make_special(d / "events.parquet", kind, loop_dir=d.parent)
    out = tmp_path / ("t.json" if command == "trace" else "r.html")
    argv = {
        "trace": ["trace", str(d), "--out", str(out)],
        "report": ["report", str(d), "--out", str(out)],
        "compare": ["compare", str(d), str(saved_once)],
    }[command]
    t0 = time.perf_counter()
    assert main(argv) == 2
    assert time.perf_counter() - t0 < 20
    err = _one_line(capsys)
    assert str(table) in err and KINDS[kind] in err, err
    assert not out.exists()


def test_a_table_past_the_cap_is_refused_naming_it(
    saved_once: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cap is read when a file is read (a test lowers it); the first file past it is named."""
    d = _copy(saved_once, tmp_path / "run")
    sizes = {f.name: f.stat().st_size for f in d.iterdir() if f.name != saved_files.MANIFEST}
    cap = sizes["events.parquet"] - 1
    monkeypatch.setattr(saved_files, "SAVED_FILE_MAX_BYTES", cap)
    with pytest.raises(SavedRunError) as info:
        load(d)
    first = min(n for n, size in sizes.items() if size > cap)  # read in the manifest's (sorted) order
    assert (info.value.file, info.value.field) == (str(d / first), ""), str(info.value)


def test_a_real_saved_run_is_far_under_the_cap(saved_once: Path) -> None:
    """Every file of a saved run loads; the cap is hundreds of times a real table's bytes per row."""
    loaded = load(saved_once)
    biggest = max(f.stat().st_size for f in saved_once.iterdir())
    assert biggest * 1000 < saved_files.SAVED_FILE_MAX_BYTES and len(loaded.events)


def test_a_file_grown_since_the_save_is_refused_without_reading_it(
    saved_once: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A (sparse) file larger than the manifest lists is changed: refused by its size, unread."""
    d = _copy(saved_once, tmp_path / "run")
    table = d / "events.parquet"
    os.truncate(table, 1 << 30)
    read: list[str] = []
    real = saved_files.read_bytes

    def spy(path: Path, *args: Any, **kwargs: Any) -> bytes:
        read.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(saved_files, "read_bytes", spy)
    with pytest.raises(SavedRunError) as info:
        load(d)
    assert info.value.file == str(table), str(info.value)
    assert "events.parquet" not in read and "manifest.json" in read, read


def test_the_manifest_is_read_bounded(saved_once: Path, tmp_path: Path) -> None:
    """A manifest far past any real one (a run lists at most eight files) is refused, named."""
    d = _copy(saved_once, tmp_path / "run")
    manifest = d / saved_files.MANIFEST
    body = json.loads(manifest.read_text())
    manifest.write_text(json.dumps(body) + " " * saved_files.MANIFEST_MAX_BYTES)
    with pytest.raises(SavedRunError) as info:
        load(d)
    assert (info.value.file, info.value.field) == (str(manifest), ""), str(info.value)


def test_is_saved_run_reads_a_large_meta_file_no_further_than_a_manifest(tmp_path: Path) -> None:
    """``is_saved_run`` (asked of every directory a command is given) read meta.json and the
    manifest whole: a 64 MiB file in meta.json's place was read into memory to find it is no saved
    run. It is read bounded now, as the manifest is: refused unread past 1 MiB."""
    import tracemalloc

    from pipesim.io.saved import is_saved_run

    d = tmp_path / "run"
    d.mkdir()
    with open(d / "meta.json", "wb") as f:  # sparse: no disk
        f.truncate(64 << 20)
    tracemalloc.start()
    try:
        assert is_saved_run(d) is False
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak
