"""``Scenario.name`` is checked at construction (issue 44): a list, a number or None ran, and was
saved as a directory the loader refused (None came back as the string 'none')."""

from __future__ import annotations

import pytest

import pipesim
from pipesim import Scenario


@pytest.mark.parametrize("bad", [["a", "b"], 7, None, "", "   ", "a\nb", "x" * 201, b"bytes"])
def test_a_bad_name_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ValueError) as info:
        Scenario(name=bad)  # type: ignore[arg-type]
    assert str(info.value).startswith("name must be")
    assert len(str(info.value)) < 300


@pytest.mark.parametrize("good", ["scenario", "systems:areal", "eta=2, partial", "x" * 200, "η 2"])
def test_a_printable_name_is_kept(good: str) -> None:
    assert Scenario(name=good).name == good
    assert pipesim.Scenario(name=good).with_(seed=1).name == good
