"""Overrides: ``key=value`` text parsed into typed scenario fields, policies and factory parameters.

Design: one parser for every place a scenario is changed from text -- ``--set`` and ``--over`` on
the command line, the registry's :func:`build`, scenario files' parameters. Values are parsed with
the dataclass field types of :class:`~pipesim.config.PipelineConfig` and
:class:`~pipesim.config.Scenario` (and of the duration model for ``durations.FIELD``), so a bad key
or an ill-typed value fails with a message that names it and lists the valid keys. Policy fields
take a policy from the catalog (:mod:`pipesim.policies.catalog`), with arguments:
``weight_update=InFlightUpdate(load_time_s=2)``, ``replicas=Replicas(2, LeastLoaded())``,
``timeout=Timeout(cap_s=600)``, ``timeout=none``; ``durations=LogNormalDurations(median_s=60)``
replaces the duration model and ``durations.FIELD=value`` changes one of its fields, as
``weight_update.load_time_s=3`` does one of the policy's (:mod:`pipesim.io.overrides_dotted`);
``sync_time_s=WeightSyncCost(8.2, 10)`` sets the sync time from a model size and a bandwidth. A key
that is a named parameter of the scenario's factory (``max_head_offpolicyness`` of
``systems:areal``) is passed to the factory instead (:func:`build`).

This module knows scenarios and the catalog, not the registry: an entry is anything with the
:class:`~pipesim.io.registry.Entry` methods (``parameters``, ``parameter_hints``, ``build``).
:mod:`pipesim.io.registry` re-exports every name here.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pipesim.config import PipelineConfig, Scenario
from pipesim.core.errors import FieldError, shown
from pipesim.core.validate import CrossFieldError, key_shown
from pipesim.io import overrides_dotted as dotted
from pipesim.io import overrides_factory as factory
from pipesim.io import overrides_policy as policy_text
from pipesim.policies.catalog import parse_policy, policy_classes

if TYPE_CHECKING:
    from pipesim.io.registry import Entry

__all__ = [
    "OPTIONAL_POLICY_FIELDS",
    "POLICY_FIELDS",
    "apply_overrides",
    "axis_value",
    "build",
    "cell_label",
    "changes_for",
    "label",
    "over_keys",
    "parse_parameter",
    "parse_value",
    "policy_classes",
    "split_pair",
    "valid_keys",
]

POLICY_FIELDS = ("admission", "weight_update", "batching")
OPTIONAL_POLICY_FIELDS = ("timeout", "failures", "replicas")
"""Policy fields whose value may be None (``--set timeout=none``)."""


def valid_keys(scenario: Scenario | None = None, entry: Entry | None = None) -> list[str]:
    """Every key ``--set`` accepts, for error messages and ``pipesim list --keys``."""
    keys = [f.name for f in dataclasses.fields(PipelineConfig)]
    keys += [f.name for f in dataclasses.fields(Scenario) if f.name != "pipeline"]
    if scenario is not None:  # ROLE.FIELD of the duration model and of each policy that is a dataclass
        keys += dotted.dotted_keys(scenario)
    if entry is not None:
        keys += [k for k in entry.parameters() if k not in keys]
    return keys


class UnknownKeyError(FieldError):
    """A ``--set`` or ``--over`` key that is no key of the scenario (nor, where a preset is named,
    one of its parameters): a FieldError whose ``field`` is the key."""


def over_keys(scenario: Scenario) -> list[str]:
    """The scenario's keys ``--over`` takes: :func:`valid_keys` without ``seed`` (a sweep runs
    ``--seeds`` seeds in every cell). ``durations.FIELD`` is an axis like a policy's field
    (:func:`pipesim.io.overrides_dotted.fold` builds each cell's model from the design's own)."""
    return [k for k in valid_keys(scenario) if k != "seed"]


def axis_value(scenario: Scenario, key: str, text: str) -> Any:
    """One ``--over`` value: :func:`parse_value`'s, except that a dotted policy key
    (``weight_update.n``) gives the field's value (16), checked on ``scenario``'s policy: the axis is
    labelled by it, and each cell sets it on its own design's policy
    (:func:`~pipesim.io.overrides_dotted.fold`)."""
    if dotted.split(key) is not None:
        return dotted.field_value(scenario, key, text.strip(), _coerce)
    return parse_value(scenario, key, text)


def unknown_key(
    key: str,
    scenario: Scenario,
    params: Sequence[str] = (),
    owner: str = "",
    keys: Sequence[str] | None = None,
) -> UnknownKeyError:
    """The error for a key that is neither a scenario key nor (where a preset is named, ``owner``)
    one of the preset's parameters ``params``: the closest of either as a suggestion, then both
    lists. ``keys``: the scenario keys the option takes (default :func:`valid_keys`; ``--over``'s
    are :func:`over_keys`)."""
    keys = valid_keys(scenario) if keys is None else list(keys)
    close = difflib.get_close_matches(key, [*params, *keys], n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    more = f"; parameters of {owner}: {', '.join(params)}" if params else ""
    return UnknownKeyError(f"unknown key {shown(key)}{hint}; valid keys: {', '.join(keys)}{more}", key)


def with_preset_params(
    exc: ValueError, scenario: Scenario, entry: Entry | None, keys: Sequence[str] | None = None
) -> ValueError:
    """``exc`` as a user of preset ``entry`` should read it: an unknown key redone to suggest from
    the preset's parameters too and list them (``--set`` and ``--over`` alike), and from ``keys``
    (the option's own scenario keys, :func:`unknown_key`) where given; else ``exc``."""
    if not isinstance(exc, UnknownKeyError):
        return exc
    params = list(entry.parameters()) if entry is not None else []
    if not params and keys is None:
        return exc
    return unknown_key(exc.field, scenario, params, entry.name if entry is not None else "", keys)


def _coerce(key: str, text: str, hint: Any) -> Any:
    """Parse ``text`` as type ``hint`` (int, float, bool, str, tuple of floats, Literal, optional)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) or (args and type(None) in args and origin is not tuple):
        if text.lower() in ("none", "null", "") and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        errors = []
        for a in rest:
            try:
                return _coerce(key, text, a)
            except ValueError as exc:
                errors.append(str(exc))
        names = " or ".join(_type_name(a) for a in args)
        raise FieldError(f"{key}: expected {names}, got {shown(text)}", key)
    if origin is typing.Literal:
        for a in args:
            if str(a) == text:
                return a
        raise FieldError(f"{key}: expected one of {', '.join(map(repr, args))}, got {shown(text)}", key)
    try:
        if hint is bool:
            low = text.lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return low in ("true", "1", "yes")
        if hint is int:
            return int(text.replace("_", ""))
        if hint is float:
            return float(text.replace("_", ""))
        if hint is str:
            return text
        if origin is tuple:
            return tuple(float(x) for x in text.strip("()[]").replace(":", ",").split(",") if x.strip())
    except ValueError:
        raise FieldError(f"{key}: expected {_type_name(hint)}, got {shown(text)}", key) from None
    if hint is Any or hint is None:
        return _literal_or_text(text)
    raise FieldError(f"{key}: cannot parse values of type {shown(hint)} from the command line", key)


def _type_name(hint: Any) -> str:
    if hint is type(None):
        return "none"
    return getattr(hint, "__name__", str(hint))


def _literal_or_text(text: str) -> Any:
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_value(scenario: Scenario, key: str, text: str) -> Any:
    """The typed value of ``key=text`` for ``scenario``; ValueError names the key and lists valid keys."""
    text = text.strip()
    if (parts := dotted.split(key)) is not None:  # ROLE.FIELD: the role's object, that field set
        if parts[0] == "durations" and key not in dotted.dotted_keys(scenario, ("durations",)):
            raise unknown_key(key, scenario)
        value = dotted.field_value(scenario, key, text, _coerce)
        return dotted.replace_field(getattr(scenario, parts[0]), key, value)
    if key in POLICY_FIELDS or key in OPTIONAL_POLICY_FIELDS or key == "durations":
        if key in OPTIONAL_POLICY_FIELDS and text.lower() in ("none", "null"):
            return None
        try:
            return parse_policy(policy_text.none_words(text), kind=key)
        except ValueError as exc:
            raise policy_text.inner_unknown(text, key) or FieldError(f"{key}: {exc}", key) from None
    if key == "sync_time_s" and "(" in text:
        try:
            cost = parse_policy(policy_text.none_words(text), kind="sync_cost")
        except ValueError as exc:  # named by the key the user set, not the policy kind it reads
            raise FieldError(f"{key}: {exc}", key) from None
        return float(cost.sync_time_s)
    hints = {**typing.get_type_hints(PipelineConfig), **typing.get_type_hints(Scenario)}
    if key not in hints or key == "pipeline":
        raise unknown_key(key, scenario)
    return _coerce(key, text, hints[key])


def parse_parameter(entry: Entry, key: str, text: str) -> Any:
    """The value of the factory parameter ``key`` of ``entry``, typed by its annotation or default."""
    param = entry.parameters()[key]
    hint = entry.parameter_hints().get(key)
    if hint is None and param.default is not param.empty and param.default is not None:
        hint = type(param.default)
    if hint is None:
        return _literal_or_text(text.strip())
    return _coerce(key, text.strip(), hint)


def changes_for(scenario: Scenario, key: str, value: Any) -> dict[str, Any]:
    """``Scenario.with_`` keyword arguments for one parsed override (``durations.x`` -> ``durations``,
    ``weight_update.n`` -> ``weight_update``: :func:`parse_value` gave the whole object)."""
    parts = dotted.split(key)
    return {key if parts is None else parts[0]: value}


def split_pair(pair: str, what: str = "override") -> tuple[str, str]:
    if "=" not in pair:
        raise ValueError(f"{what} {shown(pair)} is not key=value")
    key, text = (s.strip() for s in pair.split("=", 1))
    return key, text


def apply_overrides(scenario: Scenario, pairs: list[str]) -> tuple[Scenario, dict[str, str]]:
    """Apply ``key=value`` strings in order; returns the new scenario and the overrides as given.

    A change refused only beside another field (the scenario's
    :class:`~pipesim.core.validate.CrossFieldError`: ``batching=WholeGroups(3)`` at ``batch_size``
    16, ``admission=RollGroupAdmission(1)`` on a design with an eta) waits for the next, which may
    settle it (``batch_size=18``, ``max_staleness=0``), so the order of the two does not matter; if
    none does, the error is the scenario's refusal of every value given (its message shows the final
    values: ``--set max_staleness=100000 --set steps=5`` names steps 5, as the reverse order does),
    headed by the pair that began the wait. A value refused alone (``batch_size=0``) is the error
    at once."""
    given: dict[str, str] = {}
    pending: dict[str, Any] = {}
    began: tuple[str, str] | None = None  # the pair whose refusal began the pending changes
    last: Exception | None = None  # the refusal of every pending change together
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(
                f"override {shown(pair)} is not key=value; valid keys: {', '.join(valid_keys(scenario))}"
            )
        key, text = split_pair(pair)
        value = parse_value(scenario, key, text)
        changes = {**pending, **changes_for(scenario, key, value)}
        try:
            scenario = scenario.with_(**changes)
            pending, began, last = {}, None, None
        except (ValueError, TypeError) as exc:
            if not isinstance(exc, CrossFieldError):  # refused alone: the error at once
                raise _named(key, text, exc) from None
            began, pending, last = began or (key, text), changes, exc
        given[key] = text
    if began is not None and last is not None:
        raise _named(*began, last)
    return scenario, given


def _named(key: str, text: str, exc: Exception) -> FieldError:
    """``exc`` headed by the ``--set`` pair ``key=text``; a refusal naming ``pool_size`` (one the
    pair's key derives: a whole draw past its bound) names the key."""
    field = getattr(exc, "field", "") or key
    return FieldError(f"{key}={key_shown(text)}: {exc}", key if field == "pool_size" else field)


POOL_KEYS = ("steps", "batch_size", "n_slots")
"""The pipeline keys a preset's task pool is sized by: a factory taking ``**pipeline`` gets them
itself, so ``--set steps=200`` on ``systems:areal`` draws a pool for 200 steps (set afterwards, they
left the pool the preset had drawn for its own steps, and the run ran dry part-way)."""


def build(entry: Entry, pairs: list[str]) -> tuple[Scenario, dict[str, str]]:
    """Build ``entry`` with ``key=value`` overrides: keys that are the factory's named parameters go
    to the factory, and so do :data:`POOL_KEYS` where it takes ``**pipeline``; the others are
    applied to the scenario it returns, in order. A parameter that is its scenario key, refused
    beside another field, is applied as that key instead, in its place, so a later ``--set`` may
    settle it (:func:`~pipesim.io.overrides_factory.waiting_fields`)."""
    params = entry.parameters()
    to_pipeline = entry.takes_pipeline()
    factory_args: dict[str, Any] = {}
    pipeline_text: dict[str, str] = {}
    given: dict[str, str] = {}
    for pair in pairs:
        if "=" in pair:
            key, text = split_pair(pair)
            if key in params:  # the factory's meaning wins over a scenario key of the same name
                factory_args[key] = parse_parameter(entry, key, text)
                given[key] = text
            elif to_pipeline and key in POOL_KEYS:
                pipeline_text[key] = given[key] = text
    later = [p for p in pairs if "=" not in p or split_pair(p)[0] not in {*factory_args, *pipeline_text}]
    refusal: FieldError | None = None
    try:
        scenario = entry.build(**factory_args)
    except FieldError as exc:
        waits = factory.waiting_fields(entry, factory_args, exc, later)
        if waits is None:
            raise
        (scenario, held), refusal = waits, exc
        factory_args = {k: v for k, v in factory_args.items() if k not in held}
        later = [p for p in pairs if p in later or ("=" in p and split_pair(p)[0] in held)]
    rest_keys = [split_pair(p)[0] for p in later if "=" in p]
    factory.check_knob_kept(entry, factory_args, scenario, rest_keys)
    dotted.check_not_owned(entry, factory_args, rest_keys, "--set")
    if pipeline_text:  # each value read as the scenario's own key, then the preset built with them
        try:
            sized = {k: parse_value(scenario, k, t) for k, t in pipeline_text.items()}
        except ValueError as exc:
            raise FieldError(str(exc), getattr(exc, "field", "") or next(iter(pipeline_text))) from None
        scenario = _sized(entry, factory_args, sized, scenario, later)
    try:
        scenario, more = apply_overrides(scenario, later)
    except ValueError as exc:
        if refusal is not None and factory.same_refusal(refusal, exc):  # no later --set changed it
            raise refusal from None
        if (better := with_preset_params(exc, scenario, entry)) is not exc:
            raise better from None
        raise
    given.update(more)
    try:
        scenario.check_pool_size()  # refused before it runs, not when the pool runs dry
    except FieldError as exc:  # named by the key set here that outgrew the pool, if one did
        grew = [k for k in ("steps", "batch_size") if k in given and "pool_size" not in given]
        if not grew:
            raise
        raise FieldError(f"{grew[0]}={given[grew[0]]}: {exc}", grew[0]) from None
    return scenario, given


def _sized(
    entry: Entry, args: dict[str, Any], sized: dict[str, Any], scenario: Scenario, later: list[str]
) -> Scenario:
    """The preset built with the :data:`POOL_KEYS` given (``sized``). Where the factory refuses the
    pool it sizes from them (``--set steps=20000`` on ``systems:areal``: 5,121,280 tasks, past the
    bound) and a later pair sets ``pool_size``, it is built with that pool, so it sizes none and the
    pairs run in either order; its refusal stands where the factory takes no ``pool_size``."""
    try:
        return entry.build(**args, **sized)
    except FieldError as refusal:
        pools = [split_pair(p)[1] for p in later if "=" in p and split_pair(p)[0] == "pool_size"]
        if not pools:
            raise
        try:
            pool = parse_value(scenario, "pool_size", pools[-1])
        except ValueError as exc:
            raise _named("pool_size", pools[-1], exc) from None
        try:
            return entry.build(**args, **sized, pool_size=pool)
        except TypeError:
            raise refusal from None


def check_axes_kept(entry: Entry, pairs: list[str], keys: list[str]) -> None:
    """Refuse a sweep axis (``--over KEY=...``) over a field that a factory parameter given in
    ``pairs`` (``--set``) sets: each cell set the field after the factory, so ``--set
    max_head_offpolicyness=3 --over max_staleness=0,1`` ran eta 0 and 1 without a word, as a
    ``--set`` of the field after the parameter did
    (:func:`~pipesim.io.overrides_factory.check_knob_kept`)."""
    params = entry.parameters()
    args = {}
    for pair in pairs:
        if "=" in pair and (key := split_pair(pair)[0]) in params:
            args[key] = parse_parameter(entry, key, split_pair(pair)[1])
    if args and keys:
        factory.check_knob_kept(entry, args, entry.build(**args), keys)
    dotted.check_not_owned(entry, args, keys, "--over")


NONE_LABEL = "none"
"""The label of a grid value None (no timeout, no cap): the CLI's spelling of it."""


def cell_label(value: Any) -> Any:
    """A grid value's label: numbers and strings as they are, None as ``none``
    (:data:`NONE_LABEL`), anything else by its repr.

    Policy objects are dataclasses, so their repr names the class and its arguments:
    ``InFlightUpdate(load_time_s=0.5)`` and ``InFlightUpdate(load_time_s=30.0)`` are two cells
    (the sweep's grid and the CLI label a cell with this one function). A None label was a missing
    value to pandas: NaN in the tables, an empty CSV cell, ``32.0`` for the 32 beside it (the
    column became float), and no point in a figure (``timeout=none`` vanished).
    """
    if value is None:
        return NONE_LABEL
    if isinstance(value, bool | int | float | str):
        return value
    return repr(value)


label = cell_label
"""The registry's old name of :func:`cell_label`."""
