"""Bad input found by an adversarial pass over the entry points, each refused with an error that
names the field (or option) and stays short: table-driven, one row per case. Each case asserts
the exception type (or exit status 2 with no traceback) and that the field's name is in the
message; no case runs a simulation, so the file takes seconds.

What the pass found: a scenario file's ``[system] name`` imported and ran any module or file (a
file is data), and a file naming itself recursed; a 100 kB key or ``--set`` value made a 100 kB
message; a run spec's ``[run]`` keys were refused as ``search.*``, and a sync time of 1e308 as a
clock overflow mid-run; ``model.mfu`` beside ``model.framework`` was refused as a profile's
``fwd_bwd_efficiency``; ``pipesim plan RUN.toml`` ignored an unknown table or a bad ``[design]``;
output paths a probe cannot write (/proc, even for root) failed after the work, ``pipesim plan``
with a traceback; a log or trace with a column given twice, a JSON true as a number, a column map
reading one column as two metrics, and a ``--scale`` overflowing were read silently or blamed the
column; ``trace`` ignored ``--set``/``--seed`` on a saved run; ``profile`` spawned any
``--allreduce-gpus`` count of processes and repeated a billion times; ``fit --model`` without
``--scenario-out`` and ``plan --cache-dir`` with ``--no-cache`` were ignored.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipesim.calibrate.log import LogError, read_log
from pipesim.io.cli import main
from pipesim.io.fit import FitError, fit_trace
from pipesim.io.scenario_files import ScenarioFileError, loads
from pipesim.plan import runspec, specfile
from pipesim.plan.checks import PlanError

ROOT = Path(__file__).resolve().parent.parent
RUN_SPEC = ROOT / "examples" / "run_verl_8gpu.toml"
LOG = ROOT / "examples" / "verl_sample_log.csv"
LONG = "k" * 100_000
MAX_MESSAGE = 1_000  # characters: the longest one-line error any case below may print
PROC = Path("/proc/self")
needs_proc = pytest.mark.skipif(not PROC.is_dir(), reason="needs /proc (a directory no file can be made in)")


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``pipesim ARGV`` in this process: its stderr, after asserting exit status 2 and no traceback."""
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own refusals
        code = e.code  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err, err
    assert len(err) < MAX_MESSAGE, err[:300]
    return err


# -- scenario files: a [system] table names a registered preset, nothing else -----------------


@pytest.mark.parametrize(
    "name",
    [
        "os:system",  # a module's function, called with the table's keys as arguments
        "this:x",  # a module whose import prints
        "selfref.toml",  # a file naming itself recursed to a RecursionError
        "/etc/passwd.py:x",
        LONG,
    ],
)
def test_a_system_table_names_a_registered_preset_only(name: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = f'schema_version = 1\n[system]\nname = "{name}"\ncommand = "touch {marker}"\n'
    (tmp_path / "selfref.toml").write_text(text)
    with pytest.raises(ScenarioFileError) as info:
        loads(text, "toml")
    assert info.value.field == "system.name"
    assert "system.name" in str(info.value) and len(str(info.value)) < MAX_MESSAGE
    assert not marker.exists()


# -- a user's key or value is named, bounded --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (f"schema_version = 1\n{LONG} = 1\n", LONG),
        (f"schema_version = 1\n[pipeline]\n{LONG} = 1\n", f"pipeline.{LONG}"),
        (f'schema_version = 1\n[system]\nname = "systems:areal"\n{LONG} = 1\n', f"system.{LONG}"),
    ],
    ids=["top", "pipeline", "system-knob"],
)
def test_a_scenario_files_long_unknown_key_is_named_bounded(text: str, field: str) -> None:
    with pytest.raises(ScenarioFileError) as info:
        loads(text, "toml")
    err = info.value
    assert err.field.startswith(field[:20]) and err.field in str(err)
    assert len(str(err)) < MAX_MESSAGE


SPEC_TEXT = RUN_SPEC.read_text()


