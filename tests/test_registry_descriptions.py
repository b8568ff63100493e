"""``pipesim list`` tells every registered scenario apart by its description: two presets of one
system (slime's drain and fully async modes) once shared one line, the wrapped function's."""

from __future__ import annotations

import re
from collections import Counter

from pipesim.io.registry import registry


def test_every_registered_scenario_has_a_description_of_its_own() -> None:
    """Distinct once a trailing ``(key)`` is set aside: a wrapped function's line with the key
    appended ("slime: mode=drain or mode=fully_async ... (slime_drain)") says nothing of its own."""
    entries = registry().values()
    own = Counter(re.sub(r" \([^()]*\)$", "", e.description) for e in entries)
    repeated = [d for d, n in own.items() if n > 1]
    assert not repeated
    assert all(e.description != "(no description)" for e in entries)
