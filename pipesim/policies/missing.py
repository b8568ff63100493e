"""A policy a saved run names but this process cannot build.

:class:`MissingPolicy` stands in a scenario loaded from a saved run (:func:`pipesim.io.saved.load`)
for a policy whose class is not registered here: it prints the saved text and refuses to run
(:func:`refuse_missing`, asked by :func:`pipesim.run`), naming the slot and the module to register.
Before it, the slot held the default policy, and a rerun of the loaded scenario ran another design
(1955/h for a saved 1789/h) with a warning as its only sign.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from pipesim.policies.catalog import UnknownPolicyError

__all__ = ["PRIVATE_PREFIX", "MissingPolicy", "fix_hint", "missing_policies", "refuse_missing"]


@dataclasses.dataclass(frozen=True)
class MissingPolicy:
    """Stands in the ``slot`` of a scenario loaded from a saved run for a policy that could not be
    rebuilt in this process: its class is not registered here, or was outside the catalog when
    the run was saved (:func:`pipesim.io.saved.load`).

    It fits every slot's Protocol, so the loaded scenario builds, prints (``text`` is the saved
    policy as written then) and saves again (``data`` is its saved table, written back as it was).
    It never decides: :func:`pipesim.run` refuses a scenario holding one (:func:`refuse_missing`)
    before drawing its pool, and each of its methods raises the same error, naming the slot, the
    saved policy and the fix (register ``module``, where the save kept it, and load again)."""

    slot: str
    text: str
    module: str = ""
    data: Any = dataclasses.field(default=None, compare=False, hash=False, repr=False)
    hazard_per_s: float = dataclasses.field(default=math.nan, init=False, repr=False, compare=False)
    """The failures slot's data member: NaN, which the engine refuses (not a hazard of zero)."""

    def error(self) -> UnknownPolicyError:
        """The refusal a run of it raises (its field: the slot)."""
        return UnknownPolicyError(
            f"{plain(self.slot)}: {plain(self.text)} was not rebuilt when this scenario was loaded from a "
            f"saved run (its class is not in this process's policy catalog), so the scenario cannot run: "
            f"{fix_hint(self.module)}. The run's saved tables, summary and report read as they are",
            self.slot,
        )

    def admits(self, p: Any) -> bool:
        raise self.error()

    def blocks_admission(self, p: Any) -> bool:
        raise self.error()

    def sync(self, p: Any) -> Any:
        raise self.error()

    def select(self, buffer: Any, p: Any) -> Any:
        raise self.error()

    def choose(self, engines: Any) -> Any:
        raise self.error()

    def on_failure(self, p: Any, ep: Any) -> None:
        raise self.error()

    def sample(self, n: int, generator: Any) -> Any:
        raise self.error()


def plain(text: str, limit: int = 240) -> str:
    """``text`` from a saved file as a message may print it: control characters escaped (a saved
    ``scenario.json`` is data, and an escape sequence in it cleared the terminal that printed the
    load warning) and at most ``limit`` characters."""
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))
    return out if len(out) <= limit else out[: limit - 3] + "..."


def fix_hint(module: str) -> str:
    """How to make the classes of ``module`` (as a saved run recorded it) known to this process."""
    module = plain(module)
    if module.startswith(PRIVATE_PREFIX):  # a --policies file imported under its path's name
        try:
            path = plain(bytes.fromhex(module[len(PRIVATE_PREFIX) :]).decode())
        except ValueError:
            path = "FILE"
        return (
            f"pass --policies {path} (the command line), or register that file's module (Python), "
            "then load the run again"
        )
    if module == "__main__":
        return (
            "its class was defined in the script that saved the run (__main__), which cannot be "
            "registered: move it into a module, register that module (register_module) and run and "
            "save again"
        )
    if module:
        flag = f"{module}.py (or --policies {module})" if module.isidentifier() else module
        return (
            f"register its module first: pipesim.policies.catalog.register_module({module!r}) in "
            f"Python, --policies {flag} on the command line; then load the run again"
        )
    return (
        "register the module that defines it first (register_module in Python, --policies FILE "
        "on the command line), then load the run again"
    )


PRIVATE_PREFIX = "_pipesim_user_"
"""The module-name prefix of a ``--policies`` file imported under its path's name
(:func:`pipesim.io.user_code.private_name`, which uses this constant)."""


def missing_policies(scenario: Any) -> list[MissingPolicy]:
    """The :class:`MissingPolicy` objects ``scenario`` holds, in its slots or nested in them."""
    found: list[MissingPolicy] = []

    def walk(obj: Any, depth: int) -> None:
        if isinstance(obj, MissingPolicy):
            found.append(obj)
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type) and depth < 8:
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name, None), depth + 1)
        elif isinstance(obj, tuple) and depth < 8:
            for v in obj:
                walk(v, depth + 1)

    walk(scenario, 0)
    return found


def refuse_missing(scenario: Any) -> None:
    """Raise the first :class:`MissingPolicy`'s error where ``scenario`` holds one (a run from it
    would decide nothing, or another design)."""
    if found := missing_policies(scenario):
        raise found[0].error()