@pytest.mark.parametrize(
    ("data_edit", "sets", "field"),
    [
        (f"\n[{LONG}]\na = 1\n", [], LONG[:20]),
        ("", [f"design.{LONG}=1"], f"design.{LONG[:20]}"),
        ("", [f"{LONG}.x=1"], LONG[:20]),
        ("", [f"design.{LONG}.x=1"], f"design.{LONG[:20]}"),
    ],
    ids=["table", "set-key", "set-table", "set-nested"],
)
def test_a_run_specs_long_unknown_key_is_named_bounded(
    data_edit: str, sets: list[str], field: str, tmp_path: Path
) -> None:
    path = tmp_path / "r.toml"
    path.write_text(SPEC_TEXT + data_edit)
    with pytest.raises(PlanError) as info:
        runspec.load(path, sets)
    err = info.value
    assert err.field.startswith(field) and err.field in str(err)
    assert len(str(err)) < MAX_MESSAGE


def test_a_long_set_value_is_named_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    err = cli(["run", "async-eta2", "--set", f"name={LONG}"], capsys)
    assert "name=" in err


# -- run specs: [run] keys are named as the file names them, before anything runs --------------


@pytest.mark.parametrize(
    ("sets", "field"),
    [
        (["run.steps=1000000000000"], "run.steps"),
        (["run.steps=2000000"], "run.steps"),  # x the batch: more tasks than a run may draw
        (["run.sync_time_s=1e308"], "run.sync_time_s"),  # overflowed the clock mid-run, unnamed
        (["run.sync_time_s=604801"], "run.sync_time_s"),  # over a week: a unit slip
        (["run.inflight_load_time_s=1e308"], "run.inflight_load_time_s"),
        (["run.sync_time_s=nan"], "run.sync_time_s"),
        (["model.mfu=0"], "model.mfu"),  # beside model.framework: named fwd_bwd_efficiency
        (["model.mfu=2"], "model.mfu"),
        (["model.mfu=nan"], "model.mfu"),
    ],
)
def test_a_run_specs_bad_value_names_its_key(sets: list[str], field: str) -> None:
    with pytest.raises(PlanError) as info:
        runspec.load(RUN_SPEC, sets)
    assert info.value.field == field
    assert field in str(info.value) and "search." not in str(info.value)


@pytest.mark.parametrize(
    ("sets", "field"),
    [
        (["search.sync_time_s=1e308"], "search.sync_time_s"),
        (["search.inflight_load_time_s=1e308"], "search.inflight_load_time_s"),
        (["model.mfu=0", "model.framework=fsdp2-dense"], "model.mfu"),
    ],
)
def test_a_plan_specs_bad_value_names_its_key(sets: list[str], field: str) -> None:
    with pytest.raises(PlanError) as info:
        specfile.load(ROOT / "examples" / "plan_qwen3_8b.toml", sets)
    assert info.value.field == field and field in str(info.value)


@pytest.mark.parametrize(
    ("edit", "sets", "field"),
    [
        ("\n[bogus]\na = 1\n", [], "bogus"),
        ("", ["design.update=zzz"], "design.update"),
        ("", ["design.bogus=1"], "design.bogus"),
        ("", ["run.stpes=3"], "run.stpes"),
        ("", ["run.sync_time_s=1e308"], "run.sync_time_s"),
    ],
)
def test_plan_of_a_run_spec_checks_the_whole_spec(
    edit: str, sets: list[str], field: str, tmp_path: Path
) -> None:
    """``pipesim plan RUN.toml`` read only [cluster], [model], [workload] and the sync times: an
    unknown table, a bad [design] or a typo in [run] was ignored without a word."""
    path = tmp_path / "r.toml"
    path.write_text(SPEC_TEXT + edit)
    with pytest.raises(PlanError) as info:
        specfile.load(path, sets)
    assert info.value.field == field and field in str(info.value)


# -- output paths: a directory no file can be made in is refused before the work --------------


