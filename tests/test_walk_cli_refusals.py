"""A user walkthrough's refusals of the command line, each of which was taken without a word.

1. ``--seed`` beside ``--set seed=`` (a run spec's ``run.seed=``) ran the ``--seed`` seed under a
   header that printed both; now the pair is a usage error naming the key, in either order, on
   every command that takes both (``run``, ``trace``, ``export``).
2. A keyword given twice in one policy call (``InFlightUpdate(load_time_s=2, load_time_s=3)``)
   ran with the last; Python refuses the call, and now so does the policy parser, naming it.
3. ``pipesim sweep --seeds 100000`` was taken (about four hours); it is capped as ``compare``'s.
4. A lower bound and an upper bound were joined bare (``a finite number > 0 <= 2147483647``);
   every validator's message is a well-formed range naming its field.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipesim.core.validate import FieldError, check_int, check_number
from pipesim.io.cli import main
from pipesim.io.cli_common import UsageError
from pipesim.io.cli_options import Parser, seed_given_twice
from pipesim.io.cli_parser import build_parser
from pipesim.io.cli_sweep import cmd_sweep
from pipesim.io.compare_seeds import MAX_SEEDS
from pipesim.plan import runspec
from pipesim.plan.checks import PlanError, Table, number
from pipesim.plan.runspec_calibration import check_value
from pipesim.policies.catalog import parse_policy

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RUN_SPEC = str(EXAMPLES / "run_verl_8gpu.toml")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The line after ``error:`` of a command the parser stops (exit status 2)."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "error: " in err, err
    return err.split("error: ", 1)[1].strip()


# -- 1. --seed and --set seed= together ---------------------------------------------------------

SEED_ROWS: list[tuple[str, list[str], str]] = [
    ("run-set-first", ["run", "async-eta2", "--set", "seed=4", "--seed", "3"], "seed"),
    ("run-seed-first", ["run", "async-eta2", "--seed", "3", "--set", "seed=4"], "seed"),
    ("run-spaced-key", ["run", "async-eta2", "--set", " seed = 4", "--seed", "3"], "seed"),
    ("run-among-others", ["run", "async-eta2", "--set", "steps=2", "--set", "seed=4", "--seed", "3"], "seed"),
    ("run-runspec", ["run", RUN_SPEC, "--seed", "3", "--set", "run.seed=4"], "run.seed"),
    ("trace", ["trace", "async-eta2", "--out", "t.json", "--set", "seed=4", "--seed", "3"], "seed"),
    (
        "trace-runspec",
        ["trace", RUN_SPEC, "--out", "t.json", "--set", "run.seed=4", "--seed", "3"],
        "run.seed",
    ),
    ("export", ["export", "async-eta2", "--out", "x.toml", "--seed", "3", "--set", "seed=4"], "seed"),
    (
        "export-runspec",
        ["export", RUN_SPEC, "--out", "x.toml", "--set", "run.seed=4", "--seed", "0"],
        "run.seed",
    ),
]


@pytest.mark.parametrize(("argv", "key"), [r[1:] for r in SEED_ROWS], ids=[r[0] for r in SEED_ROWS])
def test_seed_given_by_both_seed_and_set_is_refused_naming_the_key(
    argv: list[str],
    key: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    line = _usage_error(argv, capsys)
    assert line.startswith(f"{key} ") and "--seed" in line, line
    assert not list(tmp_path.iterdir())  # refused before anything ran or was written


def test_every_command_taking_seed_and_set_checks_the_pair() -> None:
    """The check lives in the parser class every subcommand's parser is (a command added later is
    covered); the commands that take both are at least run, trace and export."""
    subs = _subcommands()
    both = {n for n, sp in subs.items() if {"--seed", "--set"} <= set(sp._option_string_actions)}
    assert {"run", "trace", "export"} <= both
    assert all(isinstance(sp, Parser) for sp in subs.values())


@pytest.mark.parametrize(
    ("sets", "seed", "refused"),
    [
        (["seed=4"], None, False),  # --set alone
        ([], 3, False),  # --seed alone
        (["steps=2", "n_slots=8"], 3, False),
        (["seeds=4"], 3, False),  # another key (refused later as unknown, not here)
        (["run.seed_x=1"], 3, False),
        (["seed=4"], 0, True),  # --seed 0 is given
        (["run.seed=4"], 3, True),
    ],
)
def test_seed_given_twice_finds_only_the_pair(sets: list[str], seed: int | None, refused: bool) -> None:
    assert (seed_given_twice(sets, seed) is not None) is refused


def test_seed_or_set_alone_still_parses() -> None:
    parser = build_parser()
    assert parser.parse_args(["run", "async-eta2", "--seed", "3"]).seed == 3
    assert parser.parse_args(["run", "async-eta2", "--set", "seed=4"]).set == ["seed=4"]


# -- 2. a keyword repeated inside a policy call --------------------------------------------------

KEYWORD_ROWS: list[tuple[str, str, str | None, str]] = [
    ("flat", "InFlightUpdate(load_time_s=2, load_time_s=3)", "weight_update", "load_time_s"),
    ("same-value", "InFlightUpdate(load_time_s=2, load_time_s=2)", None, "load_time_s"),
    ("nested", "SyncEveryK(k=2, inner=InFlightUpdate(load_time_s=1, load_time_s=1))", None, "load_time_s"),
    ("outer-of-nested", "Replicas(2, routing=LeastLoaded(), routing=LeastLoaded())", None, "routing"),
    ("apart", "AReaLThrottle(max_concurrent=8, max_concurrent=48)", "admission", "max_concurrent"),
]


@pytest.mark.parametrize(
    ("text", "kind", "keyword"), [r[1:] for r in KEYWORD_ROWS], ids=[r[0] for r in KEYWORD_ROWS]
)
def test_a_keyword_repeated_in_a_policy_call_is_refused_naming_it(
    text: str, kind: str | None, keyword: str
) -> None:
    with pytest.raises(FieldError) as info:
        parse_policy(text, kind)
    assert info.value.field == keyword and keyword in str(info.value)


def test_the_command_line_refuses_a_repeated_keyword(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "async-eta2", "--set", "weight_update=InFlightUpdate(load_time_s=2, load_time_s=3)"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "load_time_s" in err and "throughput_per_hour" not in err
    once = parse_policy("InFlightUpdate(load_time_s=3)", "weight_update")  # one keyword: as before
    assert once.load_time_s == 3


# -- 3. sweep --seeds capped as compare's --------------------------------------------------------


@pytest.mark.parametrize("command", ["sweep", "compare"])
@pytest.mark.parametrize(("seeds", "ok"), [(0, False), (1, True), (MAX_SEEDS, True), (MAX_SEEDS + 1, False)])
def test_sweep_seeds_have_compares_bound(
    command: str, seeds: int, ok: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, "synchronous", *(["async-eta2"] if command == "compare" else []), "--seeds", str(seeds)]
    if ok:
        assert build_parser().parse_args(argv).seeds == seeds
        return
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(argv)
    assert info.value.code == 2 and "argument --seeds:" in capsys.readouterr().err


def test_sweep_seeds_of_a_huge_count_is_refused_before_a_run(capsys: pytest.CaptureFixture[str]) -> None:
    line = _usage_error(["sweep", "synchronous", "--seeds", "100000"], capsys)
    assert line.startswith("argument --seeds:"), line
    args = build_parser().parse_args(["sweep", "synchronous"])
    args.seeds = 100_000  # a Namespace built in Python: cmd_sweep holds the bound too
    with pytest.raises(UsageError, match="^--seeds "):
        cmd_sweep(args)


# -- 4. a range's wording in every validator's message -------------------------------------------

JOINED_BARE = re.compile(r"[<>]=? -?[\d.,e+]+ (?:[<>]=?|in )")
"""Two bounds in a row, with no "and" between: ``> 0 <= 2147483647``, ``> 0 in [1, 5]``."""


def _runspec_median(value: str) -> Callable[[], Any]:
    return lambda: runspec.load(RUN_SPEC, [f"workload.response.median_tokens={value}"])


BOUND_ROWS: list[tuple[str, Callable[[], Any], str]] = [
    ("runspec-median-0", _runspec_median("0"), "workload.response.median_tokens"),
    ("runspec-median-huge", _runspec_median("1e12"), "workload.response.median_tokens"),
    ("above-and-hi", lambda: number("x.y", 0, hi=10, above=0), "x.y"),
    ("above-only", lambda: number("x.y", -1, above=0), "x.y"),
    ("above-and-lo", lambda: number("x.y", 0.5, lo=1, hi=5, above=0), "x.y"),
    ("lo-and-hi", lambda: number("x.y", 20, lo=1, hi=10), "x.y"),
    ("table-number", lambda: Table("model", {"mfu": 0}, ("mfu",)).number("mfu", above=0, hi=1), "model.mfu"),
    (
        "calibrated-value",
        lambda: check_value("calibration.values.response_median_tokens", "response_median_tokens", 0),
        "calibration.values.response_median_tokens",
    ),
    ("check-number", lambda: check_number("median_s", 0, 0, strict=True), "median_s"),
    ("check-int", lambda: check_int("n_slots", 10**9, 1, 1024), "n_slots"),
]


@pytest.mark.parametrize(("call", "field"), [r[1:] for r in BOUND_ROWS], ids=[r[0] for r in BOUND_ROWS])
def test_a_refused_value_names_its_field_and_a_well_formed_range(call: Callable[[], Any], field: str) -> None:
    with pytest.raises((PlanError, FieldError)) as info:
        call()
    err = info.value
    assert isinstance(err, FieldError) and err.field.endswith(field), (err.field, str(err))
    assert field in str(err)
    assert not JOINED_BARE.search(str(err)), str(err)


def test_an_open_lower_bound_with_an_upper_reads_as_an_interval() -> None:
    with pytest.raises(PlanError) as info:
        number("x.y", 0, hi=10, above=0)
    assert "(0, 10]" in str(info.value)
