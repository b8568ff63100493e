"""Scenario files: a :class:`~pipesim.config.Scenario` as TOML or YAML, and back.

A scenario file is data. Loading one never executes code, never imports a path written in the
file and never unpickles: TOML is read with :mod:`tomllib`, YAML with a safe loader reading YAML
1.2's numbers (:mod:`pipesim.io.yamlfile`), at most :data:`~pipesim.core.readfile.SCENARIO_MAX_BYTES`
of a regular file, and every policy is named from the policy catalog (:mod:`pipesim.policies.catalog`)
by its class name. ``pipesim export NAME --out my.toml`` writes any registered scenario; ``pipesim
run my.toml`` runs it; loading what was saved gives an equal Scenario, hence the same results.

The format (schema version 1)::

    schema_version = 1          # required; a newer version than this pipesim knows is refused
    name = "AReaL"
    seed = 0
    pool_size = 5888            # omitted: the default pool size

    [pipeline]                  # PipelineConfig's fields; an omitted one takes its default
    n_slots = 64
    max_staleness = 2

    [durations]                 # the duration model: "type" is its class name, then its fields
    type = "LogNormalDurations"
    median_s = 68.0
    sigma = 0.9

    [admission]                 # admission, weight_update, batching: the same shape
    type = "AReaLThrottle"
    max_concurrent = 48

    [weight_update]             # nested policies are nested tables
    type = "SyncEveryK"
    k = 2
    [weight_update.inner]
    type = "Drain"

    [timeout]                   # timeout, failures, replicas: omitted means None (none)
    type = "Timeout"
    cap_s = 600.0

    [replicas]
    type = "Replicas"
    n_replicas = 2
    routing = { type = "LeastLoaded" }

In YAML the same keys nest as mappings. Duration models are written like policies:
``AgentDurations`` (its seven fields), ``ExponentialDurations`` (``mean_s``),
``LogNormalDurations`` (``median_s``, ``sigma``), ``TraceDurations`` (``values = [..]``,
``cycle``). Tuples are written as arrays.

**None.** TOML has no null, so ``None`` is never written as a value. A key that is omitted takes
its field's default; since every optional field of pipesim (``pool_size``, ``timeout``,
``failures``, ``replicas``, ``AReaLThrottle.max_concurrent``, ...) defaults to None, *omitting the
key is how None is written*. For a field that allows None but defaults to something else (none
in pipesim today; a user's policy may have one), None is written as the string ``"none"``, which
is read as None only for a field whose type allows None. The writer writes every other field
explicitly, so a file keeps its meaning when a later version changes a default or adds fields
(new fields take their defaults in old files).

Errors name the file, the key (dotted: ``weight_update.inner.k``) and what was expected; an unknown
key also lists the valid keys. The checks against the field types live in
:mod:`pipesim.io.scenario_schema`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipesim.config import PipelineConfig, Scenario
from pipesim.core.errors import MAX_DURATION_POOL, shown
from pipesim.core.readfile import SCENARIO_MAX_BYTES, not_utf8, read_bytes
from pipesim.core.validate import MAX_NESTING, FieldError, nested_too_deep, refuse
from pipesim.io.scenario_schema import NONE, Reader, ScenarioFileError, field_default, type_hints
from pipesim.io.scenario_system import system_knobs, system_scenario, system_to_dict
from pipesim.io.scenario_text import check_writable, repeated_toml_key, too_long
from pipesim.policies import catalog

if TYPE_CHECKING:
    from pipesim.io.registry import Entry

__all__ = [
    "NONE",
    "SCHEMA_VERSION",
    "ScenarioFileError",
    "dumps",
    "load_scenario",
    "loads",
    "save_scenario",
    "scenario_from_dict",
    "scenario_to_dict",
    "system_to_dict",
]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SCHEMA_VERSION = 1
"""The version of the format this pipesim writes and the newest it reads."""

SUFFIXES = {".toml": "toml", ".yaml": "yaml", ".yml": "yaml"}

POLICY_SLOTS = ("durations", "admission", "weight_update", "batching", "timeout", "failures", "replicas")
"""Scenario fields written as a table with a ``type`` key."""


# -- writing ---------------------------------------------------------------------------------------
def scenario_to_dict(scenario: Scenario) -> dict[str, Any]:
    """The file's content as plain data (no None anywhere): see the module docstring."""
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    for f in dataclasses.fields(Scenario):
        value = getattr(scenario, f.name)
        if f.name == "pipeline":
            out["pipeline"] = {
                p.name: _data(getattr(value, p.name), p.name) for p in dataclasses.fields(value)
            }
        elif f.name in POLICY_SLOTS:
            if value is not None:
                out[f.name] = policy_to_dict(value, f.name)
        elif value is None:
            if field_default(f) is not None:
                out[f.name] = NONE
        else:
            out[f.name] = _data(value, f.name)
    # the scenario's identity first, then the other scalars, then the tables
    first: dict[str, Any] = {k: out[k] for k in ("schema_version", "name", "seed", "pool_size") if k in out}
    scalars = {k: v for k, v in out.items() if not isinstance(v, dict) and k not in first}
    return {**first, **scalars, **{k: v for k, v in out.items() if isinstance(v, dict)}}


