"""A key given twice in ``--set`` is refused naming the key, as ``--over`` refuses one.

Before, ``pipesim run SPEC --set run.steps=10 --set run.steps=20`` ran 20 steps without a word. Now
every command that takes ``--set`` (``run``, ``sweep``, ``trace``, ``export`` through
:class:`~pipesim.io.cli_options.SetPairs`; ``plan`` where it reads the spec,
:func:`~pipesim.plan.specfile.check_sets`) stops with a usage error naming the key, and so does a
table set after one of its fields (which it would replace). A field after its table, and distinct
keys, are no repeat.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.io.cli_options import SetPairs, repeated_key
from pipesim.io.cli_parser import build_parser
from pipesim.plan import specfile
from pipesim.plan.checks import PlanError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RUN_SPEC = str(EXAMPLES / "run_qwen3_8b.toml")
PLAN_SPEC = str(EXAMPLES / "plan_qwen3_8b.toml")


@pytest.mark.parametrize(
    ("pairs", "found"),
    [
        (["steps=10", "steps=20"], ("steps", "steps")),
        (["steps=10", " steps = 20"], ("steps", "steps")),  # the same key, spaced
        (["n_slots=8", "steps=1", "n_slots=16"], ("n_slots", "n_slots")),
        (["run.steps=10", "run.steps=20"], ("run.steps", "run.steps")),
        (["durations.median_s=60", "durations=LogNormalDurations()"], ("durations", "durations.median_s")),
        (
            ["workload.response.sigma=0.5", "workload.response={median_tokens=9}"],
            ("workload.response", "workload.response.sigma"),
        ),
        (["steps=10", "n_slots=8"], None),
        (["durations=LogNormalDurations()", "durations.median_s=60"], None),  # the field edits the table set
        (["run.steps=10", "run.steps_x=1", "run.step=2"], None),  # a prefix of the text is no table
        (["steps", "steps"], None),  # no '=': the reader's error, not this one
    ],
)
def test_repeated_key_finds_the_key_that_undoes_an_earlier_one(
    pairs: list[str], found: tuple[str, str] | None
) -> None:
    assert repeated_key(pairs) == found


@pytest.mark.parametrize(
    ("argv", "key"),
    [
        (["run", "synchronous", "--set", "steps=10", "--set", "steps=20"], "steps"),
        (["run", RUN_SPEC, "--set", "run.steps=10", "--set", "run.steps=20"], "run.steps"),
        (
            [
                "run",
                "synchronous",
                "--set",
                "durations.median_s=9",
                "--set",
                "durations=LogNormalDurations()",
            ],
            "durations",
        ),
        (
            ["sweep", "synchronous", "--over", "max_staleness=0,1", "--set", "steps=2", "--set", "steps=3"],
            "steps",
        ),
        (["trace", "synchronous", "--out", "t.json", "--set", "n_slots=4", "--set", "n_slots=8"], "n_slots"),
        (["export", "synchronous", "--out", "x.toml", "--set", "seed=1", "--set", "seed=2"], "seed"),
        (
            ["export", RUN_SPEC, "--out", "x.toml", "--set", "design.eta=1", "--set", "design.eta=2"],
            "design.eta",
        ),
    ],
)
def test_every_command_refuses_a_key_set_twice(
    argv: list[str],
    key: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # nothing is written: the parser stops first
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --set: {key} " in err, err
    assert not list(tmp_path.iterdir())


def test_every_subcommand_that_takes_set_uses_the_checked_action() -> None:
    """A command added later with ``add_options(..., "set")`` is covered; one spelling ``--set``
    out with ``action="append"`` would not be, and fails here."""
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    taking = {}
    for name, sub in subs.choices.items():
        for action in sub._actions:
            if "--set" in action.option_strings:
                taking[name] = type(action)
    assert {"run", "sweep", "trace", "export"} <= set(taking)
    assert all(t is SetPairs for t in taking.values()), taking


@pytest.mark.parametrize(
    ("spec", "sets", "key"),
    [
        (PLAN_SPEC, ["cluster.n_gpus=8", "cluster.n_gpus=16"], "cluster.n_gpus"),
        (PLAN_SPEC, ["search.steps=3", "space.eta=[0]", "search.steps=4"], "search.steps"),
        (
            PLAN_SPEC,
            ["workload.response.sigma=0.5", "workload.response={median_tokens=9, sigma=1}"],
            "workload.response",
        ),
        (RUN_SPEC, ["run.steps=10", "run.steps=20"], "run.steps"),  # pipesim plan RUN.toml
    ],
)
def test_plan_refuses_a_key_set_twice(spec: str, sets: list[str], key: str) -> None:
    with pytest.raises(PlanError) as info:
        specfile.load(spec, sets)
    assert info.value.field == key
    assert f"--set {key} " in str(info.value) and spec in str(info.value)


def test_plan_command_line_refuses_a_key_set_twice(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", PLAN_SPEC, "--set", "cluster.n_gpus=8", "--set", "cluster.n_gpus=16"])
    assert code == 2
    assert "--set cluster.n_gpus is given twice" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("sets", "key", "value"),
    [
        (["cluster.n_gpus=32", "search.steps=3"], "cluster.n_gpus", 32),
        (["cluster.n_gpus=32", "search.steps=3"], "search.steps", 3),
        (
            ["workload.response={median_tokens=900, sigma=0.5}", "workload.response.sigma=0.7"],
            "workload.response",
            {"median_tokens": 900, "sigma": 0.7},
        ),
    ],
)
def test_distinct_keys_and_a_field_after_its_table_are_still_applied(
    sets: list[str], key: str, value: object
) -> None:
    node: object = specfile.edited(PLAN_SPEC, sets)
    for part in key.split("."):
        assert isinstance(node, dict)
        node = node[part]
    assert node == value


def test_a_trace_may_still_set_over_its_recipe() -> None:
    """``pipesim trace RUN.json --set`` lays the user's pairs over the recipe's, so the readers of
    pairs keep the last value (only the command line's own ``--set`` is checked)."""
    from pipesim.plan import runspec

    rs = runspec.load(RUN_SPEC, ["run.steps=3", "run.steps=2"])
    assert rs.steps == 2


@pytest.mark.parametrize(
    "pairs",
    [
        ["max_staleness=4", "max_head_offpolicyness=1"],
        ["max_head_offpolicyness=1", "max_staleness=4"],
    ],
)
def test_a_key_that_undoes_a_factory_parameter_is_refused_naming_it(pairs: list[str]) -> None:
    """Both orders exported eta 4: the factory takes its parameter first, the field is set after."""
    from pipesim.io.overrides import build
    from pipesim.io.registry import get_entry

    with pytest.raises(FieldError) as err:
        build(get_entry("systems:areal"), pairs)
    assert err.value.field == "max_staleness" and "max_head_offpolicyness" in str(err.value)
    scenario, _ = build(get_entry("systems:areal"), ["max_head_offpolicyness=1", "steps=3"])
    assert scenario.pipeline.max_staleness == 1 and scenario.pipeline.steps == 3  # other keys still apply


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "a.x", "a.y", "b.z", "c"]), max_size=8))
def test_checking_each_new_pair_finds_what_checking_all_of_them_finds(keys: list[str]) -> None:
    """SetPairs checks each new pair against the earlier ones only (it re-checked every pair at
    each --set: 2,000 pairs ran past 120 s before the refusal of the first unknown key)."""
    pairs = [f"{k}=1" for k in keys]
    incremental = next(
        (found for n in range(1, len(pairs) + 1) if (found := repeated_key(pairs[:n], start=n - 1))),
        None,
    )
    assert incremental == repeated_key(pairs)


def test_a_factory_parameter_that_moves_the_default_pool_leaves_pool_size_free() -> None:
    from pipesim.io.overrides import build
    from pipesim.io.registry import get_entry

    for pairs in (
        ["max_head_offpolicyness=4", "pool_size=10000"],
        ["pool_size=10000", "max_head_offpolicyness=4"],
    ):
        scenario, _ = build(get_entry("systems:areal"), pairs)
        assert scenario.pool_size == 10000 and scenario.pipeline.max_staleness == 4


def test_a_sweep_axis_over_a_field_a_set_parameter_sets_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """'--set max_head_offpolicyness=3 --over max_staleness=0,1' ran eta 0 and 1 without a word."""
    args = ["sweep", "systems:areal", "--over", "max_staleness=0,1", "--set", "max_head_offpolicyness=3"]
    assert main([*args, "--set", "steps=2", "--quiet"]) == 2
    assert "max_staleness would undo max_head_offpolicyness=3" in capsys.readouterr().err
