"""Checking scenario-file data against the dataclass field types (used by :mod:`pipesim.io.scenario_files`).

:class:`Reader` walks the parsed data of a file (plain dicts, lists and scalars) beside the type
hints of :class:`~pipesim.config.Scenario`, :class:`~pipesim.config.PipelineConfig` and each
catalogued class, and builds the objects. A table with a ``type`` key names a class of the policy
catalog; nothing else is ever looked up, imported or executed. Each error names the source, the
dotted key (``weight_update.inner.k``) and what was expected.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any

from pipesim.core.validate import FieldError, key_shown, shown
from pipesim.policies import catalog

NONE = "none"
"""How None is written for a field whose default is not None (see :mod:`pipesim.io.scenario_files`)."""


def _a(noun: str) -> str:
    """``noun`` with its article: a Timeout, an Admission."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


class ScenarioFileError(FieldError):
    """A scenario file that cannot be read: the message names the file, the key and the problem.

    A :class:`~pipesim.core.validate.FieldError`: ``err.file`` is the source (the path, or
    ``<string>``), ``err.field`` the dotted key (``pipeline.n_slots``, ``weight_update.inner.k``;
    ``""`` where the whole file is refused: unreadable, not TOML, not a table)."""


def field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def type_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an annotation that cannot be resolved: checked by the class
        return {}


_PROTOCOL_KINDS: dict[str, str] = {
    "Admission": "admission",
    "WeightUpdate": "weight_update",
    "BatchPolicy": "batching",
    "FailurePolicy": "failures",
    "Routing": "routing",
    "DurationModel": "durations",
    "Timeout": "timeout",
    "Replicas": "replicas",
    "WeightSyncCost": "sync_cost",
}


class Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, where: str, message: str, field: str | None = None) -> ScenarioFileError:
        """The refusal of the key ``where`` (its ``field``, unless another is given)."""
        text = f"{self.source}: {where + ': ' if where else ''}{message}"
        return ScenarioFileError(text, where if field is None else field, self.source)

    def refused(self, where: str, exc: Exception) -> ScenarioFileError:
        """A constructor's refusal ``exc`` of a table at ``where``: a :class:`FieldError`'s field
        under ``where`` (``pipeline`` + ``n_slots``), any other error the table's."""
        inner = getattr(exc, "field", "") if isinstance(exc, FieldError) else ""
        field = f"{where}.{inner}" if where and inner else (inner or where)
        return self.error(field, str(exc), field)  # the key first: the line a person reads

    def check_keys(self, table: Mapping[str, Any], valid: list[str], where: str) -> None:
        for key in table:
            if not isinstance(key, str) or key not in valid:
                close = difflib.get_close_matches(str(key), valid, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                path = f"{where}.{key_shown(key)}" if where else key_shown(key)
                listed = f"valid keys: {', '.join(valid)}" if valid else "this table takes no other keys"
                raise self.error(path, f"unknown key{hint} ({listed})")

    def dataclass(self, cls: type, table: Any, where: str, skip: tuple[str, ...] = ()) -> Any:
        if not isinstance(table, Mapping):
            raise self.error(where, f"expected a table of {cls.__name__} fields, got {shown(table)}")
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        self.check_keys({k: v for k, v in table.items() if k not in skip}, list(fields), where)
        missing = [n for n, f in fields.items() if field_default(f) is dataclasses.MISSING and n not in table]
        if missing:
            raise self.error(f"{where}.{missing[0]}", f"missing (a required field of {cls.__name__})")
        hints = type_hints(cls)
        kwargs = {
            k: self.value(v, hints.get(k, Any), f"{where}.{k}", kind=k if k in catalog.KINDS else None)
            for k, v in table.items()
            if k not in skip
        }
        try:
            return catalog.construct(cls, [], kwargs)
        except ValueError as exc:
            raise self.refused(where, exc) from None

    def policy(self, table: Mapping[str, Any], hint: Any, where: str, kind: str | None) -> Any:
        name = table.get("type")
        if name is None:
            cls = hint if isinstance(hint, type) and catalog.kinds_of(hint) else None
            if cls is None:
                raise self.error(f"{where}.type", 'missing: name the class (type = "Drain")')
        elif not isinstance(name, str):
            raise self.error(f"{where}.type", f"expected a class name (str), got {shown(name)}")
        else:
            try:
                cls = catalog.lookup(name, kind)
            except catalog.UnknownPolicyError as exc:  # kept as the cause: saved.load reads it
                raise self.error(f"{where}.type", str(exc)) from exc
            except ValueError as exc:
                raise self.error(f"{where}.type", str(exc)) from None
            if kind is not None and kind not in catalog.kinds_of(cls):
                raise self.error(f"{where}.type", f"{name} does not fit {kind}")
        if not dataclasses.is_dataclass(cls):
            self.check_keys({k: v for k, v in table.items() if k != "type"}, [], where)
            return cls()
        return self.dataclass(cls, table, where, skip=("type",))

    def value(self, value: Any, hint: Any, where: str, kind: str | None = None) -> Any:
        """``value`` checked against ``hint`` (lists become tuples, tables become objects)."""
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if isinstance(hint, str) or hint is Any:
            if isinstance(value, Mapping):
                return self.policy(value, None, where, kind)
            return tuple(value) if isinstance(value, list) else value
        if origin in (typing.Union, types.UnionType) or (args and type(None) in args and origin is not tuple):
            if (value == NONE or value is None) and type(None) in args:  # TOML "none", YAML null
                return None
            options = [a for a in args if a is not type(None)]
            errors: list[ScenarioFileError] = []
            for a in options:
                try:
                    return self.value(value, a, where, kind)
                except ScenarioFileError as exc:
                    errors.append(exc)
            if len(options) == 1:
                raise errors[0]
            raise self.error(where, f"expected {_describe(hint)}, got {shown(value)}")
        if origin is typing.Literal:
            if value in args:
                return value
            raise self.error(where, f"expected one of {', '.join(map(repr, args))}, got {shown(value)}")
        if origin is tuple:
            if not isinstance(value, list | tuple):
                raise self.error(where, f"expected an array ({_describe(hint)}), got {shown(value)}")
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(self.value(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
            if len(args) != len(value):
                raise self.error(
                    where, f"expected {len(args)} values ({_describe(hint)}), got {shown(value)}"
                )
            return tuple(self.value(v, a, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
        if hint is bool:
            if isinstance(value, bool):
                return value
            raise self.error(where, f"expected a bool (true or false), got {shown(value)}")
        if hint is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            raise self.error(where, f"expected an integer, got {shown(value)}")
        if hint is float:
            if isinstance(value, int | float) and not isinstance(value, bool):
                return value
            raise self.error(where, f"expected a number, got {shown(value)}")
        if hint is str:
            if isinstance(value, str):
                return value
            raise self.error(where, f"expected a string, got {shown(value)}")
        if isinstance(hint, type):
            kind = kind or _PROTOCOL_KINDS.get(hint.__name__)
            if isinstance(value, Mapping):
                return self.policy(value, hint, where, kind)
            if isinstance(value, str):
                raise self.error(
                    where,
                    f"expected a table naming {_a(_describe(hint))} (type = {shown(value)}), got a string",
                )
            raise self.error(where, f"expected a table naming {_a(_describe(hint))}, got {shown(value)}")
        return value


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is type(None):
        return '"none"'
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return f"array of {_describe(args[0])}"
        return f"array of [{', '.join(_describe(a) for a in args)}]"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    names = {int: "integer", float: "number", bool: "bool", str: "string"}
    if hint in names:
        return names[hint]
    return getattr(hint, "__name__", str(hint))
