"""Named scenarios for the CLI, and parsing of ``key=value`` overrides into typed scenario fields.

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
:mod:`pipesim.io.scenario_files`) and ``package.module:factory`` or ``path/to/file.py:factory``.

Overrides (``--set key=value``, ``--over key=v1,v2``) are parsed with the dataclass field types,
so a bad key or an ill-typed value fails with a message that names it and lists the valid keys.
Policy fields take a policy from the catalog (:mod:`pipesim.policies.catalog`), with arguments:
``weight_update=InFlightUpdate(load_time_s=2)``, ``replicas=Replicas(2, LeastLoaded())``,
``timeout=Timeout(cap_s=600)``, ``timeout=none``; ``durations=LogNormalDurations(median_s=60)``
replaces the duration model and ``durations.FIELD=value`` changes one of its fields;
``sync_time_s=WeightSyncCost(8.2, 10)`` sets the sync time from a model size and a bandwidth. A key
that is a named parameter of the scenario's factory (``max_head_offpolicyness`` of
``systems:areal``) is passed to the factory instead.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.util
import inspect
import sys
import types
import typing
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from pipesim.config import PipelineConfig, Scenario
from pipesim.policies.base import CountThrottle, Drain, PartialRollout

CHAPTER_POOL_SIZE = 65_536
"""The chapter draws 65,536 durations with seed 0; a scenario with this pool size replays them."""

ENTRY_POINT_GROUP = "pipesim.scenarios"
"""The entry-point group through which packages register scenarios."""

POLICY_FIELDS = ("admission", "weight_update", "batching")
OPTIONAL_POLICY_FIELDS = ("timeout", "failures", "replicas")
"""Policy fields whose value may be None (``--set timeout=none``)."""


@dataclass(frozen=True)
class Entry:
    """One registered scenario: a name, a one-line description and a factory.

    The factory's named parameters (not ``**kwargs``) are the scenario's *parameters*: ``--set``
    passes them to the factory (:meth:`build`).
    """

    name: str
    description: str
    factory: Callable[..., Scenario]

    def parameters(self) -> dict[str, inspect.Parameter]:
        """The factory's named parameters (those ``--set`` passes to it), by name."""
        try:
            sig = inspect.signature(self.factory)
        except (TypeError, ValueError):
            return {}
        return {
            n: p
            for n, p in sig.parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and not n.startswith("_")
        }

    def parameter_hints(self) -> dict[str, Any]:
        try:
            return typing.get_type_hints(self.factory)
        except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to the defaults' types
            return {}

    def build(self, **params: Any) -> Scenario:
        try:
            s = self.factory(**params)
        except (ValueError, TypeError) as exc:
            msg = str(exc)
            raise ValueError(msg if msg.startswith(self.name) else f"scenario {self.name!r}: {msg}") from None
        if not isinstance(s, Scenario):
            raise ValueError(f"scenario {self.name!r}: factory returned {type(s).__name__}, not a Scenario")
        return s


def chapter_design(name: str, max_staleness: int, drain: bool = False, **pipeline: Any) -> Scenario:
    """A chapter design on the chapter's pool (64 slots, B=64, 60 s train, 10 s sync, 20 steps)."""
    cfg = dataclasses.replace(PipelineConfig(max_staleness=max_staleness), **pipeline)
    return Scenario(
        pipeline=cfg,
        admission=CountThrottle(),
        weight_update=Drain() if drain else PartialRollout(),
        seed=0,
        pool_size=CHAPTER_POOL_SIZE,
        name=name,
    )


CHAPTER_DESIGNS: dict[str, tuple[int, bool]] = {
    "synchronous": (0, False),
    "one step ahead, drain": (1, True),
    "async eta=1, partial": (1, False),
    "async eta=2, partial": (2, False),
    "async eta=4, drain": (4, True),
}
"""The chapter's design table: label -> (max_staleness, drain)."""

FIG13_1 = dict(n_slots=8, batch_size=8, steps=4)
"""Figure 13.1's small pipeline: 8 slots, 8 episodes per step, 4 steps."""


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


