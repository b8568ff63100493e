"""``--resume`` in the training scripts: an interrupted study continues without redoing a run.

Measured before (tiny settings: ``--corrections none tis --seed-list 0 1 --steps 10 --eval-every
0``, ``timeout -s INT 7``): ``python -m offpolicy.fp8`` stopped by Ctrl-C or SIGTERM kept its 3
finished runs in a valid JSON, but nothing could continue them: ``--resume`` was an unknown
argument and a rerun onto the file was refused ("holds 6 finished runs; choose another path"), so
the user redid every run. ``lr_sweep`` and ``staleness`` resumed, but a resume with another
``--gym`` silently put the other gym's runs in the new table, and a staleness or lr-sweep resume
onto an fp8 file counted fp8-sampler runs as lag-0 runs. The scripts now share one loop
(:func:`offpolicy.runfile.run_cells`).

Each in-process case interrupts the real script at its third run (``run_one`` raises
KeyboardInterrupt there, as Ctrl-C does mid-run), resumes it counting the runs it trains, and
compares the final table with an uninterrupted run's (same process, same seeds, one thread:
training is deterministic here, so the tables are equal to the digit) for one script
(:data:`FRESH`), with the table ``--table-only`` renders from the resumed file for the others.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from offpolicy import experiment, fp8, lr_sweep, staleness
from offpolicy.gym import DEFAULT_GYM
from offpolicy.interrupts import INTERRUPTED
from offpolicy.runfile import complete, read_runs, write_json
from tests.test_offpolicy_interrupts import check_one_line, interrupt_after_first_run

TINY = ["--seed-list", "0", "1", "--steps", "2", "--eval-every", "0"]
ONE_SEED = ["--seed-list", "0", *TINY[3:]]
SCRIPTS: dict[str, tuple[ModuleType, list[str], int]] = {  # module, its grid flags, runs per seed
    "fp8": (fp8, ["--corrections", "none", "tis"], 3),  # the exact sampler's run and fp8's two
    "lr_sweep": (lr_sweep, ["--lrs", "3e-4", "1e-3", "3e-3", "--lags", "0"], 3),
    "staleness": (staleness, ["--lags", "0", "1", "--corrections", "none", "tis"], 3),  # cross: 0 none,
}  # 1 none, 1 tis (lags < --steps 2)


FRESH = "staleness"
"""The script whose resumed table is compared with a fresh study's (trained again: a third of the
test's time). The three share the resume loop (:func:`offpolicy.runfile.run_cells`, which returns
the runs in the grid's order), the training of a run (:func:`offpolicy.experiment.run_one`, seeded
by its own seed) and the table's writer (``show_table``); only the table's layout is each script's
own. So the others check their printed table against ``--table-only`` on the resumed file: the
same layout of the same runs read back, with no training."""


@cache
def _built_base(gym: str) -> tuple[Any, Any, dict[str, float]]:
    return experiment.load_base(gym)


def shared_load_base(gym: str = DEFAULT_GYM) -> tuple[Any, Any, dict[str, float]]:
    """:func:`offpolicy.experiment.load_base`, made once per process (its held-out evaluation of
    the base is most of a tiny study's start): each call gets its own copy of the model, the
    tokenizer and the stats, so no test sees what another did to them."""
    base, tok, held = _built_base(gym)
    return copy.deepcopy(base), copy.deepcopy(tok), dict(held)


@pytest.fixture(autouse=True)
def shared_base(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripts load the base through :func:`shared_load_base` (a test may patch it again)."""
    for module in (fp8, lr_sweep, staleness):
        monkeypatch.setattr(module, "load_base", shared_load_base)


EVAL_EPISODES = 1
"""Held-out episodes per task of each run trained through :func:`counting` (the scripts' run_one
evaluates 8 per task, 320 in all, most of a 2-step run's time): 40 episodes still give each run its
own pass rate, and every table compared here is made of runs evaluated alike."""


def counting(module: ModuleType, monkeypatch: pytest.MonkeyPatch, stop_at: int | None = None) -> list[int]:
    """Wrap ``module.run_one``: -> a list that grows by one per run trained (evaluated on
    :data:`EVAL_EPISODES` per task); with ``stop_at``, the ``stop_at``-th run raises
    KeyboardInterrupt (Ctrl-C in the middle of that run)."""
    real: Callable[..., dict[str, Any]] = module.run_one
    calls: list[int] = []

    def run_one(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(1)
        if stop_at is not None and len(calls) == stop_at:
            raise KeyboardInterrupt
        return real(*args, **kwargs, eval_episodes=EVAL_EPISODES)

    monkeypatch.setattr(module, "run_one", run_one)
    return calls


# lr_sweep's and fp8's cases run the loop, the training and the table writer staleness's runs
# (FRESH's docstring): one more script each through them, run by make test-full; fp8's resume is
# also run whole, from a real SIGINT, by test_sigint_then_resume_of_fp8_keeps_the_finished_runs
RESUMED = [pytest.param(n, marks=pytest.mark.full) if n != FRESH else n for n in SCRIPTS]


@pytest.mark.parametrize("name", RESUMED)
def test_an_interrupted_study_resumes_without_redoing_a_run_and_prints_the_same_table(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module, grid, total = SCRIPTS[name]  # one seed: a grid of 3 runs, 2 finished when stopped
    out, full = tmp_path / "runs.json", tmp_path / "full.json"
    with monkeypatch.context() as m:
        counting(module, m, stop_at=3)
        assert module.main([*grid, *ONE_SEED, "--json", str(out)]) == INTERRUPTED
    assert "--resume continues" in capsys.readouterr().err
    finished = read_runs(out)  # the file parses: never half-written
    assert len(finished) == 2 and all(complete(r, module.KEY_FIELDS) for r in finished)
    assert not list(tmp_path.glob("*.tmp"))

    with monkeypatch.context() as m:
        calls = counting(module, m)
        assert module.main([*grid, *ONE_SEED, "--json", str(out), "--resume"]) == 0
    assert len(calls) == total - 2  # the two finished runs were not trained again
    resumed = read_runs(out)
    assert resumed[:2] == finished and len(resumed) == total  # kept as they were (same train_seconds)

    table = out.with_suffix(".txt").read_text()
    if name == FRESH:  # the uninterrupted study, trained again, prints the same table
        with monkeypatch.context() as m:
            counting(module, m)  # its runs evaluated as the resumed study's were
            assert module.main([*grid, *ONE_SEED, "--json", str(full)]) == 0
        assert table == full.with_suffix(".txt").read_text()
    else:  # the table printed is the script's table of the runs the file holds, re-rendered alone
        assert module.main([*grid, *ONE_SEED, "--json", str(out), "--table-only"]) == 0
        assert out.with_suffix(".txt").read_text() == table


def test_sigint_then_resume_of_fp8_keeps_the_finished_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real Ctrl-C (SIGINT to the process group) of ``python -m offpolicy.fp8``: 4 runs of 1
    step (the exact and the fp8 sampler, 2 seeds); the signal lands after the first. Then the
    resume of the file that process left, in this process (the signal is the process's part;
    ``main`` is what ``python -m`` runs), training only the runs the file lacks."""
    out = tmp_path / "runs.json"
    argv = ["--corrections", "none", "--seed-list", "0", "1", "--steps", "1", "--eval-every", "0"]
    rc, err, runs, seen = interrupt_after_first_run("offpolicy.fp8", [*argv, "--json", str(out)], out)
    check_one_line(rc, err, runs, seen, "python -m offpolicy.fp8", out)
    assert "--resume" in err
    calls = counting(fp8, monkeypatch)
    assert fp8.main([*argv, "--json", str(out), "--resume"]) == 0
    after = read_runs(out)
    assert after[: len(runs)] == runs and len(after) == 4  # the finished ones untouched, the rest added
    assert len(calls) == 4 - len(runs)  # and only the rest trained


def run_record(sampler: str | None, seed: int, **over: Any) -> dict[str, Any]:
    """A stored run as the scripts write it (no training needed to test a refusal)."""
    run = {"lag": 0, "correction": "none", "seed": seed, "lr": 3e-4, "steps": 2, "sampler": sampler}
    run |= {"gym": "issue", "eval_every": 0, "train_seconds": 1.0, "diverged": None}
    run |= {
        "history": [{"step": 0}, {"step": 1}],
        "heldout": {"pass_rate": 0.5, "reads": 1.0, "invalid": 0.0},
    }
    return run | over


REFUSALS = [  # (script, what the file holds, the setting the refusal names)
    ("fp8", [run_record("exact", 0, gym="defect")], "--gym"),
    ("fp8", [run_record("exact", 0, steps=3)], "--steps"),
    ("fp8", [run_record("exact", 0, lr=1e-3)], "--lr"),
    ("fp8", [run_record(None, 0)], "sampler"),  # a staleness file
    ("fp8", [{k: v for k, v in run_record("exact", 0).items() if k != "gym"}], "--gym"),  # defect, unsaid
    ("lr_sweep", [run_record(None, 0, gym="defect")], "--gym"),
    ("lr_sweep", [run_record("fp8", 0)], "sampler"),  # an fp8 file: its runs are not lag-0 runs
    ("staleness", [run_record("exact", 0)], "sampler"),
    ("staleness", [{k: v for k, v in run_record(None, 0).items() if k != "gym"}], "--gym"),  # defect, unsaid
]


@pytest.mark.parametrize(("name", "stored", "setting"), REFUSALS)
def test_a_resume_onto_runs_of_other_settings_is_refused_naming_the_setting_and_file(
    name: str,
    stored: list[dict[str, Any]],
    setting: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    module, grid, _ = SCRIPTS[name]
    out = tmp_path / "runs.json"
    write_json(out, {"runs": stored})
    calls = counting(module, monkeypatch)
    with pytest.raises(SystemExit) as info:
        module.main([*grid, *TINY, "--json", str(out), "--resume"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and setting in err and str(out) in err, err
    assert not calls and json.loads(out.read_text()) == {"runs": stored}  # nothing trained or written


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_a_resume_with_the_same_settings_is_not_refused(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, grid, _ = SCRIPTS[name]
    out = tmp_path / "runs.json"
    sampler = "exact" if name == "fp8" else None
    write_json(out, {"runs": [run_record(sampler, 0)]})
    stop = counting(module, monkeypatch, stop_at=1)  # gets past the checks, stops at the first run
    assert module.main([*grid, *TINY, "--json", str(out), "--resume"]) == INTERRUPTED and stop


def test_an_incomplete_stored_run_is_trained_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs.json"
    whole = run_record("exact", 0)
    short = run_record("exact", 1, history=[{"step": 0}])  # 1 of its 2 steps, not diverged
    write_json(out, {"runs": [whole, short]})
    trained: list[tuple[str, int]] = []

    def one_run(args: Any, base: Any, tok: Any, sampler: str, correction: str, seed: int) -> dict[str, Any]:
        trained.append((sampler, seed))
        return run_record(sampler, seed, correction=correction)

    monkeypatch.setattr(fp8, "load_base", lambda gym: (None, None, {"pass_rate": 0.2}))
    monkeypatch.setattr(fp8, "one_run", one_run)
    monkeypatch.setattr(fp8, "fp8_table", lambda runs, corrections: "table")
    assert fp8.main(["--corrections", "none", *TINY, "--json", str(out), "--resume"]) == 0
    assert trained == [("exact", 1), ("fp8", 0), ("fp8", 1)]
    assert "1 incomplete run" in capsys.readouterr().err
    assert [(r["sampler"], r["seed"]) for r in read_runs(out)] == [("exact", 0), *trained]
    assert not complete(short, fp8.KEY_FIELDS) and complete(whole, fp8.KEY_FIELDS)
    assert complete(short | {"diverged": {"step": 1}}, fp8.KEY_FIELDS)  # a diverged run is finished
