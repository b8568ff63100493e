"""Named scenarios: the registry, and how ``pipesim run SPEC`` finds a scenario.

The registry maps a short name to a one-line description and a factory returning a
:class:`~pipesim.config.Scenario`. Factories are called only when a scenario is selected, so
``pipesim list`` stays cheap even when presets are expensive to build.

Built-in designs are the chapter's (Section 13.3): they use the chapter's duration pool (seed 0,
65,536 agent durations, consumed in order), so ``pipesim run synchronous`` reproduces the chapter's
451 episodes per hour exactly. Other scenarios register themselves: each entry point of the group
``pipesim.scenarios`` (declared in a package's ``pyproject.toml``, as this project does for its
``chapter13`` and ``systems`` modules) names a mapping of names to factories, a module, or one
factory, and its scenarios are listed under the entry point's name as a prefix
(``systems:areal``). No module of pipesim imports a scenario package by name; an entry point whose
module is not importable is skipped.

:func:`resolve` also accepts a scenario file (``.toml``/``.yaml``/``.yml``, see
:mod:`pipesim.io.scenario_files`) and ``package.module:factory`` or ``path/to/file.py:factory``
(imported by :mod:`pipesim.io.user_code`). There is one lookup path: :func:`get_entry` and
:func:`resolve` both read one :func:`registry` snapshot and report an unknown name with the same
message (the closest names, then every valid one).

An entry (:class:`Entry`, and :class:`PresetFile` for a file naming a preset) is its own module,
:mod:`pipesim.io.registry_entry`: its parameters, and building it with a refusal that names the
parameter given. Overrides (``--set key=value``, ``--over key=v1,v2``) are parsed in
:mod:`pipesim.io.overrides`
(:func:`build`, :func:`parse_value`, :func:`valid_keys`, ...); they are re-exported here, where
callers have always found them.
"""

from __future__ import annotations

import difflib
import importlib.util
import inspect
import os
import warnings
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from pipesim.config import Scenario
from pipesim.core.errors import shown
from pipesim.core.validate import FieldError
from pipesim.io.chapter_designs import CHAPTER_DESIGNS, CHAPTER_POOL_SIZE, FIG13_1, chapter_design
from pipesim.io.overrides import (
    OPTIONAL_POLICY_FIELDS,
    POLICY_FIELDS,
    apply_overrides,
    build,
    changes_for,
    label,
    parse_parameter,
    parse_value,
    policy_classes,
    split_pair,
    valid_keys,
)
from pipesim.io.registry_entry import Entry, PresetFile
from pipesim.io.user_code import const_factory as _const
from pipesim.io.user_code import import_factory, is_module_path

__all__ = [
    "CHAPTER_DESIGNS",
    "CHAPTER_POOL_SIZE",
    "ENTRY_POINT_GROUP",
    "FIG13_1",
    "OPTIONAL_POLICY_FIELDS",
    "POLICY_FIELDS",
    "SCENARIO_FILE_SUFFIXES",
    "Entry",
    "apply_overrides",
    "build",
    "changes_for",
    "chapter_design",
    "entries_from",
    "get_entry",
    "get_scenario",
    "label",
    "parse_parameter",
    "parse_value",
    "policy_classes",
    "registry",
    "resolve",
    "split_pair",
    "valid_keys",
]

ENTRY_POINT_GROUP = "pipesim.scenarios"
"""The entry-point group through which packages register scenarios."""


def _builtin() -> list[Entry]:
    def d(label: str, eta: int, drain: bool, **kw: Any) -> Callable[[], Scenario]:
        return lambda: chapter_design(label, eta, drain, **kw)

    return [
        Entry(
            "synchronous",
            "on-policy: sample B, train, sync (eta=0); chapter: 451 episodes/h",
            d("synchronous", 0, False),
        ),
        Entry(
            "one-step-drain",
            "one step ahead, drain before each sync (eta=1); chapter: 506/h",
            d("one step ahead, drain", 1, True),
        ),
        Entry(
            "async-eta1",
            "asynchronous, partial rollouts, eta=1; chapter: 1,836/h",
            d("async eta=1, partial", 1, False),
        ),
        Entry(
            "async-eta2",
            "asynchronous, partial rollouts, eta=2; chapter: 2,077/h",
            d("async eta=2, partial", 2, False),
        ),
        Entry(
            "async-eta4-drain",
            "asynchronous, drain before sync, eta=4; chapter: 490/h",
            d("async eta=4, drain", 4, True),
        ),
        Entry(
            "fig13.1-sync",
            "Figure 13.1 top: synchronous, 8 slots, B=8, 4 steps",
            d("fig13.1 synchronous", 0, False, **FIG13_1),
        ),
        Entry(
            "fig13.1-async",
            "Figure 13.1 bottom: async eta=1 partial, 8 slots, B=8, 4 steps",
            d("fig13.1 async eta=1, partial", 1, False, **FIG13_1),
        ),
    ]