def _const(value: Scenario) -> Callable[..., Scenario]:
    return lambda: value


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
    reg = registry()
    if name not in reg:
        close = difflib.get_close_matches(name, list(reg), n=2, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise ValueError(f"unknown scenario {name!r}{hint}; valid scenarios: {', '.join(reg)}")
    return reg[name]


SCENARIO_FILE_SUFFIXES = (".toml", ".yaml", ".yml")


def resolve(spec: str) -> Entry:
    """What ``pipesim run SPEC`` names, in this order: a registered name (``systems:areal``); a
    scenario file (``.toml``, ``.yaml``, ``.yml``); ``package.module:factory`` or
    ``path/to/file.py:factory`` -- a function returning a Scenario (or a Scenario), imported only
    because the user named it. ValueError for anything else, listing the registered names."""
    reg = registry()
    if spec in reg:
        return reg[spec]
    if spec.lower().endswith(SCENARIO_FILE_SUFFIXES):
        from pipesim.io.scenario_files import load_scenario

        path = Path(spec)
        if not path.is_file():
            raise ValueError(f"{spec}: no such scenario file")
        return Entry(spec, f"scenario file {spec}", lambda: load_scenario(path))
    if ":" in spec:
        where, _, attr = spec.rpartition(":")
        if where and attr.isidentifier():
            return Entry(spec, f"{attr} from {where}", _import_factory(where, attr, spec))
    return get_entry(spec)


def _import_file(path: Path) -> ModuleType:
    """Import a user's ``.py`` file. Under its own name (``mine`` for ``dir/mine.py``, its folder
    appended to ``sys.path``) when that name finds this very file, so that its classes pickle to
    sweep workers; otherwise under a private name."""
    path = path.resolve()
    stem = path.stem
    if stem.isidentifier():
        existing = sys.modules.get(stem)
        if existing is not None:
            if Path(getattr(existing, "__file__", None) or "").resolve() == path:
                return existing
        else:
            folder = str(path.parent)
            if folder not in sys.path:
                sys.path.append(folder)
            found = importlib.util.find_spec(stem)
            if found is not None and found.origin and Path(found.origin).resolve() == path:
                return importlib.import_module(stem)
    mod_name = f"_pipesim_user_{abs(hash(str(path)))}"
    spec_obj = importlib.util.spec_from_file_location(mod_name, path)
    if spec_obj is None or spec_obj.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec_obj)
    sys.modules[mod_name] = mod  # dataclasses look their module up by name
    try:
        spec_obj.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(mod_name, None)
        raise
    return mod


