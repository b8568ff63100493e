"""``Scenario.with_`` takes the scenario's own fields; a dotted key the command line accepts
(``--set durations.tool_median_s=3``) was refused as unknown with no word on how to set it. It
is still refused (FieldError naming the key), and the message says how."""

from __future__ import annotations

import dataclasses

import pytest

import pipesim
from pipesim.core.validate import FieldError


def test_a_dotted_key_is_refused_with_the_way_to_set_it() -> None:
    scenario = pipesim.Scenario()
    with pytest.raises(FieldError) as info:
        scenario.with_(**{"durations.tool_median_s": 3.0})
    assert info.value.field == "durations.tool_median_s"
    assert "dataclasses.replace(scenario.durations, tool_median_s=...)" in str(info.value)
    done = scenario.with_(durations=dataclasses.replace(scenario.durations, tool_median_s=3.0))
    assert done.durations.tool_median_s == 3.0  # the way it names works


def test_a_plain_unknown_key_gets_no_nested_hint() -> None:
    with pytest.raises(FieldError) as info:
        pipesim.Scenario().with_(n_slot=4)
    assert info.value.field == "n_slot" and "dataclasses.replace" not in str(info.value)
