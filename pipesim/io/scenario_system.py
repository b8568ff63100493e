"""A scenario file that names a registered preset by its system's own knob names: a ``[system]``
table with ``name`` (``systems:areal``) and the knobs its factory takes. :func:`system_to_dict`
writes one; :func:`system_scenario` builds the preset from one, and :func:`system_knobs` reads the
preset and its knobs (which ``pipesim run`` needs to build the file as it builds the preset, so
``--set`` takes the preset's knobs). A file is data: the name must be a registered preset, never a
module or a path. :mod:`pipesim.io.scenario_files` reads and writes the rest of the format and
re-exports :func:`system_to_dict`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pipesim.config import PipelineConfig, Scenario
from pipesim.core.errors import shown
from pipesim.core.validate import FieldError, key_shown, refuse
from pipesim.io.scenario_schema import NONE, Reader

if TYPE_CHECKING:
    from pipesim.io.registry import Entry

__all__ = ["system_knobs", "system_scenario", "system_to_dict"]


def system_to_dict(preset: str, **knobs: Any) -> dict[str, Any]:
    """A file naming a registered preset (``systems:areal``) by its system's own knob names: a
    ``[system]`` table with ``name`` and every knob the preset's factory takes (``knobs`` over its
    defaults; a knob at None, such as the AReaL preset's ``max_concurrent_rollouts`` (None there: the
    slot count), is written as the file's none marker). The reader (:func:`scenario_from_dict`)
    builds the preset from the table (the knobs, plus any :class:`PipelineConfig` field the preset
    passes to its pipeline), so the file loads back to the scenario the preset builds, and an
    edited knob changes the scenario as the system's own knob would."""
    from pipesim.io.registry import resolve
    from pipesim.io.scenario_files import SCHEMA_VERSION, _data

    entry = resolve(preset)
    params = entry.parameters()
    for k in knobs:
        if k not in params:
            raise refuse(
                f"system.{k}", f"is not a knob of {entry.name} (its knobs: {', '.join(params) or 'none'})"
            )
    table: dict[str, Any] = {"name": entry.name}
    for name, p in params.items():
        value = knobs.get(name, p.default)
        if value is p.empty:
            raise refuse(f"system.{name}", f"missing (a required knob of {entry.name})")
        table[name] = _data(value, f"system.{name}")
    return {"schema_version": SCHEMA_VERSION, "system": table}


def _signature(entry: Any) -> Mapping[str, Any]:
    import inspect

    try:
        return inspect.signature(entry.factory).parameters
    except (TypeError, ValueError):
        return {}


def system_scenario(r: Reader, data: Mapping[str, Any]) -> Scenario:
    entry, knobs = system_knobs(r, data)
    try:
        return entry.build(**knobs)
    except ValueError as exc:
        field = exc.field if isinstance(exc, FieldError) and exc.field else ""
        where = f"system.{field}" if field in knobs else "system"
        raise r.error(where, str(exc), where) from None


def system_knobs(r: Reader, data: Mapping[str, Any]) -> tuple[Entry, dict[str, Any]]:
    """The preset a ``[system]`` table names and its knobs as the factory takes them."""
    from pipesim.io.registry import get_entry

    r.check_keys(data, ["schema_version", "system"], "")
    table = data["system"]
    if not isinstance(table, Mapping):
        raise r.error("system", f"expected a table with name = a preset and its knobs, got {shown(table)}")
    name = table.get("name")
    if not isinstance(name, str):
        raise r.error(
            "system.name", f"expected a preset name (str, as pipesim list shows), got {shown(name)}"
        )
    try:  # a registered preset only: a file is data, so it never names a module or a file to run
        entry = get_entry(name)
    except ValueError as exc:
        raise r.error("system.name", str(exc)) from None
    params = entry.parameters()
    known = set(params)
    if any(p.kind is p.VAR_KEYWORD for p in _signature(entry).values()):
        known |= {f.name for f in dataclasses.fields(PipelineConfig)}
    knobs = {k: None if v == NONE else v for k, v in table.items() if k != "name"}
    for k in knobs:
        if k not in known:
            why = f"is not a knob of {entry.name} (its knobs: {', '.join(params) or 'none'})"
            where = f"system.{key_shown(k)}"
            raise r.error(where, why, refuse(where, why).field) from None
    return entry, {k: tuple(v) if isinstance(v, list) else v for k, v in knobs.items()}
