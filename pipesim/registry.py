"""Named scenarios for the CLI, and parsing of ``key=value`` overrides into typed scenario fields.

The registry maps a short name to a one-line description and a zero-argument factory returning a
:class:`~pipesim.config.Scenario`. Factories are called only when a scenario is selected, so
``pipesim list`` stays cheap even when presets are expensive to build.

Built-in designs are the chapter's (Section 13.3): they use the chapter's duration pool (seed 0,
65,536 agent durations, consumed in order), so ``pipesim run synchronous`` reproduces the chapter's
451 episodes per hour exactly. If the optional modules ``scenarios.chapter13`` and
``scenarios.systems`` are importable, their scenarios are added under the prefixes ``chapter13:``
and ``systems:``; a missing module is skipped silently (they are developed separately).

Overrides (``--set key=value``, ``--over key=v1,v2``) are parsed with the dataclass field types,
so a bad key or an ill-typed value fails with a message that names it and lists the valid keys.
Policy fields take a policy class name from :mod:`pipesim.policies` (``weight_update=Drain``);
``durations.FIELD=value`` changes one field of the duration model.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pipesim import policies as _policies
from pipesim.config import PipelineConfig, Scenario
from pipesim.policies import CountThrottle, Drain, PartialRollout

CHAPTER_POOL_SIZE = 65_536
"""The chapter draws 65,536 durations with seed 0; a scenario with this pool size replays them."""

POLICY_FIELDS = ("admission", "weight_update", "batching")


@dataclass(frozen=True)
class Entry:
    """One registered scenario: a name, a one-line description and a factory."""

    name: str
    description: str
    factory: Callable[[], Scenario]

    def build(self) -> Scenario:
        s = self.factory()
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


def _const(value: Scenario) -> Callable[[], Scenario]:
    return lambda: value


def _from_module(module_name: str, prefix: str) -> list[Entry]:
    """Scenarios of an optional module: a ``SCENARIOS``/``PRESETS`` mapping, else zero-arg functions
    annotated to return a Scenario. Returns [] when the module is not importable."""
    try:
        mod = importlib.import_module(module_name)
    except ImportError:
        return []
    out: list[Entry] = []
    table = getattr(mod, "SCENARIOS", None) or getattr(mod, "PRESETS", None)
    if isinstance(table, Mapping):
        for key, value in table.items():
            fac: Callable[[], Scenario] = value if callable(value) else _const(value)
            desc = value.name if isinstance(value, Scenario) else _first_doc_line(value)
            out.append(Entry(f"{prefix}:{key}", desc, fac))
        return out
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
            out.append(Entry(f"{prefix}:{fname}", _first_doc_line(fn), fn))
    return out


def registry() -> dict[str, Entry]:
    """All scenarios by name: the built-ins, then the optional modules' (if importable)."""
    entries = (
        _builtin()
        + _from_module("scenarios.chapter13", "chapter13")
        + _from_module("scenarios.systems", "systems")
    )
    return {e.name: e for e in entries}


def get_scenario(name: str) -> Scenario:
    """Build the registered scenario ``name``; ValueError lists the valid names otherwise."""
    reg = registry()
    if name not in reg:
        raise ValueError(f"unknown scenario {name!r}; valid scenarios: {', '.join(reg)}")
    return reg[name].build()


# -- overrides ----------------------------------------------------------------------------------
def policy_classes() -> dict[str, type]:
    """Dataclass policies in :mod:`pipesim.policies` constructible without arguments, by class name."""
    out: dict[str, type] = {}
    for name, cls in inspect.getmembers(_policies, inspect.isclass):
        if (
            dataclasses.is_dataclass(cls)
            and cls.__module__ == _policies.__name__
            and all(
                f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
                for f in dataclasses.fields(cls)
            )
        ):
            out[name] = cls
    return out


def valid_keys(scenario: Scenario | None = None) -> list[str]:
    """Every key ``--set`` accepts, for error messages and ``pipesim list --keys``."""
    keys = [f.name for f in dataclasses.fields(PipelineConfig)]
    keys += [f.name for f in dataclasses.fields(Scenario) if f.name != "pipeline"]
    if scenario is not None and dataclasses.is_dataclass(scenario.durations):
        keys += [f"durations.{f.name}" for f in dataclasses.fields(scenario.durations)]
    return keys


def _coerce(key: str, text: str, hint: Any) -> Any:
    """Parse ``text`` as type ``hint`` (int, float, bool, str, tuple of floats, optional)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if args and type(None) in args and origin is not tuple:
        if text.lower() in ("none", "null", ""):
            return None
        rest = [a for a in args if a is not type(None)]
        return _coerce(key, text, rest[0])
    try:
        if hint is bool:
            low = text.lower()
            if low not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return low in ("true", "1", "yes")
        if hint is int:
            return int(text)
        if hint is float:
            return float(text)
        if hint is str:
            return text
        if origin is tuple:
            return tuple(float(x) for x in text.strip("()").split(":"))
    except ValueError:
        name = getattr(hint, "__name__", str(hint))
        raise ValueError(f"{key}: expected {name}, got {text!r}") from None
    raise ValueError(f"{key}: cannot parse values of type {hint!r} from the command line")


def parse_value(scenario: Scenario, key: str, text: str) -> Any:
    """The typed value of ``key=text`` for ``scenario``; ValueError names the key and lists valid keys."""
    text = text.strip()
    if key.startswith("durations."):
        model = scenario.durations
        sub = key.split(".", 1)[1]
        if not dataclasses.is_dataclass(model) or sub not in {f.name for f in dataclasses.fields(model)}:
            raise ValueError(f"unknown key {key!r}; valid keys: {', '.join(valid_keys(scenario))}")
        hints = typing.get_type_hints(type(model))
        return dataclasses.replace(model, **{sub: _coerce(key, text, hints[sub])})  # type: ignore[type-var]
    if key in POLICY_FIELDS:
        classes = policy_classes()
        lookup = {n.lower(): c for n, c in classes.items()}
        cls = lookup.get(text.lower()) or lookup.get(text.lower().replace("-", "").replace("_", ""))
        if cls is None:
            raise ValueError(f"{key}: unknown policy {text!r}; valid policies: {', '.join(classes)}")
        return cls()
    if key == "durations":
        raise ValueError("durations: set the model's fields with durations.FIELD=value")
    hints = {**typing.get_type_hints(PipelineConfig), **typing.get_type_hints(Scenario)}
    if key not in hints or key == "pipeline":
        raise ValueError(f"unknown key {key!r}; valid keys: {', '.join(valid_keys(scenario))}")
    return _coerce(key, text, hints[key])


def changes_for(scenario: Scenario, key: str, value: Any) -> dict[str, Any]:
    """``Scenario.with_`` keyword arguments for one parsed override (``durations.x`` -> ``durations``)."""
    return {"durations" if key.startswith("durations.") else key: value}


def apply_overrides(scenario: Scenario, pairs: list[str]) -> tuple[Scenario, dict[str, str]]:
    """Apply ``key=value`` strings in order; returns the new scenario and the overrides as given."""
    given: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValueError(
                f"override {pair!r} is not key=value; valid keys: {', '.join(valid_keys(scenario))}"
            )
        key, text = (s.strip() for s in pair.split("=", 1))
        value = parse_value(scenario, key, text)
        try:
            scenario = scenario.with_(**changes_for(scenario, key, value))
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{key}={text}: {exc}") from None
        given[key] = text
    return scenario, given


def label(value: Any) -> Any:
    """A readable, hashable cell label for a grid value (policy objects become their class name)."""
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value).__name__
    return repr(value)
