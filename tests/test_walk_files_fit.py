"""``pipesim fit``'s inputs, as a user walkthrough found them:

- a directory, a FIFO or a link to a device given as the trace, or as user code (``./x.py:make``),
  was "no such file"; each is named as what it is, as the other commands name it
  (:mod:`pipesim.core.readfile`), and a missing file is still "no such file";
- an empty trace was pandas' "No columns to parse from file"; it is "the file is empty";
- ``--base`` without ``--scenario-out`` was ignored without a word where it changes nothing (its
  agent model is the default's, or it has none); it is refused, naming ``--base``, as ``--model``
  is. A base whose agent model differs still shapes the agent fit, and is taken.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.io.fit_readers import FitError, read_table
from pipesim.io.user_code import import_factory
from tests.special_paths import KINDS, make_special

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX's"),
]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_a_trace_that_is_no_file_is_named_as_what_it_is(tmp_path: Path, suffix: str, kind: str) -> None:
    path = make_special(tmp_path / f"t{suffix}", kind)
    t0 = time.perf_counter()
    with pytest.raises(FitError) as info:
        read_table(path)
    assert time.perf_counter() - t0 < 10
    said = str(info.value)
    assert info.value.file == str(path) and info.value.field == "", said
    assert KINDS[kind] in said and "no such file" not in said, said


def test_a_missing_trace_is_still_no_such_file(tmp_path: Path) -> None:
    with pytest.raises(FitError) as info:
        read_table(tmp_path / "nope.csv")
    assert info.value.file == str(tmp_path / "nope.csv") and "no such file" in str(info.value)


@pytest.mark.parametrize("kind", ["directory", "fifo", "dev-zero"])
def test_the_cli_names_the_trace_as_what_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    path = make_special(tmp_path / "t.csv", kind)
    assert main(["fit", str(path), "--column", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and KINDS[kind] in err, err


@pytest.mark.parametrize("kind", list(KINDS))
def test_user_code_that_is_no_file_is_named_as_what_it_is(tmp_path: Path, kind: str) -> None:
    path = make_special(tmp_path / "mine.py", kind)
    spec = f"{path}:make"
    t0 = time.perf_counter()
    with pytest.raises(FieldError) as info:
        import_factory(str(path), "make", spec)
    assert time.perf_counter() - t0 < 10
    said = str(info.value)
    assert info.value.field == spec and KINDS[kind] in said and "no such file" not in said, said
    from pipesim.io.user_code import user_file_problem  # what --policies asks (pipesim.io.cli_common)

    problem = user_file_problem(str(path))
    assert problem is not None and KINDS[kind] in problem and path.name in problem


def test_user_code_missing_or_regular(tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    with pytest.raises(FieldError) as info:
        import_factory(str(missing), "make", f"{missing}:make")
    assert info.value.field == f"{missing}:make" and "no such file" in str(info.value)
    from pipesim.io.user_code import user_file_problem

    there = tmp_path / "there.py"
    there.write_text("x = 1\n")
    assert user_file_problem(there) is None


@pytest.mark.parametrize(
    ("name", "content"),
    [("e.csv", b""), ("e.csv", b"  \n\n"), ("e.tsv", b"\n"), ("e.jsonl", b""), ("e.json", b" ")],
)
def test_an_empty_trace_is_said_to_be_empty(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(FitError) as info:
        read_table(path)
    said = str(info.value).replace(str(path), "")  # the test's folder is named "...empty..."
    assert info.value.file == str(path) and info.value.field == "", said
    assert "empty" in said and "No columns" not in said, said


def _trace(tmp_path: Path) -> Path:
    x = np.random.default_rng(0).lognormal(3.0, 0.5, 200)
    path = tmp_path / "d.csv"
    path.write_text("d\n" + "\n".join(f"{v:.4f}" for v in x) + "\n")
    return path


AGENT_BASES = """
from pipesim.io.registry import get_scenario
from pipesim.workload.durations import AgentDurations, LogNormalDurations


def shaped():
    return get_scenario("synchronous").with_(durations=AgentDurations(tool_sigma=0.5))


def lognormal():
    return get_scenario("synchronous").with_(durations=LogNormalDurations())
"""


@pytest.mark.parametrize("base", ["async-eta2", "systems:areal", "{bases}:lognormal"])
def test_a_base_that_changes_nothing_without_scenario_out_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: str
) -> None:
    bases = tmp_path / "bases.py"
    bases.write_text(AGENT_BASES)
    base = base.format(bases=bases)
    assert main(["fit", str(_trace(tmp_path)), "--column", "d", "--base", base]) == 2
    err = capsys.readouterr().err
    assert "--base" in err and "--scenario-out" in err, err


def test_a_base_is_taken_with_scenario_out_or_a_shape_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _trace(tmp_path)
    out = tmp_path / "fit.toml"
    assert main(["fit", str(trace), "--column", "d", "--base", "async-eta2", "--scenario-out", str(out)]) == 0
    assert out.is_file()
    bases = tmp_path / "bases.py"
    bases.write_text(AGENT_BASES)
    capsys.readouterr()
    assert main(["fit", str(trace), "--column", "d"]) == 0
    plain = capsys.readouterr().out
    assert main(["fit", str(trace), "--column", "d", "--base", f"{bases}:shaped"]) == 0
    assert capsys.readouterr().out != plain  # the base's agent shape changed the agent fit
