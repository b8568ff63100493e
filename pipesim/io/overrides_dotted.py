"""Dotted keys: ``ROLE.FIELD=value`` changes one field of a scenario's duration model or policy.

Design: ``--set durations.median_s=60``, ``--set weight_update.load_time_s=3`` and ``--over
weight_update.n=16,64`` name one field of the object a scenario holds in a role (:data:`ROLES`:
the duration model and every policy role). The object must be a dataclass (the catalog's policies
and duration models are frozen ones, and so is a user's ``--policies`` class written the usual way);
the field is changed with :func:`dataclasses.replace`, so the class's own ``__post_init__``
validates the new value, and a refusal is a :class:`~pipesim.core.validate.FieldError` whose field
is the dotted key. Only the object's own fields are reached: ``weight_update.k`` of
``SyncEveryK(k, inner=...)`` is one, and the wrapped policy is set whole
(``weight_update=SyncEveryK(k=2, inner=InFlightUpdate(load_time_s=3))``), never by a longer key.

A value is typed by the field's annotation (:func:`field_value`): a sweep axis holds those values
(its column is the dotted key, its labels the numbers), and :func:`fold` turns a cell's dotted
keys into whole objects on each design's own policy, so one axis sweeps a field of several designs.
An axis over a role's whole object beside one over a field of it (``weight_update=A(1),A(2)`` and
``weight_update.x=3,4``) is refused (:func:`whole_and_field`): the field's value would replace the
listed objects' own in every cell, so cells labelled by different objects would run the same.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pipesim.config import Scenario
from pipesim.core.errors import FieldError, shown

if TYPE_CHECKING:
    from pipesim.io.registry import Entry

__all__ = [
    "ROLES",
    "check_not_owned",
    "dotted_keys",
    "field_value",
    "fold",
    "parameter_owning",
    "replace_field",
    "split",
    "whole_and_field",
    "whole_and_field_refusal",
]

ROLES = ("durations", "admission", "weight_update", "batching", "timeout", "failures", "replicas")
"""The scenario fields whose object's fields a dotted key reaches (``ROLE.FIELD``)."""

Coerce = Callable[[str, str, Any], Any]
"""How a text is read as a type: :func:`pipesim.io.overrides._coerce` (key, text, type hint)."""


def split(key: str) -> tuple[str, str] | None:
    """``(role, field)`` of a dotted key whose head is one of :data:`ROLES`; None for any other key."""
    role, dot, sub = key.partition(".")
    return (role, sub) if dot and role in ROLES else None


def dotted_keys(scenario: Scenario, roles: tuple[str, ...] = ROLES) -> list[str]:
    """``ROLE.FIELD`` for every field of each of ``roles`` whose object is a dataclass."""
    keys = []
    for role in roles:
        obj = getattr(scenario, role)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            keys += [f"{role}.{f.name}" for f in dataclasses.fields(obj) if f.init]
    return keys


def _target(obj: Any, key: str) -> tuple[Any, str]:
    """``obj`` (the object in ``key``'s role) and the field's name; FieldError (the key) where
    ``obj`` has no such field to set."""
    role, sub = split(key) or ("", "")
    if obj is None:
        raise FieldError(
            f"{key}: {role} is none in this scenario, so it has no fields; give it whole: {role}=...", key
        )
    name = type(obj).__name__
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise FieldError(
            f"{key}: {role} is {name}, not a dataclass, so its fields cannot be set by a dotted key; "
            f"give the whole object: {role}={name}(...)",
            key,
        )
    fields = [f.name for f in dataclasses.fields(obj) if f.init]
    if sub not in fields:
        has = f"its fields: {', '.join(fields)}" if fields else f"it has no fields; give {role} whole"
        wrapped = (
            f"; a dotted key reaches the outer policy's own fields, and a wrapped one is given whole: "
            f"{role}={name}(..., {sub.split('.')[0]}=...)"
            if "." in sub
            else ""
        )
        raise FieldError(f"{key}: {role} is {name}, which has no field {shown(sub)}; {has}{wrapped}", key)
    return obj, sub


def _hint(obj: Any, sub: str) -> Any:
    """The annotation of field ``sub`` of ``obj``; Any where a user's module leaves it unresolvable."""
    try:
        return typing.get_type_hints(type(obj))[sub]
    except Exception:  # a name of a --policies module that get_type_hints cannot find
        declared = next(f.type for f in dataclasses.fields(obj) if f.name == sub)
        return Any if isinstance(declared, str) else declared


