"""A run spec's table given as something else (a list, a number, a string) is refused naming the
table: ``cluster: [1, 2]`` in YAML said "cluster.gpu is missing", as if the table were absent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipesim.plan.checks import PlanError
from pipesim.plan.runspec import PLANNED_TABLES, from_dict, read

SPEC = Path(__file__).resolve().parent.parent / "examples" / "run_qwen3_8b.toml"


@pytest.mark.parametrize("table", [t for t in PLANNED_TABLES if t in read(SPEC)])
@pytest.mark.parametrize("value", [[1, 2], 5, "h100"], ids=["list", "number", "string"])
def test_a_table_of_the_wrong_type_is_refused_naming_it(table: str, value: Any) -> None:
    data = {**read(SPEC), table: value}
    with pytest.raises(PlanError) as info:
        from_dict(data)
    assert info.value.field == table and "must be a table" in str(info.value)


def test_a_model_that_does_not_fit_is_said_once() -> None:
    """The engine's reason follows the spec's key once: it read "design.tp (1): qwen3-32b does not
    fit: model qwen3-32b does not fit: 61.0 GiB ..."."""
    data = read(SPEC)
    data["cluster"] = {**data["cluster"], "gpu": "l40s", "n_gpus": 16}
    data["model"] = {"name": "qwen3-32b"}
    data["design"] = {**data["design"], "placement": 8, "tp": 1}
    with pytest.raises(PlanError) as info:
        from_dict(data)
    said = str(info.value)
    assert info.value.field == "design.tp" and said.count("does not fit") == 1, said
