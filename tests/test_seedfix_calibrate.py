"""``pipesim calibrate LOG --out OUT`` recorded ``[calibration] log`` as given, relative to the
folder it ran in: ``cd examples && pipesim calibrate verl_sample_log.csv ... --out /tmp/x/cal.toml``
wrote ``log = "verl_sample_log.csv"``, which names no file from ``/tmp/x``. The recorded path now
resolves from the written file's folder (as the spec's ``response_trace.path`` does), and the
``--json`` copy from its own."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from pipesim.calibrate.cli import recorded_log
from pipesim.io.cli import main
from pipesim.plan import specfile

ROOT = Path(__file__).resolve().parents[1]


def _setup(tmp_path: Path) -> Path:
    """``tmp_path/logs/`` with the sample log's first 8 steps (the paths are the point, not the
    fit) and its spec; returns that folder."""
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = (ROOT / "examples" / "verl_sample_log.csv").read_text().splitlines(keepends=True)
    (logs / "verl_sample_log.csv").write_text("".join(lines[:9]))  # the header and 8 steps
    shutil.copy(ROOT / "examples" / "run_verl_8gpu.toml", logs / "run_verl_8gpu.toml")
    return logs


@pytest.mark.parametrize("out", ["elsewhere/cal.toml", "elsewhere/deeper/cal.yaml", "cal.toml"])
def test_the_recorded_log_resolves_from_the_written_files_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: str
) -> None:
    logs = _setup(tmp_path)
    target = tmp_path / out
    target.parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "json").mkdir()
    monkeypatch.chdir(logs)  # the log given relative to this folder, the outputs elsewhere
    args = ["calibrate", "verl_sample_log.csv", "--spec", "run_verl_8gpu.toml", "--out", str(target)]
    assert main([*args, "--json", str(tmp_path / "json" / "cal.json"), "--quiet"]) == 0
    cal = specfile.read(str(target))["calibration"]
    log = logs / "verl_sample_log.csv"
    assert not Path(cal["log"]).is_absolute()
    assert (target.parent / cal["log"]).resolve() == log.resolve()
    assert hashlib.sha256(log.read_bytes()).hexdigest().startswith(cal["log_sha256"][:12])
    table = json.loads((tmp_path / "json" / "cal.json").read_text())
    assert (tmp_path / "json" / table["log"]).resolve() == log.resolve()
    monkeypatch.chdir(tmp_path)  # the written spec runs from another folder, its log still named
    assert main(["run", str(target), "--set", "run.steps=2"]) == 0


def test_json_on_stdout_records_the_log_from_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = _setup(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["calibrate", "logs/verl_sample_log.csv", "--spec", "logs/run_verl_8gpu.toml"]
    assert main([*args, "--out", str(tmp_path / "logs" / "cal.toml"), "--json", "-", "--quiet"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert (tmp_path / table["log"]).resolve() == (logs / "verl_sample_log.csv").resolve()
    assert specfile.read(str(logs / "cal.toml"))["calibration"]["log"] == "verl_sample_log.csv"


def test_recorded_log_is_relative_to_the_written_files_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert recorded_log("a/log.csv", "a/cal.toml") == "log.csv"
    assert recorded_log("a/log.csv", "b/c/cal.toml") == "../../a/log.csv"
    assert recorded_log(str(tmp_path / "a" / "log.csv"), "cal.toml") == "a/log.csv"
    assert recorded_log("log.csv", ".") == "log.csv"


def test_a_spec_written_elsewhere_keeps_its_log_resolvable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """export, --export-best and --save rewrite a spec's relative paths for where they write it
    (runspec_export.relocated): the calibration's log is one of them."""
    from pipesim.plan.runspec_export import relocated

    logs = _setup(tmp_path)
    monkeypatch.chdir(logs)
    args = [
        "calibrate",
        "verl_sample_log.csv",
        "--spec",
        "run_verl_8gpu.toml",
        "--out",
        "cal.toml",
        "--quiet",
    ]
    assert main(args) == 0
    moved = relocated(specfile.read(str(logs / "cal.toml")), logs, tmp_path / "other" / "spec.toml")
    log = (tmp_path / "other" / moved["calibration"]["log"]).resolve()
    assert log == (logs / "verl_sample_log.csv").resolve()
