"""What a factory's parameters do to its scenario, for ``--set`` on a scenario that has a factory.

Design: :func:`pipesim.io.overrides.build` gives a ``--set`` key that is a named parameter of the
factory to the factory, and applies the others to the scenario it returns, in order. Two checks
sit between those two steps:

* :func:`check_knob_kept` refuses a later key that sets a field one of the parameters set (it
  undid the parameter without a word).
* :func:`waiting_fields` lets a parameter refused beside another field wait for a later ``--set``,
  as a scenario key does in :func:`~pipesim.io.overrides.apply_overrides`. A factory parameter
  named like the scenario key it sets (``max_staleness`` of ``chapter13:chapter_scenario``)
  reached the factory, which built the scenario and refused it (a default task pool past the
  bound) before the ``--set pool_size=3000`` that settles it was applied, so the pair was refused
  in both orders while ``synchronous`` (whose factory takes no parameters) ran them. Now such a
  refusal builds the factory without those parameters and gives them back to the caller, to be
  applied as the scenario's own keys in their place among the other ``--set``. That is only done
  where each one is its field and nothing else: the factory built with it at two other values
  (the field's value without it, and one step away) must be the scenario built without it with
  the field set. Otherwise the factory's refusal stands.

Only the error path pays for these builds; a factory is cheap to build.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from pipesim.config import PipelineConfig, Scenario
from pipesim.core.errors import FieldError
from pipesim.core.validate import CrossFieldError

if TYPE_CHECKING:
    from pipesim.io.registry import Entry

__all__ = ["check_knob_kept", "same_refusal", "waiting_fields"]

_PIPELINE_KEYS = frozenset(f.name for f in dataclasses.fields(PipelineConfig))
_SCENARIO_KEYS = frozenset(f.name for f in dataclasses.fields(Scenario)) - {"pipeline", "name"}


def _field_of(scenario: Scenario, key: str) -> Any:
    return getattr(scenario.pipeline if key in _PIPELINE_KEYS else scenario, key)


def _probes(value: Any) -> list[Any]:
    """Two values at which a parameter is checked to be its field: ``value`` (the field's value
    where the parameter is not given) and one step away; none for a type without a step."""
    if isinstance(value, bool):
        return [value, not value]
    if isinstance(value, int | float):
        return [value, value + 1]
    return []


def _is_its_field(entry: Entry, args: Mapping[str, Any], base: Scenario, key: str) -> bool:
    """Whether the factory's parameter ``key`` sets the scenario's field ``key`` and nothing else,
    at two values (:func:`_probes`): ``entry`` built with ``args`` and the parameter at a value is
    ``base`` (built with ``args`` alone) with the field at that value."""
    probes = _probes(_field_of(base, key))
    if not probes:
        return False
    for value in probes:
        try:
            if entry.build(**args, **{key: value}) != base.with_(**{key: value}):
                return False
        except (ValueError, TypeError):
            return False
    return True


def waiting_fields(
    entry: Entry, args: Mapping[str, Any], refusal: FieldError, later: Collection[str]
) -> tuple[Scenario, set[str]] | None:
    """The factory's scenario without the parameters that wait, and their names; None where the
    factory's ``refusal`` of ``args`` stands.

    They wait where the factory refused ``args`` beside another field (its cause is a
    :class:`~pipesim.core.validate.CrossFieldError`: a default task pool past the bound, a batch
    that is not whole groups, fewer slots than replicas), ``later`` (the keys of the other
    ``--set``) is not empty, and each parameter named like a scenario key is that
    field (:func:`_is_its_field`); the caller applies them as the scenario's keys, in their place
    among ``later``, so ``--set max_staleness=100000 --set pool_size=3000`` runs in either order and
    a pair none settles is refused on its final values."""
    if not isinstance(refusal.__context__, CrossFieldError) or not later:
        return None
    held = {k for k in args if k in _PIPELINE_KEYS or k in _SCENARIO_KEYS}
    if not held:
        return None
    rest = {k: v for k, v in args.items() if k not in held}
    try:
        base = entry.build(**rest)
    except (ValueError, TypeError):
        return None
    if not all(_is_its_field(entry, rest, base, k) for k in held):
        return None
    return base, held


def same_refusal(refusal: FieldError, final: ValueError) -> bool:
    """Whether ``final``, the refusal of the ``--set`` pairs once the parameters waited (headed by
    the pair that began the wait), is the factory's ``refusal`` of them: the same field and text
    (no later ``--set`` changed a value it shows), so the factory's refusal stands as it was."""
    heading, sep, text = str(final).partition(": ")
    return bool(sep) and getattr(final, "field", None) == refusal.field and str(refusal).endswith(text)


def check_knob_kept(entry: Entry, args: dict[str, Any], scenario: Scenario, keys: Collection[str]) -> None:
    """Refuse a key that sets a field one of the factory's parameters set: applied after the
    factory, it undid the parameter without a word (``--set max_head_offpolicyness=1 --set
    max_staleness=4`` on ``systems:areal`` exported eta 4). A parameter's fields are those that
    differ from the scenario built without it (so a parameter given its default value sets none).
    ``keys``: the later keys, as given (a dotted key is named by its role's field)."""
    by_field = {k.split(".")[0]: k for k in keys}
    if not by_field or not args:
        return
    for name, value in args.items():
        base = entry.build(**{k: v for k, v in args.items() if k != name})
        changed = {
            f.name
            for f in dataclasses.fields(scenario.pipeline)
            if getattr(base.pipeline, f.name) != getattr(scenario.pipeline, f.name)
        } | {
            f.name
            for f in dataclasses.fields(scenario)
            if f.name not in ("pipeline", "name", "pool_size")  # a pool sized for the design: not a knob
            and getattr(base, f.name) != getattr(scenario, f.name)
        }
        for field in sorted(changed & set(by_field)):
            raise FieldError(
                f"{by_field[field]} would undo {name}={value!r}, which sets {field}: give one of them",
                by_field[field],
            )
