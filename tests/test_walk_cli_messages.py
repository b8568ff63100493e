"""A user walkthrough's messages and help texts that said the wrong thing, or too little.

5. ``pipesim calibrate LOG --spec LOG.csv`` said "a plan spec is TOML" (``--spec`` takes a run
   spec), and ``--spec areal.toml`` (a scenario file) said ``kind must be "compute" ..., got None``;
   both now say what ``--spec`` wants and what the file is.
6. A log whose verl column is misspelt (``timing_s/update_acter``) calibrated without the phase,
   with only "no timing_s/update_actor column"; a note now names the column the log has.
7. Help: fit's input named "(CSV or JSONL)" of seven suffixes; ``--policies`` named ``--set`` and
   ``--over`` on commands without them; ``report --out``, ``fit --base`` and ``fit --scale`` did not
   state their defaults; ``pipesim plan``'s usage showed the required SPEC as ``[SPEC]``.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from pipesim.calibrate import read_log
from pipesim.io.cli import main
from pipesim.io.cli_parser import FIT_SUFFIXES, build_parser
from pipesim.io.fit_readers import TEXT_SUFFIXES
from pipesim.plan import parser as plan_parser
from pipesim.plan import runspec
from pipesim.plan.checks import PlanError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
LOG = str(EXAMPLES / "verl_sample_log.csv")
RUN_SPEC = str(EXAMPLES / "run_verl_8gpu.toml")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


# -- 5. calibrate --spec given the wrong file -----------------------------------------------------


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("scenario") / "areal.toml"
    assert main(["export", "systems:areal", "--out", str(path)]) == 0
    return str(path)


@pytest.mark.parametrize(
    ("spec", "field", "says"),
    [
        ("log", "", ".csv"),  # what the file is: its suffix
        ("scenario", "kind", "scenario file"),
    ],
)
def test_a_run_spec_read_from_another_file_says_what_the_file_is(
    spec: str, field: str, says: str, scenario_file: str
) -> None:
    path = LOG if spec == "log" else scenario_file
    with pytest.raises(PlanError) as info:
        runspec.load(path)
    err = info.value
    assert err.field == field and err.file == path, (err.field, err.file)
    assert "run spec" in str(err) and says in str(err) and "plan spec" not in str(err), str(err)


@pytest.mark.parametrize("spec", ["log", "scenario"])
def test_calibrate_spec_of_another_file_names_spec_and_the_file(
    spec: str, scenario_file: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = LOG if spec == "log" else scenario_file
    out = tmp_path / "x.toml"
    assert main(["calibrate", LOG, "--spec", path, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"pipesim: error: --spec {path}: ") and "run spec" in err, err
    assert ("calibrate LOG --spec" in err) is (spec == "log")  # a log: the log is the first argument
    assert ("scenario file" in err) is (spec == "scenario")
    assert not out.exists()


# -- 6. a misspelt verl column -------------------------------------------------------------------


def _log_with(tmp_path: Path, old: str, new: str) -> Path:
    text = Path(LOG).read_text()
    header, rest = text.split("\n", 1)
    assert old in header.split(",")
    path = tmp_path / "log.csv"
    path.write_text(",".join(new if c == old else c for c in header.split(",")) + "\n" + rest)
    return path


@pytest.mark.parametrize(
    ("old", "new", "near"),
    [
        ("timing_s/update_actor", "timing_s/update_acter", True),
        ("timing_s/update_actor", "Timing_s/Update_Actor", True),  # case
        ("timing_s/param_sync", "timing_s/param_synch", True),
        ("timing_s/update_actor", "timing_s/update_critic", False),  # another verl metric, not a slip
        ("response_length/mean", "response_length/min", False),
        ("timing_s/update_actor", "my_column", False),
    ],
)
def test_a_near_miss_of_a_verl_column_is_named_in_a_note(
    tmp_path: Path, old: str, new: str, near: bool
) -> None:
    log = read_log(_log_with(tmp_path, old, new))
    notes = [n for n in log.notes if n.startswith(f"{old}:")]
    assert bool(notes) is near, log.notes
    if near:
        assert repr(new) in notes[0], notes
    assert not log.has(old)  # the column is still not read under a name it does not have


def test_a_log_with_verls_names_gets_no_near_miss_note() -> None:
    assert not [n for n in read_log(LOG).notes if "misspelt" in n]


# -- 7. help texts -------------------------------------------------------------------------------


def test_fit_help_names_every_suffix_fit_reads() -> None:
    assert set(FIT_SUFFIXES) == {*TEXT_SUFFIXES, ".json", ".parquet"}
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    fit = sub.choices["fit"]
    trace = next(a for a in fit._actions if a.dest == "trace")
    assert all(s in (trace.help or "") for s in FIT_SUFFIXES), trace.help
    listed = next(a.help for a in sub._choices_actions if a.dest == "fit")  # its line in pipesim --help
    for text in (listed or "", fit.description or ""):
        assert "CSV or JSONL" not in text and all(k in text for k in ("TSV", "JSON lines", "Parquet")), text


def test_the_policies_help_names_only_options_its_command_takes() -> None:
    for name, sp in _subcommands().items():
        action = sp._option_string_actions.get("--policies")
        if action is None:
            continue
        named = set(re.findall(r"--[a-z][a-z-]*", action.help or ""))
        assert named and named <= set(sp._option_string_actions), (name, named)


@pytest.mark.parametrize(("command", "dest"), [("report", "out"), ("fit", "base"), ("fit", "scale")])
def test_an_options_help_states_its_default(command: str, dest: str) -> None:
    action = next(a for a in _subcommands()[command]._actions if a.dest == dest)
    default = action.default if not isinstance(action.default, float) else f"{action.default:g}"
    assert f"default {default}" in (action.help or ""), action.help


def test_plan_usage_shows_spec_as_required(capsys: pytest.CaptureFixture[str]) -> None:
    usage = plan_parser().format_usage()
    assert "[SPEC]" not in usage and re.search(r"\bSPEC\b", usage), usage
    assert main(["plan"]) == 2
    assert "SPEC" in capsys.readouterr().err
