"""A dotted key into a policy field that a preset's parameter sets is refused, naming the parameter.

``systems:roll`` builds its supply and its batch rule both from ``async_generation_ratio``: ``--set
admission.ratio=2`` alone ran a design whose halves disagreed (staleness 2 against the batch rule's
promised 1, which ``check_invariants`` then refused), and ``--set batching.ratio=0`` changed
nothing. Refused with ``--set`` and ``--over`` alike, table-driven over the presets whose parameters
set policy fields; a dotted key no parameter sets, and the parameter itself, still work."""

from __future__ import annotations

import pytest

from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.io.overrides import build
from pipesim.io.overrides_dotted import parameter_owning
from pipesim.io.registry import registry

OWNED = [
    ("systems:roll", "admission.ratio", "2", "async_generation_ratio"),
    ("systems:roll", "batching.ratio", "0", "async_generation_ratio"),
    ("systems:roll_rlvr", "batching.ratio", "2", "async_generation_ratio"),
    ("systems:openrlhf_async", "admission.queue_size", "2", "async_queue_size"),
    ("systems:pipelinerl", "admission.attempts", "2", "attempts"),
    ("systems:verl_fully_async", "batching.staleness_threshold", "0.5", "staleness_threshold"),
]


@pytest.mark.parametrize(("preset", "key", "value", "param"), OWNED)
def test_set_of_an_owned_field_is_refused_naming_the_parameter(
    preset: str, key: str, value: str, param: str
) -> None:
    with pytest.raises(FieldError) as info:
        build(registry()[preset], [f"{key}={value}"])
    assert info.value.field == key and param in str(info.value)


@pytest.mark.parametrize(("preset", "key", "value", "param"), OWNED[:3])
def test_the_command_line_refuses_it_for_run_and_sweep(
    preset: str, key: str, value: str, param: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", preset, "--set", "steps=2", "--set", f"{key}={value}"]) == 2
    err = capsys.readouterr().err
    assert key in err and param in err and "Traceback" not in err
    assert main(["sweep", preset, "--set", "steps=2", "--over", f"{key}=1,2,3"]) == 2
    err = capsys.readouterr().err
    assert key in err and param in err and "Traceback" not in err


def test_the_parameter_still_sets_both_halves() -> None:
    scen, _ = build(registry()["systems:roll"], ["async_generation_ratio=2"])
    assert scen.admission.ratio == scen.batching.ratio == 2


@pytest.mark.parametrize(
    ("preset", "pairs", "key"),
    [
        (
            "async-eta2",
            ["weight_update=InFlightUpdate()", "weight_update.load_time_s=3"],
            "weight_update.load_time_s",
        ),
        ("systems:pipelinerl", ["admission.max_lag=40"], "admission.max_lag"),
        ("systems:areal", ["durations.tool_median_s=3"], "durations.tool_median_s"),
    ],
)
def test_a_field_no_parameter_sets_is_still_taken(preset: str, pairs: list[str], key: str) -> None:
    entry = registry()[preset]
    assert parameter_owning(entry, key, {}) is None
    scen, _ = build(entry, pairs)
    role, field = key.split(".")
    assert str(getattr(getattr(scen, role), field)) in {p.split("=")[1] for p in pairs} | {"3.0", "40"}
