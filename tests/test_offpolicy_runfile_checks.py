"""A results file read back (``--table-only``, ``--resume``) has every run's values checked.

Found by a walkthrough: the three training scripts checked only that each stored run had its keys.
An edited value failed deep in the statistics (``runs[2].heldout.pass_rate = 1.7``: a traceback
ending ``FieldError: values[0] = 1.7 lies outside the quantity's bounds``, and ``--resume`` on the
same file crashed after skipping every run) or printed a wrong table with no error (``seed = "5"``
or ``true``: the run stopped pairing and a paired row fell from n=2 to n=1; ``lag = -3`` and
``correction = "bogus"`` got rows of their own). Now :func:`offpolicy.runfile.read_runs` refuses
such a record by index and field, and the scripts say so in one usage line (exit 2) naming the
file, as ``scenarios.cosim --retable`` does. Also from the walkthrough: a paired row of fewer than
10 seeds no longer prints a t-test's ``p < 0.05`` beside a sign-flip ``p=0.250``; ``--json`` into a
missing directory is refused (it made the directory) as ``--html`` and cosim's ``--json`` are;
resume refusals say their values plainly; ``offpolicy.fp8 --help`` says ``--eval-every 0`` is never.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from offpolicy import fp8, lr_sweep, staleness
from offpolicy.checks import FieldError
from offpolicy.experiment import paired_table
from offpolicy.runfile import read_runs, write_json

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--seed-list", "0", "1", "--steps", "2", "--eval-every", "0"]
SCRIPTS: dict[str, tuple[ModuleType, list[str], str | None]] = {  # module, its grid flags, its sampler
    "staleness": (staleness, ["--lags", "0", "1", "--corrections", "none"], None),
    "fp8": (fp8, ["--corrections", "none"], "exact"),
    "lr_sweep": (lr_sweep, ["--lrs", "3e-4", "--lags", "0"], None),
}


@pytest.fixture(autouse=True)
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every refusal here comes before any training: reaching it fails the test at once."""

    def reached(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a run started: the refusal must come before any training")

    for module in (staleness, lr_sweep, fp8):
        monkeypatch.setattr(module, "load_base", reached)


def step_record(step: int) -> dict[str, Any]:
    """One history step with every value a table reads."""
    shares = {"reward": 0.5, "over_cap": 0.01, "clip_frac": 0.02, "invalid": 0.0}
    return {"step": step, **shares, "mismatch": 0.1, "reads": 1.0, "health_p99": 0.3, "health_max": 0.5}


def run_record(seed: int, sampler: str | None = None, lag: int = 0) -> dict[str, Any]:
    """A finished 2-step run as the scripts write it (default lr, issue gym)."""
    return {
        "lag": lag,
        "correction": "none",
        "seed": seed,
        "lr": 3e-4,
        "steps": 2,
        "sampler": sampler,
        "gym": "issue",
        "eval_every": 0,
        "train_seconds": 1.0,
        "diverged": None,
        "history": [step_record(0), step_record(1)],
        "heldout": {"pass_rate": 0.5, "reads": 1.0, "invalid": 0.0},
    }


def results_file(path: Path, sampler: str | None, edit: Callable[[list[dict[str, Any]]], None]) -> Path:
    """A file of 3 finished runs (seeds 0, 1 and 2 of one cell), ``edit`` applied to its runs."""
    runs = [run_record(seed, sampler) for seed in range(3)]
    edit(runs)
    write_json(path, {"command": "test", "runs": runs})
    return path


def setter(*keys: Any, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    """An edit setting ``runs[keys[0]][keys[1]]...`` to ``value``."""

    def edit(runs: list[dict[str, Any]]) -> None:
        target: Any = runs
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return edit


BAD_VALUES = [  # (id, the edit, the field the error names)
    ("seed-str", setter(0, "seed", value="5"), "runs[0].seed"),
    ("seed-bool", setter(1, "seed", value=True), "runs[1].seed"),
    ("seed-negative", setter(2, "seed", value=-1), "runs[2].seed"),
    ("seed-float", setter(0, "seed", value=1.0), "runs[0].seed"),
    ("seed-huge", setter(0, "seed", value=2**64), "runs[0].seed"),
    ("lag-negative", setter(2, "lag", value=-3), "runs[2].lag"),
    ("lag-float", setter(2, "lag", value=1.0), "runs[2].lag"),
    ("lag-not-below-steps", setter(2, "lag", value=2), "runs[2].lag"),
    ("steps-zero", setter(1, "steps", value=0), "runs[1].steps"),
    ("correction-unknown", setter(2, "correction", value="bogus"), "runs[2].correction"),
    ("correction-null", setter(2, "correction", value=None), "runs[2].correction"),
    ("sampler-unknown", setter(0, "sampler", value="fp16"), "runs[0].sampler"),
    ("gym-unknown", setter(0, "gym", value="other"), "runs[0].gym"),
    ("lr-zero", setter(0, "lr", value=0), "runs[0].lr"),
    ("lr-nan", setter(0, "lr", value=math.nan), "runs[0].lr"),
    ("lr-str", setter(0, "lr", value="3e-4"), "runs[0].lr"),
    ("diverged-str", setter(0, "diverged", value="yes"), "runs[0].diverged"),
    ("heldout-not-a-record", setter(1, "heldout", value=0.5), "runs[1].heldout"),
    ("pass-rate-above-1", setter(2, "heldout", "pass_rate", value=1.7), "runs[2].heldout.pass_rate"),
    ("pass-rate-nan", setter(2, "heldout", "pass_rate", value=math.nan), "runs[2].heldout.pass_rate"),
    ("pass-rate-negative", setter(0, "heldout", "pass_rate", value=-0.5), "runs[0].heldout.pass_rate"),
    ("pass-rate-str", setter(0, "heldout", "pass_rate", value="0.5"), "runs[0].heldout.pass_rate"),
    ("pass-rate-bool", setter(0, "heldout", "pass_rate", value=True), "runs[0].heldout.pass_rate"),
    ("reads-negative", setter(1, "heldout", "reads", value=-1.0), "runs[1].heldout.reads"),
    ("invalid-above-1", setter(1, "heldout", "invalid", value=2.0), "runs[1].heldout.invalid"),
    ("history-not-a-list", setter(0, "history", value={"reward": 0.5}), "runs[0].history"),
    ("history-step-not-a-record", setter(0, "history", 1, value=3), "runs[0].history[1]"),
    ("history-step-negative", setter(0, "history", 1, "step", value=-1), "runs[0].history[1].step"),
    ("history-reward-above-1", setter(1, "history", 1, "reward", value=1.5), "runs[1].history[1].reward"),
    ("history-reward-nan", setter(1, "history", 0, "reward", value=math.nan), "runs[1].history[0].reward"),
    ("history-mismatch-neg", setter(2, "history", 0, "mismatch", value=-0.1), "runs[2].history[0].mismatch"),
    ("history-over-cap-str", setter(2, "history", 0, "over_cap", value="0"), "runs[2].history[0].over_cap"),
    ("history-health-inf", setter(2, "history", 1, "health_max", value=math.inf),
     "runs[2].history[1].health_max"),
    ("history-clip-null", setter(2, "history", 1, "clip_frac", value=None), "runs[2].history[1].clip_frac"),
]  # fmt: skip
BAD_IDS = [case[0] for case in BAD_VALUES]


@pytest.mark.parametrize(("case", "edit", "field"), BAD_VALUES, ids=BAD_IDS)
def test_read_runs_refuses_a_bad_value_naming_the_record_and_field(
    case: str, edit: Callable[[list[dict[str, Any]]], None], field: str, tmp_path: Path
) -> None:
    path = results_file(tmp_path / "runs.json", None, edit)
    with pytest.raises(FieldError) as info:
        read_runs(path)
    assert info.value.field == field and info.value.file == str(path)
    assert str(info.value).startswith(f"{path}: {field} "), str(info.value)


@pytest.mark.parametrize("mode", ["--table-only", "--resume"])
@pytest.mark.parametrize("name", list(SCRIPTS))
@pytest.mark.parametrize(("case", "edit", "field"), BAD_VALUES, ids=BAD_IDS)
def test_a_script_reading_a_bad_value_says_one_line_naming_file_record_and_field(
    case: str,
    edit: Callable[[list[dict[str, Any]]], None],
    field: str,
    name: str,
    mode: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The usage error (exit 2) before any training, never a traceback or a table of wrong rows."""
    module, grid, sampler = SCRIPTS[name]
    path = results_file(tmp_path / "runs.json", sampler, edit)
    before = path.read_bytes()
    flags = ["--table-only"] if mode == "--table-only" else [*grid, *TINY, "--resume"]
    with pytest.raises(SystemExit) as info:
        module.main([*flags, "--json", str(path)])
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert err.splitlines()[-1].startswith(f"{module.PROG}: error: {mode}: {path}: {field} "), err
    assert path.read_bytes() == before


TABLE_NEEDS = [  # (script, the field its table reads, removed from run 1's last step or record)
    ("staleness", "history.clip_frac", "runs[1].history[1].clip_frac"),
    ("staleness", "heldout.reads", "runs[1].heldout.reads"),
    ("staleness", "lag", "runs[1].lag"),
    ("fp8", "history.health_p99", "runs[1].history[1].health_p99"),
    ("fp8", "sampler", "runs[1].sampler"),
    ("lr_sweep", "history.reward", "runs[1].history[1].reward"),
    ("lr_sweep", "heldout.pass_rate", "runs[1].heldout.pass_rate"),
    ("lr_sweep", "steps", "runs[1].steps"),
]


@pytest.mark.parametrize(("name", "need", "field"), TABLE_NEEDS)
def test_table_only_refuses_a_run_without_a_field_its_table_reads(
    name: str, need: str, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was a KeyError from inside the table."""
    module, _, sampler = SCRIPTS[name]

    def drop(runs: list[dict[str, Any]]) -> None:
        where, _, key = need.rpartition(".")
        record = runs[1] if not where else runs[1][where][-1] if where == "history" else runs[1][where]
        del record[key]

    path = results_file(tmp_path / "runs.json", sampler, drop)
    with pytest.raises(SystemExit) as info:
        module.main(["--json", str(path), "--table-only"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and f"--table-only: {path}: {field} is missing" in err, err


def test_a_valid_file_is_still_tabled_and_a_resume_without_a_held_out_result_trains_it_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks refuse wrong values only: a file of good runs is tabled, and a run with no
    held-out result (null) is an unfinished one, which --resume trains again as before."""
    path = results_file(tmp_path / "runs.json", None, lambda runs: None)
    assert staleness.main(["--json", str(path), "--table-only"]) == 0
    unfinished = results_file(
        tmp_path / "unfinished.json", None, setter(1, "heldout", "pass_rate", value=None)
    )
    assert len(read_runs(unfinished)) == 3
    with pytest.raises(AssertionError, match="a run started"):  # past every check, to the training
        staleness.main([*SCRIPTS["staleness"][1], *TINY, "--json", str(unfinished), "--resume"])


def test_every_committed_results_file_passes_the_checks_of_its_table() -> None:
    from offpolicy.cli_checks import TABLE_READS

    files = sorted((ROOT / "results" / "offpolicy").rglob("*.json"))
    assert len(files) >= 10
    for path in files:
        script = next(s for s in ("lr_sweep", "fp8", "staleness", "issue_lift", "seq_tis") if s in path.name)
        prog = {"issue_lift": "staleness", "seq_tis": "staleness"}.get(script, script)
        assert read_runs(path, TABLE_READS[f"python -m offpolicy.{prog}"]), path


def test_a_paired_row_under_ten_seeds_prints_no_verdict_beside_its_p() -> None:
    """It printed ``p=0.250 | t-test p < 0.05 (n < 10: no claim)``: the interval's t-test beside
    the sign-flip p, under a header saying the verdict is that p < 0.05."""

    def run(lag: int, seed: int, rate: float) -> dict[str, Any]:
        return {"lag": lag, "correction": "none", "seed": seed, "heldout": {"pass_rate": rate}}

    runs = [run(0, s, 0.8 + 0.01 * s) for s in range(3)] + [run(8, s, 0.2 + 0.02 * s) for s in range(3)]
    runs += [run(4, s, r) for s, r in enumerate((0.9, 0.7, 0.85))]
    lines = paired_table(runs, [((8, "none"), (0, "none")), ((4, "none"), (0, "none"))]).splitlines()
    assert lines[1].endswith("| n=3 | p=0.250 | no claim (n < 10)"), lines[1]  # its interval excludes 0
    assert lines[2].endswith("| n=3 | p=1.000 | no claim (n < 10)"), lines[2]
    for line in lines[1:3]:
        assert "0.05" not in line and "significant" not in line and "t-test" not in line


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_json_into_a_missing_directory_is_refused_and_not_made(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json`` made the directory where ``--html``, ``estimator --out`` and cosim refuse it."""
    module, grid, _ = SCRIPTS[name]
    target = tmp_path / "nodir" / "x.json"
    with pytest.raises(SystemExit) as info:
        module.main([*grid, *TINY, "--json", str(target)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and f"--json {target}: no directory {target.parent}" in err, err
    assert not target.parent.exists()


RESUME_SAID = [  # (script, what the file holds, what the refusal says, what it no longer prints)
    ("fp8", lambda runs: [r.update(steps=8, history=[step_record(i) for i in range(8)]) for r in runs],
     "holds runs of 8 steps, not --steps 2: resume with --steps 8"),
    ("fp8", lambda runs: [r.update(lr=1e-3) for r in runs], "holds runs at lr 0.001, not --lr 0.0003"),
    ("fp8", lambda runs: [r.update(gym="defect") for r in runs],
     "holds runs of the defect gym, not --gym issue"),
    ("fp8", lambda runs: [r.update(sampler=None) for r in runs],
     "holds runs of offpolicy.staleness or lr_sweep (no sampler), not of offpolicy.fp8"),
    ("staleness", lambda runs: [r.update(sampler="exact") for r in runs],
     "holds runs of offpolicy.fp8 (sampler exact), not of offpolicy.staleness or lr_sweep"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "edit", "said"), RESUME_SAID)
def test_a_resume_refusal_says_the_stored_setting_plainly(
    name: str,
    edit: Callable[[list[dict[str, Any]]], None],
    said: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It printed ``holds runs of --steps ['8'], not 6`` and ``holds runs of sampler ['None'],
    another script's``."""
    module, grid, sampler = SCRIPTS[name]
    path = results_file(tmp_path / "runs.json", sampler, edit)
    with pytest.raises(SystemExit) as info:
        module.main([*grid, *TINY, "--json", str(path), "--resume"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and said in err and "['" not in err, err


def test_fp8_help_says_eval_every_0_is_never(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        fp8.main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--eval-every EVAL_EVERY evaluate the current policy every k steps (0: never)" in help_text


def test_records_are_not_changed_by_reading_them(tmp_path: Path) -> None:
    path = results_file(tmp_path / "runs.json", None, lambda runs: None)
    stored = json.loads(path.read_text())["runs"]
    assert read_runs(path) == copy.deepcopy(stored)
