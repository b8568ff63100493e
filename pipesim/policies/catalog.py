"""The policy catalog: every policy class by name, and a safe parser for ``Name(arg, key=value)``.

The catalog is discovered, not kept by hand. It scans pipesim's policy modules
(:data:`POLICY_MODULES`) for the classes defined there that fit one of the policy slots -- a class
satisfying the :class:`~pipesim.policies.base.Admission`, :class:`~pipesim.policies.base.WeightUpdate`,
:class:`~pipesim.policies.base.BatchPolicy`, :class:`~pipesim.policies.faults.FailurePolicy` or
:class:`~pipesim.policies.replicas.Routing` Protocol, or one of the value classes
:class:`~pipesim.policies.faults.Timeout`, :class:`~pipesim.policies.replicas.Replicas`,
:class:`~pipesim.policies.synccost.WeightSyncCost` -- plus the duration models of
:mod:`pipesim.workload.durations`
(so that a scenario file or ``--set durations=...`` can name one). A base class that only exists
to be subclassed (``CountsOnly``, ``FullBatch``: not a dataclass, and a base of catalogued
classes) is left out. The rule lives in :mod:`pipesim.policies.catalog_scan` (:func:`kinds_of`,
:func:`scan_module`); this module holds what is scanned, the cache, the lookup and the parser.

User modules join the catalog in two ways, both scanned with the same rule:

* an entry point in the group ``pipesim.policies`` whose value is a module (``mypkg.policies``)
  or a class (``mypkg.policies:HeadroomThrottle``), declared in the user's own ``pyproject.toml``;
* :func:`register_module` (``catalog.register_module("mypkg.policies")``) from Python.

:func:`parse_policy` turns text such as ``AReaLThrottle(max_concurrent=48)``,
``Replicas(2, LeastLoaded())`` or ``SyncEveryK(k=2, inner=Drain())`` into an object. It parses the
text with :mod:`ast` and accepts only calls of catalogued names whose arguments are literals
(numbers, strings, True/False/None, tuples and lists -- lists become tuples, so policies stay
hashable -- and nested catalogued calls). Nothing is evaluated, executed or imported: a name that
is not in the catalog is an error that lists the closest names. A bare name (``Drain``, or
``drain``, case and ``-``/``_`` ignored) means the class called without arguments. Bad arguments
give the class's own message prefixed with the call (``AReaLThrottle(max_concurrent=0):
max_concurrent must be an integer >= 1, got 0``). A keyword given twice in one call is refused
naming it, as Python refuses it (:mod:`ast` parses it; the last value used to win without a word).

:class:`pipesim.policies.missing.MissingPolicy` stands in a scenario loaded from a saved run for a
policy this process cannot build (its module not registered here).
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import importlib
import inspect
import re
import warnings
from collections.abc import Iterable
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from pipesim.core.errors import shown
from pipesim.core.validate import FieldError
from pipesim.policies.catalog_scan import KINDS, CatalogEntry, kinds_of, nearest_roles, scan_module

__all__ = [
    "DURATION_MODULES",
    "ENTRY_POINT_GROUP",
    "KINDS",
    "POLICY_MODULES",
    "CatalogEntry",
    "catalog",
    "construct",
    "duration_classes",
    "kinds_of",
    "lookup",
    "name_of",
    "parse_policy",
    "policy_classes",
    "register_module",
    "scan_module",
    "to_text",
]

POLICY_MODULES: tuple[str, ...] = (
    "pipesim.policies.base",
    "pipesim.policies.admission",
    "pipesim.policies.updates",
    "pipesim.policies.batching",
    "pipesim.policies.faults",
    "pipesim.policies.replicas",
    "pipesim.policies.synccost",
    "pipesim.policies.systems",
    "pipesim.policies.verl",
    "pipesim.policies.groups",
    "pipesim.policies.roll",
    "pipesim.policies.roll_agentic",
    "pipesim.policies.slime_submit",
)
"""pipesim's own policy modules, scanned for policy classes."""

DURATION_MODULES: tuple[str, ...] = ("pipesim.workload.durations",)
"""Modules scanned for duration models (classes fitting
:class:`~pipesim.workload.durations.DurationModel`)."""

ENTRY_POINT_GROUP = "pipesim.policies"
"""The entry-point group through which installed packages add their policy modules."""

_registered: list[str] = []
_cache: dict[str, CatalogEntry] | None = None


