"""A file a user names is read only when it is a regular file within its size cap
(:mod:`pipesim.core.readfile`), at every reader: a FIFO (whose ``open`` waited for a writer
forever), a symlink to ``/dev/zero`` (read until the process was killed for memory), a directory, a
symlink loop and a file past the cap are each refused at once, with the reader's own error type
naming the file and saying what the path is. Rows: the reader, the kind of path, the error type,
the field, the word that tells the refusal; each test is bounded in time.
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import pipesim.plan as plan
from pipesim.calibrate import LogError, read_columns_map, read_log
from pipesim.core.readfile import LOG_MAX_BYTES, SCENARIO_MAX_BYTES, SPEC_MAX_BYTES, NotAFile, read_bytes
from pipesim.core.validate import FieldError
from pipesim.io import scenario_files as sf
from pipesim.io.cli import main
from pipesim.io.scenario_schema import ScenarioFileError
from pipesim.plan import runspec
from pipesim.plan.checks import PlanError
from tests.special_paths import KINDS as SPECIAL
from tests.special_paths import make_special

KINDS: dict[str, str] = {**SPECIAL, "over-the-cap": "at most"}  # the kind of path -> a word its refusal says

pytestmark = [
    pytest.mark.timeout(20),
    pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX's"),
]

ROOT = Path(__file__).resolve().parent.parent
RUN_SPEC = ROOT / "examples" / "run_verl_8gpu.toml"
LOG = ROOT / "examples" / "verl_sample_log.csv"


def _model_spec(tmp_path: Path, name: str) -> Path:
    """A run spec whose ``model.name`` is ``name`` (a path beside it)."""
    text = RUN_SPEC.read_text()
    lines = [f'name = "{name}"' if line.startswith("name = ") else line for line in text.splitlines()]
    assert lines != text.splitlines()
    spec = tmp_path / "spec.toml"
    spec.write_text("\n".join(lines) + "\n")
    return spec


# reader: (the file name, its cap, how it is read, the error type, the field)
READERS: dict[str, tuple[str, int, Callable[[Path], object], type[FieldError], str]] = {
    "scenario-yaml": ("s.yaml", SCENARIO_MAX_BYTES, sf.load_scenario, ScenarioFileError, ""),
    "scenario-toml": ("s.toml", SCENARIO_MAX_BYTES, sf.load_scenario, ScenarioFileError, ""),
    "plan-spec": ("p.toml", SPEC_MAX_BYTES, plan.load, PlanError, ""),
    "run-spec": ("r.yaml", SPEC_MAX_BYTES, runspec.load, PlanError, ""),
    "calibrate-log": ("log.csv", LOG_MAX_BYTES, read_log, LogError, "log"),
    "columns-map": ("cols.toml", SPEC_MAX_BYTES, read_columns_map, LogError, "columns"),
    "model-config": (
        "m.json",
        SPEC_MAX_BYTES,
        lambda p: runspec.load(_model_spec(p.parent, p.name)),
        PlanError,
        "model.name",
    ),
}


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("reader", list(READERS))
def test_a_path_that_is_no_regular_file_or_too_large_is_refused_at_once(
    tmp_path: Path, reader: str, kind: str
) -> None:
    name, cap, read, error, field = READERS[reader]
    if reader == "model-config" and kind == "directory":
        pytest.skip("a model.name directory is read as its config.json (test_plan_input's rows)")
    path = make_special(tmp_path / name, kind, cap)
    t0 = time.perf_counter()
    with pytest.raises(error) as info:
        read(path)
    assert time.perf_counter() - t0 < 10
    said = str(info.value)
    assert info.value.field == field, said
    assert name in said and KINDS[kind] in said and "\n" not in said, said


def test_a_model_directory_without_a_config_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    with pytest.raises(PlanError) as info:
        runspec.load(_model_spec(tmp_path, "ckpt"))
    assert info.value.field == "model.name" and "config.json" in str(info.value)


CLI: list[tuple[str, str, list[str]]] = [  # id, the file made special, the command ({} is it)
    ("calibrate-log", "ff.csv", ["calibrate", "{}", "--spec", str(RUN_SPEC), "--out", "{out}"]),
    (
        "calibrate-columns",
        "c.toml",
        ["calibrate", str(LOG), "--spec", str(RUN_SPEC), "--columns", "{}", "--out", "{out}"],
    ),
    ("calibrate-spec", "s.toml", ["calibrate", str(LOG), "--spec", "{}", "--out", "{out}"]),
]


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
@pytest.mark.parametrize(("name", "argv"), [r[1:] for r in CLI], ids=[r[0] for r in CLI])
def test_the_cli_says_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, argv: list[str], kind: str
) -> None:
    path = make_special(tmp_path / name, kind, 0)
    args = [a.format(path, out=tmp_path / "out.toml") for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert name in err and KINDS[kind] in err, err


def test_pipesim_plan_refuses_a_fifo_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = make_special(tmp_path / "p.toml", "fifo", 0)
    assert plan.main([str(path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "p.toml" in err and "FIFO" in err, err


# -- the helper itself ------------------------------------------------------------------------------
def test_a_regular_file_within_the_cap_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_bytes(b"x" * 100)
    assert read_bytes(path, "files", 100) == b"x" * 100
    link = tmp_path / "link.txt"
    link.symlink_to(path)  # a symlink is followed
    assert read_bytes(link, "files", 100) == b"x" * 100
    with pytest.raises(NotAFile) as info:
        read_bytes(path, "test files", 99)
    assert (
        info.value.errno == errno.EFBIG
        and info.value.strerror == "is 100 bytes; test files are at most 99 bytes"
    )


def test_a_missing_file_is_the_systems_own_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "nope", "files", 10)


def test_a_socket_is_refused() -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as d:  # short: a socket's path is at most ~100 bytes
        path = Path(d) / "s.sock"
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))
            with pytest.raises(NotAFile) as info:
                read_bytes(path, "files", 10)
    assert "socket" in str(info.value.strerror)


def test_a_dev_zero_link_names_its_target(tmp_path: Path) -> None:
    path = make_special(tmp_path / "z.csv", "dev-zero", 0)
    with pytest.raises(NotAFile) as info:
        read_bytes(path, "logs", LOG_MAX_BYTES)
    assert info.value.strerror == "is a symlink to /dev/zero, which is a character device, not a file"


@pytest.mark.timeout(20)
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
@pytest.mark.parametrize("reader", ["lengths", "trajectory", "measured", "durations"])
def test_the_apis_csv_readers_refuse_a_special_path_at_once(tmp_path: Path, reader: str, kind: str) -> None:
    """The CSVs the Python API reads (a length trace, a trajectory, measurements, durations) go
    through the same check: a FIFO hung each of them, a link to /dev/zero filled the memory. They
    raise the OSError an unreadable file always raised there (the plan names its key around it)."""
    from pipesim.compute.measured import read_measurements
    from pipesim.compute.trajectory import LengthTrajectory
    from pipesim.compute.workload import EmpiricalLengths
    from pipesim.workload.durations import TraceDurations

    read: dict[str, Callable[[Path], object]] = {
        "lengths": lambda p: EmpiricalLengths.from_csv(p, "tokens"),
        "trajectory": LengthTrajectory.from_csv,
        "measured": read_measurements,
        "durations": lambda p: TraceDurations.from_csv(p, "seconds"),
    }
    path = make_special(tmp_path / "t.csv", kind, LOG_MAX_BYTES)
    t0 = time.perf_counter()
    with pytest.raises((OSError, FieldError)) as info:
        read[reader](path)
    assert time.perf_counter() - t0 < 10
    assert "t.csv" in str(info.value) and KINDS[kind] in str(info.value)


@pytest.mark.parametrize("reader", ["lengths", "trajectory", "durations"])
@pytest.mark.parametrize("content", ["", "\n"])
def test_the_apis_csv_readers_call_an_empty_file_empty(tmp_path: Path, reader: str, content: str) -> None:
    """An empty CSV (no header line) is refused as empty, naming ``path``: it was "column
    'response_tokens' not in x.csv (columns: None)", which sent a user looking for a column."""
    from pipesim.compute.trajectory import LengthTrajectory
    from pipesim.compute.workload import EmpiricalLengths
    from pipesim.workload.durations import TraceDurations

    read: dict[str, Callable[[Path], object]] = {
        "lengths": lambda p: EmpiricalLengths.from_csv(p, "tokens"),
        "trajectory": LengthTrajectory.from_csv,
        "durations": lambda p: TraceDurations.from_csv(p, "seconds"),
    }
    path = tmp_path / "t.csv"
    path.write_text(content)
    with pytest.raises(FieldError) as info:
        read[reader](path)
    assert info.value.field == "path"
    assert "t.csv" in str(info.value) and "empty" in str(info.value)
