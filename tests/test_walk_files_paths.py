"""A path given where a scenario is named is called what it is, not an unknown scenario:
``pipesim run /tmp`` was "unknown scenario '/tmp'", and ``pipesim compare fig13.1-sync
runs/nosuch`` "unknown scenario 'runs/nosuch'". An existing directory (a saved run's, or another),
a FIFO, or a path with a separator where nothing is, is named as such (field ``scenario``, the
path as the file); a name that is no path is still an unknown scenario, with the closest names.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.io.registry import resolve

pytestmark = pytest.mark.timeout(30)


def _make(where: Path, kind: str) -> None:
    if kind == "directory":
        where.mkdir()
    elif kind == "saved-run":
        where.mkdir()
        (where / "meta.json").write_text(json.dumps({"format": "pipesim-run", "version": 2}))
    elif kind == "fifo":
        os.mkfifo(where)
    elif kind != "missing":
        raise AssertionError(kind)


# the kind of path, its argument (relative to the folder the command runs in), a word said
PATHS = [
    ("directory", "adir.csv", "directory"),
    ("directory", "runs/old", "directory"),
    ("saved-run", "runs/eta1", "saved run"),
    ("missing", "runs/nosuch", "no such file"),
    ("fifo", "ff.csv", "FIFO"),
]


@pytest.mark.parametrize(("kind", "arg", "word"), PATHS, ids=[f"{k}-{a}" for k, a, _ in PATHS])
def test_a_path_is_not_called_an_unknown_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, arg: str, word: str
) -> None:
    if kind == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("FIFOs are POSIX's")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    _make(tmp_path / arg, kind)
    with pytest.raises(FieldError) as info:
        resolve(arg)
    said = str(info.value)
    assert info.value.field == "scenario" and info.value.file == arg, said
    assert word in said and "unknown scenario" not in said, said
    assert "async-eta1" in said  # the valid scenarios, still listed


def test_a_name_that_is_no_path_is_still_an_unknown_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FieldError) as info:
        resolve("asynk-eta1")
    assert info.value.field == "scenario" and "unknown scenario" in str(info.value)


@pytest.mark.parametrize(
    ("argv", "arg", "word"),
    [
        (["run", "{tmp}"], "{tmp}", "directory"),
        (["run", "runs/nosuch"], "runs/nosuch", "no such file"),
        (["compare", "fig13.1-sync", "runs/nosuch"], "runs/nosuch", "no such file"),
        (["export", "runs/nosuch", "--out", "x.toml"], "runs/nosuch", "no such file"),
    ],
    ids=["run-directory", "run-missing", "compare-missing", "export-missing"],
)
def test_the_cli_names_the_path(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    arg: str,
    word: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and arg.format(tmp=tmp_path) in err, err
    assert word in err and "unknown scenario" not in err, err