def register_module(name: str) -> list[str]:
    """Add the policy classes of the module ``name`` (imported now) to the catalog; returns their names.

    ValueError when the module cannot be imported or defines no policy class.
    """
    global _cache
    try:
        mod = importlib.import_module(name)
    except ImportError as exc:
        raise FieldError(f"cannot import policy module {shown(name)}: {exc}", "module") from None
    entries = scan_module(mod)
    if not entries:
        near = nearest_roles(mod)  # a method misspelt (admit for admits): say which, not just "none"
        why = f": {'; '.join(near[:5])}" if near else ""
        raise FieldError(f"module {shown(name)} defines no policy class{why}", "module")
    own = {e.name: e.cls for e in _own_entries()}
    for e in entries:
        if e.name in own and own[e.name] is not e.cls:  # a subclass under the same name, or a new class
            warnings.warn(
                f"{e.name} of {name} has the name of pipesim's own {e.name}; the catalog keeps "
                f"pipesim's, so --set and scenario files that name {e.name} run pipesim's. Rename "
                "yours to use it by name",
                UserWarning,
                stacklevel=2,
            )
    if name in _registered:  # registered again: it becomes the latest
        _registered.remove(name)
    _registered.append(name)
    _cache = None
    return [e.name for e in entries]


@functools.cache
def _own_entries() -> tuple[CatalogEntry, ...]:
    """pipesim's own catalogued classes (:data:`POLICY_MODULES`, :data:`DURATION_MODULES`), scanned
    once: the catalog starts from them, and a registered module is checked against them."""
    return tuple(
        e for name in POLICY_MODULES + DURATION_MODULES for e in scan_module(importlib.import_module(name))
    )


def _entry_point_entries() -> Iterable[CatalogEntry]:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception:  # noqa: BLE001 - a broken plug-in must not break the CLI
            continue
        if isinstance(obj, ModuleType):
            yield from scan_module(obj)
        elif isinstance(obj, type) and kinds_of(obj):
            yield CatalogEntry(obj.__name__, obj, kinds_of(obj), obj.__module__)


def catalog() -> dict[str, CatalogEntry]:
    """Every catalogued class by name: pipesim's own first, then entry points, then registered modules.

    A user class never replaces one of pipesim's under the same name. Among registered modules that
    define the same name, the one registered last wins (registering a module asks for its classes).
    """
    global _cache
    if _cache is not None:
        return _cache
    out: dict[str, CatalogEntry] = {}

    def add(entries: Iterable[CatalogEntry]) -> None:
        for e in entries:
            out.setdefault(e.name, e)

    add(_own_entries())
    add(_entry_point_entries())
    for name in reversed(_registered):
        add(scan_module(importlib.import_module(name)))
    _cache = out
    return out


def policy_classes(kind: str | None = None) -> dict[str, type]:
    """Policy classes by name (duration models excluded), or only those fitting ``kind``."""
    return {
        n: e.cls
        for n, e in catalog().items()
        if (kind in e.kinds if kind is not None else e.kinds != ("durations",))
    }


def duration_classes() -> dict[str, type]:
    """Duration models by name."""
    return {n: e.cls for n, e in catalog().items() if "durations" in e.kinds}


def _norm(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def lookup(name: str, kind: str | None = None) -> type:
    """The catalogued class ``name`` (exact, else ignoring case, ``-`` and ``_``).

    ValueError lists the closest names (of ``kind`` when given).
    """
    cat = catalog()
    if name in cat:
        return cat[name].cls
    by_norm = {_norm(n): e.cls for n, e in cat.items()}
    if _norm(name) in by_norm:
        return by_norm[_norm(name)]
    pool = [n for n, e in cat.items() if kind is None or kind in e.kinds]
    close = difflib.get_close_matches(name, pool, n=3, cutoff=0.5) or difflib.get_close_matches(
        name, list(cat), n=3, cutoff=0.5
    )
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    what, plural = ("duration model", "duration models") if kind == "durations" else ("policy", "policies")
    plugin = (
        "; a class of your own: --policies FILE (the command line) or "
        "pipesim.policies.catalog.register_module('MODULE') (Python)"
    )
    raise UnknownPolicyError(
        f"unknown {what} {shown(name)}{hint}; valid {plural}: {', '.join(pool)}{plugin}", "type"
    )


class UnknownPolicyError(FieldError):
    """A class name the catalog does not hold: a typo, or a policy of a module not registered in
    this process (``--policies FILE``, :func:`register_module`). Its own type so that a reader of
    saved work (:func:`pipesim.io.saved.load`) can tell a missing plug-in from a malformed file."""


def name_of(obj: Any) -> str:
    """The catalog name of ``obj``'s class; ValueError if it is not catalogued (a saved run's
    stand-in, :class:`~pipesim.policies.missing.MissingPolicy`, says which policy it stands for and
    how to rebuild it, not that pipesim's own class should be registered)."""
    cls = type(obj)
    if cls.__module__ == "pipesim.policies.missing":
        raise obj.error()
    for n, e in catalog().items():
        if e.cls is cls:
            return n
    raise FieldError(
        f"{cls.__module__}.{cls.__qualname__} is not in the policy catalog; register its module "
        f"(pipesim.policies.catalog.register_module or a 'pipesim.policies' entry point)",
        "type",
    )


# -- the safe expression parser --------------------------------------------------------------------
class _Reject(ValueError):
    pass


def _literal(node: ast.expr, text: str) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str | bool | type(None)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _literal(node.operand, text)
        if isinstance(inner, bool) or not isinstance(inner, int | float):
            raise _Reject(f"only numbers take a sign, got {shown(ast.get_source_segment(text, node))}")
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Tuple | ast.List):
        return tuple(_literal(e, text) for e in node.elts)
    if isinstance(node, ast.Name):
        if node.id in ("inf", "Infinity"):
            return float("inf")
        if node.id in ("nan", "NaN"):  # a number (the policy says whether it may be NaN)
            return float("nan")
        try:
            cls = lookup(node.id)
        except UnknownPolicyError:  # a bare word: most often a string left unquoted
            close = difflib.get_close_matches(node.id, list(catalog()), n=2, cutoff=0.6)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise _Reject(
                f"{node.id!r} is neither a number, a quoted string ({node.id!r}) nor a catalogued "
                f"policy{hint}"
            ) from None
        return construct(cls, [], {})
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name):
            raise _Reject(f"call a catalogued name, got {shown(ast.get_source_segment(text, node.func))}")
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise _Reject("*args and **kwargs are not accepted")
        names = [k.arg for k in node.keywords]
        if (twice := next((k for i, k in enumerate(names) if k in names[:i]), None)) is not None:
            call = ast.get_source_segment(text, node)  # ast parses it; Python's compiler refuses it
            raise FieldError(f"{call}: keyword argument {twice} is repeated; give it once", str(twice))
        args = [_literal(a, text) for a in node.args]
        kwargs = {k.arg: _literal(k.value, text) for k in node.keywords if k.arg is not None}
        return _construct(node.func.id, args, kwargs, text)
    seg = ast.get_source_segment(text, node) or type(node).__name__
    raise _Reject(f"only literals and catalogued calls are accepted, got {shown(seg)}")