def _plain(hint: Any) -> bool:
    """Whether a text can hold a value of type ``hint`` (numbers, strings, Literals, optionals)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return all(a is type(None) or _plain(a) for a in args)
    return hint in (int, float, bool, str, Any) or origin in (typing.Literal, tuple)


def replace_field(obj: Any, key: str, value: Any) -> Any:
    """``obj``, the object in ``key``'s role, with the field set to ``value``: ``dataclasses.replace``,
    so the class validates it; its refusal is a FieldError naming ``key``."""
    obj, sub = _target(obj, key)
    try:
        return dataclasses.replace(obj, **{sub: value})
    except (TypeError, ValueError) as exc:
        msg = str(exc)
        raise FieldError(msg if msg.startswith(key) else f"{key}: {msg}", key) from None


def field_value(scenario: Scenario, key: str, text: str, coerce: Coerce) -> Any:
    """The value of ``key=text`` typed by the field's annotation, checked by setting it."""
    obj, sub = _target(getattr(scenario, key.split(".", 1)[0]), key)
    hint = _hint(obj, sub)
    if not _plain(hint):
        role = key.split(".", 1)[0]
        raise FieldError(
            f"{key}: {sub} of {type(obj).__name__} holds an object, not a number or a word; "
            f"give {role} whole: {role}={type(obj).__name__}(..., {sub}=...)",
            key,
        )
    value = coerce(key, text, hint)
    replace_field(obj, key, value)
    return value


def fold(scenario: Scenario, changes: Mapping[str, Any]) -> dict[str, Any]:
    """``changes`` as ``Scenario.with_`` keywords: each dotted key set on its role's object (the one
    ``changes`` gives, else ``scenario``'s), so ``{"weight_update.n": 16}`` becomes
    ``{"weight_update": replace(scenario.weight_update, n=16)}``."""
    out = {k: v for k, v in changes.items() if split(k) is None}
    for key, value in changes.items():
        if (parts := split(key)) is not None:
            role = parts[0]
            out[role] = replace_field(out[role] if role in out else getattr(scenario, role), key, value)
    return out


def whole_and_field(keys: Iterable[str]) -> tuple[str, str] | None:
    """The first ``(ROLE, ROLE.FIELD)`` of a sweep's axis ``keys`` that sweep a role's whole object
    and one of its fields, else None. Together they would mislabel the cells: :func:`fold` sets
    the field on each object the whole axis lists, so ``weight_update=InFlightUpdate(1),
    InFlightUpdate(2)`` with ``weight_update.load_time_s=30,60`` ran two cells labelled apart that
    were one run (and ``--over`` read the field off the base scenario's object, which no cell runs,
    naming a class the user had not asked for). Refused like a key both ``--set`` and swept."""
    given = list(keys)
    for key in given:
        if (parts := split(key)) is not None and parts[0] in given:
            return parts[0], key
    return None


def whole_and_field_refusal(whole: str, key: str, named: Callable[[str], str]) -> str:
    """The message refusing axes ``whole`` and ``key`` (:func:`whole_and_field`), each as the
    caller spells an axis (``named``: ``--over 'weight_update'``, ``over['weight_update']``)."""
    sub = key.split(".", 1)[1]
    return (
        f"{named(whole)} and {named(key)}: the field axis's values would replace {sub} in every "
        f"object the other axis lists, so cells labelled by different objects would run the same; "
        f"sweep one or the other (or list whole objects only: {whole}=...({sub}=...),...)"
    )


def parameter_owning(entry: Entry, key: str, given: Mapping[str, Any]) -> str | None:
    """The factory parameter that sets the policy field ``key`` (``ROLE.FIELD``), or None.

    A parameter owns a field when building with another value of it (an int or float one more, a
    bool flipped; the value ``given``, else its default) changes that field of that role's object,
    the object's class unchanged. ``systems:roll`` builds its supply and its batch rule both from
    ``async_generation_ratio``, so ``--set admission.ratio=2`` alone gave a design whose two halves
    disagreed (it broke the staleness bound its batch rule promised) and ``--set batching.ratio=0``
    changed nothing: a dotted key into an owned field is refused, naming the parameter."""
    parts = split(key)
    if parts is None:
        return None
    role, field = parts
    for name, param in entry.parameters().items():
        value = given.get(name, param.default)
        if isinstance(value, bool):
            other: Any = not value
        elif isinstance(value, int | float):
            other = value + 1
        else:
            continue
        try:
            here = getattr(entry.build(**{**given, name: value}), role)
            there = getattr(entry.build(**{**given, name: other}), role)
        except (ValueError, TypeError, AttributeError):
            continue
        same_class = type(here) is type(there) and dataclasses.is_dataclass(here)
        if same_class and getattr(here, field, None) != getattr(there, field, None):
            return name
    return None


def check_not_owned(entry: Entry, args: Mapping[str, Any], keys: Sequence[str], flag: str) -> None:
    """Refuse a dotted key into a field a factory parameter sets (:func:`parameter_owning`)."""
    for key in keys:
        if (name := parameter_owning(entry, key, args)) is not None:
            raise FieldError(
                f"{flag} {key}: {entry.name} sets it from its parameter {name}, with the fields "
                f"that must agree with it; {flag} {name}=... instead",
                key,
            )
