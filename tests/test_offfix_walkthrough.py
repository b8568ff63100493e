"""What a walkthrough of the off-policy scripts and the co-simulation found (offfix).

* ``--json ''`` died with ``IsADirectoryError`` (``Path('')`` is ``.``) and ``--html ''``,
  ``--out ''``, cosim's ``--json ''`` were taken as "not given": every empty path is refused by
  its flag.
* ``scenarios.cosim --resume`` pooled runs evaluated every 4 steps with runs evaluated every step,
  so the time-to-target race compared first passages at different cadences.
* A lag of ``--steps`` or more was the same run as lag ``steps - 1`` under another label.
* Messages: cosim ``--steps 0`` named no flag, empty comma-list items were dropped, ``--lrs -1e-3``
  was read as a flag, ``EvalSpec`` named the scripts' words rather than its fields.
* ``mis_weights`` took ``low = 0`` where ``check_correction_args`` refused it.
* ``stats.T95`` was held to 3 decimals while its docstring said exact.
* Tables: ``seq-tis`` pushed columns out of line, a race table with no sync printed a bare header,
  the staleness progress line ended in an empty "current policy by update: ".

No test here trains: the first piece of work is replaced by one that raises :class:`Started`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from offpolicy import estimator, fp8, lr_sweep, staleness, stats
from offpolicy.checks import FieldError
from offpolicy.functional import mis_weights
from offpolicy.gym import make_tasks
from offpolicy.rl import EvalSpec, RLConfig
from offpolicy.runfile import read_runs
from offpolicy.update import behavior_weights, check_correction_args
from scenarios import cosim_checks, cosim_report
from scenarios.cosim import CosimConfig
from scenarios.cosim_tables import aggregate, claims_table, format_table, race_table

Main = Callable[[list[str]], int]


class Started(Exception):
    """The first piece of work began: the flags were accepted."""


def _start(*args: object, **kwargs: object) -> Any:
    raise Started


@pytest.fixture(autouse=True)
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (staleness, lr_sweep, fp8):
        monkeypatch.setattr(module, "load_base", _start)
    monkeypatch.setattr(estimator, "estimator_table", _start)
    monkeypatch.setattr(cosim_report, "run_cosim", _start)


def refused(main: Main, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one ``error:`` line of a usage error (exit 2), after its ``error:``."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1, errors
    return errors[0].split("error:", 1)[1]


# -- 1. empty paths ----------------------------------------------------------------------------
OFF = ["--lags", "0", "--corrections", "none", "--seeds", "1", "--steps", "2"]
EMPTY: list[tuple[str, Main, list[str], str]] = [
    ("staleness-json", staleness.main, [*OFF, "--json", ""], "--json"),
    ("staleness-json-resume", staleness.main, [*OFF, "--json", "", "--resume"], "--json"),
    ("staleness-json-table", staleness.main, ["--json", "", "--table-only"], "--json"),
    ("staleness-json-blank", staleness.main, [*OFF, "--json", " "], "--json"),
    ("staleness-html", staleness.main, [*OFF, "--html", ""], "--html"),
    ("fp8-json", fp8.main, ["--seeds", "1", "--steps", "1", "--json", ""], "--json"),
    ("fp8-json-resume", fp8.main, ["--seeds", "1", "--steps", "1", "--json", "", "--resume"], "--json"),
    ("lr-sweep-json", lr_sweep.main, ["--lags", "0", "--seeds", "1", "--json", ""], "--json"),
    ("lr-sweep-json-resume", lr_sweep.main, ["--lags", "0", "--json", "", "--resume"], "--json"),
    ("estimator-out", estimator.main, ["--out", ""], "--out"),
    ("cosim-json", cosim_report.cli, ["--json", "", "--steps", "1"], "--json"),
    ("cosim-html", cosim_report.cli, ["--html", "", "--steps", "1"], "--html"),
    ("cosim-retable", cosim_report.cli, ["--retable", ""], "--retable"),
    ("cosim-seed-list", cosim_report.cli, ["--seed-list", "", "--steps", "1"], "--seed-list"),
]


@pytest.mark.parametrize(("main", "argv", "flag"), [c[1:] for c in EMPTY], ids=[c[0] for c in EMPTY])
def test_an_empty_path_is_refused_by_its_flag(
    main: Main, argv: list[str], flag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    assert refused(main, argv, capsys).startswith(f" {flag} ")
    assert list(tmp_path.iterdir()) == []


def test_read_runs_of_a_directory_names_it(tmp_path: Path) -> None:
    for path in ("", tmp_path):
        with pytest.raises(FieldError, match="is a directory"):
            read_runs(path)


# -- 2. cosim --resume over runs of another evaluation schedule ---------------------------------
def record(seed: int, eval_at: list[int], **extra: Any) -> dict[str, Any]:
    """A stored cosim run of 8 steps (the keys the checks and the tables read)."""
    evals = [dict(step=s, sim_h=s / 10, pass_rate=0.5) for s in eval_at]
    base = dict(
        design="sync", correction="none", seed=seed, batch_size=64, evals=evals,
        summary=dict.fromkeys(cosim_checks.TABLE_SUMMARY_KEYS, 0.5),
        steps=[{}] * 8, lr=RLConfig().lr, gym=CosimConfig().gym,
    )  # fmt: skip
    return base | extra


RESUMES: list[tuple[str, dict[str, Any], int, str | None]] = [  # stored run, --eval-every, refusal
    ("recorded-other", record(0, [0, 4, 8], eval_every=4), 1, "--eval-every"),
    ("inferred-other", record(0, [0, 4, 8]), 1, "--eval-every"),
    ("inferred-coarser", record(0, [0, 1, 2, 3, 4, 5, 6, 7, 8]), 4, "--eval-every"),
    ("inferred-same", record(0, [0, 4, 8]), 4, None),
    ("recorded-same", record(0, [0, 4, 8], eval_every=4), 4, None),
    ("same-schedule", record(0, [0, 8], eval_every=10), 8, None),  # 8 and 10 both evaluate at 0, 8
    ("diverged-early", record(0, [0, 4], diverged={"steps_done": 5}), 4, None),
    ("other-episodes", record(0, [0, 4, 8], eval_every=4, eval_episodes=2), 4, "evaluation episodes"),
]


@pytest.mark.parametrize(("stored", "every", "needle"), [r[1:] for r in RESUMES], ids=[r[0] for r in RESUMES])
def test_cosim_resume_refuses_another_evaluation_schedule(
    stored: dict[str, Any], every: int, needle: str | None, tmp_path: Path, capsys: Any
) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"table": [], "runs": [stored]}))
    before = path.read_bytes()
    argv = ["--designs", "sync", "--corrections", "none", "--seed-list", "0,1", "--steps", "8"]
    argv += ["--eval-every", str(every), "--json", str(path), "--resume"]
    if needle is None:  # the same schedule: seed 1 is trained (here: Started), seed 0 kept
        with pytest.raises(Started):
            cosim_report.cli(argv)
    else:
        err = refused(cosim_report.cli, argv, capsys)
        assert "--resume" in err and needle in err
    assert path.read_bytes() == before


def test_the_evaluation_schedule_is_the_drivers() -> None:
    assert (
        cosim_checks.eval_steps(4, 8) == [0, 4, 8]
        and cosim_checks.eval_steps(3, 8) == [0, 3, 6, 8]
        and cosim_checks.eval_steps(0, 8) == []
    )
    base = CosimConfig(steps=8, eval_every_steps=3)
    assert cosim_checks._settings_mismatch(record(0, cosim_checks.eval_steps(3, 8)), base) is None
    assert (
        cosim_checks._settings_mismatch(record(0, cosim_checks.eval_steps(3, 8), lr=1e-3), base) is not None
    )


def test_a_run_record_carries_its_evaluation_settings() -> None:
    cfg = CosimConfig(steps=3, eval_every_steps=2, eval_episodes_per_task=3)
    run = SimpleNamespace(config=cfg, summary=dict, counts={}, evals=[], steps=[], diverged=None)
    rec = cosim_report.run_record(run)  # type: ignore[arg-type]
    assert (rec["eval_every"], rec["eval_episodes"], rec["train_steps"]) == (2, 3, 3)
    assert cosim_checks._settings_mismatch(rec, cfg) is None
    other = CosimConfig(steps=3, eval_every_steps=1, eval_episodes_per_task=3)
    assert "--eval-every" in str(cosim_checks._settings_mismatch(rec, other))


# -- 3. a lag of --steps or more -----------------------------------------------------------------
LAGS: list[tuple[str, Main, list[str], str]] = [
    ("staleness", staleness.main, ["--lags", "3", "20", "--corrections", "none", "--steps", "4"], "--lags"),
    (
        "staleness-equal",
        staleness.main,
        ["--lags", "0", "4", "--corrections", "none", "--steps", "4"],
        "--lags",
    ),
    ("lr-sweep", lr_sweep.main, ["--lrs", "1e-3", "--lags", "0", "8", "--steps", "4"], "--lags"),
    ("chapter", staleness.main, ["--grid", "chapter", "--steps", "8"], "--grid chapter"),
]


@pytest.mark.parametrize(("main", "argv", "flag"), [c[1:] for c in LAGS], ids=[c[0] for c in LAGS])
def test_a_lag_of_steps_or_more_is_refused(
    main: Main, argv: list[str], flag: str, tmp_path: Path, capsys: Any
) -> None:
    err = refused(main, [*argv, "--seed-list", "1", "--json", str(tmp_path / "s.json")], capsys)
    assert err.startswith(f" {flag}") and "--steps" in err


@pytest.mark.parametrize(
    ("main", "argv"),
    [
        (staleness.main, ["--lags", "0", "3", "--corrections", "none", "--steps", "4"]),
        (staleness.main, ["--grid", "chapter", "--steps", "9"]),
        (lr_sweep.main, ["--lrs", "1e-3", "--lags", "0", "3", "--steps", "4"]),
    ],
    ids=["staleness", "chapter", "lr-sweep"],
)
def test_lags_below_steps_are_taken(main: Main, argv: list[str], tmp_path: Path) -> None:
    with pytest.raises(Started):
        main([*argv, "--seed-list", "1", "--json", str(tmp_path / "s.json")])


# -- 4. messages ---------------------------------------------------------------------------------
FLAGS: list[tuple[str, Main, list[str], str]] = [
    ("cosim-steps", cosim_report.cli, ["--steps", "0"], "--steps"),
    ("cosim-seed-list", cosim_report.cli, ["--seed-list", "1,,2,"], "--seed-list"),
    ("cosim-designs", cosim_report.cli, ["--designs", "sync,"], "--designs"),
    ("cosim-corrections", cosim_report.cli, ["--corrections", ",none"], "--corrections"),
    ("cosim-lr", cosim_report.cli, ["--lr", "-1e-3"], "--lr"),
    ("lr-sweep-lrs", lr_sweep.main, ["--lrs", "-1e-3"], "--lrs"),
    ("lr-sweep-lrs-second", lr_sweep.main, ["--lrs", "1e-3", "-2E+1"], "--lrs"),
    ("staleness-lr", staleness.main, ["--lr", "-1e-3"], "--lr"),
    ("fp8-lr", fp8.main, ["--lr", "-.5e-2"], "--lr"),
]


@pytest.mark.parametrize(("main", "argv", "flag"), [c[1:] for c in FLAGS], ids=[c[0] for c in FLAGS])
def test_a_bad_flag_is_named(main: Main, argv: list[str], flag: str, tmp_path: Path, capsys: Any) -> None:
    err = refused(main, [*argv, "--json", str(tmp_path / "x.json")], capsys)
    assert err.startswith(f" {flag}"), err


EVAL_SPECS: list[tuple[str, dict[str, Any], str, str]] = [  # kwargs, field, the scripts' name
    ("every", dict(every=-1), "every", "eval_every"),
    ("episodes", dict(every=1, episodes_per_task=0), "episodes_per_task", "eval_episodes"),
    ("seed", dict(every=0, seed=-1), "seed", "eval_seed"),
]


@pytest.mark.parametrize(
    ("kwargs", "field", "alias"), [c[1:] for c in EVAL_SPECS], ids=[c[0] for c in EVAL_SPECS]
)
def test_evalspec_names_its_field_and_the_scripts_word(
    kwargs: dict[str, Any], field: str, alias: str
) -> None:
    with pytest.raises(FieldError) as info:
        EvalSpec(make_tasks("heldout", "defect"), **kwargs)
    assert info.value.field == field and str(info.value).startswith(f"{field} ({alias})")


# -- 5. the MIS band: the weights and the update agree --------------------------------------------
@pytest.mark.parametrize(
    ("band", "taken"),
    [((0.0, 5.0), True), ((0.5, 5.0), True), ((-0.1, 5.0), False), ((math.nan, 5.0), False),
     ((0.5, 0.0), False), ((2.0, 1.0), False)],
    ids=["low-0", "default", "negative", "nan", "high-0", "crossed"],
)  # fmt: skip
def test_mis_weights_and_the_update_take_the_same_band(band: tuple[float, float], taken: bool) -> None:
    logp = torch.tensor([[0.0, -1.0, 2.0]])
    logmu = torch.tensor([[-3.0, 0.0, 0.0]])  # ratios e^3, e^-1, e^2
    mask = torch.ones(1, 3)
    if not taken:
        with pytest.raises(ValueError):
            mis_weights(logp, logmu, mask, *band)
        with pytest.raises(ValueError):
            check_correction_args("mis", 2.0, band)
        return
    check_correction_args("mis", 2.0, band)
    weights = behavior_weights(logp, logmu, mask, "mis", band=band)
    assert torch.equal(weights, mis_weights(logp, logmu, mask, *band))
    ratio = (logp - logmu).exp()
    assert torch.equal(weights, torch.where((ratio >= band[0]) & (ratio <= band[1]), ratio, 0.0))


# -- 6. the t quantiles ------------------------------------------------------------------------------
def test_the_t_table_is_exact() -> None:
    p = 0.975
    assert stats.T95[0] == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-9)  # df 1: Cauchy
    assert stats.T95[1] == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-9)  # df 2
    published = {1: 12.7062, 2: 4.30265, 10: 2.22814, 30: 2.04227}  # to their printed digits
    for df, value in published.items():
        assert stats.t_quantile(df) == pytest.approx(value, abs=6e-5 if df == 1 else 6e-6)


def test_the_t_table_agrees_with_mpmath_and_pipesim() -> None:
    mp = pytest.importorskip("mpmath")
    from pipesim.io.sweep_grid import t_quantile_975

    mp.mp.dps = 30
    for df in range(1, 31):
        v = mp.mpf(df)

        def tail(t: Any, v: Any = v) -> Any:
            return mp.betainc(v / 2, mp.mpf(1) / 2, 0, v / (v + t**2), regularized=True) - mp.mpf("0.05")

        exact = float(mp.findroot(tail, stats.T95[df - 1]))
        assert stats.T95[df - 1] == pytest.approx(exact, rel=1e-9), df
        assert stats.t_quantile(df) == pytest.approx(t_quantile_975(df), rel=1e-9), df


# -- 8. tables ----------------------------------------------------------------------------------------
def cosim_runs(designs: list[str], corrections: list[str]) -> list[dict[str, Any]]:
    summary = dict(
        final_pass_rate=0.8, staleness_mean=1.0, staleness_max=2, mixed_share=0.5, mismatch=0.01,
        sim_hours=0.5, lone_share=0.0, token_staleness_mean=1.0, trained_duration_s=1.0,
        launched_duration_s=1.0,
    )  # fmt: skip
    evals = [dict(step=0, sim_h=0.0, pass_rate=0.2), dict(step=5, sim_h=0.1, pass_rate=0.9)]
    return [
        dict(design=d, correction=c, seed=s, batch_size=64, evals=evals,
             summary=dict(summary, final_pass_rate=0.7 + s / 10))
        for d in designs for c in corrections for s in range(3)
    ]  # fmt: skip


def columns_line_up(lines: list[str], mark: str) -> bool:
    return len({line.index(mark) for line in lines}) == 1


def test_seq_tis_keeps_the_cosim_columns_in_line() -> None:
    runs = cosim_runs(["sync", "async-eta2"], ["none", "seq-tis"])
    table = format_table(aggregate(runs, 0.5), 0.5).splitlines()
    assert len({len(line) for line in table}) == 1, table  # every row as wide as the header
    claims = claims_table(runs).splitlines()
    cells = [line for line in claims[: claims.index("")] if "|" in line]
    assert columns_line_up(cells, "|"), cells
    paired = [line for line in claims if " - " in line and "|" in line]
    assert columns_line_up(paired, " - ") and columns_line_up(paired, "|"), paired
    race = race_table(runs, 0.5).splitlines()[1:]
    assert race and columns_line_up(race, "|"), race


@pytest.mark.parametrize("designs", [["async-eta2", "async-eta4"], ["sync"]], ids=["no-sync", "only-sync"])
def test_a_race_with_nothing_to_race_says_why(designs: list[str]) -> None:
    text = race_table(cosim_runs(designs, ["none"]), 0.5)
    assert len(text.splitlines()) == 1 and "--designs" in text, text


def test_the_staleness_line_leaves_out_an_empty_evaluation_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def run_one(
        base: Any, tok: Any, lag: int, correction: str, seed: int, steps: int, *a: Any, **k: Any
    ) -> Any:
        history = [dict(step=i) for i in range(steps)]
        if seed == 1:  # an evaluation after update 2
            history[1].update(eval_pass_rate=0.5, eval_invalid=0.25)
        run = dict(lag=lag, correction=correction, seed=seed, lr=RLConfig().lr, steps=steps)
        return run | dict(heldout=dict(pass_rate=0.5), history=history, train_seconds=1.0, diverged=None)

    monkeypatch.setattr(staleness, "load_base", lambda gym: (None, None, dict(pass_rate=0.3, reads=1.0)))
    monkeypatch.setattr(staleness, "run_one", run_one)
    monkeypatch.setattr(staleness, "report", lambda *a: None)
    argv = ["--lags", "0", "--corrections", "none", "--seed-list", "0", "1", "--steps", "2"]
    assert staleness.main([*argv, "--json", str(tmp_path / "s.json")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("lag 0")]
    assert len(lines) == 2 and not lines[0].rstrip().endswith(":") and "current policy" not in lines[0]
    assert lines[1].endswith("current policy by update (pass/invalid): 2:0.50/0.25"), lines[1]
