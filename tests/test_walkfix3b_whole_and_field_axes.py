"""A sweep axis over a role's whole object beside one over a field of it, from a user's walkthrough.

``--over 'weight_update=InFlightUpdate(load_time_s=1),InFlightUpdate(load_time_s=2)' --over
weight_update.load_time_s=3,4`` was refused naming the base scenario's class (``weight_update is
PartialRollout``), which no cell runs; in Python the same axes ran, and the field's value replaced
each listed object's own, so the cells labelled ``InFlightUpdate(load_time_s=1)`` and ``(...=2)``
were one run (as were ``durations=LogNormalDurations(sigma=0.8)`` cells beside ``durations.sigma``).
Now both refuse the pair, in either order, naming both keys, as a key both ``--set`` and swept is.
An axis over the field alone, or over whole objects alone, still sweeps.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import pipesim
from pipesim.core.validate import FieldError
from pipesim.io.cli import main
from pipesim.io.cli_common import UsageError
from pipesim.io.cli_sweep import parse_over
from pipesim.io.overrides import apply_overrides
from pipesim.io.registry import get_scenario
from pipesim.io.sweep_grid import grid
from pipesim.policies.faults import Timeout
from pipesim.policies.updates import InFlightUpdate
from pipesim.workload.durations import LogNormalDurations

ROLES = [  # (role, whole objects, the --over text of them, field, the field's values, its text)
    (
        "weight_update",
        [InFlightUpdate(load_time_s=1.0), InFlightUpdate(load_time_s=2.0)],
        "InFlightUpdate(load_time_s=1),InFlightUpdate(load_time_s=2)",
        "load_time_s",
        [30.0, 60.0],
        "30,60",
    ),
    (
        "durations",
        [LogNormalDurations(median_s=30.0, sigma=0.8), LogNormalDurations(median_s=60.0, sigma=0.8)],
        "LogNormalDurations(median_s=30,sigma=0.8),LogNormalDurations(median_s=60,sigma=0.8)",
        "sigma",
        [0.2, 1.5],
        "0.2,1.5",
    ),
    (
        "timeout",
        [Timeout(cap_s=600.0), Timeout(cap_s=900.0)],
        "Timeout(cap_s=600),Timeout(cap_s=900)",
        "cap_s",
        [100.0, 200.0],
        "100,200",
    ),
]
IDS = [r[0] for r in ROLES]


def _small() -> Any:
    return apply_overrides(get_scenario("async-eta2"), ["steps=2"])[0]


def _names_both(message: str, role: str, field: str) -> None:
    """Both axes are named, each as a key (quoted): the role alone, not only as the dotted key's head."""
    assert repr(f"{role}.{field}") in message, message
    assert repr(role) in message, message


def _axes(role: str, wholes: list[Any], field: str, values: list[Any], field_first: bool) -> dict[str, Any]:
    pairs = [(role, wholes), (f"{role}.{field}", values)]
    return dict(reversed(pairs) if field_first else pairs)


@pytest.mark.parametrize("field_first", [False, True], ids=["whole-first", "field-first"])
@pytest.mark.parametrize(("role", "wholes", "text", "field", "values", "vtext"), ROLES, ids=IDS)
def test_python_grid_refuses_a_whole_axis_beside_its_field(
    role: str, wholes: list[Any], text: str, field: str, values: list[Any], vtext: str, field_first: bool
) -> None:
    with pytest.raises(FieldError) as err:
        grid(_small(), _axes(role, wholes, field, values, field_first))
    assert err.value.field == f"over.{role}.{field}"
    _names_both(str(err.value), role, field)


@pytest.mark.parametrize("field_first", [False, True], ids=["whole-first", "field-first"])
@pytest.mark.parametrize(("role", "wholes", "text", "field", "values", "vtext"), ROLES, ids=IDS)
def test_python_sweep_refuses_before_running(
    role: str, wholes: list[Any], text: str, field: str, values: list[Any], vtext: str, field_first: bool
) -> None:
    with ThreadPoolExecutor(1) as ex, pytest.raises(FieldError) as err:
        pipesim.sweep(_small(), _axes(role, wholes, field, values, field_first), executor=ex, timeout_s=None)
    assert err.value.field == f"over.{role}.{field}"
    _names_both(str(err.value), role, field)


@pytest.mark.parametrize("field_first", [False, True], ids=["whole-first", "field-first"])
@pytest.mark.parametrize(("role", "wholes", "text", "field", "values", "vtext"), ROLES, ids=IDS)
def test_cli_refuses_a_whole_axis_beside_its_field(
    role: str,
    wholes: list[Any],
    text: str,
    field: str,
    values: list[Any],
    vtext: str,
    field_first: bool,
    capsys: pytest.CaptureFixture[str],
) -> None:
    items = [f"{role}={text}", f"{role}.{field}={vtext}"]
    items = items[::-1] if field_first else items
    with pytest.raises(UsageError) as err:
        parse_over(_small(), items)
    _names_both(str(err.value), role, field)
    base = type(getattr(_small(), role)).__name__
    assert base not in str(err.value)  # not the base scenario's class, which no cell runs
    argv = ["sweep", "async-eta2", "--set", "steps=2", "--workers", "1", "--quiet", "--timeout-s", "none"]
    assert main([*argv, *(a for i in items for a in ("--over", i))]) == 2
    stderr = capsys.readouterr().err
    _names_both(stderr, role, field)
    assert base not in stderr


@pytest.mark.parametrize(("role", "wholes", "text", "field", "values", "vtext"), ROLES, ids=IDS)
def test_either_axis_alone_still_sweeps(
    role: str, wholes: list[Any], text: str, field: str, values: list[Any], vtext: str
) -> None:
    whole = parse_over(_small(), [f"{role}={text}"])
    assert whole == {role: wholes}
    assert [getattr(c.scenario, role) for c in grid(_small(), whole)] == wholes
    base = _small().with_(**{role: wholes[0]})  # the field axis on a design holding the class
    over = parse_over(base, [f"{role}.{field}={vtext}"])
    assert over == {f"{role}.{field}": values}
    cells = grid(base, over)
    assert [c.labels[f"{role}.{field}"] for c in cells] == values
    assert [getattr(getattr(c.scenario, role), field) for c in cells] == values


def test_two_field_axes_of_one_role_still_sweep() -> None:
    """Two dotted keys of one role are no whole-object axis: each cell sets both fields."""
    base = _small().with_(durations=LogNormalDurations(median_s=30.0, sigma=0.8))
    cells = grid(base, {"durations.median_s": [30.0, 60.0], "durations.sigma": [0.2, 1.5]})
    got = [(c.scenario.durations.median_s, c.scenario.durations.sigma) for c in cells]
    assert got == [(30.0, 0.2), (30.0, 1.5), (60.0, 0.2), (60.0, 1.5)]