def _construct(name: str, args: list[Any], kwargs: dict[str, Any], text: str) -> Any:
    cls = lookup(name)
    return construct(cls, args, kwargs)


def construct(cls: type, args: list[Any] | tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``cls(*args, **kwargs)`` with argument errors and the class's ValueError prefixed by the call."""
    call = _call_text(cls.__name__, args, kwargs)
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        sig = None
    if sig is not None:
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            names = [
                p.name for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            ]
            named = re.search(r"argument:? '(\w+)'", str(exc))  # the argument missing or unexpected
            raise FieldError(
                f"{call}: {exc}; {cls.__name__} takes {', '.join(names) or 'no arguments'}",
                named.group(1) if named else "",
            ) from None
    try:
        return cls(*args, **kwargs)
    except (ValueError, TypeError) as exc:  # a FieldError keeps its field (a file's reader nests it)
        raise FieldError(f"{call}: {exc}", exc.field if isinstance(exc, FieldError) else "") from None


def _call_text(name: str, args: Iterable[Any], kwargs: dict[str, Any]) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def parse_policy(text: str, kind: str | None = None) -> Any:
    """The object that ``text`` (``Name``, ``Name(args)``) describes; see the module docstring.

    ``kind`` (a :data:`KINDS` slot) narrows the suggestions of an unknown name and checks that the
    result fits that slot. Raises ValueError with a one-line message.
    """
    text = text.strip()
    if not text:
        raise FieldError(
            "empty policy: give a name such as Drain or AReaLThrottle(max_concurrent=48)", kind or ""
        )
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", text):  # a bare name, dashes allowed (partial-rollout)
        obj: Any = construct(lookup(text, kind), [], {})
        return _check_kind(obj, kind)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise FieldError(f"cannot parse {shown(text)}: {exc.msg}", kind or "") from None
    body = tree.body
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Name):
        lookup(body.func.id, kind)  # an unknown outer name lists the slot's policies
        try:
            obj = _literal(body, text)
        except _Reject as exc:
            raise FieldError(f"{text}: {exc}", kind or "") from None
    else:
        raise FieldError(f"{shown(text)} is not a policy: write Name or Name(arg, key=value)", kind or "")
    return _check_kind(obj, kind)


def _check_kind(obj: Any, kind: str | None) -> Any:
    if kind is not None and kind not in kinds_of(type(obj)):
        valid = ", ".join(policy_classes(kind) if kind != "durations" else duration_classes())
        raise FieldError(f"{type(obj).__name__} does not fit {kind} (valid: {valid})", kind)
    return obj


def to_text(obj: Any) -> str:
    """The inverse of :func:`parse_policy` for catalogued dataclasses: ``Name(field=value, ...)``
    with the fields that differ from their defaults (nested policies written the same way)."""
    name = name_of(obj)
    if not dataclasses.is_dataclass(obj):
        return f"{name}()"
    parts = []
    for f in dataclasses.fields(obj):
        if not f.init:
            continue
        value = getattr(obj, f.name)
        default: Any = f.default
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        if default is not dataclasses.MISSING and value == default:
            continue
        parts.append(f"{f.name}={_value_text(value)}")
    return f"{name}({', '.join(parts)})"


def _value_text(value: Any) -> str:
    if isinstance(value, tuple):
        inner = ", ".join(_value_text(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, bool | int | float | str) or value is None:
        return repr(value)
    return to_text(value)
