"""``--set`` order on a scenario whose factory takes the key by name (docs/usage.md: several
``--set`` apply in turn, and the order of whole values does not matter).

``pipesim run chapter13:chapter_scenario --set max_staleness=100000 --set pool_size=3000`` was
refused in both orders while ``pipesim run synchronous`` with the same pairs ran: ``max_staleness``
is a named parameter of ``chapter_scenario``, so it went to the factory, whose scenario was refused
(a default task pool of 6,401,408 tasks) before ``pool_size`` was applied. A parameter that is its
scenario key now waits for the later ``--set`` as the key does on a preset
(:func:`pipesim.io.overrides_factory.waiting_fields`): every order gives the outcome of the factory
built without parameters and the pairs applied to it (the preset path), and the outcome of one
factory call given every value where the factory takes them all.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from pipesim.config import Scenario
from pipesim.core.errors import FieldError
from pipesim.io.cli import main
from pipesim.io.overrides import build
from pipesim.io.registry import Entry, get_entry

NAME = "chapter13:chapter_scenario"

# (id, the --set pairs, "ok" or the field the refusal names)
CASES: list[tuple[str, list[str], str]] = [
    ("staleness-pool", ["max_staleness=100000", "pool_size=3000"], "ok"),
    ("staleness-steps-pool", ["max_staleness=100000", "steps=5", "pool_size=3000"], "ok"),
    ("staleness-smaller-batch", ["max_staleness=100000", "batch_size=8"], "ok"),
    ("staleness-sync-pool", ["max_staleness=100000", "sync_time_s=5", "pool_size=3000"], "ok"),
    (
        "staleness-replicas-slots-pool",
        ["max_staleness=100000", "replicas=Replicas(128)", "n_slots=128", "pool_size=3000"],
        "ok",
    ),
    ("staleness-steps-unsettled", ["max_staleness=100000", "steps=5"], "pipeline.max_staleness"),
    ("staleness-seed-unsettled", ["max_staleness=100000", "seed=1"], "pipeline.max_staleness"),
    ("staleness-pool-too-small", ["max_staleness=100000", "pool_size=1000"], "pool_size"),
    (
        "staleness-slots-below-replicas",
        ["max_staleness=100000", "replicas=Replicas(128)"],
        "pipeline.max_staleness",
    ),
]


def _outcome(make: Any, pairs: list[str]) -> tuple[str, Any]:
    """("ok", the scenario) or ("refused", the field the refusal names)."""
    try:
        scenario = make(pairs)
    except FieldError as exc:
        return "refused", exc.field
    return "ok", scenario


@pytest.mark.parametrize(("pairs", "expect"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_order_gives_the_preset_paths_outcome(pairs: list[str], expect: str) -> None:
    entry = get_entry(NAME)
    knobless = Entry("knobless", "the same scenario from a factory of no parameters", entry.factory)
    preset = _outcome(lambda p: build(knobless, p)[0], pairs)
    assert preset[0] == ("ok" if expect == "ok" else "refused"), preset
    if expect != "ok":
        assert preset[1] == expect
    for order in itertools.permutations(pairs):
        assert _outcome(lambda p: build(entry, p)[0], list(order)) == preset, order


def test_the_settled_run_is_the_single_factory_call_with_both_values() -> None:
    factory = get_entry(NAME).factory
    for order in (["max_staleness=100000", "pool_size=3000"], ["pool_size=3000", "max_staleness=100000"]):
        scenario, given = build(get_entry(NAME), order)
        assert scenario == factory(max_staleness=100_000, pool_size=3000)
        assert given == {"max_staleness": "100000", "pool_size": "3000"}


def test_an_unsettled_pair_shows_the_final_values_in_either_order() -> None:
    messages = set()
    for order in (["max_staleness=100000", "steps=5"], ["steps=5", "max_staleness=100000"]):
        with pytest.raises(FieldError) as info:
            build(get_entry(NAME), order)
        assert info.value.field == "pipeline.max_staleness"
        messages.add(str(info.value))
    assert len(messages) == 1
    assert "(steps 5 + max_staleness 100,000 + 1)" in messages.pop()


def test_a_pair_no_later_set_changes_keeps_the_factorys_own_refusal() -> None:
    entry = get_entry(NAME)
    with pytest.raises(FieldError) as alone:
        build(entry, ["max_staleness=100000"])
    for order in (["max_staleness=100000", "seed=1"], ["seed=1", "max_staleness=100000"]):
        with pytest.raises(FieldError) as info:
            build(entry, order)
        assert (info.value.field, str(info.value)) == (alone.value.field, str(alone.value))
    assert str(alone.value).startswith(f"scenario '{NAME}': max_staleness is the largest term")


def test_a_value_refused_alone_is_still_the_factorys_refusal() -> None:
    entry = get_entry(NAME)
    for order in (["max_staleness=-1", "pool_size=3000"], ["pool_size=3000", "max_staleness=-1"]):
        with pytest.raises(FieldError) as info:
            build(entry, order)
        assert "max_staleness" in info.value.field
        assert str(info.value).startswith(f"scenario '{NAME}'")


def test_pipesim_run_takes_both_orders(capsys: pytest.CaptureFixture[str]) -> None:
    """``pipesim run`` in process, 2 steps: both orders run, and run the same (the first line, the
    command's pairs as given, aside)."""
    outputs = []
    for pairs in (["max_staleness=100000", "pool_size=3000"], ["pool_size=3000", "max_staleness=100000"]):
        assert main(["run", NAME, *[w for p in [*pairs, "steps=2"] for w in ("--set", p)]]) == 0
        outputs.append(capsys.readouterr().out.splitlines()[1:])
    assert outputs[0] == outputs[1]
    assert any("throughput" in line for line in outputs[0])


def _staleness_and_sync(max_staleness: int = 0) -> Scenario:
    """A factory whose ``max_staleness`` sets more than its field: the sync time grows with it."""
    return get_entry(NAME).factory(max_staleness, sync_time_s=10.0 + max_staleness)


def test_a_parameter_that_sets_more_than_its_field_keeps_the_factorys_refusal() -> None:
    """Applied as the key, it would lose what else the factory does with it: the refusal stands."""
    entry = Entry("sync-grows", "max_staleness sets the sync time too", _staleness_and_sync)
    for order in (["max_staleness=100000", "pool_size=3000"], ["pool_size=3000", "max_staleness=100000"]):
        with pytest.raises(FieldError) as info:
            build(entry, order)
        assert info.value.field == "pipeline.max_staleness"
        assert str(info.value).startswith("scenario 'sync-grows': max_staleness is the largest term")


# (id, the --set pairs, the pool the scenario gets or the field the refusal names)
PRESET_POOL_CASES: list[tuple[str, list[str], int | str]] = [
    ("steps-then-pool", ["steps=20000", "pool_size=2000000"], 2_000_000),
    ("steps-alone", ["steps=20000"], "steps"),  # the preset's own pool is past the bound
    ("pool-too-small", ["steps=20000", "pool_size=1000"], "pool_size"),
    ("pool-not-a-number", ["steps=20000", "pool_size=abc"], "pool_size"),
    ("pool-then-batch", ["batch_size=4096", "steps=400", "pool_size=2000000"], 2_000_000),
]


@pytest.mark.parametrize(
    ("pairs", "expect"), [c[1:] for c in PRESET_POOL_CASES], ids=[c[0] for c in PRESET_POOL_CASES]
)
def test_a_preset_sizing_its_pool_from_steps_takes_a_pool_size_in_either_order(
    pairs: list[str], expect: int | str
) -> None:
    """``systems:areal`` sizes its pool from ``steps`` itself, so ``--set steps=20000`` (a pool of
    5,121,280 tasks, past the bound) was refused before ``--set pool_size=2000000`` could settle it,
    in both orders. Every order now gives the one factory call with both values, or one refusal."""
    entry = get_entry("systems:areal")
    for order in itertools.permutations(pairs):
        if isinstance(expect, str):
            with pytest.raises(FieldError) as info:
                build(entry, list(order))
            assert info.value.field == expect, order
            continue
        scenario, _ = build(entry, list(order))
        values = dict(p.split("=") for p in pairs)
        assert scenario == entry.factory(**{k: int(v) for k, v in values.items()}), order
        assert scenario.pool_size == expect
