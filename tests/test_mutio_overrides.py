"""``--set`` overrides (:func:`pipesim.io.overrides.apply_overrides`): booleans and pending changes.

A mutation audit of :mod:`pipesim.io.overrides` found no test holding these:

- a boolean key reads ``true``/``false``, ``1``/``0`` and ``yes``/``no`` (any case), and refuses
  other text naming the key;
- a change refused only beside another field waits for the next ``--set`` (pending), and a later
  value of the same key replaces it: the last value given wins, as for any key.
"""

from __future__ import annotations

import pytest

from pipesim.core.validate import FieldError
from pipesim.io.registry import apply_overrides, get_scenario
from pipesim.policies.groups import WholeGroups

BASE = get_scenario("async-eta1")


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("yes", True),
        ("no", False),
        ("1", True),
        ("0", False),
        ("true", True),
        ("false", False),
        ("YES", True),
        ("False", False),
    ],
)
@pytest.mark.parametrize("start", [False, True])
def test_a_boolean_set_reads_each_spelling(text: str, want: bool, start: bool) -> None:
    """From either value, so that a spelling read as the other one (or as the default) fails."""
    base, _ = apply_overrides(BASE, [f"colocated={start}"])
    assert base.pipeline.colocated is start
    s, given = apply_overrides(base, [f"colocated={text}"])
    assert s.pipeline.colocated is want
    assert given == {"colocated": text}


@pytest.mark.parametrize("text", ["maybe", "2", "on", "y"])
def test_other_text_for_a_boolean_is_refused_naming_it(text: str) -> None:
    with pytest.raises(FieldError) as err:
        apply_overrides(BASE, [f"colocated={text}"])
    assert err.value.field == "colocated", str(err.value)
    assert text in str(err.value)


def test_a_later_value_replaces_a_pending_one() -> None:
    """WholeGroups(3) at batch_size 64 is refused beside batch_size (pending); WholeGroups(4),
    given next, replaces it and settles the scenario."""
    assert BASE.pipeline.batch_size == 64
    with pytest.raises(FieldError):
        apply_overrides(BASE, ["batching=WholeGroups(3)"])
    s, given = apply_overrides(BASE, ["batching=WholeGroups(3)", "batching=WholeGroups(4)"])
    assert isinstance(s.batching, WholeGroups)
    assert s.batching.samples_per_group == 4
    assert given == {"batching": "WholeGroups(4)"}


def test_a_pending_value_settled_by_another_key_is_kept() -> None:
    """The pending WholeGroups(3) is kept when the next key (batch_size 63) settles it."""
    s, _ = apply_overrides(BASE, ["batching=WholeGroups(3)", "batch_size=63"])
    assert isinstance(s.batching, WholeGroups)
    assert (s.batching.samples_per_group, s.pipeline.batch_size) == (3, 63)
