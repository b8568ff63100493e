"""How ``pipesim compare`` runs one design at one seed, and passes its warnings on once.

Split out of :mod:`pipesim.io.compare` (past 400 lines) when the warnings were. A design's runs
warned once per seed, naming no design: a run that sets a warnings filter (the planner's build
does) resets Python's once-per-place registry, so :func:`warned_once` records each run's
warnings and passes each on once per design, the design's name before it.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from pipesim.config import Scenario
from pipesim.core.errors import shown
from pipesim.io.api import run

__all__ = ["run_design", "warned_once"]


def run_design(d: Any, seed: int | None) -> Any:
    """``d`` run at ``seed`` (None: its own): a RunResult, or a ComputeRun for a run spec."""
    if isinstance(d, Scenario):
        return run(d if seed is None else d.with_(seed=seed))
    from pipesim.plan.runspec import run as run_spec

    return run_spec(d if seed is None else dataclasses.replace(d, seed=seed))


def warned_once(
    name: str, said: set[tuple[str, type[Warning], str]], d: Any, seed: int | None
) -> tuple[Any, Any]:
    """``d`` run at ``seed`` (:func:`run_design`) and its summary; each warning they raise is passed on
    to the caller's filters once per design, with the design's name before it (``said``: those
    passed on). N seeds warned N times (a run that sets a filter resets Python's once-per-place
    registry), naming no design."""
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = run_design(d, seed)
            return r, r.summary()
    finally:
        for w in caught:
            key = (name, w.category, str(w.message))
            if key in said:
                continue
            said.add(key)
            message = w.message
            if isinstance(message, Warning) and type(message).__str__ is Exception.__str__:
                message.args = (f"design {shown(name)}: {message}",)
            warnings.warn_explicit(message, w.category, w.filename, w.lineno, source=w.source)
