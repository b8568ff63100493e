"""One registered scenario (:class:`Entry`): a name, a one-line description and a factory, with
the factory's parameters (what ``--set`` passes to it) and a build whose refusal names the
parameter the caller gave.

Design: a factory's named parameters (not ``**kwargs``) are the scenario's parameters, read from
its signature (:meth:`Entry.parameters`) and its type hints (:meth:`Entry.parameter_hints`, which
:mod:`pipesim.io.overrides` parses ``--set`` values by); ``**pipeline`` marks a preset that builds
its pipeline, and sizes its own task pool, from PipelineConfig keys (:meth:`Entry.takes_pipeline`).
A refusal from inside the factory names the field it refused, which may be one the factory built
from a parameter (ROLL's ``async_generation_ratio`` becomes ``ratio``): :meth:`Entry.build` blames
the parameter given instead, finding it by building with it alone (on the error path only).
:class:`PresetFile` is a scenario file that names a preset: its knobs are the preset's parameters
with the file's values as their defaults.

Split from :mod:`pipesim.io.registry` (the names and how ``pipesim run SPEC`` finds one), which
re-exports both classes.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pipesim.config import Scenario
from pipesim.core.errors import shown
from pipesim.core.validate import FieldError

__all__ = ["Entry", "PresetFile"]


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

    def takes_pipeline(self) -> bool:
        """Whether the factory takes ``**pipeline`` (the presets' convention: PipelineConfig keys it
        builds its pipeline from, and sizes its own task pool by)."""
        try:
            sig = inspect.signature(self.factory)
        except (TypeError, ValueError):
            return False
        return any(p.kind is p.VAR_KEYWORD and n == "pipeline" for n, p in sig.parameters.items())

    def parameter_hints(self) -> dict[str, Any]:
        try:
            return typing.get_type_hints(self.factory)
        except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to the defaults' types
            return {}

    def build(self, **params: Any) -> Scenario:
        """The factory's scenario for ``params``. A refusal names the parameter the caller gave,
        not the field of whatever the factory built from it (``systems:roll`` with
        ``async_generation_ratio=-1`` was refused as ``ratio``): see :meth:`_blame`."""
        try:
            s = self.factory(**params)
        except (ValueError, TypeError) as exc:
            msg = str(exc)
            field = exc.field if isinstance(exc, FieldError) else ""
            given = self._blame(params, field)
            if given is not None:
                msg, field = f"{given}={shown(params[given])}: {msg}", given
            raise FieldError(
                msg if msg.startswith(self.name) else f"scenario {shown(self.name)}: {msg}", field
            ) from None
        if not isinstance(s, Scenario):
            raise FieldError(
                f"scenario {shown(self.name)}: factory returned {type(s).__name__}, not a Scenario",
                "scenario",
            )
        return s

    def _blame(self, params: dict[str, Any], field: str) -> str | None:
        """Which of ``params`` a refusal of ``field`` comes from, when ``field`` is not one of them
        (a factory turns its parameters into other configs' fields: ROLL's
        ``async_generation_ratio`` into ``ratio``, PipelineRL's ``batch_size`` into ``max_lag``):
        the first that the factory refuses alone, with its defaults for the rest; None when the
        field is a given parameter, or no single one is refused alone (then the refusal stands as
        it is). Runs only on the error path; a factory is cheap to build."""
        if not params or field in params or field.rsplit(".", 1)[-1] in params:
            return None
        for key, value in params.items():
            if len(params) == 1:
                return key
            try:
                self.factory(**{key: value})
            except (ValueError, TypeError):
                return key
        return None


@dataclass(frozen=True)
class PresetFile(Entry):
    """A scenario file naming a preset (``pipesim export systems:areal``'s ``[system]`` table),
    built as the preset is: its knobs are the preset's parameters with the file's values as their
    defaults, so ``--set`` on the file does what it does on the preset's name (a knob goes to the
    factory, and ``steps`` sizes the preset's task pool, :func:`pipesim.io.overrides.build`). Built
    as written, it is the scenario the file's reader built (:func:`~pipesim.io.scenario_files.
    read_scenario_file`, whose refusals name the file and key)."""

    preset: Entry
    knobs: Mapping[str, Any]
    as_written: Scenario

    def parameters(self) -> dict[str, inspect.Parameter]:
        return {
            n: p.replace(default=self.knobs[n]) if n in self.knobs else p
            for n, p in self.preset.parameters().items()
        }

    def parameter_hints(self) -> dict[str, Any]:
        return self.preset.parameter_hints()

    def build(self, **params: Any) -> Scenario:
        if not params:
            return self.as_written
        return self.preset.build(**{**self.knobs, **params})