def _first_doc_line(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip().splitlines()[0] if doc.strip() else "(no description)"


def _zero_arg_scenario_functions(mod: ModuleType) -> list[tuple[str, Callable[..., Scenario]]]:
    out: list[tuple[str, Callable[..., Scenario]]] = []
    for fname, fn in inspect.getmembers(mod, inspect.isfunction):
        if fname.startswith("_") or fn.__module__ != mod.__name__:
            continue
        sig = inspect.signature(fn)
        if any(
            p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            for p in sig.parameters.values()
        ):
            continue
        ret = sig.return_annotation
        if ret is Scenario or (isinstance(ret, str) and ret.split(".")[-1] == "Scenario"):
            out.append((fname, fn))
    return out


def entries_from(obj: Any, prefix: str) -> list[Entry]:
    """The scenarios an entry point offers under ``prefix``: a mapping of names to factories (or
    Scenarios), a module (its public zero-argument functions annotated to return a Scenario), a
    single factory, or a Scenario."""
    out: list[Entry] = []
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            fac: Callable[..., Scenario] = value if callable(value) else _const(value)
            desc = value.name if isinstance(value, Scenario) else _first_doc_line(value)
            if desc == "(no description)" and callable(value):
                desc = _lambda_description(value, key)
            out.append(Entry(f"{prefix}:{key}", desc, fac))
    elif isinstance(obj, ModuleType):
        out = [Entry(f"{prefix}:{n}", _first_doc_line(fn), fn) for n, fn in _zero_arg_scenario_functions(obj)]
    elif isinstance(obj, Scenario):
        out = [Entry(prefix, obj.name, _const(obj))]
    elif callable(obj):
        out = [Entry(prefix, _first_doc_line(obj), obj)]
    return out


def _lambda_description(fn: Callable[..., Any], key: str) -> str:
    """A lambda wrapping a documented function (``lambda **kw: slime("drain", **kw)``): the wrapped
    function's first doc line, with the key."""
    code = getattr(fn, "__code__", None)
    glb = getattr(fn, "__globals__", {})
    for name in code.co_names if code is not None else ():
        target = glb.get(name)
        if inspect.isfunction(target) and inspect.getdoc(target):
            return f"{_first_doc_line(target)} ({key})"
    return "(no description)"


def _entry_point_entries() -> list[Entry]:
    out: list[Entry] = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            obj = ep.load()
        except ImportError:
            continue  # an optional scenario package that is not importable here
        except Exception as exc:  # noqa: BLE001 - one broken plug-in must not hide the others
            warnings.warn(f"scenario entry point {ep.name!r} ({ep.value}) failed: {exc}", stacklevel=2)
            continue
        out.extend(entries_from(obj, ep.name))
    return out


def registry() -> dict[str, Entry]:
    """All scenarios by name: the built-ins, then those of the ``pipesim.scenarios`` entry points."""
    return {e.name: e for e in _builtin() + _entry_point_entries()}


def get_scenario(name: str) -> Scenario:
    """Build the registered scenario ``name``; ValueError lists the valid names otherwise."""
    return get_entry(name).build()


def get_entry(name: str) -> Entry:
    """The registered entry ``name``; ValueError names the closest and lists the valid names."""
    return _named(registry(), name)


def _named(reg: Mapping[str, Entry], name: str, why: str = "") -> Entry:
    """The one lookup of a name in the registry: the entry, or a ValueError with the closest names
    (``why`` is said after them)."""
    if name not in reg:
        close = _close_names(reg, name)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise FieldError(
            f"unknown scenario {shown(name)}{hint}{why}; valid scenarios: {', '.join(reg)}", "scenario"
        )
    return reg[name]


def _close_names(reg: Mapping[str, Entry], name: str) -> list[str]:
    """The registered names closest to ``name``: one that differs only in case first."""
    same_case = [n for n in reg if n.lower() == name.lower()]
    return same_case or difflib.get_close_matches(name, list(reg), n=2, cutoff=0.6)


def _importable(where: str) -> bool:
    """Whether ``where`` (of ``where:factory``) names a file or a module that exists; imports nothing
    but the parent packages of a dotted name."""
    if where.endswith(".py"):  # a FIFO or a directory is there too: the importer says what it is
        return os.path.lexists(where)
    try:
        return importlib.util.find_spec(where) is not None
    except (ImportError, ValueError):  # a parent package that is missing, or not a package
        return False


def _factory_or_name(reg: Mapping[str, Entry], spec: str, where: str, attr: str) -> Entry:
    """``where:attr`` that is no registered name: the factory ``attr`` of the module or file
    ``where``. A prefix that is a registered namespace and no module (``systems:arael``), or a module
    that cannot be found while a registered name is close (``sytems:areal``), is a misspelled name:
    the error names the closest ones. Both said ``cannot import module 'systems'``."""
    namespaces = {n.split(":", 1)[0] for n in reg if ":" in n}
    if where in namespaces and not _importable(where):
        return _named(reg, spec)
    try:
        return Entry(spec, f"{attr} from {where}", import_factory(where, attr, spec))
    except ValueError:
        if _close_names(reg, spec) and not _importable(where):
            _named(reg, spec, f" ({shown(where)} is neither a registered prefix nor an importable module)")
        raise


SCENARIO_FILE_SUFFIXES = (".toml", ".yaml", ".yml")


def resolve(spec: str) -> Entry:
    """What ``pipesim run SPEC`` names, in this order: a registered name (``systems:areal``); a
    scenario file (``.toml``, ``.yaml``, ``.yml``); ``package.module:factory`` or
    ``path/to/file.py:factory`` -- a function returning a Scenario (or a Scenario), imported only
    because the user named it. ValueError for anything else, listing the registered names."""
    reg = registry()
    if spec not in reg:
        if spec.lower().endswith(SCENARIO_FILE_SUFFIXES):
            from pipesim.io.scenario_files import read_scenario_file

            path = Path(spec)
            if not os.path.lexists(path):  # a directory, a FIFO, a loop: the reader says which
                raise FieldError(f"{spec}: no such scenario file", "scenario", spec)
            scenario, preset = read_scenario_file(path)  # read and built once, here
            if preset is not None:
                entry, knobs = preset
                return PresetFile(
                    spec, f"scenario file {spec} ({entry.name})", entry.factory, entry, knobs, scenario
                )
            return Entry(spec, f"scenario file {spec}", lambda: scenario)
        where, _, attr = spec.rpartition(":")
        if where and attr.isidentifier() and is_module_path(where):
            return _factory_or_name(reg, spec, where, attr)
        if Path(spec).is_file():
            raise FieldError(
                f"{shown(spec)} is a file but not a scenario file: scenario files end in "
                f"{', '.join(SCENARIO_FILE_SUFFIXES)} (pipesim export writes one); a Python file "
                "is named with its factory, path/to/file.py:factory",
                "scenario",
                spec,
            )
        if (problem := path_problem(spec)) is not None:
            raise FieldError(
                f"{spec}: {problem}; a scenario is a registered name, a scenario file "
                f"({', '.join(SCENARIO_FILE_SUFFIXES)}) or path/to/file.py:factory; "
                f"valid scenarios: {', '.join(reg)}",
                "scenario",
                spec,
            )
    return _named(reg, spec)


def path_problem(spec: str) -> str | None:
    """What ``spec`` is, where it names a path that is no file: ``is a directory`` (``is a saved
    run's directory`` where it is one), ``is a FIFO (a named pipe), not a file`` (as
    :mod:`pipesim.core.readfile` says it), or ``no such file or directory`` where it holds a path
    separator and nothing is there. None for anything else: a name (``asynk-eta1`` is a misspelt
    scenario, with the closest names), or a regular file (its reader says what it is). ``pipesim
    run /tmp`` and ``pipesim compare A runs/nosuch`` called the path an unknown scenario."""
    from pipesim.core.readfile import check_file

    if not os.path.lexists(spec):
        return "no such file or directory" if "/" in spec or "\\" in spec else None
    if Path(spec).is_dir():
        from pipesim.io.saved import is_saved_run

        return (
            "is a saved run's directory (pipesim report, trace and compare read it)"
            if is_saved_run(spec)
            else "is a directory"
        )
    try:
        check_file(spec)
    except FileNotFoundError:  # a link to nothing
        return "no such file or directory"
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def names_a_path(spec: str) -> bool:
    """Whether a missing ``spec`` was meant as a file or directory (``runs/missing``), not a scenario
    name: it has a ``/`` and is no scenario file (``mine.toml``, ``file.py:name``: the scenario's
    builder says that such a file is missing). ``pipesim trace`` and ``pipesim compare`` ask it."""
    scenario_file = Path(spec.partition(".py:")[0]).suffix.lower() in (*SCENARIO_FILE_SUFFIXES, ".py")
    return ("/" in spec or "\\" in spec) and ".py:" not in spec and not scenario_file