@needs_proc
@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["run", "async-eta2", "--json", "/proc/x.json"], "--json"),
        (["run", "async-eta2", "--events", "/proc/x.csv"], "--events"),
        (["run", "async-eta2", "--save", "/proc/xx"], "--save"),
        (["export", "async-eta2", "--out", "/proc/x.toml"], "--out"),
        (["calibrate", str(LOG), "--spec", str(RUN_SPEC), "--out", "/proc/x.toml"], "--out"),
        (["plan", str(RUN_SPEC), "--json", "/proc/x.json"], "--json"),
        (["plan", str(RUN_SPEC), "--export-best", "/proc/x.toml"], "--export-best"),
        (["plan", str(RUN_SPEC), "--cache-dir", "/proc/x"], "--cache-dir"),
        (["profile", "--model", "tiny", "--device", "cpu", "--out", "/proc/x.csv"], "--out"),
    ],
)
def test_an_output_no_file_can_be_made_in_is_refused_first(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``os.access`` says yes to root in /proc: the run, the plan or the calibration ran, then its
    write failed naming a temporary file (and ``pipesim plan`` with a traceback)."""
    assert option in cli(argv, capsys)


def test_a_plan_output_that_fails_after_the_search_names_its_option(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import argparse

    import pipesim.plan as plan
    from pipesim.io.cli_common import UsageError
    from pipesim.plan import report

    def full(result: object, path: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report, "write_json", full)
    args = argparse.Namespace(json="plan.json", html=None, csv=None, parquet=None)
    with pytest.raises(UsageError, match="--json plan.json"):
        plan._write_all(object(), args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--no-cache", "--cache-dir", "somewhere"], "--cache-dir"),
        (["--cache-dir", "FILE/sub"], "--cache-dir"),
    ],
)
def test_a_plan_cache_that_cannot_be_used_is_refused_first(
    extra: list[str], option: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "FILE").write_text("x")
    extra = [e.replace("FILE", str(tmp_path / "FILE")) for e in extra]
    assert option in cli(["plan", str(RUN_SPEC), *extra], capsys)


# -- training logs and traces: a column given twice, a flag as a number, one column as two ------


def _log_rows() -> tuple[list[str], list[list[str]]]:
    lines = LOG.read_text().splitlines()
    return lines[0].split(","), [ln.split(",") for ln in lines[1:]]


def _jsonl(tmp_path: Path, edit: str) -> Path:
    header, rows = _log_rows()
    path = tmp_path / "log.jsonl"
    out = []
    for i, row in enumerate(rows):
        d: dict[str, object] = {k: float(v) for k, v in zip(header, row, strict=True)}
        if edit == "bool" and i == 2:
            d["timing_s/gen"] = True
        text = json.dumps(d)
        if edit == "dupkey":
            text = text[:-1] + ', "timing_s/gen": 1.0}'
        out.append(text)
    path.write_text("\n".join(out) + "\n")
    return path


@pytest.mark.parametrize(
    ("case", "columns", "field"),
    [
        ("csv-dup", None, "timing_s/gen"),  # pandas renamed the second to timing_s/gen.1
        ("jsonl-dup", None, "timing_s/gen"),  # json kept the last
        ("jsonl-bool", None, "timing_s/gen"),  # read as 1 s
        ("map-twice", {"timing_s/gen": "timing_s/step", "timing_s/step": "timing_s/step"}, "timing_s/step"),
        ("map-step", {"timing_s/gen": "step"}, "step"),
    ],
)
def test_a_log_read_two_ways_is_refused_naming_the_column(
    case: str, columns: dict[str, str] | None, field: str, tmp_path: Path
) -> None:
    if case == "csv-dup":
        path = tmp_path / "log.csv"
        path.write_text(LOG.read_text().replace("timing_s/step", "timing_s/gen", 1))
    elif case.startswith("jsonl"):
        path = _jsonl(tmp_path, "dupkey" if case == "jsonl-dup" else "bool")
    else:
        path = LOG
    with pytest.raises(LogError) as info:
        read_log(path, columns)
    assert info.value.field == field and repr(field) in str(info.value)


def test_a_column_the_map_gives_to_another_metric_is_not_read_as_its_own() -> None:
    log = read_log(LOG, {"timing_s/gen": "timing_s/step"})
    assert "timing_s/step" not in log.frame.columns
    assert any(n.startswith("timing_s/step:") for n in log.notes)


@pytest.mark.parametrize(("case", "field"), [("dup", "d"), ("scale", "--scale")])
def test_a_fit_of_an_ambiguous_or_overflowing_column_names_it(case: str, field: str, tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    values = [float(10 + i) for i in range(40)]
    if case == "dup":
        path.write_text("d,d\n" + "\n".join(f"{v},{v * 100}" for v in values) + "\n")
    else:
        path.write_text("d\n" + "\n".join(map(str, values)) + "\n")
    with pytest.raises(FitError) as info:
        fit_trace(path, "d", scale=1e308 if case == "scale" else 1.0)
    assert info.value.field == field and field in str(info.value)


# -- command-line flags that were ignored or unbounded ----------------------------------------


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["trace", "SAVED", "--out", "t.json", "--set", "steps=3"], "--set"),
        (["trace", "SAVED", "--out", "t.json", "--seed", "3"], "--seed"),
        (["trace", "EVENTS", "--out", "t.json", "--seed", "3"], "--seed"),
        (["trace", "RECIPE", "--out", "t.json"], "set"),  # a string's characters were read as pairs
        (["fit", "TRACE", "--column", "d", "--model", "agent"], "--model"),
        (
            ["profile", "--model", "tiny", "--device", "cpu", "--out", "p.csv", "--repeats", "1000000000"],
            "--repeats",
        ),
        (
            ["profile", "--model", "tiny", "--device", "cpu", "--out", "p.csv", "--warmup", "1000000"],
            "--warmup",
        ),
        (
            [
                "profile",
                "--model",
                "tiny",
                "--out",
                "p.csv",
                "--allreduce-gpus",
                "100000",
                "--allreduce-backend",
                "gloo",
            ],
            "--allreduce-gpus",
        ),
        (
            ["profile", "--model", "tiny", "--device", "cpu", "--out", "p.csv", "--allreduce-backend", "zzz"],
            "--allreduce-backend",
        ),
        (["profile", "--config", "TRACE", "--device", "cpu", "--out", "p.csv"], "--config"),
        (["profile", "--config", "SAVED", "--device", "cpu", "--out", "p.csv"], "--config"),
        (["run", "PLAN"], "pipesim plan"),  # a plan spec read as a scenario: 'schema_version: missing'
        # a saved run's page draws the run as it was: --seeds and --workers were ignored
        (["report", "SAVED", "--seeds", "5"], "--seeds"),
        (["report", "SAVED", "--workers", "2"], "--workers"),
        # a key both set and swept: the axis replaced the set value in every cell without a word
        (["sweep", "async-eta2", "--set", "max_staleness=3", "--over", "max_staleness=1,2"], "max_staleness"),
        (
            ["sweep", "async-eta2", "--set", "durations.tool_median_s=3", "--over", "durations=x,y"],
            "durations",
        ),
    ],
)
def test_a_flag_that_would_be_ignored_or_run_unbounded_is_refused(
    argv: list[str],
    option: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "saved").mkdir()
    (tmp_path / "events.csv").write_text("kind,lane\n")
    (tmp_path / "trace.csv").write_text("d\n" + "\n".join(str(10.0 + i) for i in range(40)) + "\n")
    recipe = {"recipe": {"scenario": "async-eta2", "set": "steps=2", "seed": 0}}
    (tmp_path / "run.json").write_text(json.dumps(recipe))
    shutil.copy(ROOT / "examples" / "plan_qwen3_8b.toml", tmp_path / "plan.toml")
    names = {
        "SAVED": "saved",
        "EVENTS": "events.csv",
        "TRACE": "trace.csv",
        "RECIPE": "run.json",
        "PLAN": "plan.toml",
    }
    assert option in cli([names.get(a, a) for a in argv], capsys)