def _import_factory(where: str, attr: str, spec: str) -> Callable[..., Scenario]:
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise ValueError(f"{spec}: no such file {where!r}")
        try:
            mod = _import_file(path)
        except Exception as exc:  # noqa: BLE001 - the user's file: report, do not crash
            raise ValueError(f"{spec}: importing {where} failed: {type(exc).__name__}: {exc}") from None
    else:
        if not all(part.isidentifier() for part in where.split(".")):
            reg = ", ".join(registry())
            raise ValueError(f"unknown scenario {spec!r}; valid scenarios: {reg}")
        try:
            mod = importlib.import_module(where)
        except Exception as exc:  # noqa: BLE001 - ImportError or an error inside the user's module
            raise ValueError(f"{spec}: cannot import module {where!r}: {type(exc).__name__}: {exc}") from None
    if not hasattr(mod, attr):
        names = [n for n, _ in inspect.getmembers(mod, callable) if not n.startswith("_")]
        close = difflib.get_close_matches(attr, names, n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise ValueError(f"{spec}: {where} has no {attr!r}{hint}")
    obj = getattr(mod, attr)
    if isinstance(obj, Scenario):
        return _const(obj)
    if not callable(obj):
        raise ValueError(f"{spec}: {attr} is neither a Scenario nor a function returning one")
    fn: Callable[..., Scenario] = obj
    return fn


# -- overrides ----------------------------------------------------------------------------------
def policy_classes() -> dict[str, type]:
    """Every policy class of the catalog (:func:`pipesim.policies.catalog.policy_classes`), by class name."""
    from pipesim.policies.catalog import policy_classes as _classes

    return _classes()


def valid_keys(scenario: Scenario | None = None, entry: Entry | None = None) -> list[str]:
    """Every key ``--set`` accepts, for error messages and ``pipesim list --keys``."""
    keys = [f.name for f in dataclasses.fields(PipelineConfig)]
    keys += [f.name for f in dataclasses.fields(Scenario) if f.name != "pipeline"]
    if scenario is not None and dataclasses.is_dataclass(scenario.durations):
        keys += [f"durations.{f.name}" for f in dataclasses.fields(scenario.durations)]
    if entry is not None:
        keys += [k for k in entry.parameters() if k not in keys]
    return keys


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
        raise ValueError(f"{key}: expected {names}, got {text!r}")
    if origin is typing.Literal:
        for a in args:
            if str(a) == text:
                return a
        raise ValueError(f"{key}: expected one of {', '.join(map(repr, args))}, got {text!r}")
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
            return tuple(float(x) for x in text.strip("()").replace(":", ",").split(",") if x.strip())
    except ValueError:
        raise ValueError(f"{key}: expected {_type_name(hint)}, got {text!r}") from None
    if hint is Any or hint is None:
        return _literal_or_text(text)
    raise ValueError(f"{key}: cannot parse values of type {hint!r} from the command line")


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
    from pipesim.policies.catalog import parse_policy

    text = text.strip()
    if key.startswith("durations."):
        model = scenario.durations
        sub = key.split(".", 1)[1]
        if not dataclasses.is_dataclass(model) or sub not in {f.name for f in dataclasses.fields(model)}:
            raise ValueError(f"unknown key {key!r}; valid keys: {', '.join(valid_keys(scenario))}")
        hints = typing.get_type_hints(type(model))
        try:
            return dataclasses.replace(model, **{sub: _coerce(key, text, hints[sub])})  # type: ignore[type-var]
        except (TypeError, ValueError) as exc:
            msg = str(exc)
            raise ValueError(msg if msg.startswith(key) else f"{key}: {msg}") from None
    if key in POLICY_FIELDS or key in OPTIONAL_POLICY_FIELDS or key == "durations":
        if key in OPTIONAL_POLICY_FIELDS and text.lower() in ("none", "null"):
            return None
        try:
            return parse_policy(text, kind=key)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    if key == "sync_time_s" and "(" in text:
        cost = parse_policy(text, kind="sync_cost")
        return float(cost.sync_time_s)
    hints = {**typing.get_type_hints(PipelineConfig), **typing.get_type_hints(Scenario)}
    if key not in hints or key == "pipeline":
        close = difflib.get_close_matches(key, valid_keys(scenario), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ValueError(f"unknown key {key!r}{hint}; valid keys: {', '.join(valid_keys(scenario))}")
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
    """``Scenario.with_`` keyword arguments for one parsed override (``durations.x`` -> ``durations``)."""
    return {"durations" if key.startswith("durations.") else key: value}


def split_pair(pair: str, what: str = "override") -> tuple[str, str]:
    if "=" not in pair:
        raise ValueError(f"{what} {pair!r} is not key=value")
    key, text = (s.strip() for s in pair.split("=", 1))
    return key, text


def apply_overrides(scenario: Scenario, pairs: list[str]) -> tuple[Scenario, dict[str, str]]:
    """Apply ``key=value`` strings in order; returns the new scenario and the overrides as given."""
    given: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(
                f"override {pair!r} is not key=value; valid keys: {', '.join(valid_keys(scenario))}"
            )
        key, text = split_pair(pair)
        value = parse_value(scenario, key, text)
        try:
            scenario = scenario.with_(**changes_for(scenario, key, value))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{key}={text}: {exc}") from None
        given[key] = text
    return scenario, given


def build(entry: Entry, pairs: list[str]) -> tuple[Scenario, dict[str, str]]:
    """Build ``entry`` with ``key=value`` overrides: keys that are the factory's named parameters go
    to the factory, the others are applied to the scenario it returns, in order."""
    params = entry.parameters()
    factory_args: dict[str, Any] = {}
    rest: list[str] = []
    given: dict[str, str] = {}
    for pair in pairs:
        if "=" in pair:
            key, text = split_pair(pair)
            if key in params:  # the factory's meaning wins over a scenario key of the same name
                factory_args[key] = parse_parameter(entry, key, text)
                given[key] = text
                continue
        rest.append(pair)
    scenario = entry.build(**factory_args)
    try:
        scenario, more = apply_overrides(scenario, rest)
    except ValueError as exc:
        if params and "unknown key" in str(exc):
            raise ValueError(f"{exc}; parameters of {entry.name}: {', '.join(params)}") from None
        raise
    given.update(more)
    return scenario, given


def label(value: Any) -> Any:
    """A readable, hashable cell label for a grid value (numbers and strings as they are, policy
    objects by their repr with arguments)."""
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return repr(value)
