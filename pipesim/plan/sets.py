"""``--set TABLE.KEY=VALUE`` on a spec file's tables, before they are read into a spec.

``pipesim run`` and ``pipesim export`` take it on a run spec, ``pipesim plan`` on a plan spec (or
a run spec planned over). A value is read as TOML reads it (``2``, ``0.5``, ``true``, ``[1, 2]``,
``{a = 1}``, ``"x"``); a bare word that is not TOML is a string. A key may go through nested
tables (``workload.agent.turns=4``); a table that is missing is made. The tables a spec allows are
the caller's: an unknown one, a missing ``=`` or an empty part is a :class:`PlanError` naming the
key, and every other check is the spec's own, when the edited tables are read.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from pipesim.core.errors import shown
from pipesim.core.validate import MAX_NESTING, key_shown, nested_too_deep
from pipesim.plan.checks import PlanError, did_you_mean

__all__ = ["apply_sets", "parse_value"]


_TOO_DEEP = object()


def parse_value(text: str) -> Any:
    """A ``--set`` value as TOML reads it; a bare word that is not TOML is a string."""
    import tomllib

    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    except RecursionError:
        value = _TOO_DEEP
    except ValueError as e:  # an integer past Python's digit limit (tomllib converts it)
        from pipesim.plan.specread import too_long_int

        raise ValueError(too_long_int(e)) from None
    if value is _TOO_DEEP or nested_too_deep(value):
        raise ValueError(f"arrays nest more than {MAX_NESTING} levels deep")
    return value


def apply_sets(
    data: Mapping[str, Any], sets: Sequence[str], tables: Sequence[str], what: str = "a spec"
) -> dict[str, Any]:
    """``data`` (not changed) with each ``table.key=value`` set, ``table`` one of ``tables``;
    PlanError naming a bad pair's key. ``what`` names the spec in the message."""
    out = copy.deepcopy(dict(data))
    for pair in sets:
        key, eq, text = pair.partition("=")
        key = key.strip()
        name = key_shown(key)  # what a message names: a 100 kB key is cut to its ends
        parts = key.split(".")
        if not eq or len(parts) < 2 or not all(parts):
            raise PlanError(
                f"--set {shown(pair)}: {what} takes TABLE.KEY=VALUE (e.g. cluster.n_gpus=32), TABLE one "
                f"of {', '.join(tables)}",
                name,
            )
        if parts[0] not in tables:
            raise PlanError(
                f"--set {name}: unknown table {key_shown(parts[0])!r}{did_you_mean(parts[0], tables)} "
                f"(choose from {', '.join(tables)})",
                name,
            )
        node = out
        for i, p in enumerate(parts[:-1]):
            nxt = node.get(p)
            if nxt is None:
                nxt = node[p] = {}
            if not isinstance(nxt, dict):
                where = key_shown(".".join(parts[: i + 1]))
                raise PlanError(f"--set {name}: {where} is {shown(nxt)}, not a table", name)
            node = nxt
        try:
            node[parts[-1]] = parse_value(text.strip())
        except ValueError as e:
            raise PlanError(f"--set {name}: {e}", name) from None
    return out
