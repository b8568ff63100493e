"""The catalog's rule: which classes are policies, and for which slots (:data:`KINDS`).

Design: a class is catalogued by what it is, not by a list kept by hand. :func:`kinds_of` says which
slots a class fits -- a subclass of a value class (:class:`~pipesim.policies.faults.Timeout`,
:class:`~pipesim.policies.replicas.Replicas`, :class:`~pipesim.policies.synccost.WeightSyncCost`),
or a class whose methods and data members cover one of the slot Protocols
(:class:`~pipesim.policies.base.Admission`, :class:`~pipesim.policies.base.WeightUpdate`,
:class:`~pipesim.policies.base.BatchPolicy`, :class:`~pipesim.policies.faults.FailurePolicy`,
:class:`~pipesim.policies.replicas.Routing`,
:class:`~pipesim.workload.durations.DurationModel`), checked statically on the class so that
nothing is instantiated. :func:`scan_module` applies the rule to the classes a module defines and
leaves out a base class that only exists to be subclassed (``CountsOnly``, ``FullBatch``: not a
dataclass, and a base of catalogued classes). Protocols and abstract classes fit nothing.

The catalog itself (which modules are scanned, the cache, lookup by name, the text parser) is
:mod:`pipesim.policies.catalog`, which re-exports these names.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from types import ModuleType

__all__ = ["KINDS", "CatalogEntry", "kinds_of", "scan_module"]

KINDS: tuple[str, ...] = (
    "admission",
    "weight_update",
    "batching",
    "failures",
    "routing",
    "timeout",
    "replicas",
    "sync_cost",
    "durations",
)
"""The slots a catalogued class can fill; ``Scenario`` fields except ``routing`` (inside
``Replicas``) and ``sync_cost`` (a :class:`~pipesim.policies.synccost.WeightSyncCost` gives
``sync_time_s``)."""


@dataclass(frozen=True)
class CatalogEntry:
    """One catalogued class: its name, the slot(s) it fits, the module it came from."""

    name: str
    cls: type
    kinds: tuple[str, ...]
    module: str

    @property
    def summary(self) -> str:
        doc = inspect.getdoc(self.cls) or ""
        return doc.strip().splitlines()[0] if doc.strip() else "(no description)"

    def signature(self) -> str:
        """``Name(arg=default, ...)`` for listings and error messages."""
        factories = {}
        if dataclasses.is_dataclass(self.cls):
            factories = {
                f.name: f.default_factory
                for f in dataclasses.fields(self.cls)
                if f.default_factory is not dataclasses.MISSING
            }
        try:
            sig = inspect.signature(self.cls)
        except (TypeError, ValueError):
            return f"{self.name}(...)"
        parts = []
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if p.name in factories:
                parts.append(f"{p.name}={factories[p.name]()!r}")
            else:
                parts.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
        return f"{self.name}({', '.join(parts)})"


def _protocols() -> list[tuple[str, type]]:
    from pipesim.policies.base import Admission, BatchPolicy, WeightUpdate
    from pipesim.policies.faults import FailurePolicy
    from pipesim.policies.replicas import Routing
    from pipesim.workload.durations import DurationModel

    return [
        ("admission", Admission),
        ("weight_update", WeightUpdate),
        ("batching", BatchPolicy),
        ("failures", FailurePolicy),
        ("routing", Routing),
        ("durations", DurationModel),
    ]


def _values() -> list[tuple[str, type]]:
    from pipesim.policies.faults import Timeout
    from pipesim.policies.replicas import Replicas
    from pipesim.policies.synccost import WeightSyncCost

    return [("timeout", Timeout), ("replicas", Replicas), ("sync_cost", WeightSyncCost)]


def _members(protocol: type) -> list[str]:
    names = [n for n, v in vars(protocol).items() if not n.startswith("_") and callable(v)]
    names += [n for n in getattr(protocol, "__annotations__", {}) if not n.startswith("_")]
    return names


def _fits(cls: type, protocol: type) -> bool:
    """Whether instances of ``cls`` would satisfy ``protocol`` (methods on the class, data members
    as class attributes or dataclass fields)."""
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    for m in _members(protocol):
        if m in fields:
            continue
        attr = inspect.getattr_static(cls, m, None)
        if attr is None:
            return False
        if m in vars(protocol) and callable(vars(protocol)[m]) and not callable(attr):
            return False
    return True


def _is_protocol(cls: type) -> bool:
    return bool(getattr(cls, "_is_protocol", False))


def kinds_of(cls: type) -> tuple[str, ...]:
    """The slots ``cls`` fits (empty when it fits none)."""
    if not isinstance(cls, type) or _is_protocol(cls) or inspect.isabstract(cls):
        return ()
    out = [kind for kind, value_cls in _values() if issubclass(cls, value_cls)]
    out += [kind for kind, proto in _protocols() if _fits(cls, proto)]
    return tuple(k for k in KINDS if k in out)


def scan_module(module: ModuleType) -> list[CatalogEntry]:
    """The policy classes defined in ``module`` (see the module docstring for the rule)."""
    found: list[CatalogEntry] = []
    classes = [
        cls
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if cls.__module__ == module.__name__ and not cls.__name__.startswith("_")
    ]
    for cls in classes:
        kinds = kinds_of(cls)
        if not kinds:
            continue
        is_base = any(other is not cls and issubclass(other, cls) for other in classes)
        if is_base and not dataclasses.is_dataclass(cls):
            continue  # a mixin such as CountsOnly: its subclasses are the policies
        found.append(CatalogEntry(cls.__name__, cls, kinds, module.__name__))
    return found


def nearest_roles(module: ModuleType) -> list[str]:
    """For a module with no policy class: each public class it defines, with the role it comes
    closest to (the fewest members missing) and what it lacks, e.g. ``Bad lacks admits (an
    admission policy)``; a method named within a typo of a missing one is pointed at."""
    import difflib

    out = []
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ != module.__name__ or cls.__name__.startswith("_"):
            continue
        fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
        best: tuple[int, str, list[str]] | None = None
        for kind, proto in _protocols():
            missing = [
                m for m in _members(proto) if m not in fields and inspect.getattr_static(cls, m, None) is None
            ]
            if best is None or len(missing) < best[0]:
                best = (len(missing), kind, missing)
        if best is None or not best[2]:
            continue
        own = [n for n in vars(cls) if not n.startswith("_")]
        hints = [
            f"{m} (it has {close[0]})"
            for m in best[2]
            if (close := difflib.get_close_matches(m, own, 1, 0.75))
        ]
        lacks = ", ".join(hints) if hints else ", ".join(best[2])
        out.append(f"{cls.__name__} lacks {lacks} (the closest role: {best[1].replace('_', ' ')})")
    return out