def policy_to_dict(obj: Any, where: str = "policy") -> dict[str, Any]:
    """``{"type": ClassName, field: value, ...}`` for a catalogued policy or duration model."""
    try:
        name = catalog.name_of(obj)
    except ValueError as exc:
        raise FieldError(f"{where}: {exc}", where) from None
    table: dict[str, Any] = {"type": name}
    if not dataclasses.is_dataclass(obj):
        return table  # a policy without fields (RoundRobin)
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        value = getattr(obj, f.name)
        if value is None:
            if field_default(f) is not None:
                table[f.name] = NONE
            continue
        table[f.name] = _data(value, f"{where}.{f.name}")
    return table


def _data(value: Any, where: str) -> Any:
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_data(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if value is None:
        return NONE
    return policy_to_dict(value, where)


def dumps(scenario: Scenario | Mapping[str, Any], fmt: str = "toml") -> str:
    """The scenario (or a file's content, e.g. :func:`system_to_dict`'s) as TOML (``fmt="toml"``)
    or YAML (``fmt="yaml"``) text."""
    if isinstance(scenario, Scenario):
        data, title = scenario_to_dict(scenario), scenario.name
    else:
        data, title = dict(scenario), str(scenario.get("system", {}).get("name", ""))
    head = f"# pipesim scenario {title!r} (format: pipesim.io.scenario_files)\n"
    if fmt == "toml":
        import tomli_w

        return head + tomli_w.dumps(data)
    if fmt == "yaml":
        from pipesim.io.yamlfile import dump_yaml  # strings YAML 1.2 reads as numbers quoted

        return head + dump_yaml(data, sort_keys=False, default_flow_style=False)
    raise refuse("format", f"must be 'toml' or 'yaml', got {shown(fmt)}")


def file_format(path: str | Path) -> str:
    """``"toml"`` or ``"yaml"`` from the file's suffix; ValueError for any other suffix."""
    suffix = Path(path).suffix.lower()
    if suffix not in SUFFIXES:
        raise FieldError(f"{path}: a scenario file ends in .toml, .yaml or .yml", "", str(path))
    return SUFFIXES[suffix]


def save_scenario(scenario: Scenario, path: str | Path) -> Path:
    """Write ``scenario`` to ``path`` (TOML or YAML by its suffix), atomically (a file cut by a
    Ctrl-C or a full disk is never left half written); returns the path."""
    from pipesim.io.interrupts import write_text_atomic

    path = Path(path)
    text = dumps(scenario, file_format(path))
    check_writable(path)
    write_text_atomic(path, text)
    return path


# -- reading ---------------------------------------------------------------------------------------
def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file (``.toml``, ``.yaml``, ``.yml``); ScenarioFileError says what is wrong."""
    return read_scenario_file(path)[0]


def read_scenario_file(path: str | Path) -> tuple[Scenario, tuple[Entry, dict[str, Any]] | None]:
    """The scenario a file holds (read, parsed and built once), and for a ``[system]`` file the
    registered preset it names with the knobs it sets (None for a file of plain scenario keys).
    ``pipesim run`` builds a ``[system]`` file as it builds the preset
    (:class:`pipesim.io.registry.PresetFile`), so ``--set steps=200`` sizes the preset's task pool
    and ``--set`` takes the preset's knobs."""
    path = Path(path)
    fmt = file_format(path)
    try:
        raw = read_bytes(path, "scenario files", SCENARIO_MAX_BYTES)  # a FIFO, /dev/zero: refused
    except OSError as exc:
        raise ScenarioFileError(f"{path}: cannot read: {exc.strerror or exc}", "", str(path)) from None
    data = _parse(raw, fmt, str(path))
    scenario = scenario_from_dict(data, str(path))  # the file's own refusals, named by file and key
    if not isinstance(data, Mapping) or "system" not in data:
        return scenario, None
    return scenario, system_knobs(Reader(str(path)), data)


_TOO_DEEP = object()
"""What :func:`loads` holds when the parser itself recursed too deep."""


def loads(text: str | bytes, fmt: str = "toml", source: str = "<string>") -> Scenario:
    """Parse scenario text of format ``fmt``; ``source`` names it in errors."""
    return scenario_from_dict(_parse(text, fmt, source), source)


def _parse(text: str | bytes, fmt: str, source: str) -> Any:
    """The file's content (tables, arrays, scalars) before any scenario key is read."""
    if isinstance(text, bytes):
        raw = text
        try:
            text = raw.decode("utf-8-sig")  # a byte-order mark, as some editors write, is dropped
        except UnicodeDecodeError:
            where = f"{not_utf8(raw)}; save the file as UTF-8 (iconv -f latin1 -t utf-8)"
            raise ScenarioFileError(f"{source}: {where}", "", source) from None
    text = text.removeprefix("\ufeff")
    if fmt == "toml":
        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            if (key := repeated_toml_key(text, str(exc))) is not None:
                where = f"line {key[1]}, column {key[2]}"
                raise ScenarioFileError(
                    f"{source}: {key[0]}: the key is given twice ({where})", key[0], source
                ) from None
            raise ScenarioFileError(f"{source}: not valid TOML: {exc}", "", source) from None
        except RecursionError:
            data = _TOO_DEEP
        except ValueError as exc:  # an integer past Python's digit limit, which the parser converts
            from pipesim.plan.specread import too_long_int  # here: pipesim.plan is not loaded for a scenario

            raise ScenarioFileError(f"{source}: not valid TOML: {too_long_int(exc)}", "", source) from None
    elif fmt == "yaml":
        import yaml

        from pipesim.io.yamlfile import NodeError, load_yaml

        try:
            data = load_yaml(text)
        except yaml.YAMLError as exc:  # a key given twice is named; the rest refuses the whole file
            if isinstance(exc, NodeError):  # ``n_slots: 016``, a key given twice, too many values
                raise ScenarioFileError(f"{source}: {exc.said()}", exc.path, source) from None
            text = " ".join(str(exc).split())
            raise ScenarioFileError(f"{source}: not valid YAML: {text}", "", source) from None
        except RecursionError:
            data = _TOO_DEEP
        except ValueError as exc:  # as TOML's
            from pipesim.plan.specread import too_long_int

            raise ScenarioFileError(f"{source}: not valid YAML: {too_long_int(exc)}", "", source) from None
    else:
        raise refuse("format", f"must be 'toml' or 'yaml', got {shown(fmt)}")
    if data is _TOO_DEEP or nested_too_deep(data):
        raise ScenarioFileError(
            f"{source}: arrays or tables nest more than {MAX_NESTING} levels deep", "", source
        )
    if data is None or (isinstance(data, Mapping) and not data):  # whitespace or comments only
        raise ScenarioFileError(
            f"{source}: the file is empty (a scenario file starts with schema_version = {SCHEMA_VERSION})",
            "",
            source,
        )
    if (long := too_long(data, MAX_ARRAY_VALUES)) is not None:
        raise ScenarioFileError(
            f"{source}: {long[0]}: {long[1]:,} values; an array holds at most {MAX_ARRAY_VALUES:,}",
            long[0],
            source,
        )
    return data


MAX_ARRAY_VALUES = MAX_DURATION_POOL
"""The longest array a scenario file may hold (4,194,304): ``durations.values``, a trace, is the
only long one, and a run never draws more durations than its pool holds
(:data:`~pipesim.core.errors.MAX_DURATION_POOL`). YAML is bounded before its values are built
(:data:`pipesim.io.yamlfile.MAX_VALUES`)."""


def scenario_from_dict(data: Any, source: str = "<dict>") -> Scenario:
    """Build a Scenario from a file's content (see the module docstring)."""
    r = Reader(source)
    if not isinstance(data, Mapping):
        raise r.error("", f"expected a table of scenario keys at the top, got {type(data).__name__}")
    if "schema_version" not in data:
        raise r.error("schema_version", f"missing (this pipesim writes schema_version = {SCHEMA_VERSION})")
    version = data["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise r.error("schema_version", f"expected an integer >= 1, got {shown(version)}")
    if version > SCHEMA_VERSION:
        raise r.error(
            "schema_version",
            f"{version} is newer than this pipesim reads ({SCHEMA_VERSION}); upgrade pipesim",
        )
    if "system" in data:  # a preset in its system's own knob names (system_to_dict)
        return system_scenario(r, data)
    hints = type_hints(Scenario)
    fields = {f.name: f for f in dataclasses.fields(Scenario)}
    r.check_keys(data, ["schema_version", *fields], "")
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key == "schema_version":
            continue
        if key == "pipeline":
            kwargs["pipeline"] = r.dataclass(PipelineConfig, value, "pipeline")
        elif key in POLICY_SLOTS:
            kwargs[key] = r.value(value, hints.get(key, Any), key, kind=key)
        else:
            kwargs[key] = r.value(value, hints.get(key, Any), key)
    try:
        return Scenario(**kwargs)
    except (ValueError, TypeError) as exc:
        if isinstance(exc, FieldError) and exc.field and str(exc).startswith(exc.field):
            raise r.error("", str(exc), exc.field) from None  # it names its key first: once is enough
        where = _field_in(str(exc), list(fields))
        raise r.error(
            where, str(exc), exc.field if isinstance(exc, FieldError) and exc.field else where
        ) from None


def _field_in(message: str, names: list[str]) -> str:
    for n in names:
        if message.startswith(n):
            return n
    return ""
